"""The port's own reader keeps the approval records: the port-only `approval/always` and any
other unknown type marked `ignorable` load (and the state derived from them survives a resume),
while an unknown type without the mark makes the log refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from approval_helpers import Recorder, call, of_type, stack, tool

from plugins.session.events import live_event
from plugins.session_persistence import SessionFormatUnsupportedError
from plugins.tool_approval import Answer, ApprovalRequest

pytestmark = pytest.mark.anyio

SCRIPT = [{"tool_calls": [call("c1", "write", {})]}, {"text": "done"}]


async def test_ignorable_records_load_and_unknown_required_ones_are_refused(
    tmp_path: Path,
) -> None:
    body = Recorder()

    async def always(request: ApprovalRequest) -> Answer:
        return Answer.always()

    async with stack(SCRIPT, root=tmp_path, tools=[tool("write", body)]) as ctx:
        ctx.approval.answer_with(always)
        handle = await ctx.agents.create("s1")
        handle.agent.followup("go")
        await handle.agent.when_idle()
        await handle.dispose()
        stored = await ctx.sessionPersistence.read_from("s1", 0)
        future = live_event("approval/future-thing", len(stored), 1, {"x": 1}, ignorable=True)
        await ctx.sessionPersistence.append("s1", [future])

    again = [{"tool_calls": [call("c2", "write", {})]}, {"text": "done"}]
    async with stack(again, root=tmp_path, tools=[tool("write", body)]) as ctx:
        handle = await ctx.agents.resume("s1")
        session = handle.agent.session
        kinds = [e["type"] for e in session.events]
        assert "approval/always" in kinds
        assert "approval/future-thing" in kinds
        # The remembered rule is read back: no answerer is mounted, yet the tool runs.
        handle.agent.followup("again")
        await handle.agent.when_idle()
        assert len(body.calls) == 2
        assert len(of_type(session, "approval/asked")) == 1
        await handle.dispose()
        stored = await ctx.sessionPersistence.read_from("s1", 0)
        required = live_event("approval/newer-thing", len(stored), 1, {"y": 2})
        await ctx.sessionPersistence.append("s1", [required])

    async with stack(root=tmp_path) as ctx:
        with pytest.raises(SessionFormatUnsupportedError) as caught:
            await ctx.sessionPersistence.load("s1")
    assert 'event type "approval/newer-thing"' in str(caught.value)
    assert "not marked ignorable" in str(caught.value)
