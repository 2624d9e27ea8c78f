"""`glance`, the listing's one walk over a log, says what the per-fact folds say (turns, last
reason, title, approvals waiting, state) on random logs, packed zstd logs and the original
fixtures (docs/performance.md, P11)."""

from __future__ import annotations

import random
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from apps.cli.states import PREVIEW_CHARS, glance, state_of
from apps.cli.summary import last_turn_reason, message_text, turn_count
from plugins.session.jsonutil import loads
from plugins.session_persistence import Owner
from plugins.session_persistence.testing import FIXTURE_NAMES, FIXTURES, running
from plugins.session_persistence_jsonl import JsonlBackend, project_dir, segment
from plugins.tool_approval import pending_questions

pytestmark = pytest.mark.anyio

Event = dict[str, Any]
OWNERS = (None, Owner(4242, "box"))


def title_by_two_walks(events: Sequence[Event]) -> str | None:
    """The title rule as the listing read it before `glance`: the last usable
    `session/title`, else the first prompt with text, cut to `PREVIEW_CHARS`."""
    for event in reversed(events):
        if event["type"] == "session/title":
            title = event["data"].get("title")
            if isinstance(title, str) and title.strip():
                return title.strip()
    for event in events:
        if event["type"] == "user/message":
            text = " ".join(message_text(event["data"]).split())
            if text:
                return text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return None


def assert_agrees(events: Sequence[Event], owner: Owner | None) -> None:
    seen = glance(events, owner)
    plain = list(events)
    assert seen.turns == turn_count(plain)
    assert seen.last_reason == (None if owner is not None else last_turn_reason(plain))
    assert seen.title == title_by_two_walks(plain)
    assert seen.waiting == len(pending_questions(plain))
    assert seen.state == state_of(plain, owner)


TEXTS = ("", "   ", "What is k?", "  two\n lines\t here ", "x" * 59, "y" * 60, "z" * 61, "日本 ✓")
TITLES: tuple[object, ...] = ("Named", "  padded  ", "", "   ", 7, None)


def user(text: str) -> Event:
    blocks = [{"type": "text", "text": text}, {"type": "image", "data": "…"}]
    return {"role": "user", "content": blocks, "source": {"kind": "user"}}


def random_log(rng: random.Random) -> list[Event]:
    """A log of random pieces: turns closed or cut off, titles, prompts, chunks, approval
    questions answered or not, tool calls with or without results."""
    out: list[tuple[str, Any]] = []
    calls = 0
    for turn in range(1, rng.randint(0, 5) + 1):
        out.append(("turn/start", {"turn": turn}))
        if rng.random() < 0.8:
            out.append(("user/message", user(rng.choice(TEXTS))))
        if rng.random() < 0.3:
            out.append(("session/title", {"title": rng.choice(TITLES)}))
        out.append(("step/start", {"turn": turn, "step": 1}))
        for _ in range(rng.randint(0, 3)):
            chunk = {"type": "text-delta", "index": 0, "text": "w"}
            out.append(("assistant/chunk", {"turn": turn, "step": 1, "chunk": chunk}))
        if rng.random() < 0.5:
            calls += 1
            call_id = f"call-{calls}"
            block = {"type": "tool-call", "id": call_id, "name": "probe", "arguments": "{}"}
            message = {"role": "assistant", "content": [block]}
            out.append(("assistant/message", {"turn": turn, "step": 1, "message": message}))
            asked = rng.random() < 0.6
            if asked:
                out.append(("approval/asked", {"id": f"q-{calls}", "toolName": "probe"}))
                out[-1][1]["callId"] = call_id
            if asked and rng.random() < 0.5:
                outcome = rng.choice(("allowed-once", "rejected"))
                out.append(("approval/decided", {"id": f"q-{calls}", "outcome": outcome}))
            if rng.random() < 0.5:
                data = {"turn": turn, "step": 1, "callId": call_id, "name": "probe"}
                out.append(("tool/call", data))
            if rng.random() < 0.4:
                result = {"role": "user", "source": {"kind": "tool", "callId": call_id}}
                out.append(("tool/result", {"turn": turn, "step": 1, "message": result}))
        if rng.random() < 0.25:
            break  # cut off in the step: the last turn stays open
        out.append(("step/end", {"turn": turn, "step": 1}))
        kind = rng.choice(("completed", "completed", "interrupted", "blocked"))
        out.append(("turn/end", {"turn": turn, "reason": {"kind": kind}}))
    return [{"type": k, "seq": s, "time": 100 + s, "data": d} for s, (k, d) in enumerate(out)]


@pytest.mark.parametrize("seed", range(300))
@pytest.mark.parametrize("owner", OWNERS)
def test_glance_agrees_with_the_folds_on_random_logs(seed: int, owner: Owner | None) -> None:
    assert_agrees(random_log(random.Random(seed)), owner)


@pytest.mark.parametrize("mode", ["zstd", "none"])
async def test_glance_agrees_on_stored_logs_with_packed_rows(tmp_path: Path, mode: str) -> None:
    """Read back as the listing reads them (compact events, chunk runs packed into rows that
    `glance` skips), every random log still agrees."""
    backend = JsonlBackend(tmp_path, compression=mode, pack_chunks=True)  # type: ignore[arg-type]
    try:
        for seed in range(40):
            events = random_log(random.Random(seed))
            if not events:
                continue
            meta = {"version": 0, "id": f"s{seed}", "createdAt": 1, "cwd": "/p"}
            await backend.acquire_writer(meta["id"])
            await backend.append_batch(meta, events, is_materialized=False)
            await backend.release_writer(meta["id"])
            stored = await backend.load_stored(meta["id"])
            assert stored is not None
            assert list(stored.events) == events
            for owner in OWNERS:
                assert_agrees(stored.events, owner)
    finally:
        await backend.aclose()


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_glance_agrees_on_the_original_logs(tmp_path: Path, name: str) -> None:
    """The legacy fixtures, upgraded and balanced by the inspect the listing uses."""
    header = loads((FIXTURES / name).read_bytes().split(b"\n", 1)[0])
    path = tmp_path / project_dir(header.get("cwd")) / segment(header["id"]) / "session.jsonl"
    path.parent.mkdir(parents=True)
    shutil.copyfile(FIXTURES / name, path)
    async with running(JsonlBackend(tmp_path, compression="none")) as world:
        log = await world.service.inspect(header["id"])
        stored = await world.service.read_from(header["id"], 0)
    assert len(log.events) > 0
    assert_agrees(log.events, None)
    assert_agrees(stored, OWNERS[1])
