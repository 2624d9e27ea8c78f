"""What `agents.run()` returns and `agents.stream()` yields, folded from a session's events.

`TurnFold` reads the live events of one session (the `session/event` bus) and follows the first
turn that starts after it was created: it turns the turn's events into stream items and, at the
turn's `turn/end`, into a `RunResult`. Content items (`TurnStart`, the deltas, `ToolCall`,
`ToolResult`, `TurnEnd`) are what a turn says; progress items (`StepStart`, `ToolCallStart`,
`BlockEnd`, `MessageEnd`, `RetryScheduled`) are how it gets there, for a live display such as
`dsh run`'s. See docs/python-api.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plugins.session.jsonutil import parse_arguments
from plugins.session.repair import NOT_STARTED, UNKNOWN_OUTCOME

Event = Mapping[str, Any]


@dataclass(frozen=True)
class TurnStart:
    """The turn began: the session it runs on and its number."""

    session_id: str
    turn: int


@dataclass(frozen=True)
class TextDelta:
    """A piece of the assistant's answer as the model streams it."""

    text: str
    step: int


@dataclass(frozen=True)
class ReasoningDelta:
    """A piece of the model's reasoning as it streams."""

    text: str
    step: int


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model made; `arguments` is the parsed JSON (the raw text if invalid)."""

    call_id: str
    name: str
    arguments: Any
    step: int


@dataclass(frozen=True)
class ToolResult:
    """The committed result of a call: what the model sees (`text`, `content`) and, for runtime
    failures, `error` (`{"name", "code"}`, e.g. `INVALID_ARGS`, `TOOL_OUTCOME_UNKNOWN`)."""

    call_id: str
    name: str
    is_error: bool
    text: str
    content: list[dict[str, Any]]
    error: dict[str, Any] | None
    step: int

    @property
    def repair(self) -> str | None:
        """`TOOL_OUTCOME_UNKNOWN` or `TOOL_NOT_STARTED` when crash repair wrote this result."""
        code = None if self.error is None else self.error.get("code")
        return code if code in (UNKNOWN_OUTCOME, NOT_STARTED) else None


@dataclass(frozen=True)
class StepStart:
    """Progress: a step began; the model's request is about to be sent."""

    step: int


@dataclass(frozen=True)
class ToolCallStart:
    """Progress: the model began writing a tool call (its `ToolCall` follows once logged)."""

    step: int


@dataclass(frozen=True)
class BlockEnd:
    """Progress: a block of the response (`text`, `reasoning`, `tool-call`, ...) is complete."""

    block_type: str
    step: int


@dataclass(frozen=True)
class MessageEnd:
    """Progress: the model's response is assembled and logged; `interrupted` when an abort cut
    it short (what it had said is kept); `text` is its text."""

    text: str
    interrupted: bool
    step: int


@dataclass(frozen=True)
class RetryScheduled:
    """Progress: the step's failed model request is sent again after `delay_ms` (the
    `retry`-th time); `code` and `message` are the failure's."""

    retry: int
    delay_ms: int
    code: str | None
    message: str | None
    step: int


@dataclass(frozen=True)
class Usage:
    """Token usage summed over the turn's model responses (input excludes cached tokens)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0

    def plus(self, usage: Mapping[str, Any]) -> Usage:
        """This usage plus one response's persisted `usage` object."""
        return Usage(
            self.input_tokens + int(usage.get("inputTokens", 0)),
            self.output_tokens + int(usage.get("outputTokens", 0)),
            self.cache_read_tokens + int(usage.get("cacheReadTokens", 0)),
            self.cache_write_tokens + int(usage.get("cacheWriteTokens", 0)),
            self.reasoning_tokens + int(usage.get("reasoningTokens", 0)),
        )


@dataclass(frozen=True)
class ToolRun:
    """One tool call of the turn with its result (None if the turn ended before it committed)."""

    call: ToolCall
    result: ToolResult | None


@dataclass(frozen=True)
class RunResult:
    """One turn, as `agents.run()` returns it.

    `reason` is the turn's `turn/end` reason (`{"kind": "completed"}`, `{"kind": "error",
    "error": {...}}`, `{"kind": "aborted", "reason": {...}}`, ...); `text` the final assistant
    message's text.
    """

    session_id: str
    turn: int
    reason: dict[str, Any]
    text: str
    tool_calls: list[ToolRun] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def completed(self) -> bool:
        """Whether the turn ended `completed`."""
        return self.reason.get("kind") == "completed"


@dataclass(frozen=True)
class TurnEnd:
    """The turn ended and the agent is idle; `result.reason` says `SESSION_NOT_DURABLE` unless
    the turn's end is durable (or nothing persists)."""

    result: RunResult


ProgressItem = StepStart | ToolCallStart | BlockEnd | MessageEnd | RetryScheduled
StreamItem = TurnStart | TextDelta | ReasoningDelta | ToolCall | ToolResult | TurnEnd | ProgressItem


