"""The execution pipeline: stage order, scopes, FINAL vs POST, every code."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from framework import AbortController
from plugins.llm import HarnessError
from plugins.tools import (
    Accept,
    Allow,
    Ask,
    Block,
    Deny,
    ToolExecution,
    ToolExecutionResult,
    aborted_before_dispatch_result,
)

pytestmark = pytest.mark.anyio

Next = Callable[[], Awaitable[Any]]


def text(message: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": message}]


def failure(message: str, name: str | None = None, code: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message}
    if name is not None:
        error["info"] = {"name": name, "code": code}
    return {"isError": True, "content": text(f"Error: {message}"), "error": error}


def recorder(root: Any) -> list[str]:
    """Record whether post-execute ran and that tools/result was emitted."""
    order: list[str] = []

    async def post(exec: ToolExecution, result: ToolExecutionResult, next: Next) -> Any:
        order.append("post-execute")
        return await next()

    root.on("tools/post-execute", post)
    root.on("tools/result", lambda exec, result: order.append("result"))
    return order


async def test_stage_order_and_agent_scoping(
    tools_root: Any, agent_of: Any, call: Any, make_tool: Any
) -> None:
    async with tools_root() as root:
        order: list[str] = []
        a, b = agent_of(root), agent_of(root)

        def listeners(ctx: Any, where: str) -> None:
            async def pre(exec: ToolExecution, next: Next) -> Any:
                order.append(f"{where}:pre-execute")
                return await next()

            def wrapper(label: str) -> Callable[[ToolExecution, Next], Awaitable[Any]]:
                async def wrap(exec: ToolExecution, next: Next) -> Any:
                    order.append(f"{where}:execute:{label}-in")
                    result = await next()
                    order.append(f"{where}:execute:{label}-out")
                    return result

                return wrap

            async def post(exec: ToolExecution, result: Any, next: Next) -> Any:
                order.append(f"{where}:post-execute")
                return await next()

            ctx.on("tools/pre-execute", pre)
            ctx.on("tools/execute", wrapper("outer"))
            ctx.on("tools/execute", wrapper("inner"))
            ctx.on("tools/post-execute", post)
            ctx.on("tools/result", lambda exec, result: order.append(f"{where}:result"))
            ctx.tools.guard(lambda exec: order.append(f"{where}:guard"))

        # The agents' listeners are registered first: plain ones still see every dispatch, and
        # a listener registered through agent B's context never sees agent A's call.
        listeners(b.ctx, "b")
        listeners(a.ctx, "a")
        listeners(root, "global")

        async def body(args: Any, exec: ToolExecution) -> str:
            order.append("body")
            return "done"

        root.tools.register(make_tool("probe", body))
        result = await root.tools.execute(call("probe", agent=a))

    assert result.to_json() == {"isError": False, "content": text("done"), "value": "done"}
    assert order == [
        "a:pre-execute",
        "global:pre-execute",
        "global:guard",
        "a:guard",
        "a:execute:outer-in",
        "a:execute:inner-in",
        "global:execute:outer-in",
        "global:execute:inner-in",
        "body",
        "global:execute:inner-out",
        "global:execute:outer-out",
        "a:execute:inner-out",
        "a:execute:outer-out",
        "a:post-execute",
        "global:post-execute",
        "a:result",
        "global:result",
    ]


async def test_calls_without_agent_reach_only_plain_listeners(
    tools_root: Any, agent_of: Any, call: Any, make_tool: Any
) -> None:
    async with tools_root() as root:
        seen: list[str] = []
        agent = agent_of(root)
        agent.ctx.on("tools/result", lambda exec, result: seen.append("agent"))
        root.on("tools/result", lambda exec, result: seen.append(f"plain:{exec.agent}"))
        root.tools.register(make_tool())
        await root.tools.execute(call("echo"))
    assert seen == ["plain:None"]


async def test_success_renders_and_carries_meta(tools_root: Any, call: Any, make_tool: Any) -> None:
    async with tools_root() as root:
        root.tools.register(make_tool())
        root.tools.register(
            make_tool(
                "rendered",
                render=lambda args, value: text(f"rendered {value['n']}"),
                presentation_meta=lambda args, value: {"seen": args["n"]},
            )
        )
        plain = await root.tools.execute(call("echo", {"n": 1.5, "s": "é"}))
        rendered = await root.tools.execute(call("rendered", {"n": 2}))
    assert plain.to_json() == {
        "isError": False,
        "content": text('{"n":1.5,"s":"é"}'),
        "value": {"n": 1.5, "s": "é"},
    }
    assert rendered.to_json() == {
        "isError": False,
        "content": text("rendered 2"),
        "value": {"n": 2},
        "meta": {"seen": 2},
    }


async def test_unknown_tool_is_a_post_result(tools_root: Any, call: Any) -> None:
    async with tools_root() as root:
        order = recorder(root)
        result = await root.tools.execute(call("nope"))
    assert result.to_json() == failure('unknown tool "nope"', "ToolNotFoundError", "UNKNOWN_TOOL")
    assert order == ["post-execute", "result"]


async def test_invalid_args_skip_the_body(tools_root: Any, call: Any, make_tool: Any) -> None:
    ran: list[Any] = []

    async def body(args: Any, exec: ToolExecution) -> None:
        ran.append(args)

    parameters = {
        "type": "object",
        "properties": {"path": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    async with tools_root() as root:
        order = recorder(root)
        root.tools.register(make_tool("strict", body, parameters=parameters))
        result = await root.tools.execute(call("strict", {"n": "1", "x": 0}))
        raw = await root.tools.execute(call("strict", "{not json"))
    assert result.to_json() == failure(
        'invalid arguments: missing required property "arguments.path"; "arguments.n" must be '
        'an integer; "arguments.x" is not a declared property (additionalProperties: false)',
        "ToolArgsError",
        "INVALID_ARGS",
    )
    assert raw.to_json() == failure(
        'invalid arguments: "arguments" must be an object', "ToolArgsError", "INVALID_ARGS"
    )
    assert ran == []
    assert order == ["post-execute", "result", "post-execute", "result"]


async def test_invalid_output(tools_root: Any, call: Any, make_tool: Any) -> None:
    async def body(args: Any, exec: ToolExecution) -> Any:
        return {"n": "x"}

    schema = {"type": "object", "properties": {"n": {"type": "number"}}}
    async with tools_root() as root:
        root.tools.register(make_tool("out", body, output_schema=schema))
        result = await root.tools.execute(call("out"))
    assert result.to_json() == failure(
        'tool "out" returned invalid output: "value.n" must be a number',
        "ToolOutputError",
        "INVALID_TOOL_OUTPUT",
    )


async def test_body_exceptions(tools_root: Any, call: Any, make_tool: Any) -> None:
    class Coded(HarnessError):
        pass

    async def plain(args: Any, exec: ToolExecution) -> None:
        raise RuntimeError("boom")

    async def coded(args: Any, exec: ToolExecution) -> None:
        raise Coded("disk full", "DISK_FULL")

    async with tools_root() as root:
        order = recorder(root)
        root.tools.register(make_tool("plain", plain))
        root.tools.register(make_tool("coded", coded))
        first = await root.tools.execute(call("plain"))
        second = await root.tools.execute(call("coded"))
    assert first.to_json() == failure("boom")
    assert second.to_json() == failure("disk full", "Coded", "DISK_FULL")
    assert order == ["post-execute", "result", "post-execute", "result"]


async def test_caller_aborted_before_prepare_is_final(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    controller = AbortController()
    controller.abort()
    async with tools_root() as root:
        order = recorder(root)

        async def pre(exec: ToolExecution, next: Next) -> Any:
            order.append("pre-execute")
            return await next()

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo", signal=controller.signal))
    assert result.to_json() == aborted_before_dispatch_result().to_json()
    assert order == ["result"]


async def test_abort_during_pre_execute_is_a_post_result(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    controller = AbortController()
    ran: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> None:
        ran.append("body")

    async with tools_root() as root:
        order = recorder(root)

        async def pre(exec: ToolExecution, next: Next) -> Any:
            controller.abort()
            return await next()

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool("t", body))
        result = await root.tools.execute(call("t", signal=controller.signal))
    assert result.to_json() == failure(
        "tool call aborted before dispatch", "AbortError", "ABORTED_BEFORE_DISPATCH"
    )
    assert order == ["post-execute", "result"]
    assert ran == []


@pytest.mark.parametrize(
    ("decision", "message"),
    [
        (Deny("not here"), "not here"),
        (Ask(), 'tool "echo" requires approval (not yet supported)'),
        (Ask("needs a human"), "needs a human"),
    ],
)
async def test_denials_are_post_results_without_info(
    tools_root: Any, call: Any, make_tool: Any, decision: Any, message: str
) -> None:
    async with tools_root() as root:
        order = recorder(root)

        async def pre(exec: ToolExecution, next: Next) -> Any:
            return decision

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo"))
    assert result.to_json() == failure(message)
    assert order == ["post-execute", "result"]


async def test_guards_run_in_order_and_the_first_string_denies(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    seen: list[str] = []

    async def async_guard(exec: ToolExecution) -> str | None:
        seen.append("async")
        return None

    async with tools_root() as root:
        root.tools.guard(async_guard)

        def second(exec: ToolExecution) -> str:
            seen.append("second")
            return f"no {exec.name}"

        root.tools.guard(second)
        root.tools.guard(lambda exec: seen.append("third"))
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo"))
    assert result.to_json() == failure("no echo")
    assert seen == ["async", "second"]


async def test_pre_execute_failure_is_final(tools_root: Any, call: Any, make_tool: Any) -> None:
    async with tools_root() as root:
        order = recorder(root)

        async def pre(exec: ToolExecution, next: Next) -> Any:
            raise RuntimeError("policy crashed")

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo"))
        bad = root.on("tools/pre-execute", lambda exec, next: "yes", prepend=True)
        wrong = await root.tools.execute(call("echo"))
        bad()
    assert result.to_json() == failure("policy crashed")
    assert wrong.to_json() == failure("tools/pre-execute must return Allow, Deny or Ask, got str")
    assert order == ["result", "result"]


async def test_wrapper_failure_is_final(tools_root: Any, call: Any, make_tool: Any) -> None:
    ran: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> None:
        ran.append("body")

    async with tools_root() as root:
        order = recorder(root)

        async def flush_fails(exec: ToolExecution, next: Next) -> Any:
            raise RuntimeError("disk unavailable")

        root.on("tools/execute", flush_fails)
        root.tools.register(make_tool("t", body))
        result = await root.tools.execute(call("t"))
    assert result.to_json() == failure("disk unavailable")
    assert order == ["result"]
    assert ran == []


async def test_wrapper_results_are_normalized(tools_root: Any, call: Any, make_tool: Any) -> None:
    async with tools_root() as root:
        replies: list[Any] = [
            {"isError": False, "content": text("from json"), "value": 7},
            42,
        ]

        async def short_circuit(exec: ToolExecution, next: Next) -> Any:
            return replies.pop(0)

        root.on("tools/execute", short_circuit)
        root.tools.register(make_tool())
        first = await root.tools.execute(call("echo"))
        second = await root.tools.execute(call("echo"))
    assert first.to_json() == {"isError": False, "content": text("from json"), "value": 7}
    assert second.to_json() == failure("tools/execute listener must return a tool result, got int")


async def test_success_after_caller_abort_is_the_real_result(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    controller = AbortController()

    async def body(args: Any, exec: ToolExecution) -> str:
        controller.abort()
        return "finished anyway"

    async with tools_root() as root:
        root.tools.register(make_tool("ran", body))
        ran = await root.tools.execute(call("ran", signal=controller.signal))

        skipping = AbortController()

        async def skip(exec: ToolExecution, next: Next) -> Any:
            skipping.abort()
            return {"isError": False, "content": text("skipped"), "value": None}

        root.on("tools/execute", skip)
        root.tools.register(make_tool("skipped"))
        skipped = await root.tools.execute(call("skipped", signal=skipping.signal))
    # The body finished: its effect happened, so the model is told its real result (the
    # original reported ABORTED here). A wrapper's answer without the body stays "before dispatch".
    assert ran.to_json() == {
        "isError": False,
        "content": text("finished anyway"),
        "value": "finished anyway",
    }
    assert skipped.to_json() == aborted_before_dispatch_result().to_json()


async def test_swapped_signal_reaches_the_body(tools_root: Any, call: Any, make_tool: Any) -> None:
    wrapper_controller = AbortController()
    seen: list[Any] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        seen.append(exec.signal.aborted)
        wrapper_controller.abort()
        seen.append(exec.signal.aborted)
        return "ignored"

    async with tools_root() as root:

        async def swap(exec: ToolExecution, next: Next) -> Any:
            previous, exec.signal = exec.signal, wrapper_controller.signal
            try:
                return await next()
            finally:
                exec.signal = previous

        root.on("tools/execute", swap)
        root.tools.register(make_tool("t", body))
        caller = AbortController()
        result = await root.tools.execute(call("t", signal=caller.signal))
    assert seen == [False, True]
    assert result.to_json() == {"isError": False, "content": text("ignored"), "value": "ignored"}
    assert not caller.signal.aborted


async def test_aborted_wrapper_signal_before_the_body(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    ran: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> None:
        ran.append("body")

    async with tools_root() as root:

        async def pre_aborted(exec: ToolExecution, next: Next) -> Any:
            dead = AbortController()
            dead.abort()
            exec.signal = dead.signal
            return await next()

        root.on("tools/execute", pre_aborted)
        root.tools.register(make_tool("t", body))
        result = await root.tools.execute(call("t"))
    assert result.to_json() == aborted_before_dispatch_result().to_json()
    assert ran == []


@pytest.mark.parametrize(
    "arguments",
    [{"x": math.nan}, {"x": math.inf}, {"x": -0.0}, {"x": (1, 2)}, {"x": 2**60}],
)
async def test_arguments_must_be_lossless_json(
    tools_root: Any, call: Any, make_tool: Any, arguments: Any
) -> None:
    async with tools_root() as root:
        order = recorder(root)

        async def pre(exec: ToolExecution, next: Next) -> Any:
            order.append("pre-execute")
            return await next()

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo", arguments))
    assert result.to_json() == failure(
        "tool execution arguments must be losslessly JSON-serializable"
    )
    assert order == ["result"]


async def test_cyclic_arguments_are_refused(tools_root: Any, call: Any, make_tool: Any) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    async with tools_root() as root:
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo", cyclic))
    assert result.error is not None
    assert result.error.message == "tool execution arguments must be losslessly JSON-serializable"


async def test_arguments_are_deep_copied(tools_root: Any, call: Any, make_tool: Any) -> None:
    original = {"list": [1, {"k": "v"}]}
    seen: list[Any] = []

    async def body(args: Any, exec: ToolExecution) -> None:
        seen.append(args)
        args["list"][1]["k"] = "changed"

    async with tools_root() as root:
        root.tools.register(make_tool("t", body))
        await root.tools.execute(call("t", original))
    assert seen == [{"list": [1, {"k": "changed"}]}]
    assert original == {"list": [1, {"k": "v"}]}


async def test_result_must_be_lossless_json(tools_root: Any, call: Any, make_tool: Any) -> None:
    async def nan_value(args: Any, exec: ToolExecution) -> Any:
        return {"x": math.nan}

    async def fine(args: Any, exec: ToolExecution) -> Any:
        return "fine"

    async with tools_root() as root:
        root.tools.register(make_tool("value", nan_value))
        root.tools.register(make_tool("meta", fine, presentation_meta=lambda a, v: {1: "x"}))
        root.tools.register(make_tool("blocks", fine, render=lambda a, v: [{"text": "untyped"}]))
        value = await root.tools.execute(call("value"))
        meta = await root.tools.execute(call("meta"))
        blocks = await root.tools.execute(call("blocks"))
    assert value.to_json() == failure("tool result must be losslessly JSON-serializable")
    assert meta.to_json() == failure("tool result must be losslessly JSON-serializable")
    assert blocks.to_json() == failure(
        "tool result field content must be a list of content blocks with a string type"
    )


async def test_post_execute_decisions(tools_root: Any, call: Any, make_tool: Any) -> None:
    decisions: list[Any] = [
        Accept(content=text("replaced")),
        Accept(value={"v": 2}),
        Block("rejected by policy"),
        Block([{"type": "text", "text": "line 1"}, {"type": "image", "data": "..."}]),
        Block([]),
        Accept(contexts=("remember this",)),
    ]

    async with tools_root() as root:

        async def post(exec: ToolExecution, result: Any, next: Next) -> Any:
            return decisions.pop(0)

        root.on("tools/post-execute", post)
        root.tools.register(make_tool())
        results = [(await root.tools.execute(call("echo", {"v": 1}))).to_json() for _ in range(6)]
    assert results == [
        {"isError": False, "content": text("replaced"), "value": {"v": 1}},
        {"isError": False, "content": text('{"v":2}'), "value": {"v": 2}},
        {
            "isError": True,
            "content": text("rejected by policy"),
            "error": {"message": "rejected by policy"},
        },
        {
            "isError": True,
            "content": [{"type": "text", "text": "line 1"}, {"type": "image", "data": "..."}],
            "error": {"message": "line 1\n[image content]"},
        },
        {
            "isError": True,
            "content": [],
            "error": {"message": "tool result blocked by post-execute policy"},
        },
        {
            "isError": False,
            "content": text('{"v":1}'),
            "value": {"v": 1},
            "additionalContexts": ["remember this"],
        },
    ]


async def test_post_execute_failures_and_value_on_errors(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    async with tools_root() as root:

        async def post(exec: ToolExecution, result: Any, next: Next) -> Any:
            return Accept(value=1) if result.is_error else "nonsense"

        root.on("tools/post-execute", post)
        root.tools.register(make_tool())
        unknown = await root.tools.execute(call("missing"))
        known = await root.tools.execute(call("echo"))
    assert unknown.to_json() == failure(
        "post-execute Accept(value=...) cannot replace a failed result"
    )
    assert known.to_json() == failure("tools/post-execute must return Accept or Block, got str")


async def test_abort_during_post_execute_keeps_a_success_whose_body_ran(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    controller = AbortController()
    async with tools_root() as root:

        async def post(exec: ToolExecution, result: Any, next: Next) -> Any:
            controller.abort()
            return await next()

        root.on("tools/post-execute", post)
        root.tools.register(make_tool())
        result = await root.tools.execute(call("echo", {"x": 1}, signal=controller.signal))
    assert result.to_json() == {"isError": False, "content": text('{"x":1}'), "value": {"x": 1}}


async def test_contexts_conclude_turn_and_finalize_content(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    emitted: list[tuple[str, Any]] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        exec.defer_context("from the body")
        exec.defer_context({"role": "user", "content": []})
        exec.conclude_turn()
        return "ok"

    async def finalize(exec: ToolExecution, result: ToolExecutionResult) -> Any:
        return [*result.content, *text(f"finalized {exec.call_id}")]

    async with tools_root() as root:

        async def pre(exec: ToolExecution, next: Next) -> Any:
            return Allow(contexts=("from pre-execute",))

        root.on("tools/pre-execute", pre)
        root.on("tools/result", lambda exec, result: emitted.append((exec.call_id, result)))
        root.tools.register(make_tool("t", body, finalize_content=finalize))
        result = await root.tools.execute(call("t", call_id="c-9"))
    assert result.to_json() == {
        "isError": False,
        "content": [*text("ok"), *text("finalized c-9")],
        "value": "ok",
        "additionalContexts": [
            "from pre-execute",
            "from the body",
            {"role": "user", "content": []},
        ],
        "concludesTurn": True,
    }
    assert emitted == [("c-9", result)]


async def test_execution_identity_and_nesting(tools_root: Any, call: Any, make_tool: Any) -> None:
    seen: list[tuple[str, str, Any]] = []

    async def inner(args: Any, exec: ToolExecution) -> None:
        seen.append((exec.call_id, exec.root_call_id, exec.parent))

    async with tools_root() as root:

        async def outer(args: Any, exec: ToolExecution) -> None:
            seen.append((exec.call_id, exec.root_call_id, exec.parent))
            await root.tools.execute(
                call(
                    "inner",
                    call_id="nested-1",
                    signal=exec.signal,
                    parent=exec.token,
                    root_call_id=exec.root_call_id,
                )
            )
            seen.append(("token", exec.token.call_id, exec.token.root_call_id))

        root.tools.register(make_tool("outer", outer))
        root.tools.register(make_tool("inner", inner))
        await root.tools.execute(call("outer", call_id="top"))
    assert seen[0] == ("top", "top", None)
    assert seen[1][:2] == ("nested-1", "top")
    assert seen[1][2] is not None
    assert seen[1][2].call_id == "top"
    assert seen[2] == ("token", "top", "top")


async def test_scheduler_stages_overlap_only_dispatch(
    tools_root: Any, call: Any, make_tool: Any
) -> None:
    order: list[str] = []
    both_started = anyio.Event()
    started: list[str] = []

    async def body(args: Any, exec: ToolExecution) -> str:
        started.append(exec.call_id)
        if len(started) == 2:
            both_started.set()
        await both_started.wait()  # deadlocks unless the two dispatches overlap
        order.append(f"body:{exec.call_id}")
        return exec.call_id

    async with tools_root() as root:

        async def pre(exec: ToolExecution, next: Next) -> Any:
            order.append(f"prepare:{exec.call_id}")
            return await next()

        root.on("tools/pre-execute", pre)
        root.tools.register(make_tool("p", body, is_concurrency_safe=True))
        scheduler = root.tools.scheduler
        first = await scheduler.prepare(call("p", call_id="c1"))
        second = await scheduler.prepare(call("p", call_id="c2"))
        denied = await scheduler.prepare(call("missing-but-allowed", call_id="c3"))
        assert first.dispatchable
        assert second.dispatchable
        assert denied.dispatchable
        with anyio.fail_after(5):
            async with anyio.create_task_group() as group:
                group.start_soon(scheduler.dispatch, first)
                group.start_soon(scheduler.dispatch, second)
        results = []
        for prepared in (first, second):
            await scheduler.finalize(prepared)
            results.append(await scheduler.finish(prepared))
    assert order[:3] == ["prepare:c1", "prepare:c2", "prepare:c3"]
    assert sorted(order[3:]) == ["body:c1", "body:c2"]
    assert [r.value for r in results] == ["c1", "c2"]
