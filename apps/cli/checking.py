"""`dsh check`: every manifest and overlay problem as one `file:line:col: message` line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from framework.loader import check_manifest
from framework.manifest import ManifestProblem


def problem_line(problem: ManifestProblem) -> str:
    """`path:line:col: message` (multi-line messages joined with `; `)."""
    text = "; ".join(part.strip() for part in problem.message.splitlines() if part.strip())
    return f"{problem.loc.full}: {text}" if problem.loc is not None else text


def check(manifest: Path, patches: Sequence[Path]) -> list[str]:
    """The problem lines of `manifest` plus `patches` (empty when clean)."""
    return [problem_line(problem) for problem in check_manifest(manifest, list(patches))]
