"""jsonutil: JSON.stringify byte format, strict parsing, the lossless snapshot."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import shutil
import subprocess
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plugins.session import jsonutil
from plugins.session.jsonutil import (
    MAX_SAFE_INTEGER,
    _is_index,
    _needs_js,
    _slow,
    dumps,
    js_number,
    loads,
    snapshot,
)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (1.0, "1"),
        (1.5, "1.5"),
        (-1.5, "-1.5"),
        (100.0, "100"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e-7, "1e-7"),
        (123456789012345680000.0, "123456789012345680000"),
        (1e16, "10000000000000000"),
        (1.5e20, "150000000000000000000"),
        (1e-5, "0.00001"),
        (1e-6, "0.000001"),
        (1.2345e-6, "0.0000012345"),
        (2.5e-7, "2.5e-7"),
        (1.5e300, "1.5e+300"),
        (5e-324, "5e-324"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (-0.0, "0"),
        (0.0, "0"),
        (0.0001, "0.0001"),
        (123.456, "123.456"),
    ],
)
def test_floats_print_like_ecmascript(value: float, text: str) -> None:
    assert dumps(value) == text
    assert js_number(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_dumps_refuses_non_finite_floats(value: float) -> None:
    with pytest.raises(ValueError):
        dumps(value)
    with pytest.raises(ValueError):
        dumps({"a": [value]})


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ('"', r'"\""'),
        ("\\", r'"\\"'),
        ("\b\f\n\r\t", r'"\b\f\n\r\t"'),
        ("\x00\x01\x1f", r'"\u0000\u0001\u001f"'),
        ("\x7f", '"\x7f"'),
        ("\u2028\u2029", '"\u2028\u2029"'),
        ("é 中 😀", '"é 中 😀"'),
        ("/", '"/"'),
        ("\ud800", r'"\ud800"'),
        ("a\udfffb", r'"a\udfffb"'),
        ("\udc00\ud800", r'"\udc00\ud800"'),
        # Adjacent high+low surrogate code points are one UTF-16 character in JavaScript.
        ("\ud83d\ude00", '"😀"'),
        ("\x1b\ud800 1.0", r'"\u001b\ud800 1.0"'),
    ],
)
def test_strings_escape_like_json_stringify(value: str, text: str) -> None:
    assert dumps(value) == text


def test_compact_separators_and_key_order() -> None:
    value = {"z": 1, "a": [1, 2.5, {"b": None, "c": True, "d": False}], "m": "x"}
    assert dumps(value) == '{"z":1,"a":[1,2.5,{"b":null,"c":true,"d":false}],"m":"x"}'


def test_slow_path_keeps_structure() -> None:
    value = {"k\ud800": [1.0, {"x": 1e21, "y": "1.0"}, [], {}], "n": None}
    assert dumps(value) == r'{"k\ud800":[1,{"x":1e+21,"y":"1.0"},[],{}],"n":null}'


def test_text_that_looks_like_a_float_stays_verbatim() -> None:
    assert dumps({"v": "version 1.0, 1e-5"}) == '{"v":"version 1.0, 1e-5"}'


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@settings(max_examples=20, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
        max_leaves=30,
    )
)
def test_dumps_matches_node_json_stringify(value: Any) -> None:
    """Cross-check against the real JSON.stringify (values passed via Python's own repr)."""
    payload = json.dumps(value, ensure_ascii=True)
    result = subprocess.run(
        [
            "node",
            "-e",
            "process.stdout.write(JSON.stringify(JSON.parse(require('fs')"
            ".readFileSync(0, 'utf8'))))",
        ],
        input=payload.encode(),
        capture_output=True,
        check=True,
    )
    assert dumps(value).encode("utf-8", "surrogatepass") == result.stdout


def test_loads_refuses_nan_and_infinity() -> None:
    for text in ("NaN", "[Infinity]", '{"a":-Infinity}', "1e400", "[-1e999]"):
        with pytest.raises(ValueError):
            loads(text)


def test_loads_keeps_order_and_last_duplicate() -> None:
    value = loads('{"b":1,"a":2,"b":3}')
    assert list(value) == ["b", "a"]
    assert value == {"b": 3, "a": 2}
    assert loads(b'[1.5,"\\ud800"]') == [1.5, "\ud800"]


def test_snapshot_deep_copies() -> None:
    inner = {"x": [1, 2]}
    value = {"a": inner, "b": [inner, "s", None, True, 1.5]}
    copied = snapshot(value)
    assert copied == value
    assert copied is not value
    assert copied["a"] is not inner
    assert copied["b"][0] is not inner
    assert copied["a"]["x"] is not inner["x"]
    inner["x"].append(3)
    assert copied["a"]["x"] == [1, 2]


def test_snapshot_accepts_edges() -> None:
    assert snapshot(MAX_SAFE_INTEGER) == MAX_SAFE_INTEGER
    assert snapshot(-MAX_SAFE_INTEGER) == -MAX_SAFE_INTEGER
    assert snapshot(0.0) == 0.0
    assert snapshot(True) is True
    assert snapshot(None) is None
    assert snapshot("\ud800") == "\ud800"


class _Color(enum.Enum):
    RED = 1


class _Level(enum.IntEnum):
    LOW = 1


class _Str(str):
    pass


class _Dict(dict):  # type: ignore[type-arg]
    pass


@dataclasses.dataclass
class _Point:
    x: int


def _cyclic_list() -> list[Any]:
    value: list[Any] = [1]
    value.append(value)
    return value


def _cyclic_dict() -> dict[str, Any]:
    value: dict[str, Any] = {}
    value["self"] = {"again": value}
    return value


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ((1, 2), "value has type tuple"),
        ({1, 2}, "value has type set"),
        (b"x", "value has type bytes"),
        (_Point(1), "value has type _Point"),
        (_Color.RED, "value has type _Color"),
        (_Level.LOW, "value has type _Level"),
        (_Str("x"), "value has type _Str"),
        (_Dict(), "value has type _Dict"),
        (OrderedDict(), "value has type OrderedDict"),
        (math.nan, "value is nan"),
        (math.inf, "value is inf"),
        (-0.0, "value is -0.0"),
        (MAX_SAFE_INTEGER + 1, "outside the JavaScript safe range"),
        (-MAX_SAFE_INTEGER - 1, "outside the JavaScript safe range"),
        ({1: "a"}, "non-string key 1"),
        ({"a": [1, {"b": (1,)}]}, "value['a'][1]['b'] has type tuple"),
        (_cyclic_list(), "value[1] is a reference cycle"),
        (_cyclic_dict(), "value['self']['again'] is a reference cycle"),
    ],
)
def test_snapshot_refuses_lossy_values(value: Any, where: str) -> None:
    with pytest.raises(TypeError) as info:
        snapshot(value)
    assert where in str(info.value)


