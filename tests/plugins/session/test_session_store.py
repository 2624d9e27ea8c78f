"""SessionStore as the `sessions` service: lifecycle events, publication, fork, flush."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import plugins.session as session_plugin
from framework import Context
from plugins.session import Session, SessionForkError, SessionStore
from plugins.session.repair import interrupted_turn_closers

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000_000

    def __call__(self) -> int:
        self.now += 1
        return self.now


@pytest.fixture
async def root() -> AsyncIterator[Context]:
    async with Context() as ctx:
        yield ctx


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def store(root: Context, clock: Clock) -> SessionStore:
    """A store with a fake clock, provided by a plugin of its own."""

    def provide(ctx: Context, config: object) -> Any:
        instance = SessionStore(ctx, clock=clock)
        ctx.provide("sessions", instance)
        return instance.close

    await root.plugin(provide)
    sessions: SessionStore = root.sessions
    return sessions


def record(root: Context, *names: str) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []
    for name in names:
        root.on(name, lambda *args, name=name: seen.append((name, *args)))
    return seen


def user_message(mid: str = "m") -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": [], "source": {"kind": "user"}}


async def test_plugin_provides_sessions_and_detaches_on_dispose(root: Context) -> None:
    seen = record(root, "session/disposed")
    fiber = root.plugin(session_plugin)
    await fiber
    assert session_plugin.name == "session"
    sessions = root.sessions
    assert isinstance(sessions, SessionStore)
    session = sessions.create()
    await fiber.dispose()
    assert seen == [("session/disposed", session)]
    assert root.get("sessions") is None


async def test_create_assigns_free_ids_and_lists_in_order(store: SessionStore) -> None:
    first = store.create()
    second = store.create()
    taken = store.create("session-3")
    fourth = store.create()
    assert [s.id for s in store.list()] == ["session-1", "session-2", "session-3", "session-4"]
    assert store.list() == [first, second, taken, fourth]
    assert store.get("session-2") is second
    assert store.get("missing") is None


async def test_create_header_and_duplicate(store: SessionStore) -> None:
    session = store.create("a", meta={"cwd": "/w", "agentPreset": "p"})
    assert session.header == {
        "version": 0,
        "id": "a",
        "createdAt": 1_700_000_000_001,
        "cwd": "/w",
        "agentPreset": "p",
    }
    with pytest.raises(RuntimeError) as info:
        store.create("a")
    assert str(info.value) == 'session "a" already exists'


async def test_create_keeps_given_created_at(store: SessionStore) -> None:
    session = store.create("a", meta={"createdAt": 7, "delegationDepth": 1, "origin": "subagent"})
    assert session.header == {
        "version": 0,
        "id": "a",
        "createdAt": 7,
        "origin": "subagent",
        "delegationDepth": 1,
    }
    assert list(session.header) == ["version", "id", "createdAt", "origin", "delegationDepth"]


async def test_create_refuses_lossy_meta(store: SessionStore) -> None:
    with pytest.raises(TypeError) as info:
        store.create("a", meta={"cwd": ("/w",)})
    assert str(info.value) == "session metadata must be losslessly JSON-serializable"
    assert store.get("a") is None


async def test_create_refuses_unknown_meta_keys(store: SessionStore) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        store.create("a", meta={"colour": "red"})


async def test_created_and_events_are_published(
    root: Context, store: SessionStore, clock: Clock
) -> None:
    seen = record(root, "session/created", "session/event")
    seed = [
        {"type": "turn/start", "seq": 0, "time": 1, "data": {"turn": 1}},
        {
            "type": "turn/end",
            "seq": 1,
            "time": 2,
            "data": {"turn": 1, "reason": {"kind": "completed"}},
        },
    ]
    session = store.create("a", seed=seed)
    assert seen == [("session/created", session)]
    assert [e["type"] for e in session.events] == ["turn/start", "turn/end", "session/end-seed"]
    event = session.append("turn/start", {"turn": 2})
    assert event["time"] == clock.now
    assert seen[1] == ("session/event", session, event)


async def test_event_listener_sees_the_committed_event(root: Context, store: SessionStore) -> None:
    observed: list[int] = []
    root.on("session/event", lambda s, e: observed.append(len(s.events) - e["seq"]))
    store.create("a").append("turn/start", {"turn": 1})
    assert observed == [1]


async def test_listener_failures_are_contained_and_logged(
    root: Context, store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    later: list[str] = []

    def boom(session: Session, event: Any) -> None:
        raise ValueError("kaput")

    async def rejects(session: Session, event: Any) -> None:
        await anyio.lowlevel.checkpoint()
        raise ValueError("async kaput")

    root.on("session/event", boom)
    root.on("session/event", rejects)
    root.on("session/event", lambda s, e: later.append(e["type"]))
    session = store.create("a")
    with caplog.at_level(logging.ERROR, logger="plugins.session"):
        event = session.append("turn/start", {"turn": 1})
        for _ in range(5):
            await anyio.lowlevel.checkpoint()
    assert event in session.events
    assert later == ["turn/start"]
    messages = [r.getMessage() for r in caplog.records if r.name == "plugins.session"]
    assert 'session "a": session/event listener threw: kaput' in messages
    assert 'session "a": session/event listener rejected: async kaput' in messages


async def test_reentrant_append_is_refused(
    root: Context, store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    def reenter(session: Session, event: Any) -> None:
        if event["type"] == "turn/start":
            session.append("step/start", {"turn": 1, "step": 1})

    root.on("session/event", reenter)
    session = store.create("a")
    with caplog.at_level(logging.ERROR, logger="plugins.session"):
        session.append("turn/start", {"turn": 1})
    assert [e["type"] for e in session.events] == ["turn/start"]
    assert [r.getMessage() for r in caplog.records if r.name == "plugins.session"] == [
        'session "a": session/event listener threw: session append cannot reenter while '
        "another append is being published"
    ]
    session.append("step/start", {"turn": 1, "step": 1})
    assert len(session.events) == 2


async def test_listeners_come_from_a_snapshot(root: Context, store: SessionStore) -> None:
    calls: list[str] = []

    def first(session: Session, event: Any) -> None:
        calls.append("first")
        root.on("session/event", lambda s, e: calls.append("late"))

    root.on("session/event", first)
    session = store.create("a")
    session.append("turn/start", {"turn": 1})
    assert calls == ["first"]


async def test_seed_events_emit_no_session_event(root: Context, store: SessionStore) -> None:
    seen = record(root, "session/event")
    store.create("a", seed=[])
    assert seen == []


async def test_unpublished_sessions_do_not_publish(root: Context, store: SessionStore) -> None:
    seen = record(root, "session/event", "session/created")
    session = store.prepare("a")
    session.append("turn/start", {"turn": 1})
    store.enter(session)
    session.append("turn/end", {"turn": 1, "reason": {"kind": "completed"}})
    assert seen == []
    assert store.get("a") is session
    store.announce(session)
    event = session.append("turn/start", {"turn": 2})
    assert seen == [("session/created", session), ("session/event", session, event)]


async def test_created_veto(root: Context, store: SessionStore) -> None:
    seen = record(root, "session/disposed")
    after: list[Session] = []

    def veto(session: Session) -> None:
        raise LookupError("no thanks")

    root.on("session/created", veto)
    root.on("session/created", after.append)
    with pytest.raises(LookupError, match="no thanks"):
        store.create("a")
    assert store.get("a") is None
    assert len(seen) == 1
    assert after == []
    vetoed = seen[0][1]
    assert vetoed.id == "a"
    events = record(root, "session/event")
    vetoed.append("turn/start", {"turn": 1})
    assert events == []


async def test_disposed_once_and_contained(
    root: Context, store: SessionStore, caplog: pytest.LogCaptureFixture
) -> None:
    seen = record(root, "session/disposed")

    def boom(session: Session) -> None:
        raise ValueError("bad observer")

    root.on("session/disposed", boom)
    session = store.create("a")
    with caplog.at_level(logging.ERROR, logger="plugins.session"):
        store.dispose(session)
        store.dispose(session)
    assert seen == [("session/disposed", session)]
    assert store.get("a") is None
    assert 'session "a": session/disposed listener threw: bad observer' in [
        r.getMessage() for r in caplog.records
    ]
    again = store.create("a")
    assert again is not session


async def test_session_belongs_to_the_creating_fiber(root: Context, store: SessionStore) -> None:
    seen = record(root, "session/disposed")
    created: list[Session] = []

    def owner(ctx: Context, config: object) -> None:
        created.append(ctx.sessions.create("owned"))

    fiber = root.plugin(owner, inject=["sessions"])
    await fiber
    assert store.get("owned") is created[0]
    await fiber.dispose()
    assert store.get("owned") is None
    assert seen == [("session/disposed", created[0])]


async def test_store_teardown_detaches_live_sessions(root: Context) -> None:
    fiber = root.plugin(session_plugin)
    await fiber
    seen = record(root, "session/disposed")
    a = root.sessions.create("a")
    b = root.sessions.create("b")
    await fiber.dispose()
    assert seen == [("session/disposed", b), ("session/disposed", a)]


async def test_enter_duplicate_and_announce_unknown(store: SessionStore) -> None:
    store.create("a")
    twin = store.prepare("b")
    store.enter(twin)
    with pytest.raises(RuntimeError, match='session "b" already exists'):
        store.enter(Session({"version": 0, "id": "b", "createdAt": 0}))
    stranger = Session({"version": 0, "id": "c", "createdAt": 0})
    with pytest.raises(RuntimeError, match='session "c" is not live in this store'):
        store.announce(stranger)


async def test_publishing_a_stored_session(
    root: Context, store: SessionStore, clock: Clock, outcome_unknown_log: Any
) -> None:
    seen = record(root, "session/created", "session/event")
    events = outcome_unknown_log.events[:5]
    stored = events + interrupted_turn_closers(events)
    session = Session.from_stored(outcome_unknown_log.header, stored)
    store.enter(session)
    store.announce(session)
    assert seen == [("session/created", session)]
    assert session.events[-1]["type"] == "session/end-seed"
    assert session.first_live_seq == 9
    event = session.append("turn/start", {"turn": 2})
    assert event["time"] == clock.now
    assert seen[-1] == ("session/event", session, event)


# -- flush -----------------------------------------------------------------------------------


async def test_flush_not_live(store: SessionStore) -> None:
    with pytest.raises(RuntimeError) as info:
        await store.flush("ghost")
    assert str(info.value) == 'session "ghost" is not live in this store'
    stranger = Session({"version": 0, "id": "x", "createdAt": 0})
    with pytest.raises(RuntimeError, match='session "x" is not live in this store'):
        await store.flush(stranger)


async def test_flush_without_listeners_is_false(store: SessionStore) -> None:
    session = store.create("a")
    assert await store.flush(session) is False
    assert await store.flush("a") is False


async def test_flush_runs_listeners_concurrently(root: Context, store: SessionStore) -> None:
    first_started = anyio.Event()
    second_started = anyio.Event()
    flushed: list[Session] = []

    async def first(session: Session) -> None:
        first_started.set()
        await second_started.wait()
        flushed.append(session)

    async def second(session: Session) -> None:
        second_started.set()
        await first_started.wait()
        flushed.append(session)

    root.on("session/flush", first)
    root.on("session/flush", second)
    root.on("session/flush", flushed.append)
    session = store.create("a")
    with anyio.fail_after(2):
        assert await store.flush(session) is True
    assert flushed == [session, session, session]


async def test_flush_reraises_first_failure_in_registration_order(
    root: Context, store: SessionStore
) -> None:
    finished: list[str] = []
    late_error = KeyError("first registered, fails last")
    early_error = ValueError("second registered, fails first")
    slow_failed = anyio.Event()

    async def slow_failure(session: Session) -> None:
        await anyio.sleep(0.02)
        finished.append("slow")
        slow_failed.set()
        raise late_error

    def sync_failure(session: Session) -> None:
        raise early_error

    async def slow_success(session: Session) -> None:
        await slow_failed.wait()  # the order below holds on any machine load
        finished.append("success")

    root.on("session/flush", slow_failure)
    root.on("session/flush", sync_failure)
    root.on("session/flush", slow_success)
    session = store.create("a")
    with pytest.raises(KeyError) as info:
        await store.flush(session)
    assert info.value is late_error
    assert finished == ["slow", "success"]


# -- fork ------------------------------------------------------------------------------------


def closed_turn(session: Session, turn: int = 1) -> None:
    session.append("turn/start", {"turn": turn})
    session.append("user/message", user_message(f"m{turn}"), surface_op="append")
    session.append("turn/end", {"turn": turn, "reason": {"kind": "completed"}})


async def test_fork_copies_the_prefix(root: Context, store: SessionStore) -> None:
    parent = store.create("p", meta={"cwd": "/w"})
    closed_turn(parent)
    closed_turn(parent, 2)
    child = store.fork(parent, 2, id="c")
    assert child.header == {
        "version": 0,
        "id": "c",
        "createdAt": child.header["createdAt"],
        "cwd": "/w",
        "parentSession": "p",
        "seedLength": 3,
    }
    assert child.events[:3] == parent.events[:3]
    assert child.events[:3][0] is not parent.events[0]
    assert [e["type"] for e in child.events[3:]] == ["session/end-seed"]
    assert child.first_live_seq == 4
    assert store.get("c") is child
    whole = store.fork("p")
    assert whole.id == "session-1"
    assert whole.header["seedLength"] == 6
    assert "cwd" not in store.fork(store.create("bare", seed=[])).header


async def test_fork_errors(store: SessionStore) -> None:
    parent = store.create("p")
    closed_turn(parent)
    parent.append("turn/start", {"turn": 2})
    store.create("taken")

    def code(call: Any) -> tuple[str, str]:
        with pytest.raises(SessionForkError) as info:
            call()
        return info.value.code, str(info.value)

    assert code(lambda: store.fork("ghost")) == ("SESSION_NOT_FOUND", 'session "ghost" not found')
    stranger = Session({"version": 0, "id": "p", "createdAt": 0})
    assert code(lambda: store.fork(stranger)) == (
        "SESSION_NOT_LIVE",
        'session "p" is not live in this store',
    )
    assert code(lambda: store.fork(parent, 9))[0] == "INVALID_BOUNDARY"
    assert code(lambda: store.fork(parent, -1))[0] == "INVALID_BOUNDARY"
    assert code(lambda: store.fork(store.create("empty")))[0] == "INVALID_BOUNDARY"
    assert code(lambda: store.fork(parent, 1)) == (
        "OPEN_TURN",
        'fork boundary 1 in session "p" ends inside open turn 1',
    )
    assert code(lambda: store.fork(parent)) == (
        "OPEN_TURN",
        'fork boundary 3 in session "p" ends inside open turn 2',
    )
    assert code(lambda: store.fork(parent, 2, id="taken")) == (
        "SESSION_ALREADY_EXISTS",
        'session "taken" already exists',
    )
