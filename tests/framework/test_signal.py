"""Abort signals, deadlines and abort scopes (docs/concepts.md)."""

from __future__ import annotations

import gc

import anyio
import anyio.lowlevel
import pytest

from framework import (
    AbortController,
    AbortError,
    AbortSignal,
    Context,
    TimeoutReason,
    abort_scope,
    deadline,
    timeout_of,
)

pytestmark = pytest.mark.anyio


def test_abort_is_idempotent_and_the_first_reason_wins() -> None:
    controller = AbortController()
    heard: list[object] = []
    controller.signal.add_listener(heard.append)
    assert not controller.signal.aborted
    assert controller.signal.reason is None
    controller.abort({"kind": "user"})
    controller.abort({"kind": "parent"})
    assert controller.signal.aborted
    assert controller.signal.reason == {"kind": "user"}
    assert heard == [{"kind": "user"}]


def test_abort_without_reason_uses_abort_error() -> None:
    controller = AbortController()
    controller.abort()
    assert isinstance(controller.signal.reason, AbortError)
    with pytest.raises(AbortError) as info:
        controller.signal.throw_if_aborted()
    assert info.value is controller.signal.reason


def test_throw_if_aborted_wraps_non_error_reasons() -> None:
    controller = AbortController()
    controller.signal.raise_if_aborted()
    controller.abort({"kind": "hook", "reason": "stop"})
    with pytest.raises(AbortError) as info:
        controller.signal.raise_if_aborted()
    assert info.value.reason == {"kind": "hook", "reason": "stop"}


def test_listeners_run_synchronously_and_can_be_removed() -> None:
    controller = AbortController()
    heard: list[str] = []
    remove = controller.signal.add_listener(lambda reason: heard.append("removed"))
    controller.signal.add_listener(lambda reason: heard.append("kept"))
    remove()
    controller.abort("why")
    assert heard == ["kept"]
    controller.signal.add_listener(lambda reason: heard.append(f"late {reason}"))
    assert heard == ["kept", "late why"]


def test_failing_listener_does_not_stop_the_others() -> None:
    controller = AbortController()
    heard: list[str] = []

    def broken(reason: object) -> None:
        raise RuntimeError("listener broke")

    controller.signal.add_listener(broken)
    controller.signal.add_listener(lambda reason: heard.append("after"))
    controller.abort()
    assert heard == ["after"]


def test_any_follows_the_first_source_to_abort() -> None:
    a, b = AbortController(), AbortController()
    combined = AbortSignal.any([a.signal, b.signal])
    assert not combined.aborted
    b.abort("b first")
    a.abort("a later")
    assert combined.reason == "b first"
    already = AbortSignal.any([a.signal, AbortController().signal])
    assert already.reason == "a later"


def test_any_does_not_keep_listeners_of_dropped_signals() -> None:
    parent = AbortController()
    for _ in range(10):
        AbortSignal.any([parent.signal])
    gc.collect()
    assert not parent.signal._listeners


async def test_wait_returns_on_abort() -> None:
    controller = AbortController()
    async with anyio.create_task_group() as tg:
        tg.start_soon(controller.signal.wait)
        await anyio.wait_all_tasks_blocked()
        controller.abort()
    await controller.signal.wait()


async def test_abort_scope_cancels_the_block_and_raises_abort_error() -> None:
    controller = AbortController()
    reached: list[str] = []
    errors: list[AbortError] = []

    async def body() -> None:
        try:
            with abort_scope(controller.signal):
                await anyio.sleep_forever()
            reached.append("after")
        except AbortError as exc:
            errors.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(body)
        await anyio.wait_all_tasks_blocked()
        controller.abort({"kind": "user"})
    assert reached == []
    assert [e.reason for e in errors] == [{"kind": "user"}]


async def test_abort_scope_raises_for_an_already_aborted_signal() -> None:
    controller = AbortController()
    controller.abort({"kind": "user"})
    with pytest.raises(AbortError) as info, abort_scope(controller.signal):
        await anyio.sleep_forever()
    assert info.value.reason == {"kind": "user"}


