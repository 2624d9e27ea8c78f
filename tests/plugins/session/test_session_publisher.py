"""The session is handed a publisher; it knows nothing of the store that hands it one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import plugins.session.session as session_module
from framework import Context
from plugins import session as session_plugin
from plugins.session import Session, SessionStore
from plugins.session.events import Event, make_header
from plugins.session.hooks import EVENT


def header(session_id: str = "s") -> dict[str, object]:
    return make_header(session_id, 1, {})


def test_appends_reach_the_publisher_until_it_is_taken_away() -> None:
    session = Session(header())
    seen: list[tuple[str, int]] = []

    def publisher(live: Session, event: Event) -> None:
        seen.append((live.id, event["seq"]))

    session.append("plugin/note", {"n": 0}, ignorable=True)  # unpublished: nobody hears it
    session.publish_to(publisher)
    session.append("plugin/note", {"n": 1}, ignorable=True)
    session.publish_to(None)
    session.append("plugin/note", {"n": 2}, ignorable=True)
    assert seen == [("s", 1)]
    assert session.seq == 3


def test_a_publisher_cannot_append_reentrantly() -> None:
    session = Session(header())
    errors: list[str] = []

    def publisher(live: Session, event: Event) -> None:
        try:
            live.append("plugin/note", {"nested": True}, ignorable=True)
        except RuntimeError as error:
            errors.append(str(error))

    session.publish_to(publisher)
    session.append("plugin/note", {}, ignorable=True)
    assert errors == ["session append cannot reenter while another append is being published"]
    assert session.seq == 1


def test_the_session_module_does_not_reach_into_the_store() -> None:
    source = Path(session_module.__file__).read_text()
    tree = ast.parse(source)
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert "store" not in imported
    assert "plugins.session.store" not in imported
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not attributes & {"_listeners", "_store"}


@pytest.mark.anyio
async def test_the_store_publishes_while_the_session_is_live() -> None:
    heard: list[int] = []
    async with Context() as ctx:
        await ctx.plugin(session_plugin)
        ctx.on(EVENT, lambda live, event: heard.append(event["seq"]))
        store = ctx.service(SessionStore)
        live = store.create("p", meta={"cwd": "/"})
        live.append("plugin/note", {}, ignorable=True)
        store.dispose(live)
        live.append("plugin/note", {}, ignorable=True)
    assert heard == [0]
