"""`dsh check`: every manifest and overlay problem as one `file:line:col: message` line."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from framework.loader import check_manifest
from framework.manifest import ManifestProblem

from .errors import one_line


def problem_line(problem: ManifestProblem) -> str:
    """`path:line:col: message`, on one line."""
    text = one_line(problem.message)
    return f"{problem.loc.full}: {text}" if problem.loc is not None else text


def check(manifest: Path, patches: Sequence[Path]) -> list[str]:
    """The problem lines of `manifest` plus `patches` (empty when clean)."""
    return [problem_line(problem) for problem in check_manifest(manifest, list(patches))]