async def test_abort_scope_passes_through_when_not_aborted() -> None:
    controller = AbortController()
    with abort_scope(controller.signal) as scope:
        await anyio.lowlevel.checkpoint()
    assert not scope.cancel_called


async def test_task_group_cancellation_never_becomes_an_abort() -> None:
    controller = AbortController()
    with anyio.CancelScope() as outer:
        with abort_scope(controller.signal):
            outer.cancel()
            await anyio.sleep_forever()
    assert outer.cancelled_caught
    assert not controller.signal.aborted


async def test_deadline_fires_lazily_without_a_root_context() -> None:
    with deadline(None, 5, "TOOL_TIMEOUT") as d:
        assert not d.signal.aborted
        with pytest.raises(TimeoutReason), abort_scope(d.signal):
            await anyio.sleep_forever()
        reason = d.signal.reason
    assert isinstance(reason, TimeoutReason)
    assert (reason.code, reason.ms) == ("TOOL_TIMEOUT", 5)
    assert timeout_of(d.signal, "TOOL_TIMEOUT") is reason
    assert timeout_of(d.signal, "OTHER") is None


async def test_deadline_wait_wakes_at_expiry() -> None:
    with deadline(None, 5, "T") as d:
        with anyio.fail_after(1):
            await d.signal.wait()
    assert timeout_of(d.signal, "T") is not None


async def test_deadline_fires_listeners_eagerly_under_a_root_context() -> None:
    heard: list[object] = []
    async with Context():
        with deadline(None, 5, "T") as d:
            d.signal.add_listener(heard.append)
            await anyio.sleep(0.05)
            assert len(heard) == 1
    assert isinstance(heard[0], TimeoutReason)


async def test_deadline_follows_the_parents_reason() -> None:
    parent = AbortController()
    with deadline(parent.signal, 10_000, "T") as d:
        parent.abort({"kind": "user"})
        assert d.signal.reason == {"kind": "user"}
    assert timeout_of(d.signal, "T") is None


async def test_timeout_of_is_only_true_for_this_deadline() -> None:
    with deadline(None, 1, "T") as outer:
        await anyio.sleep(0.01)
        with deadline(outer.signal, 10_000, "T") as inner:
            assert inner.signal.aborted
    assert timeout_of(outer.signal, "T") is not None
    assert timeout_of(inner.signal, "T") is None


async def test_inner_deadline_inherits_an_earlier_parent_deadline() -> None:
    with deadline(None, 5, "OUTER") as outer, deadline(outer.signal, 10_000, "INNER") as inner:
        with anyio.fail_after(1):
            await inner.signal.wait()
        assert timeout_of(outer.signal, "OUTER") is not None
        assert inner.signal.reason is outer.signal.reason


async def test_deadline_does_not_fire_after_its_block() -> None:
    heard: list[object] = []
    async with Context():
        with deadline(None, 5, "T") as d:
            d.signal.add_listener(heard.append)
        await anyio.sleep(0.02)
        assert not d.signal.aborted
    assert heard == []


async def test_any_inherits_the_earliest_deadline() -> None:
    with deadline(None, 5, "T") as d:
        combined = AbortSignal.any([AbortController().signal, d.signal])
        with anyio.fail_after(1):
            await combined.wait()
        assert combined.reason is d.signal.reason


async def test_a_signal_derived_from_an_exited_deadline_never_fires() -> None:
    with deadline(None, 1, "T") as d:
        combined = AbortSignal.any([d.signal])
    await anyio.sleep(0.01)
    start = anyio.current_time()
    with abort_scope(combined):
        await anyio.sleep(0.02)
    assert anyio.current_time() - start >= 0.02
    assert not combined.aborted
    with anyio.move_on_after(0.01):
        await combined.wait()
    assert not combined.aborted
