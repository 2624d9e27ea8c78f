"""Exact spec text of the replay adapter's config check (docs/models.md)."""

from __future__ import annotations

import pytest

import plugins.llm
import plugins.llm_replay
from framework import ConfigError, Context, FiberState

pytestmark = pytest.mark.anyio


async def test_responses_and_file_together_is_one_exact_config_problem() -> None:
    async with Context() as root:
        await root.plugin(plugins.llm)
        both = root.plugin(plugins.llm_replay, {"responses": [], "file": "x.yml"})
        with pytest.raises(ConfigError) as caught:
            await both
        assert both.state is FiberState.FAILED
        assert str(caught.value) == (
            "invalid config:\n  - set either responses or file, not both (at <root>)"
        )
