"""`boot(..., services=)`: only the rows that provide the asked services (and what they need)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from loader_helpers import rec, write

from framework import ManifestError
from framework.loader import boot, inspect_manifest, rows_serving
from framework.manifest import Manifest

pytestmark = pytest.mark.anyio
__all__ = ["rec"]

Rec = list[tuple[Any, ...]]


def _provider(service: str, *, needs: tuple[str, ...] = ()) -> str:
    """A module plugin providing `service` through a `Service` class of its own."""
    return f"""
    import loader_rec
    from framework import Service

    name = "{service}-plugin"
    inject = {list(needs)!r}


    class Provided(Service):
        provide = "{service}"


    def apply(ctx, config):
        loader_rec.events.append(("applied", "{service}"))
        ctx.provide("{service}", Provided(ctx))
    """


#: Needs `store` and provides nothing a `Service` class shows (it registers a listener).
USER = """
import loader_rec

name = "user"
inject = ["store"]


def apply(ctx, config):
    loader_rec.events.append(("applied", "user"))
"""

#: Provides `hidden` through `ctx.provide` alone: invisible without applying it.
HIDDEN = """
import loader_rec

name = "hidden"


def apply(ctx, config):
    loader_rec.events.append(("applied", "hidden"))
    ctx.provide("hidden", object())
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write(tmp_path, "base.py", _provider("base"))
    write(tmp_path, "store.py", _provider("store", needs=("base",)))
    write(tmp_path, "agent.py", _provider("agent", needs=("store",)))
    write(tmp_path, "user.py", USER)
    write(tmp_path, "hidden.py", HIDDEN)
    write(tmp_path, "needs_hidden.py", _provider("store", needs=("hidden",)))
    return tmp_path


def _applied(rec: Rec) -> list[str]:
    return sorted(name for kind, name in rec if kind == "applied")


async def test_only_the_providers_and_what_they_need_are_applied(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: agent, name: ./agent.py}
        - {id: user, name: ./user.py}
        - {id: store, name: ./store.py}
        - {id: base, name: ./base.py}
        """,
    )
    async with boot(manifest, services=["store"]) as ctx:
        assert _applied(rec) == ["base", "store"]
        assert ctx.get("store") is not None
        assert ctx.get("agent") is None
    rec.clear()
    async with boot(manifest):
        assert _applied(rec) == ["agent", "base", "store", "user"]


async def test_a_group_holding_a_provider_is_mounted_with_only_that_child(
    folder: Path, rec: Rec
) -> None:
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: base, name: ./base.py}
        - id: g
          name: framework:group
          group: true
          config:
            - {id: agent, name: ./agent.py}
            - {id: store, name: ./store.py}
        """,
    )
    async with boot(manifest, services=["store"]) as ctx:
        assert _applied(rec) == ["base", "store"]
        assert ctx.get("store") is not None


async def test_a_need_no_row_visibly_provides_boots_every_row(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: store, name: ./needs_hidden.py}
        - {id: hidden, name: ./hidden.py}
        - {id: agent, name: ./agent.py}
        """,
    )
    found = inspect_manifest(manifest)
    assert found.manifest is not None
    assert rows_serving(found.manifest, found.plugins, ["store"]) is None
    async with boot(manifest, services=["store"]) as ctx:
        assert _applied(rec) == ["agent", "hidden", "store"]
        assert ctx.get("store") is not None


async def test_a_row_that_is_not_mounted_still_has_to_resolve(folder: Path, rec: Rec) -> None:
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: base, name: ./base.py}
        - {id: store, name: ./store.py}
        - {id: agent, name: ./missing.py}
        """,
    )
    with pytest.raises(ManifestError, match=r'cannot resolve plugin "\./missing\.py"'):
        async with boot(manifest, services=["store"]):
            pytest.fail("booted a manifest with a row that does not resolve")
    assert rec == []


def test_rows_serving_names_rows_and_their_groups(folder: Path) -> None:
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: base, name: ./base.py}
        - {id: off, name: ./store.py, disabled: true}
        - id: g
          name: framework:group
          group: true
          config:
            - {id: user, name: ./user.py}
            - {id: store, name: ./store.py}
        - {id: agent, name: ./agent.py}
        """,
    )
    found = inspect_manifest(manifest)
    assert found.manifest is not None
    assert rows_serving(found.manifest, found.plugins, ["store"]) == {"base", "g", "store"}
    assert rows_serving(found.manifest, found.plugins, ["agent"]) == {
        "agent",
        "base",
        "g",
        "store",
    }
    assert rows_serving(found.manifest, found.plugins, ["nobody"]) is None


async def test_resolved_sees_every_enabled_row_before_any_is_mounted(
    folder: Path, rec: Rec
) -> None:
    # a caller that asks which plugins a manifest mounts (`dsh show`'s checkpoint policy) takes
    # them from the boot instead of reading the manifest a second time
    manifest = write(
        folder,
        "app.yml",
        """
        - {id: agent, name: ./agent.py}
        - {id: store, name: ./store.py}
        - {id: base, name: ./base.py}
        - {id: off, name: ./user.py, disabled: true}
        """,
    )
    seen: list[tuple[list[str], dict[str, str], list[str]]] = []

    def resolved(parsed: Manifest, plugins: Mapping[str, object]) -> None:
        ids = [entry.id for entry in parsed.walk(enabled_only=True)]
        names = {row: getattr(plugin, "name", "") for row, plugin in plugins.items()}
        seen.append((ids, names, _applied(rec)))

    async with boot(manifest, services=["store"], resolved=resolved):
        assert _applied(rec) == ["base", "store"]
    assert seen == [
        (
            ["agent", "store", "base"],
            {"agent": "agent-plugin", "store": "store-plugin", "base": "base-plugin"},
            [],
        )
    ]


async def test_a_resolved_callback_that_raises_mounts_nothing(folder: Path, rec: Rec) -> None:
    # the callback runs before any row is mounted: its error leaves nothing applied to dispose
    manifest = write(folder, "app.yml", "- {id: base, name: ./base.py}\n")

    def resolved(parsed: Manifest, plugins: Mapping[str, object]) -> None:
        raise LookupError("no policy")

    with pytest.raises(LookupError, match="no policy"):
        async with boot(manifest, resolved=resolved):
            pass
    assert _applied(rec) == []