def find_call(events: Sequence[Event], call_id: str) -> ToolCall | None:
    """The logged call `call_id`, the newest first (None if the log has none)."""
    for event in reversed(events):
        if event["type"] == "tool/call" and event["data"]["callId"] == call_id:
            return _call(event["data"])
    return None


class TurnFold:
    """Follows the first turn that starts in one session's events from now on (after `skip`
    turns: those of prompts queued before this one, each claimed by a turn of its own).

    Every result appended while the turn runs is the turn's, also that of a call an earlier turn
    made and this one resolves (an answered approval question); `earlier(call_id)` finds such a
    call in the log (`find_call`).
    """

    def __init__(
        self,
        session_id: str,
        earlier: Callable[[str], ToolCall | None] | None = None,
        *,
        skip: int = 0,
    ) -> None:
        self.session_id = session_id
        self._skip = skip
        self.turn: int | None = None
        self.result: RunResult | None = None
        self._text = ""
        self._usage = Usage()
        self._calls: dict[str, ToolRun] = {}
        self._earlier = earlier

    def add(self, event: Event) -> list[StreamItem]:
        """The stream items `event` yields (none once the turn has ended)."""
        kind, data = event["type"], event["data"]
        if self.result is not None:
            return []
        if kind == "turn/start" and self.turn is None:
            if self._skip:
                self._skip -= 1
                return []
            self.turn = data["turn"]
            return [TurnStart(self.session_id, data["turn"])]
        if self.turn is None:
            return []
        if kind == "tool/result":
            result = self._tool_result(data)
            return [] if result is None else [result]
        if data.get("turn") != self.turn:
            return []
        if kind == "step/start":
            return [StepStart(data["step"])]
        if kind == "assistant/chunk":
            return self._chunk(data["chunk"], data["step"])
        if kind == "llm/retry":
            failure = data.get("failure") or {}
            return [
                RetryScheduled(
                    data["retry"],
                    data["delayMs"],
                    failure.get("code"),
                    failure.get("message"),
                    data["step"],
                )
            ]
        if kind == "assistant/message":
            self._text = _text(data["message"].get("content", ()))
            if "usage" in data:
                self._usage = self._usage.plus(data["usage"])
            return [MessageEnd(self._text, data.get("interrupted") is True, data["step"])]
        if kind == "tool/call":
            call = _call(data)
            self._calls[call.call_id] = ToolRun(call, None)
            return [call]
        if kind == "turn/end":
            self.result = RunResult(
                self.session_id,
                self.turn,
                dict(data["reason"]),
                self._text,
                list(self._calls.values()),
                self._usage,
            )
        return []

    @staticmethod
    def _chunk(chunk: Mapping[str, Any], step: int) -> list[StreamItem]:
        kind = chunk["type"]
        if kind == "text-delta":
            return [TextDelta(chunk["text"], step)]
        if kind == "reasoning-delta":
            return [ReasoningDelta(chunk["text"], step)]
        if kind == "block-start" and chunk.get("blockType") == "tool-call":
            return [ToolCallStart(step)]
        if kind == "block-end":
            block = chunk.get("block")
            kind = str(block.get("type", "")) if isinstance(block, Mapping) else ""
            return [BlockEnd(kind, step)]
        return []

    def _tool_result(self, data: Mapping[str, Any]) -> ToolResult | None:
        message = data["message"]
        call_id = _result_call_id(message)
        if call_id not in self._calls and self._earlier is not None:
            call = self._earlier(call_id)
            if call is not None:
                self._calls[call_id] = ToolRun(call, None)
        block = next(
            (b for b in message.get("content", ()) if b.get("type") == "tool-result"), None
        )
        if block is None:
            return None
        run = self._calls.get(call_id)
        content = block.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": str(content)}]
        result = ToolResult(
            call_id,
            run.call.name if run is not None else "",
            block.get("isError") is True,
            _text(blocks),
            list(blocks),
            dict(data["error"]) if isinstance(data.get("error"), Mapping) else None,
            data["step"],
        )
        if run is not None:
            self._calls[call_id] = ToolRun(run.call, result)
        return result


def _call(data: Mapping[str, Any]) -> ToolCall:
    """A `tool/call` event's data as a `ToolCall`."""
    return ToolCall(data["callId"], data["name"], parse_arguments(data["arguments"]), data["step"])


def _result_call_id(message: Mapping[str, Any]) -> str:
    """The call a `tool/result` message answers."""
    blocks = message.get("content", ())
    block: Mapping[str, Any] = next((b for b in blocks if b.get("type") == "tool-result"), {})
    return str(block.get("toolCallId", message.get("source", {}).get("callId", "")))


def _text(blocks: Sequence[Mapping[str, Any]]) -> str:
    """Text blocks joined; other blocks (images, tool calls) are not text."""
    return "".join(b["text"] for b in blocks if b.get("type") == "text" and "text" in b)
