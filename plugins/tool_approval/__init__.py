"""Human approval that survives a crash (`dsh-tool-approval`), see docs/approval.md.

Namespace plugin providing `ctx.approval`. Its `tools/pre-execute` listener applies the
manifest's rules (first match wins; unmatched tools: read-only → allow, else ask); the tools
pipeline hands every `Ask` to `ctx.approval.decide`, which records `approval/asked` (durable
before anyone is asked), asks the answerers and records `approval/decided` (durable before the
body may run). Its `agent/pre-step` listener ends a turn `blocked` while a question is open and
continues the call in the next turn once it is answered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from framework.lazy import lazy_attributes

if TYPE_CHECKING:
    from framework import Context

    from .answers import Answer, Answerer, ApprovalRequest
    from .config import Config
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
#: What `apply` provides, for the loader to read without importing the service (docs/concepts.md).
provides = ["approval"]


def apply(ctx: Context, config: Config) -> None:
    """Provide `approval` and install the rules and continuation listeners."""
    from .continuation import rules_listener, step_listener
    from .service import ApprovalService

    service = ApprovalService(ctx, config)
    ctx.provide("approval", service)
    ctx.on("tools/pre-execute", rules_listener(service))
    ctx.on("agent/pre-step", step_listener(service))
    ctx.on("session/disposed", service.forget)


#: The module of each public name. The package imports one on the first use of one of its names:
#: resolving the plugin, or reading a log's open questions (`dsh sessions`), does not import the
#: approval machinery (docs/performance.md, "Start-up (P11)").
_HOMES: dict[str, str] = {
    "Answer": "answers",
    "Answerer": "answers",
    "ApprovalRequest": "answers",
    "Config": "config",
    "ALWAYS": "log",
    "ASKED": "log",
    "DECIDED": "log",
    "POLICY": "log",
    "ApprovalLog": "log",
    "Question": "log",
    "pending_questions": "log",
    "Rule": "rules",
    "ApprovalService": "service",
    "Decision": "service",
}

if not TYPE_CHECKING:
    __getattr__ = lazy_attributes(__name__, _HOMES)
