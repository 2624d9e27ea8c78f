"""Suite-wide fixtures: every async test runs on asyncio and on trio."""

from __future__ import annotations

import pytest


@pytest.fixture(
    params=[
        pytest.param("asyncio", id="asyncio"),
        pytest.param("trio", id="trio"),
    ]
)
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Run each `pytest.mark.anyio` test once per anyio backend."""
    return str(request.param)
