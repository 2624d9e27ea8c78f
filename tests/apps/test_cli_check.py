"""`dsh check`: every problem of a manifest and its overlays as one `file:line:col:` line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from dsh_sandbox import Sandbox

CONFIG = Path(__file__).parents[2] / "config"


def _app_line(text: str, offset: int = 0) -> int:
    """The 1-based line of `text` in the packaged app.yml, plus `offset`."""
    lines = (CONFIG / "app.yml").read_text().splitlines()
    return lines.index(text) + 1 + offset


#: (manifest, overlay or None, a fragment of the expected problem, its line)
BAD = {
    "unknown-plugin": ("- id: a\n  name: dsh-no-such-plugin\n", None, "cannot resolve plugin", 2),
    "missing-file-plugin": ("- id: a\n  name: ./nope.py\n", None, "no such file", 2),
    "extra-config-key": (
        "- id: a\n  name: dsh-agent\n  config:\n    bogus: 1\n",
        None,
        "Extra inputs",
        4,
    ),
    "config-type": (
        "- id: a\n  name: dsh-agent\n  config:\n    max_parallel_tool_calls: many\n",
        None,
        "max_parallel_tool_calls",
        4,
    ),
    "unset-variable": (
        "- id: a\n  name: dsh-demo-tools\n  config:\n    workspace: ${DSH_TEST_UNSET_VAR}\n",
        None,
        "DSH_TEST_UNSET_VAR",
        4,
    ),
    "yaml-syntax": ("- id: a\n  name: [dsh-agent\n", None, "failed to parse", 3),
    "not-a-list": ("id: a\nname: dsh-agent\n", None, "", 1),
    "row-not-mapping": ("- just a string\n", None, "", 1),
    "duplicate-id": ("- id: a\n  name: dsh-session\n- id: a\n  name: dsh-tools\n", None, "", 3),
    "unknown-row-field": ("- id: a\n  name: dsh-session\n  colour: red\n", None, "colour", 3),
    "disabled-not-bool": ("- id: a\n  name: dsh-session\n  disabled: maybe\n", None, "disabled", 3),
    "python-tag": ("- id: a\n  name: !!python/name:os.system\n", None, "", 2),
    "overlay-missing-id": (
        "- id: a\n  name: dsh-session\n",
        "- id: b\n  disabled: true\n",
        'no entry with id "b"',
        1,
    ),
    "overlay-unknown-field": (
        "- id: a\n  name: dsh-session\n",
        "- id: a\n  frobnicate: 1\n",
        "frobnicate",
        2,
    ),
}

LINE = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+):(?P<col>\d+): \S")


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_manifest_exits_2_with_file_line(dsh: Sandbox, case: str) -> None:
    manifest, overlay, fragment, line = BAD[case]
    dsh.write("app.yml", manifest)
    args = ["check", "-c", "app.yml"]
    if overlay is not None:
        dsh.write("overlay.yml", overlay)
        args += ["--patch", "overlay.yml"]
    result = dsh(*args)
    assert result.returncode == 2, result.stdout
    problems = result.stdout.splitlines()
    assert problems
    for problem in problems:
        assert LINE.match(problem), problem
    first = LINE.match(problems[0])
    assert first is not None
    assert first["path"] == ("overlay.yml" if overlay is not None else "app.yml")
    assert int(first["line"]) == line
    assert fragment in problems[0]
    assert result.stderr.endswith("problem(s) in app.yml\n")


def test_every_problem_is_reported(dsh: Sandbox) -> None:
    dsh.write(
        "app.yml",
        "- id: a\n  name: dsh-nope\n- id: b\n  name: dsh-agent\n  config:\n    bogus: 1\n",
    )
    result = dsh("check", "-c", "app.yml")
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    # The unknown plugin, the bad config, then each service row b needs and no row provides.
    assert [LINE.match(line)["line"] for line in lines] == ["2", "6", "3", "3", "3"]  # type: ignore[index]
    assert lines[1].endswith(
        "invalid config for entry b (app.yml:6): Extra inputs are not permitted (at bogus)"
    )
    assert lines[2].endswith(
        'service "sessions" is not provided by any row; add a row with name: dsh-session'
        " (needed by entry b)"
    )
    assert result.stderr == "dsh: error: 5 problem(s) in app.yml\n"


@pytest.mark.parametrize(
    "overlays",
    [
        [],
        ["overlays/no-checkpoints.yml"],
        ["overlays/strict-checkpoints.yml"],
        ["overlays/sqlite.yml"],
        ["overlays/postgres.yml"],
        ["examples/replace-policy.yml"],
    ],
)
def test_shipped_manifests_are_clean(dsh: Sandbox, overlays: list[str]) -> None:
    args = ["check", *(a for o in overlays for a in ("--patch", CONFIG / o))]
    result = dsh(*args, env={"DSH_POSTGRES_DSN": "postgresql://unused"})
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("ok: ")


def test_missing_manifest(dsh: Sandbox) -> None:
    result = dsh("check", "-c", "absent.yml")
    assert result.returncode == 2
    assert result.stdout.startswith("failed to read config file absent.yml")


def _check(dsh: Sandbox, overlay: str, **env: str) -> tuple[int, list[str]]:
    dsh.write("overlay.yml", overlay)
    result = dsh("check", "--patch", "overlay.yml", env=env)
    return result.returncode, result.stdout.splitlines()


def test_check_names_the_plugin_for_a_service_no_row_provides(dsh: Sandbox) -> None:
    code, lines = _check(dsh, "- id: sessions\n  disabled: true\n")
    assert code == 2
    assert len(lines) == 1
    assert LINE.match(lines[0])
    assert (
        ': service "sessions" is not provided by any row; add a row with name: dsh-session '
        "(needed by entries session-persistence, session-checkpoints, approval, agent)"
    ) in lines[0]


def test_check_catches_an_agent_without_a_model(dsh: Sandbox) -> None:
    code, lines = _check(dsh, "- id: agent\n  config: {system: hi}\n")
    assert code == 2
    assert lines[0] == (
        "overlay.yml:2:11: entry agent (dsh-agent) has no model to talk to: set "
        '"provider" and "model" in its config (e.g. provider: replay, model: replay)'
    )
    assert "AgentOptions" not in "\n".join(lines)


def test_check_catches_a_provider_no_adapter_serves(dsh: Sandbox) -> None:
    code, lines = _check(dsh, "- id: agent\n  config: {provider: openai, model: gpt, system: hi}\n")
    assert (code, lines) == (
        2,
        [
            'overlay.yml:2:11: entry agent (dsh-agent) asks for provider "openai", which no '
            'adapter row serves (served: "replay"); add a row with name: dsh-llm-openai'
        ],
    )
    openai = CONFIG / "overlays" / "openai.yml"
    result = dsh("check", "--patch", openai, "--patch", "overlay.yml")
    assert result.returncode == 0, result.stdout


def test_check_catches_a_missing_replay_file(dsh: Sandbox) -> None:
    code, lines = _check(
        dsh,
        "- id: model\n  config: {provider: replay, model: replay, file: nope.yml, delay_ms: 0}\n",
    )
    assert code == 2
    # Relative to the folder of the row's manifest (the row's `ctx.base_dir`); then the
    # warning that `responses` is dropped.
    assert lines[0] == (
        f'overlay.yml:2:11: replay file "nope.yml" of entry model does not exist '
        f"({CONFIG / 'nope.yml'})"
    )


def test_check_warns_when_an_overlay_replaces_a_whole_config(dsh: Sandbox) -> None:
    code, lines = _check(dsh, "- id: model\n  config: {responses: [{text: hi}]}\n")
    assert code == 0
    assert lines[0] == (
        "overlay.yml:2:11: warning: the config of entry model is replaced, not merged: it drops "
        f'"provider", "model", "delay_ms" of {CONFIG / "app.yml"}:{_app_line("- id: model", 3)} '
        "(repeat the keys to keep them)"
    )
    assert lines[1].startswith("ok: ")


def test_check_catches_session_folders_the_backend_refuses(dsh: Sandbox) -> None:
    blocker = dsh.write("a-file", "")
    result = dsh("check", env={"DSH_HOME": str(blocker)})
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        f"{CONFIG / 'app.yml'}:{_app_line('- id: session-persistence', 3)}:5: session root "
        f'"{blocker}/sessions" of entry '
        f'session-persistence cannot be used: "{blocker}" is not a directory'
    ]
    open_home = dsh.root / "open-home"
    open_home.mkdir(mode=0o777)
    open_home.chmod(0o777)
    sqlite = CONFIG / "overlays" / "sqlite.yml"
    result = dsh("check", "--patch", sqlite, env={"DSH_HOME": str(open_home)})
    assert result.returncode == 2
    (line,) = result.stdout.splitlines()
    assert line.endswith(
        f'session database folder "{open_home}" of entry session-persistence-sqlite cannot be '
        "used: it must be owned by this user and owner-only (0700), found mode 0777"
    )
    # What `dsh check` refuses, `dsh run` refuses too.
    run = dsh("run", "--patch", sqlite, "hi", env={"DSH_HOME": str(open_home)})
    assert run.returncode != 0
    assert "owner-only (0700)" in run.stderr


def test_run_refuses_what_check_catches_before_writing_anything(dsh: Sandbox) -> None:
    dsh.write("overlay.yml", "- id: agent\n  config: {system: hi}\n")
    result = dsh("run", "--patch", "overlay.yml", "hi")
    assert (result.returncode, result.stderr) == (
        2,
        "dsh: error: overlay.yml:2:11: entry agent (dsh-agent) has no model to talk to: set "
        '"provider" and "model" in its config (e.g. provider: replay, model: replay)\n',
    )
    assert dsh.files() == {}
    assert not dsh.home.exists()
