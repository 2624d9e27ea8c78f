"""The configuration reference (`docs/configuration.md`), generated from each first-party plugin's
pydantic `Config` so that the page cannot drift from the code.

Run `python -m apps.config_reference > docs/configuration.md` after changing a `Config`; the test
suite fails while the committed page differs from what this prints. A field's description is the
`#:` comment block directly above it in the class body (the convention every `Config` follows).
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Iterator

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from framework.loader import plugin_entry_points

HEADER = """# Configuration reference

Every first-party plugin, by the name a manifest row gives it (`name:`), and the fields its row's
`config:` accepts. Unknown fields are errors; `${VAR}` and `${VAR:-default}` expand from the
environment. Where a field has a camelCase spelling (the original harness's), both spellings are
accepted.

This page is generated from the code (`python -m apps.config_reference > docs/configuration.md`);
a test fails when it is stale.
"""

_FIELD = re.compile(r"^\s+(\w+)\s*:")
_DOC = re.compile(r"^\s+#:\s?(.*)$")


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """`#:` comments above each field, from the model and its `BaseModel` ancestors."""
    comments: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if not (isinstance(cls, type) and issubclass(cls, BaseModel)) or cls is BaseModel:
            continue
        try:
            lines = inspect.getsource(cls).splitlines()
        except (OSError, TypeError):
            continue
        pending: list[str] = []
        for line in lines:
            doc = _DOC.match(line)
            if doc:
                pending.append(doc.group(1))
                continue
            field = _FIELD.match(line)
            if field and pending:
                comments[field.group(1)] = " ".join(pending)
            pending = []
    return comments


def type_name(annotation: object) -> str:
    """A short, readable spelling of a field's type."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(repr(arg) for arg in args).replace("'", '"')
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_name(arg) for arg in args)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin))
        return f"{name}[{', '.join(type_name(arg) for arg in args)}]"
    if annotation is type(None):
        return "null"
    if isinstance(annotation, type):
        return annotation.__name__
    return str(annotation).replace("typing.", "")


def default_text(info: FieldInfo) -> str:
    """The default as YAML-ish text, or `required`."""
    if info.default is PydanticUndefined:
        if info.default_factory is not None:
            if info.default_factory_takes_validated_data:
                return "computed"
            return repr_default(_factory(info))
        return "required"
    return repr_default(info.default)


def _factory(info: FieldInfo) -> object:
    factory = typing.cast("typing.Callable[[], object]", info.default_factory)
    return factory()


def repr_default(value: object) -> str:
    """`null`, `true`/`false`, numbers and strings as a manifest would write them."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, BaseModel):
        return "{...}"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        value = list(value)
    return repr(value).replace("'", '"')


def nested_models(annotation: object) -> Iterator[type[BaseModel]]:
    """The pydantic models a field's type mentions (`list[X]`, `X | None`, `dict[str, X]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from nested_models(arg)


def field_table(model: type[BaseModel]) -> list[str]:
    """A Markdown table of a model's fields."""
    comments = field_comments(model)
    lines = ["| field | type | default | meaning |", "|---|---|---|---|"]
    for field_name, info in model.model_fields.items():
        spelled = f"`{field_name}`"
        if info.alias and info.alias != field_name:
            spelled += f" (`{info.alias}`)"
        meaning = comments.get(field_name, "").replace("|", "\\|")
        kind = type_name(info.annotation).replace("|", "\\|")
        default = default_text(info).replace("|", "\\|")
        lines.append(f"| {spelled} | `{kind}` | `{default}` | {meaning} |")
    return lines


def model_tables(config: type[BaseModel]) -> list[str]:
    """The config's table, then one table per nested model it uses (each once)."""
    lines = field_table(config)
    seen: set[type[BaseModel]] = {config}
    queue = [config]
    while queue:
        for info in queue.pop(0).model_fields.values():
            for nested in nested_models(info.annotation):
                if nested in seen:
                    continue
                seen.add(nested)
                queue.append(nested)
                doc = (inspect.getdoc(nested) or "").split("\n\n")[0].replace("\n", " ")
                lines += ["", f"`{nested.__name__}`: {doc}".rstrip(), "", *field_table(nested)]
    return lines


def plugin_sections() -> Iterator[str]:
    """One Markdown section per first-party entry point, by name."""
    for name, entry_point in sorted(plugin_entry_points().items()):
        if not entry_point.value.startswith("plugins."):
            continue
        plugin = entry_point.load()
        summary = (inspect.getdoc(plugin) or "").split("\n\n")[0].replace("\n", " ")
        lines = [f"## `{name}`", "", f"Module `{entry_point.value}`. {summary}".rstrip(), ""]
        config = getattr(plugin, "Config", None)
        if not (isinstance(config, type) and issubclass(config, BaseModel)):
            lines += ["No configuration.", ""]
            yield "\n".join(lines)
            continue
        yield "\n".join([*lines, *model_tables(config), ""])


def render() -> str:
    """The whole page."""
    return "\n".join([HEADER, *plugin_sections()])


def main() -> None:
    """Print the page to stdout."""
    sys.stdout.write(render())


if __name__ == "__main__":
    main()
