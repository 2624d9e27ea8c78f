"""The execution pipeline (docs/tools-and-cancellation.md) as four stages the agent loop drives.

`ToolScheduler.prepare(input)` creates the call (argument snapshot), runs `tools/pre-execute`
and the guards; `dispatch(call)` runs the `tools/execute` waterfall around the tool body;
`finalize(call)` runs `tools/post-execute`; `finish(call)` snapshots the result, applies the
tool's `finalize_content` and emits `tools/result`. The loop calls `prepare` sequentially in
model order, may overlap `dispatch` of calls it groups as parallel, and calls `finalize` then
`finish` once per call. Every stage after `prepare` is a no-op for a call already settled by an
earlier stage: a FINAL result skips `finalize`, a POST result (denials, dispatch results) runs it.
`ToolsService.execute(input)` runs all four for one call.

Once its caller aborts, a running body gets the cancellation grace (`plugins.tools.grace`); what
is then recorded follows docs/tools-and-cancellation.md: a body that returned keeps its result.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from framework import AbortError, AbortSignal, Context, Scope
from plugins.session.jsonutil import snapshot

from .decisions import Accept, Allow, Ask, Block, Deny
from .errors import ToolArgsError, ToolNotFoundError, ToolOutputError
from .execution import ToolExecution, ToolExecutionInput
from .grace import CancelGrace
from .hooks import EXECUTE, POST_EXECUTE, PRE_EXECUTE, RESULT
from .registry import Registry, scope_of
from .results import (
    ToolExecutionResult,
    ToolFailure,
    aborted_before_dispatch_result,
    aborted_result,
    cancelled_result,
    content_message,
    exception_result,
    failure_result,
    text_block,
)
from .schema import violations

ARGS_NOT_LOSSLESS = "tool execution arguments must be losslessly JSON-serializable"
RESULT_NOT_LOSSLESS = "tool result must be losslessly JSON-serializable"


class PreparedCall:
    """One call moving through the stages; `result` is set once a stage settles it."""

    __slots__ = ("body_ran", "deferred", "exec", "final", "input", "result")

    def __init__(self, input: ToolExecutionInput, exec: ToolExecution) -> None:
        self.input = input
        self.exec = exec
        self.result: ToolExecutionResult | None = None
        #: A FINAL result skips `tools/post-execute`.
        self.final = False
        self.body_ran = False
        #: Its approval question stays open: the loop commits no result for it this turn.
        self.deferred = False

    @property
    def dispatchable(self) -> bool:
        """True while no stage has produced a result (prepare allowed the call)."""
        return self.result is None

    def settle(self, result: ToolExecutionResult, *, final: bool) -> None:
        """Record the stage's result; `final` skips any later `tools/post-execute`."""
        self.result = result
        self.final = final


async def _resolved(value: Any) -> Any:
    """Await a listener's return value if it is awaitable (sync listeners may return plainly)."""
    return await value if inspect.isawaitable(value) else value