def test_snapshot_allows_shared_acyclic_references() -> None:
    shared = {"k": 1}
    assert snapshot([shared, shared, {"again": shared}]) == [
        {"k": 1},
        {"k": 1},
        {"again": {"k": 1}},
    ]


def test_dumps_round_trips_fixture_lines_byte_for_byte(fixture_log: Any) -> None:
    for line in fixture_log.lines:
        assert dumps(loads(line)) == line


def test_array_index_keys_come_first_like_javascript() -> None:
    value = {"b": 1, "10": 2, "a": {"x": 0, "2": 1, "01": 2, "0": 3}, "1": 4, "4294967295": 5}
    assert dumps(value) == ('{"1":4,"10":2,"b":1,"a":{"0":3,"2":1,"x":0,"01":2},"4294967295":5}')
    assert dumps({"": None, "0": None}) == '{"0":null,"":null}'


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False).filter(lambda f: f != 0.0 or str(f) == "0.0")
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=30,
)


@settings(max_examples=200)
@given(_json_values)
def test_snapshot_and_round_trip_properties(value: Any) -> None:
    copied = snapshot(value)
    assert copied == value
    text = dumps(value)
    assert dumps(copied) == text
    assert dumps(loads(text)) == text


@settings(max_examples=300)
@given(st.text(st.characters(blacklist_categories=())))
def test_a_lone_string_encodes_as_it_does_inside_a_container(text: str) -> None:
    """`dumps` of a bare string (its own fast path) is the literal the container path writes,
    surrogates and control characters included."""
    assert dumps(text) == dumps([text])[1:-1]


def test_snapshot_copies_every_level_and_checks_every_value() -> None:
    value = {"s": "x", "n": 1, "b": False, "z": None, "f": 0.5, "d": {"l": [{"k": 1}]}}
    copied = snapshot(value)
    assert list(copied) == list(value)
    assert copied == value
    value["s"] = "changed"
    value["d"]["l"][0]["k"] = 2
    value["d"]["new"] = 1
    assert copied == {"s": "x", "n": 1, "b": False, "z": None, "f": 0.5, "d": {"l": [{"k": 1}]}}
    with pytest.raises(TypeError, match=r"value\['d'\]\['f'\] is -0.0"):
        snapshot({"d": {"ok": True, "f": -0.0}})


def _needs_js_reference(value: Any) -> bool:
    """What `_needs_js` decides, written plainly (no cache, no shortcuts)."""
    if isinstance(value, dict):
        return any(type(k) is not str or _is_index(k) for k in value) or any(
            _needs_js_reference(v) for v in value.values()
        )
    if isinstance(value, list):
        return any(_needs_js_reference(v) for v in value)
    return type(value) is float and (repr(value).endswith(".0") or "e" in repr(value))


_index_like_keys = st.sampled_from(["0", "1", "01", "17", "4294967294", "4294967295", "١"])
_keyed_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=3),
    lambda inner: (
        st.lists(inner, max_size=10)
        | st.dictionaries(st.text(max_size=3) | _index_like_keys, inner, max_size=4)
    ),
    max_leaves=30,
)


@settings(max_examples=400)
@given(_keyed_values)
def test_needs_js_with_its_key_cache_decides_like_the_plain_walk(value: Any) -> None:
    """The cache of keys seen to be plain changes no decision: the first walk fills it, the
    second reads it (docs/performance.md, "Owned appends in the agent loop")."""
    expected = _needs_js_reference(value)
    assert _needs_js(value) is expected
    assert _needs_js(value) is expected
    assert (dumps(value) == "".join(_slow(value, []))) or not expected


def test_the_key_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonutil, "_PLAIN_KEYS", set())
    monkeypatch.setattr(jsonutil, "_PLAIN_KEYS_MAX", 3)
    assert not _needs_js({"a": 1, "b": 2})
    assert not _needs_js({"c": 1, "d": 2})
    assert not _needs_js({"e": 1})
    assert {"a", "b", "c", "d"} == jsonutil._PLAIN_KEYS
    assert _needs_js({"a": 1, "0": 2})
