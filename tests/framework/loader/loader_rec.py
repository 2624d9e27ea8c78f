"""What the loader tests' plugins did, in order (cleared by the `rec` fixture)."""

from __future__ import annotations

from typing import Any

events: list[tuple[Any, ...]] = []
