"""What the model reads when a call is not allowed (one error result; never the approval UI)."""

from __future__ import annotations


def rejected(reason: str | None) -> str:
    """`the user rejected this call[: <reason>]`."""
    return "the user rejected this call" + (f": {reason}" if reason else "")


NEVER = 'the approval policy is "never": this call needs approval and was refused without asking'
CANCELLED = "the approval was cancelled before anyone answered; the call was not run"
NO_SESSION = "this call needs approval, but it has no agent session to record the question in"


def unavailable(why: str) -> str:
    """`nobody could approve this call (<why>); the call was not run`."""
    return f"nobody could approve this call ({why}); the call was not run"


def denied(tool_name: str) -> str:
    """A `deny` rule without its own reason."""
    return f'tool "{tool_name}" is denied by the approval rules'


def waiting(question_id: str) -> str:
    """The result of a call whose question stays open (only seen by direct `tools.execute`)."""
    return f"this call is waiting for the user's approval (question {question_id}); it has not run"
