"""JSON the way the original harness writes it: JavaScript `JSON.stringify` bytes, lossless values.

`dumps` is byte-identical to `JSON.stringify` for lossless values: no spaces, UTF-8
literal text, only `\\" \\\\ \\b \\f \\n \\r \\t` short escapes, lowercase `\\uXXXX` for other
control characters and lone surrogates, numbers in ECMAScript Number-to-string form. The common
case runs entirely in the C encoder: Python already agrees with JavaScript except for floats whose
`repr` is integral (`1.0`) or exponential (`1e-07`), object keys that are array indices (JavaScript
lists them first, ascending) and surrogate code points, which a walk over the containers (cost per
node, not per byte) and an `isascii`/UTF-8 check detect.
"""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any

__all__ = ["MAX_SAFE_INTEGER", "JsonTooDeepError", "dumps", "loads", "snapshot"]

#: Largest integer a JavaScript Number holds exactly (2**53 - 1).
MAX_SAFE_INTEGER = 2**53 - 1

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_encode_str = json.encoder.encode_basestring
#: The same C encoder built once (`JSONEncoder.encode` builds one per call). Without a markers
#: dict it does not detect cycles; a cycle ends in RecursionError and `dumps` then re-encodes
#: with `_ENCODER`, which reports it as before.
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_C_ENCODE = (
    None
    if _c_make_encoder is None
    else _c_make_encoder(None, _ENCODER.default, _encode_str, None, ":", ",", False, False, False)
)

_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")
_LONE = re.compile("[\ud800-\udfff]")


def dumps(value: Any) -> str:
    """Serialize `value` exactly like JavaScript `JSON.stringify`.

    Expects JSON values (see `snapshot`); raises `ValueError` for NaN, infinities and cycles.
    """
    if type(value) is str:
        # A lone string (a streaming delta's text): no container to walk, no chunks to join.
        return str(_encode_str(value)) if value.isascii() else _js_string(value)
    try:
        text = "".join(_C_ENCODE(value, 0)) if _C_ENCODE is not None else _ENCODER.encode(value)
    except RecursionError:
        text = _ENCODER.encode(value)
    if _needs_js(value) or not _is_utf8(text):
        return "".join(_slow(value, []))
    return text


def _is_utf8(text: str) -> bool:
    """False when `text` holds surrogate code points (which JavaScript escapes or pairs)."""
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _float_differs(value: float) -> bool:
    """True when Python's `repr` of `value` is not its JavaScript rendering."""
    text = repr(value)
    return text.endswith(".0") or "e" in text


def _needs_js(value: Any) -> bool:
    """True when `value` holds a float that Python renders differently from JavaScript, or an
    object key that JavaScript orders first (an array index such as "0")."""
    kind = type(value)
    if kind is dict:
        # Keys already seen to be plain are looked up in C (docs/performance.md, "Owned
        # appends in the agent loop"). A `str` subclass equal to one of them encodes the same.
        if not value.keys() <= _PLAIN_KEYS and _has_index_key(value):
            return True
        items: Any = value.values()
    elif kind is list:
        # Long runs of plain scalars (packed rows' texts and dts) are skipped at C speed.
        if len(value) > 8 and _PLAIN.issuperset(map(type, value)):
            return False
        items = value
    else:
        return isinstance(value, float) and _float_differs(value)
    for item in items:
        kind = type(item)
        if kind is str or kind is int:
            continue
        if kind is float:
            if _float_differs(item):
                return True
        elif (kind is dict or kind is list) and _needs_js(item):
            return True
    return False


def _has_index_key(value: dict[Any, Any]) -> bool:
    """True when `value` has a key that is not a `str` or is an array index; remembers the
    keys of a dict that has neither (while the cache has room)."""
    for key in value:
        # `"0" <= key < ":"`: the key starts with a digit (no slice allocated).
        if type(key) is not str or ("0" <= key < ":" and _is_index(key)):
            return True
    if len(_PLAIN_KEYS) < _PLAIN_KEYS_MAX:
        _PLAIN_KEYS.update(value)
    return False


