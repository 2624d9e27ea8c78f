"""Manifest parsing, overlays and interpolation (pure: no plugin is imported or run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from loader_helpers import write

from framework.manifest import (
    EnvRef,
    Loc,
    Manifest,
    MissingVariable,
    interpolate,
    load_manifest,
)

BASE = """
- id: session-persistence
  name: '@deepseek-ai/dsh-session-persistence-jsonl'
  config: {root: ./sessions, compress: true}
- id: session-checkpoints
  name: '@deepseek-ai/dsh-session-checkpoint-policy'
- id: tools
  name: framework:group
  group: true
  config:
    - id: timeout
      name: dsh-tool-timeout-policy
      config: {ms: 1000}
"""


def _load(tmp_path: Path, *overlays: str) -> Manifest:
    base = write(tmp_path, "app.yaml", BASE)
    paths = [write(tmp_path, f"o{i}.yaml", text) for i, text in enumerate(overlays)]
    manifest, problems = load_manifest(base, paths)
    assert problems == []
    assert manifest is not None
    return manifest


def test_rows_keep_fields_and_locations(tmp_path: Path) -> None:
    manifest = _load(tmp_path)
    ids = [e.id for e in manifest.walk()]
    assert ids == ["session-persistence", "session-checkpoints", "tools", "timeout"]
    first = manifest.entries[0]
    assert first.config == {"root": "./sessions", "compress": True}
    assert first.loc == Loc(str(tmp_path / "app.yaml"), 1, 3)
    assert first.name_loc.line == 2
    group = manifest.entries[2]
    assert group.group
    assert group.config is None
    assert [c.id for c in group.children] == ["timeout"]
    assert group.children[0].config == {"ms": 1000}


def test_missing_id_gets_a_random_8_hex_id(tmp_path: Path) -> None:
    manifest, _ = load_manifest(write(tmp_path, "a.yaml", "- name: x\n- name: x\n"))
    assert manifest is not None
    first, second = manifest.entries
    assert re.fullmatch(r"[0-9a-f]{8}", first.id)
    assert first.id != second.id
    assert not first.explicit_id


def test_anchors_and_merge_keys_are_plain_data(tmp_path: Path) -> None:
    text = (
        "- id: a\n  name: x\n  config: &shared {retries: 3, base: {ms: 10}}\n"
        "- id: b\n  name: y\n  config: {<<: *shared, retries: 5}\n"
    )
    manifest, _ = load_manifest(write(tmp_path, "a.yaml", text))
    assert manifest is not None
    assert manifest.entries[1].config == {"retries": 5, "base": {"ms": 10}}


def test_overlay_disables_a_row(tmp_path: Path) -> None:
    manifest = _load(tmp_path, "- {id: session-checkpoints, disabled: true}\n")
    assert manifest.entries[1].disabled
    enabled = [e.id for e in manifest.walk(enabled_only=True)]
    assert enabled == ["session-persistence", "tools", "timeout"]


def test_overlay_replaces_config_wholesale_with_a_name_guard(tmp_path: Path) -> None:
    manifest = _load(
        tmp_path,
        "- id: session-persistence\n"
        "  name: '@deepseek-ai/dsh-session-persistence-jsonl'\n"
        "  config: {root: /var/dsh}\n",
    )
    entry = manifest.entries[0]
    assert entry.config == {"root": "/var/dsh"}  # `compress` is gone: replaced, not merged
    assert entry.config_loc is not None
    assert entry.config_loc.path.endswith("o0.yaml")


def test_overlay_swaps_a_policy_and_inserts_into_a_group(tmp_path: Path) -> None:
    manifest = _load(
        tmp_path,
        "- {id: session-checkpoints, disabled: true}\n"
        "- insert: [{id: my-checkpoints, name: ./my_policy.py}]\n",
        "- id: tools\n  insert:\n    - {id: extra, name: ./extra.py}\n",
    )
    assert [e.id for e in manifest.entries][-1] == "my-checkpoints"
    assert manifest.entries[-1].name_loc.path == str(tmp_path / "o0.yaml")
    assert [c.id for c in manifest.entries[2].children] == ["timeout", "extra"]


def test_overlays_apply_in_order(tmp_path: Path) -> None:
    manifest = _load(
        tmp_path,
        "- {id: session-checkpoints, disabled: true}\n",
        "- {id: session-checkpoints, disabled: false}\n",
    )
    assert not manifest.entries[1].disabled


def test_patch_targets_nested_rows(tmp_path: Path) -> None:
    manifest = _load(tmp_path, "- {id: timeout, config: {ms: 5}, inject: [tools]}\n")
    child = manifest.entries[2].children[0]
    assert (child.config, child.inject) == ({"ms": 5}, ("tools",))


def test_failed_overlay_stops_at_its_first_bad_patch(tmp_path: Path) -> None:
    base = write(tmp_path, "app.yaml", BASE)
    overlay = write(tmp_path, "o.yaml", "- {id: nope, disabled: true}\n- {id: x, disabled: 1}\n")
    manifest, problems = load_manifest(base, [overlay])
    assert manifest is None
    assert [p.entry for p in problems] == ["nope"]


def test_env_refs_are_located(tmp_path: Path) -> None:
    text = "- id: a\n  name: x\n  config:\n    url: '${HOST:-localhost}:${PORT}'\n    n: 3\n"
    manifest, _ = load_manifest(write(tmp_path, "a.yaml", text))
    assert manifest is not None
    loc = Loc(str(tmp_path / "a.yaml"), 4, 10)
    assert manifest.entries[0].env_refs == (EnvRef("HOST", True, loc), EnvRef("PORT", False, loc))


def test_interpolation_expands_only_string_values() -> None:
    config = {"a": "${X}", "b": ["${Y:-dflt}", 3, None], "${X}": "$X and ${X:+alt}", "c": True}
    out = interpolate(config, {"X": "ex"})
    assert out == {"a": "ex", "b": ["dflt", 3, None], "${X}": "$X and ${X:+alt}", "c": True}
    assert config["a"] == "${X}"  # the original is untouched
    assert interpolate("${E:-}", {}) == ""
    assert interpolate("${E:-fallback}", {"E": ""}) == ""


def test_missing_variable_names_it_and_where() -> None:
    ref = EnvRef("TOKEN", False, Loc("app.yaml", 7, 12))
    with pytest.raises(MissingVariable) as info:
        interpolate({"t": "Bearer ${TOKEN}"}, {}, (ref,))
    assert str(info.value) == 'environment variable "TOKEN" is not set (app.yaml:7)'
    assert (info.value.name, info.value.loc) == ("TOKEN", ref.loc)
    with pytest.raises(MissingVariable, match=r'^environment variable "X" is not set$'):
        interpolate("${X}", {})
