"""The replay script: response items, their validation and loading from a YAML/JSON file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

#: `json.dumps(value, separators=(",", ":"), ensure_ascii=False)` with the encoder built once
#: (`json.dumps` builds one per call when given options).
compact_json: Callable[[Any], str] = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False
).encode


class ReplayToolCall(BaseModel):
    """One scripted tool call; non-string `arguments` are sent as compact JSON."""

    model_config = ConfigDict(extra="forbid")

    id: str
    name: str
    arguments: Any = Field(default_factory=dict)

    def arguments_text(self) -> str:
        """The raw argument string (a string is sent verbatim, even if it is not JSON)."""
        if isinstance(self.arguments, str):
            return self.arguments
        return compact_json(self.arguments)


class ReplayFailure(BaseModel):
    """A scripted request failure."""

    model_config = ConfigDict(extra="forbid")

    code: str
    message: str = "replayed failure"


class ReplayResponse(BaseModel):
    """One scripted response: `text` and/or `tool_calls` (optional `reasoning`), or an `error`.

    `text_on_tool_error` is served instead of `text` when a tool result the request carries since
    the model's last message is an error (a failed, refused or cancelled call), so a scripted
    answer never claims work that did not happen.
    """

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    text_on_tool_error: str | None = None
    tool_calls: list[ReplayToolCall] | None = None
    error: ReplayFailure | None = None
    reasoning: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> ReplayResponse:
        has_output = self.text is not None or self.tool_calls is not None
        if self.error is not None and (has_output or self.reasoning is not None):
            raise PydanticCustomError(
                "replay_item", "an error response cannot also have text, tool_calls or reasoning"
            )
        if self.error is None and not has_output:
            raise PydanticCustomError(
                "replay_item", "a response needs one of text, tool_calls or error"
            )
        if self.text_on_tool_error is not None and self.text is None:
            raise PydanticCustomError(
                "replay_item", "text_on_tool_error replaces text: give text as well"
            )
        return self

    def served(self, messages: Sequence[Mapping[str, Any]]) -> ReplayResponse:
        """This response as served after `messages` (see `text_on_tool_error`)."""
        if self.text_on_tool_error is None or not _failed_since_model(messages):
            return self
        return self.model_copy(update={"text": self.text_on_tool_error})


def _failed_since_model(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a tool result after the last assistant message is an error."""
    for message in reversed(messages):
        if message.get("role") == "assistant":
            return False
        if any(
            isinstance(block, Mapping)
            and block.get("type") == "tool-result"
            and block.get("isError") is True
            for block in message.get("content", ())
        ):
            return True
    return False


_SCRIPT = TypeAdapter(list[ReplayResponse])


def load_script(path: Path) -> list[ReplayResponse]:
    """Read and validate a script file (`.json` as JSON, anything else as YAML).

    Raises `ValueError` with one clear message naming the file (and the item for bad items).
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ValueError(f"cannot read replay file {path}: {error.strerror or error}") from None
    try:
        raw: Any = json.loads(text) if path.suffix == ".json" else YAML(typ="safe").load(text)
    except (ValueError, YAMLError) as error:
        raise ValueError(f"cannot parse replay file {path}: {error}") from None
    if raw is None:
        return []
    try:
        return _SCRIPT.validate_python(raw)
    except ValidationError as error:
        problems = "\n".join(
            f"  - {item['msg']} (at {'.'.join(str(part) for part in item['loc']) or '<root>'})"
            for item in error.errors()
        )
        raise ValueError(f"invalid replay file {path}:\n{problems}") from None
