"""Human approval that survives a crash (`dsh-tool-approval`), see docs/approval.md.

Namespace plugin providing `ctx.approval`. Its `tools/pre-execute` listener applies the
manifest's rules (first match wins; unmatched tools: read-only → allow, else ask); the tools
pipeline hands every `Ask` to `ctx.approval.decide`, which records `approval/asked` (durable
before anyone is asked), asks the answerers and records `approval/decided` (durable before the
body may run). Its `agent/pre-step` listener ends a turn `blocked` while a question is open and
continues the call in the next turn once it is answered.
"""

from __future__ import annotations

from framework import Context

from .answers import Answer, Answerer, ApprovalRequest
from .config import Config
from .continuation import rules_listener, step_listener
from .log import ALWAYS, ASKED, DECIDED, POLICY, ApprovalLog, Question, pending_questions
from .rules import Rule
from .service import ApprovalService, Decision

__all__ = [
    "ALWAYS",
    "ASKED",
    "DECIDED",
    "POLICY",
    "Answer",
    "Answerer",
    "ApprovalLog",
    "ApprovalRequest",
    "ApprovalService",
    "Config",
    "Decision",
    "Question",
    "Rule",
    "aliases",
    "apply",
    "inject",
    "name",
    "pending_questions",
]

name = "tool-approval"
aliases = ["@deepseek-ai/dsh-tool-approval"]
inject = ["sessions", "tools"]


def apply(ctx: Context, config: Config) -> None:
    """Provide `approval` and install the rules and continuation listeners."""
    service = ApprovalService(ctx, config)
    ctx.provide("approval", service)
    ctx.on("tools/pre-execute", rules_listener(service))
    ctx.on("agent/pre-step", step_listener(service))
    ctx.on("session/disposed", service.forget)