_PLAIN = frozenset({str, int, bool, type(None)})
#: Object keys seen to be strings that are not array indices (event and message keys, mostly);
#: bounded, since foreign data (tool arguments) brings keys of its own.
_PLAIN_KEYS: set[str] = set()
_PLAIN_KEYS_MAX = 4096
_MAX_INDEX = 2**32 - 2


def _is_index(key: Any) -> bool:
    """True for a canonical JavaScript array index ("0", "17"; not "01", not 2**32-1)."""
    return (
        type(key) is str
        and key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and int(key) <= _MAX_INDEX
    )


def _js_items(value: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """Object entries in JavaScript property order: array indices ascending, then the rest."""
    items = list(value.items())
    indices = [(k, v) for k, v in items if _is_index(k)]
    if not indices:
        return items
    indices.sort(key=lambda kv: int(kv[0]))
    return indices + [(k, v) for k, v in items if not _is_index(k)]


def _slow(value: Any, out: list[str]) -> list[str]:
    """Encode `value` into `out` with the JavaScript rules for floats, surrogates and key
    order."""
    if isinstance(value, str):
        out.append(_js_string(value))
    elif isinstance(value, float):
        out.append(js_number(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in _js_items(value):
            if not first:
                out.append(",")
            first = False
            out.append(_js_string(key if isinstance(key, str) else str(key)))
            out.append(":")
            _slow(item, out)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            if index:
                out.append(",")
            _slow(item, out)
        out.append("]")
    else:
        out.append(_ENCODER.encode(value))
    return out


def _js_string(text: str) -> str:
    """A JSON string literal as `JSON.stringify` writes it (UTF-16 semantics for surrogates)."""
    if text.isascii() or _LONE.search(text) is None:
        return str(_encode_str(text))
    # Adjacent high+low surrogate code points form one character in UTF-16: join them first.
    joined = _PAIR.sub(
        lambda m: m.group().encode("utf-16-be", "surrogatepass").decode("utf-16-be"), text
    )
    return _LONE.sub(lambda m: f"\\u{ord(m.group()):04x}", str(_encode_str(joined)))


def js_number(value: float) -> str:
    """ECMAScript Number::toString of a finite float (`1`, `1.5`, `1e+21`, `1e-7`)."""
    if not math.isfinite(value):
        raise ValueError(f"{value!r} is not a JSON value (JSON has no NaN or Infinity)")
    if value == 0.0:
        return "0"
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exp_text = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    if not exp_text and whole != "0":
        # Positional repr (1e-4 <= |v| < 1e16): identical to JS except a trailing ".0".
        return sign + (whole if frac == "0" else mantissa)
    digits = (whole + frac).lstrip("0").rstrip("0") or "0"
    # n = position of the decimal point relative to the first significant digit.
    n = int(exp_text) + len(whole) if exp_text else -(len(frac) - len(frac.lstrip("0")))
    k = len(digits)
    if k <= n <= 21:
        body = digits + "0" * (n - k)
    elif 0 < n <= 21:
        body = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        body = "0." + "0" * (-n) + digits
    else:
        exponent = n - 1
        mark = "+" if exponent >= 0 else "-"
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{head}e{mark}{abs(exponent)}"
    return sign + body


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text} is out of range for a JSON value")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


class JsonTooDeepError(ValueError):
    """Raised by `loads` for JSON text nested deeper than the parser's recursion allows (a
    `ValueError` like every refusal of the text, never a bare `RecursionError`)."""


def parse_arguments(raw: Any) -> Any:
    """A tool call's `arguments`: `""` → `{}`; valid JSON → its value; anything else stays the
    raw string."""
    if not isinstance(raw, str):
        return raw
    if raw == "":
        return {}
    try:
        return loads(raw)
    except ValueError:
        return raw


def loads(text: str | bytes) -> Any:
    """Parse JSON text; refuses `NaN`, `Infinity` and numbers that overflow to infinity, and
    raises `JsonTooDeepError` for nesting deeper than the recursion limit allows.

    Same as `json.loads(text, parse_constant=..., parse_float=...)`, with the decoder built once.
    """
    if isinstance(text, str):
        if text.startswith("\ufeff"):
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    elif isinstance(text, bytes | bytearray):
        text = text.decode(json.detect_encoding(text), "surrogatepass")
    else:
        raise TypeError(
            f"the JSON object must be str, bytes or bytearray, not {type(text).__name__}"
        )
    try:
        return _DECODER.decode(text)
    except RecursionError:
        raise JsonTooDeepError(
            f"JSON text nests deeper than this parser reads (recursion limit "
            f"{sys.getrecursionlimit()})"
        ) from None


class _Refused(Exception):
    """Internal: the value is not lossless JSON."""


def snapshot(value: Any) -> Any:
    """Check that `value` is lossless JSON and return a deep copy of it, in one pass.

    Accepts None, bool, int with |v| <= 2**53-1, finite float except -0.0, str, list and dict
    with str keys, acyclic; exact types only (no subclasses except bool). Raises `TypeError`
    naming the first offending location otherwise. A cycle (or nesting deeper than Python's
    recursion limit) surfaces as recursion overflow and is refused.
    """
    kind = type(value)
    try:
        if kind is dict:
            return _copy_dict(value)
        if kind is list:
            return _copy_list(value)
        return _copy_scalar(value)
    except (_Refused, RecursionError):
        pass
    raise TypeError(_explain(value))


def _copy_scalar(value: Any) -> Any:
    kind = type(value)
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    elif kind is float:
        if value - value == 0.0 and (value != 0.0 or math.copysign(1.0, value) > 0):
            return value
    elif kind is str or kind is bool or value is None:
        return value
    raise _Refused


def _copy_dict(value: dict[Any, Any]) -> dict[str, Any]:
    # A shallow copy (in C); then each value is checked and each container replaced by its copy.
    out = value.copy()
    for key, item in out.items():
        if type(key) is not str:
            raise _Refused
        kind = type(item)
        if kind is str:
            continue
        if kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise _Refused
        elif kind is dict:
            out[key] = _copy_dict(item)
        elif kind is list:
            out[key] = _copy_list(item)
        elif kind is not bool and item is not None:
            _copy_scalar(item)
    return out


def _copy_list(value: list[Any]) -> list[Any]:
    out = []
    for item in value:
        kind = type(item)
        if kind is str or kind is bool or item is None:
            out.append(item)
        elif kind is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                raise _Refused
            out.append(item)
        elif kind is dict:
            out.append(_copy_dict(item))
        elif kind is list:
            out.append(_copy_list(item))
        else:
            out.append(_copy_scalar(item))
    return out


def _explain(value: Any) -> str:
    """Describe where `value` stops being lossless JSON (slow; only after a refusal)."""
    stack: list[tuple[Any, str]] = [(value, "value")]
    seen: dict[int, str] = {}
    while stack:
        item, where = stack.pop()
        kind = type(item)
        if item is None or kind is str or kind is bool:
            continue
        if kind is int:
            if abs(item) > MAX_SAFE_INTEGER:
                return f"{where} is an integer outside the JavaScript safe range: {item}"
            continue
        if kind is float:
            if not math.isfinite(item):
                return f"{where} is {item!r}, which JSON cannot represent"
            if item == 0.0 and math.copysign(1.0, item) < 0:
                return f"{where} is -0.0, which JSON cannot represent"
            continue
        if kind is dict or kind is list:
            if where.startswith(seen.get(id(item), "\0") + "["):
                return f"{where} is a reference cycle"
            seen[id(item)] = where
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str:
                        return f"{where} has a non-string key {key!r}"
                    stack.append((child, f"{where}[{key!r}]"))
            else:
                stack.extend((child, f"{where}[{i}]") for i, child in enumerate(item))
            continue
        return f"{where} has type {kind.__qualname__}, which is not a lossless JSON value"
    return "value is nested too deeply to be copied"
