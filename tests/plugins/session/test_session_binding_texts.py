"""Exact spec texts of the session package (docs/event-log.md) not pinned in full elsewhere."""

from __future__ import annotations

from plugins.session.events import KNOWN_EVENT_TYPES

# docs/event-log.md "Known types", brace groups expanded, in the spec's order.
SPEC_KNOWN_TYPES = [
    "agent-preset/selected",
    "agent/inbox/spliced",
    "approval/asked",
    "approval/decided",
    "approval/policy",
    "assistant/chunk",
    "assistant/message",
    "command/done",
    "command/run",
    "compaction/end",
    "compaction/prune",
    "compaction/start",
    "compaction/summary",
    "feedback/record",
    "goal/change",
    "hook/invoked",
    "hook/result",
    "llm/retry",
    "llm/retry-started",
    "permission/preset",
    "plan/mode",
    "request/context",
    "request/header",
    "sandbox/mode",
    "schedule/change",
    "session/end-seed",
    "session/title",
    "session/title-llm-request",
    "step/end",
    "step/start",
    "subagent/descriptor",
    "team/member",
    "team/message/delivered",
    "team/message/queued",
    "team/task",
    "todo/write",
    "tool-workflow/agent-end",
    "tool-workflow/agent-start",
    "tool-workflow/run-end",
    "tool-workflow/run-start",
    "tool/call",
    "tool/result",
    "tool/code-dispatch",
    "tool/code-dispatch-start",
    "turn/end",
    "turn/start",
    "user/message",
    "web/deepseek-search-llm-request",
]


def test_known_event_types_are_exactly_the_spec_list() -> None:
    assert len(SPEC_KNOWN_TYPES) == len(set(SPEC_KNOWN_TYPES)) == 48
    assert set(SPEC_KNOWN_TYPES) == KNOWN_EVENT_TYPES