class ToolScheduler:
    """The four pipeline stages over a registry; `ctx` dispatches calls made without an agent."""

    def __init__(self, ctx: Context, registry: Registry, grace: CancelGrace) -> None:
        self._ctx = ctx
        self._registry = registry
        #: How long an aborted call's body may keep running (see `plugins.tools.grace`).
        self.grace = grace

    def _dispatcher(self, exec: ToolExecution) -> Context:
        return exec.agent.ctx if exec.agent is not None else self._ctx

    def _scope(self, exec: ToolExecution) -> Scope | None:
        return scope_of(exec.agent.ctx) if exec.agent is not None else None

    async def prepare(self, input: ToolExecutionInput) -> PreparedCall:
        """Create the call and decide whether it may dispatch (pre-execute, guards)."""
        try:
            arguments = snapshot(input.arguments)
        except TypeError:
            call = PreparedCall(input, ToolExecution(input, input.arguments))
            call.settle(exception_result(TypeError(ARGS_NOT_LOSSLESS)), final=True)
            return call
        call = PreparedCall(input, ToolExecution(input, arguments))
        if input.signal.aborted:
            call.settle(aborted_before_dispatch_result(), final=True)
            return call
        try:
            denial = await self._pre_execute(call)
            if denial is None:
                denial = await self._guard(call.exec)
        except Exception as error:
            call.settle(exception_result(error), final=True)
            return call
        if _aborted(input.signal):
            call.settle(aborted_before_dispatch_result(), final=False)
        elif denial is not None:
            call.settle(failure_result(denial), final=False)
        return call

    async def _pre_execute(self, call: PreparedCall) -> str | None:
        exec = call.exec

        async def allow() -> Allow:
            return Allow()

        decision = await self._dispatcher(exec).waterfall(PRE_EXECUTE, exec, inner=allow)
        for context in decision.contexts:
            exec.defer_context(context)
        if isinstance(decision, Deny):
            return decision.reason
        if isinstance(decision, Ask):
            return await self._approval(call, decision.reason)
        return None

    async def _approval(self, call: PreparedCall, reason: str | None) -> str | None:
        """`Ask`: the approval service decides (docs/approval.md); without one, deny."""
        approval = self._ctx.get("approval")
        if approval is None:
            return (
                reason
                if reason is not None
                else f'tool "{call.exec.name}" requires approval (not yet supported)'
            )
        decision = await approval.decide(call.exec, reason)
        call.deferred = decision.deferred
        denial: str | None = decision.denial
        return denial

    async def _guard(self, exec: ToolExecution) -> str | None:
        for guard in self._registry.guards(self._scope(exec)):
            reason = await _resolved(guard(exec))
            if isinstance(reason, str):
                return reason
        return None

    async def dispatch(self, call: PreparedCall) -> None:
        """Run the `tools/execute` waterfall around the body (no-op for a settled call)."""
        if call.result is not None:
            return
        exec = call.exec

        async def body() -> ToolExecutionResult:
            return await self._run_body(call)

        try:
            outcome = await self._dispatcher(exec).waterfall(EXECUTE, exec, inner=body)
            result = _normalized(outcome)
        except Exception as error:
            call.settle(exception_result(error), final=True)
            return
        call.settle(_after_abort(call, result), final=False)

    async def _run_body(self, call: PreparedCall) -> ToolExecutionResult:
        exec = call.exec
        caller = call.input.signal
        fused = caller if exec.signal is caller else AbortSignal.any([caller, exec.signal])
        if fused.aborted:
            return aborted_before_dispatch_result()
        tool = self._registry.resolve(exec.name, self._scope(exec))
        if tool is None:
            return exception_result(ToolNotFoundError(exec.name))
        problems = violations(exec.arguments, tool.parameters, "arguments")
        if problems:
            return exception_result(ToolArgsError(problems))
        swapped, exec.signal = exec.signal, fused
        call.body_ran = True
        try:
            with self.grace.watch(caller, exec.agent) as body:
                try:
                    value = await tool.execute(exec.arguments, exec)
                except AbortError as error:
                    return aborted_result() if fused.aborted else exception_result(error)
                except Exception as error:
                    return exception_result(error)
        finally:
            exec.signal = swapped
        if body.cancelled_caught:
            return cancelled_result()
        try:
            value = _lossless_value(value)
            if tool.output_schema is not None:
                problems = violations(value, tool.output_schema, "value")
                if problems:
                    raise ToolOutputError(tool.name, problems)
            content = tool.content_of(exec.arguments, value)
            meta = (
                None
                if tool.presentation_meta is None
                else tool.presentation_meta(exec.arguments, value)
            )
        except Exception as error:
            return exception_result(error)
        return ToolExecutionResult(is_error=False, content=content, value=value, meta=meta)

    async def finalize(self, call: PreparedCall) -> None:
        """Run `tools/post-execute` on a POST result (no-op for FINAL ones)."""
        if call.final or call.result is None:
            return
        exec, result = call.exec, call.result

        async def accept() -> Accept:
            return Accept()

        try:
            decision = await self._dispatcher(exec).waterfall(
                POST_EXECUTE, exec, result, inner=accept
            )
            result = self._decided(exec, result, decision)
        except Exception as error:
            result = exception_result(error)
        call.settle(_after_abort(call, result), final=True)

    def _decided(
        self, exec: ToolExecution, result: ToolExecutionResult, decision: Accept | Block
    ) -> ToolExecutionResult:
        for context in decision.contexts:
            exec.defer_context(context)
        if isinstance(decision, Block):
            feedback = decision.feedback
            blocks = [text_block(feedback)] if isinstance(feedback, str) else list(feedback)
            return ToolExecutionResult(
                is_error=True, content=blocks, error=ToolFailure(content_message(blocks))
            )
        if decision.content is not None:
            return replace(result, content=list(decision.content))
        if decision.replaces_value:
            if result.is_error:
                raise TypeError("post-execute Accept(value=...) cannot replace a failed result")
            tool = self._registry.resolve(exec.name, self._scope(exec))
            content = (
                tool.content_of(exec.arguments, decision.value)
                if tool is not None
                else [text_block(str(decision.value))]
            )
            return replace(result, value=decision.value, content=content)
        return result

    async def finish(self, call: PreparedCall) -> ToolExecutionResult:
        """Snapshot the result, apply `finalize_content`, emit `tools/result`; return it."""
        if call.result is None:
            raise RuntimeError("finish() needs a call that prepare/dispatch settled")
        exec = call.exec
        result = call.result
        if exec.contexts or exec.concludes_turn:
            result = replace(
                result,
                additional_contexts=[*result.additional_contexts, *exec.contexts],
                concludes_turn=result.concludes_turn or exec.concludes_turn,
            )
        try:
            data = snapshot(result.to_json())
        except TypeError:
            result = exception_result(TypeError(RESULT_NOT_LOSSLESS))
        else:
            try:
                result = ToolExecutionResult.from_json(data)
            except TypeError as error:
                result = exception_result(error)
        tool = self._registry.resolve(exec.name, self._scope(exec))
        if tool is not None and tool.finalize_content is not None:
            try:
                content = await _resolved(tool.finalize_content(exec, result))
                if content is not None:
                    result = replace(result, content=list(content))
            except Exception as error:
                result = exception_result(error)
        call.settle(result, final=True)
        self._dispatcher(exec).emit(RESULT, exec, result)
        return result

    async def execute(self, input: ToolExecutionInput) -> ToolExecutionResult:
        """All four stages for one call."""
        call = await self.prepare(input)
        await self.dispatch(call)
        await self.finalize(call)
        return await self.finish(call)


def _normalized(outcome: ToolExecutionResult | Mapping[str, Any]) -> ToolExecutionResult:
    """A wrapper's return value as a result (a result object or its persisted JSON; the bus
    has checked it is one of them, see `hooks.EXECUTE`)."""
    if isinstance(outcome, ToolExecutionResult):
        return outcome
    return ToolExecutionResult.from_json(outcome)


def _lossless_value(value: Any) -> Any:
    """A detached copy of a body's value; refuses values that are not lossless JSON."""
    try:
        return snapshot(value)
    except TypeError:
        raise TypeError(RESULT_NOT_LOSSLESS) from None


def _aborted(signal: AbortSignal) -> bool:
    """Read `signal.aborted` afresh: it changes across awaits (no type narrowing)."""
    return signal.aborted


def _after_abort(call: PreparedCall, result: ToolExecutionResult) -> ToolExecutionResult:
    """A success stands once the body ran, even if the caller aborted meanwhile (its effects
    happened); without the body (a wrapper's own answer), an aborted caller gets
    `ABORTED_BEFORE_DISPATCH`."""
    if call.input.signal.aborted and not result.is_error and not call.body_ran:
        return aborted_before_dispatch_result()
    return result
