"""What a call carries: `ToolExecutionInput` (from the caller) and `ToolExecution` (the `exec`
handed to listeners and to the tool body), docs/tools-and-cancellation.md."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Protocol
from uuid import uuid4

from framework import AbortSignal, Context

from .results import ToolContext

#: `json.dumps(value, ensure_ascii=False)` with the encoder built once (`json.dumps` builds one
#: per call when given options).
_encode = json.JSONEncoder(ensure_ascii=False).encode


def idempotency_key(store_identity: str, session_id: str, call_id: str) -> str:
    """The key of call `call_id` of session `session_id` in the store `store_identity`:
    `dsh-` and 32 hex digits of a SHA-256 over the three (docs/tools-and-cancellation.md)."""
    text = _encode([store_identity, session_id, call_id])
    return "dsh-" + hashlib.sha256(text.encode()).hexdigest()[:32]


class AgentLike(Protocol):
    """What the tools runtime reads from an agent: its scoped context and live session."""

    @property
    def ctx(self) -> Context: ...

    @property
    def session(self) -> Any: ...


@dataclass(frozen=True, eq=False)
class ExecutionToken:
    """Identity of one execution; pass it as `parent` to dispatch nested calls."""

    call_id: str
    root_call_id: str


@dataclass(frozen=True)
class ToolExecutionInput:
    """A call to execute. `arguments` is the parsed JSON (a raw string if it was not JSON)."""

    call_id: str
    name: str
    arguments: Any
    signal: AbortSignal
    agent: AgentLike | None = None
    parent: ExecutionToken | None = None
    root_call_id: str | None = None
    idempotency_key: str | None = None


class ToolExecution:
    """The `exec` of one call: identity, a deep copy of the arguments and a mutable `signal`.

    Wrappers may swap `signal` (and must restore it); the body reads it. `defer_context(msg)`
    leaves a message for the next step; `conclude_turn()` makes the turn end after this step.
    """

    def __init__(self, input: ToolExecutionInput, arguments: Any) -> None:
        self.call_id = input.call_id
        self.name = input.name
        self.arguments = arguments
        self.agent = input.agent
        self.parent = input.parent
        self.root_call_id = input.root_call_id if input.root_call_id is not None else input.call_id
        self.token = ExecutionToken(self.call_id, self.root_call_id)
        #: Stable for one durable call across crash, repair and resume; unique across calls.
        #: A caller that passes none (no durable call behind it) gets a fresh random key.
        self.idempotency_key: str = (
            input.idempotency_key if input.idempotency_key is not None else f"dsh-{uuid4().hex}"
        )
        self.signal: AbortSignal = input.signal
        self.contexts: list[ToolContext] = []
        self.concludes_turn = False

    def defer_context(self, message: ToolContext) -> None:
        """Queue `message` (a text or a message dict) for the next step."""
        self.contexts.append(message)

    def conclude_turn(self) -> None:
        """Ask the loop to end the turn once this step's results are committed."""
        self.concludes_turn = True

    def __repr__(self) -> str:
        return f"ToolExecution(call_id={self.call_id!r}, name={self.name!r})"
