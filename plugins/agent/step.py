"""One step: stream the model's response into the log, then run its tool calls."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from framework import AbortError, abort_scope
from plugins.llm import BlockAssembler, LlmError, close_stream
from plugins.session.owned import append_owned, checked

from .hooks import REQUEST_ERROR, RequestFailed, Retry
from .messages import assistant_message
from .request import build_request
from .tool_calls import refuse_repeated_call_ids, run_tool_calls

if TYPE_CHECKING:
    from framework import AbortSignal

    from .agent import Agent

StepOutcome = Literal["completed", "max-tokens", "continue"]


async def run_step(agent: Agent, turn: int, step: int, signal: AbortSignal) -> StepOutcome:
    """Run `step` of `turn`; returns how the turn goes on. Raises on abort or request failure."""
    session = agent.session
    while True:
        request = await build_request(agent, turn, step, signal)
        options = request.options
        assembler = BlockAssembler()
        seqs: list[int] = []
        replay_state: Any = None
        try:
            with abort_scope(signal):
                stream = request.stream()
                try:
                    async for raw in stream:
                        # The log's copy is what the step reads on: the assistant message is
                        # then built of checked values only (docs/performance.md, "Owned
                        # appends in the agent loop").
                        chunk = checked("assistant/chunk", raw)
                        event = append_owned(
                            session,
                            "assistant/chunk",
                            {"turn": turn, "step": step, "chunk": chunk},
                        )
                        seqs.append(event["seq"])
                        assembler.add(chunk)
                        if chunk.get("type") == "finish":
                            replay_state = chunk.get("replayState")
                finally:
                    await close_stream(stream)
            signal.throw_if_aborted()
        except AbortError:
            _interrupted(agent, turn, step, assembler, seqs, options.provider, options.model)
            raise
        response = assembler.result()
        finish = response.finish
        if finish["kind"] in ("error", "aborted"):
            if signal.aborted:
                _interrupted(agent, turn, step, assembler, seqs, options.provider, options.model)
                signal.throw_if_aborted()
            decision = await agent.ctx.serial(
                REQUEST_ERROR,
                RequestFailed(
                    agent,
                    turn,
                    step,
                    options.provider,
                    finish["failure"],
                    request.retry_policy,
                    signal,
                ),
            )
            if isinstance(decision, Retry):
                continue
            raise LlmError(finish["failure"])
        calls = [block for block in response.blocks if block.get("type") == "tool-call"]
        refuse_repeated_call_ids(agent, calls)
        # Read before the message is logged: a store that cannot name itself fails the step
        # with no call left unanswered in the transcript.
        store = await agent.service.sessions.identity() if calls else ""
        message = assistant_message(
            response.blocks,
            checked("assistant/message", options.provider),
            checked("assistant/message", options.model),
            replay_state,
        )
        data: dict[str, Any] = {"turn": turn, "step": step, "message": message}
        if response.usage is not None:
            data["usage"] = response.usage
        append_owned(
            session, "assistant/message", data, surface_op="append", source_event_seqs=seqs
        )
        if finish["kind"] == "max-tokens":
            return "max-tokens"
        if not calls:
            return "completed"
        concluded = await run_tool_calls(agent, turn, step, calls, signal, store)
        return "completed" if concluded else "continue"


def _interrupted(
    agent: Agent,
    turn: int,
    step: int,
    assembler: BlockAssembler,
    seqs: list[int],
    provider: str,
    model: str,
) -> None:
    """Keep what the model had said before an abort as an interrupted assistant message."""
    blocks = assembler.interrupted_blocks()
    if blocks:
        agent.session.append(
            "assistant/message",
            {
                "turn": turn,
                "step": step,
                "message": assistant_message(blocks, provider, model),
                "interrupted": True,
            },
            surface_op="append",
            source_event_seqs=seqs,
        )
