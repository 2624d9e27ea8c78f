"""Bad manifests and overlays: each gives exactly one problem naming file:line:col and row."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from loader_helpers import CONFIGURED, write

from framework.errors import ManifestError
from framework.loader import boot, check_manifest

pytestmark = pytest.mark.anyio


@dataclass(frozen=True)
class Case:
    manifest: str
    expected: str  # exact message, `{m}`/`{o}`/`{d}` stand for manifest, overlay, folder
    at: tuple[str, int, int]  # ("m" or "o", line, col)
    entry: str | None = None
    overlay: str | None = None
    files: dict[str, str] = field(default_factory=dict)


P = "./configured.py"
CASES = {
    "syntax error": Case(
        "- id: a\n  name: [x\n",
        "failed to parse config file {m}: 3:1: expected ',' or ']', but got '<stream end>'"
        " (while parsing a flow sequence at 2:9)",
        ("m", 3, 1),
    ),
    "tab indentation": Case(
        "- id: a\n\tname: x\n",
        "failed to parse config file {m}: 2:1: found character '\\t' that cannot start any token"
        " (while scanning for the next token)",
        ("m", 2, 1),
    ),
    "two documents": Case(
        "- {id: a, name: x}\n---\n- {id: b, name: y}\n",
        "failed to parse config file {m}: 2:1: but found another document"
        " (expected a single document in the stream at 1:1)",
        ("m", 2, 1),
    ),
    "top level mapping": Case(
        "id: a\nname: x\n",
        "failed to validate config file {m}: config file must be a top-level list",
        ("m", 1, 1),
    ),
    "empty file": Case(
        "# nothing\n",
        "failed to validate config file {m}: config file must be a top-level list",
        ("m", 1, 1),
    ),
    "python object tag": Case(
        "- id: a\n  name: x\n  config:\n    cmd: !!python/object/apply:os.system [ls]\n",
        'failed to parse config file {m}: 4:10: tag "!!python/object/apply:os.system"'
        " is not allowed (only plain YAML data)",
        ("m", 4, 10),
    ),
    "custom tag": Case(
        "- id: a\n  name: !env PLUGIN\n",
        'failed to parse config file {m}: 2:9: tag "!env" is not allowed (only plain YAML data)',
        ("m", 2, 9),
    ),
    "duplicate key": Case(
        "- id: a\n  name: x\n  name: y\n",
        'failed to parse config file {m}: 3:3: duplicate key "name" (first at line 2)',
        ("m", 3, 3),
    ),
    "row not a mapping": Case(
        "- id: a\n  name: " + P + "\n- just-a-string\n",
        "failed to validate config file {m}: 3:3: entry must be a mapping, got a string",
        ("m", 3, 3),
    ),
    "missing name": Case(
        "- id: a\n  config: {}\n",
        'failed to validate config file {m}: 1:3: missing field "name" in entry a',
        ("m", 1, 3),
        "a",
    ),
    "unknown row field": Case(
        "- id: a\n  name: " + P + "\n  priority: 3\n",
        'failed to validate config file {m}: 3:3: unknown field "priority" in entry a',
        ("m", 3, 3),
        "a",
    ),
    "id not a string": Case(
        "- id: [a]\n  name: x\n",
        'failed to validate config file {m}: 1:7: "id" must be a non-empty string',
        ("m", 1, 7),
    ),
    "duplicate id": Case(
        "- id: a\n  name: " + P + "\n- id: g\n  name: framework:group\n  group: true\n"
        "  config:\n    - id: a\n      name: " + P + "\n",
        'failed to validate config file {m}: 7:7: duplicate id "a" (first at {m}:1)',
        ("m", 7, 7),
        "a",
    ),
    "disabled not a boolean": Case(
        "- id: a\n  name: " + P + "\n  disabled: 'yes'\n",
        'failed to validate config file {m}: 3:13: "disabled" of entry a must be true or false',
        ("m", 3, 13),
        "a",
    ),
    "bad isolate value": Case(
        "- id: a\n  name: " + P + "\n  isolate: {demo: 3}\n",
        'failed to validate config file {m}: 3:12: "isolate" of entry a must map service'
        " names to true, false or a label",
        ("m", 3, 12),
        "a",
    ),
    "bad inject type": Case(
        "- id: a\n  name: " + P + "\n  inject: demo\n",
        'failed to validate config file {m}: 3:11: "inject" of entry a must be a list of'
        " service names",
        ("m", 3, 11),
        "a",
    ),
    "config not a mapping": Case(
        "- id: a\n  name: " + P + "\n  config: [1, 2]\n",
        'failed to validate config file {m}: 3:11: "config" of entry a must be a mapping,'
        " got a list",
        ("m", 3, 11),
        "a",
    ),
    "group config not a list": Case(
        "- id: g\n  name: framework:group\n  group: true\n  config: {a: 1}\n",
        'failed to validate config file {m}: 4:11: "config" of entry g (a group) must be a'
        " list of entries",
        ("m", 4, 11),
        "g",
    ),
    "group with a plugin name": Case(
        "- id: g\n  name: " + P + "\n  group: true\n  config: []\n",
        'failed to validate config file {m}: 2:9: group entry g must be named "framework:group"',
        ("m", 2, 9),
        "g",
    ),
    "unknown plugin module": Case(
        "- id: a\n  name: no_such_pkg.plugin\n",
        'cannot resolve plugin "no_such_pkg.plugin" for entry a ({m}:2): no module named'
        ' "no_such_pkg.plugin"',
        ("m", 2, 9),
        "a",
    ),
    "unknown entry point": Case(
        "- id: a\n  name: '@deepseek-ai/dsh-no-such-plugin'\n",
        'cannot resolve plugin "@deepseek-ai/dsh-no-such-plugin" for entry a ({m}:2): no'
        ' "dsh.plugins" entry point or plugin alias named "@deepseek-ai/dsh-no-such-plugin"',
        ("m", 2, 9),
        "a",
    ),
    "unknown builtin": Case(
        "- id: a\n  name: framework:include\n",
        'cannot resolve plugin "framework:include" for entry a ({m}:2): unknown builtin'
        ' (only "framework:group")',
        ("m", 2, 9),
        "a",
    ),
    "missing attribute": Case(
        "- id: a\n  name: 'json:no_such_thing'\n",
        'cannot resolve plugin "json:no_such_thing" for entry a ({m}:2): "json" has no'
        ' attribute "no_such_thing"',
        ("m", 2, 9),
        "a",
    ),
    "module that is not a plugin": Case(
        "- id: a\n  name: json\n",
        'cannot resolve plugin "json" for entry a ({m}:2): module "json" is not a plugin'
        " (it has no apply)",
        ("m", 2, 9),
        "a",
    ),
    "relative file that does not exist": Case(
        "- id: a\n  name: ./missing_policy.py\n",
        'cannot resolve plugin "./missing_policy.py" for entry a ({m}:2): no such file or'
        " package: {d}/missing_policy.py",
        ("m", 2, 9),
        "a",
    ),
    "relative file that does not import": Case(
        "- id: a\n  name: ./broken.py\n",
        'cannot resolve plugin "./broken.py" for entry a ({m}:2): {d}/broken.py failed to'
        " import: ZeroDivisionError: division by zero",
        ("m", 2, 9),
        "a",
        files={"broken.py": "name = 'broken'\nx = 1 / 0\n"},
    ),
    "plugin with a bad inject": Case(
        "- id: a\n  name: ./stringly.py\n",
        'cannot resolve plugin "./stringly.py" for entry a ({m}:2): inject of plugin "stringly"'
        " must be a list of service names",
        ("m", 2, 9),
        "a",
        files={"stringly.py": "name = 'stringly'\ninject = 'llm'\ndef apply(ctx, config): pass\n"},
    ),
    "bad config type": Case(
        "- id: a\n  name: " + P + "\n  config:\n    port: eighty\n",
        "invalid config for entry a ({m}:4):\n  - Input should be a valid integer, unable to"
        " parse string as an integer (at port)",
        ("m", 4, 5),
        "a",
    ),
    "unknown config field": Case(
        "- id: a\n  name: " + P + "\n  config:\n    colour: red\n",
        "invalid config for entry a ({m}:4):\n  - Extra inputs are not permitted (at colour)",
        ("m", 4, 5),
        "a",
    ),
    "missing env var": Case(
        "- id: a\n  name: " + P + "\n  config:\n    greeting: 'hello ${DSH_TEST_UNSET_VAR}'\n",
        "failed to apply loader entry a (./configured.py): environment variable"
        ' "DSH_TEST_UNSET_VAR" is not set ({m}:4)',
        ("m", 4, 15),
        "a",
    ),
    "overlay on a missing id": Case(
        "- id: a\n  name: " + P + "\n",
        'failed to apply overlay {o}: 3:7: no entry with id "nope"',
        ("o", 3, 7),
        "nope",
        overlay="- id: a\n  disabled: false\n- id: nope\n  disabled: true\n",
    ),
    "guard mismatch": Case(
        "- id: a\n  name: " + P + "\n",
        "failed to apply overlay {o}: 2:9: patch for entry a expects name"
        ' "dsh-session-persistence-jsonl", but the entry is "./configured.py" ({m}:2)',
        ("o", 2, 9),
        "a",
        overlay="- id: a\n  name: dsh-session-persistence-jsonl\n  disabled: true\n",
    ),
    "insert into a non-group": Case(
        "- id: a\n  name: " + P + "\n",
        "failed to apply overlay {o}: 2:11: cannot insert into entry a: it is not a group",
        ("o", 2, 11),
        "a",
        overlay="- id: a\n  insert: [{id: b, name: ./configured.py}]\n",
    ),
    "overlay inserts a duplicate id": Case(
        "- id: a\n  name: " + P + "\n",
        'failed to apply overlay {o}: 1:12: duplicate id "a" (first at {m}:1)',
        ("o", 1, 12),
        "a",
        overlay="- insert: [{id: a, name: ./configured.py}]\n",
    ),
    "insert patch with row fields": Case(
        "- id: a\n  name: " + P + "\n",
        'failed to apply overlay {o}: 1:16: unknown patch field "config" (an insert patch'
        " takes only id, name and insert)",
        ("o", 1, 16),
        overlay="- {insert: [], config: {}}\n",
    ),
    "overlay not a list": Case(
        "- id: a\n  name: " + P + "\n",
        "failed to validate overlay file {o}: overlay file must be a top-level list",
        ("o", 1, 1),
        overlay="id: a\ndisabled: true\n",
    ),
    "overlay syntax error": Case(
        "- id: a\n  name: " + P + "\n",
        "failed to parse overlay file {o}: 1:9: found unexpected end of stream"
        " (while scanning a quoted scalar at 1:7)",
        ("o", 1, 9),
        overlay="- id: 'a",
    ),
}


def _setup(tmp_path: Path, case: Case) -> tuple[Path, list[Path], dict[str, str]]:
    write(tmp_path, "configured.py", CONFIGURED)
    for name, text in case.files.items():
        write(tmp_path, name, text)
    manifest = write(tmp_path, "app.yaml", case.manifest)
    overlays = []
    if case.overlay is not None:
        overlays.append(write(tmp_path / "deploy", "overlay.yaml", case.overlay))
    names = {"m": str(manifest), "o": str(overlays[0]) if overlays else "", "d": str(tmp_path)}
    return manifest, overlays, names


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_one_problem_naming_file_line_and_column(tmp_path: Path, case: Case) -> None:
    manifest, overlays, names = _setup(tmp_path, case)
    problems = check_manifest(manifest, overlays, environ={})
    assert [str(p) for p in problems] == [case.expected.format(**names)]
    (problem,) = problems
    where, line, col = case.at
    assert problem.loc is not None
    assert (problem.loc.path, problem.loc.line, problem.loc.col) == (names[where], line, col)
    assert problem.entry == case.entry
    if "top-level list" not in case.expected:  # that text is fixed by the spec, without a line
        text = str(problem)
        assert f"{names[where]}:{line}" in text or f"{names[where]}: {line}:{col}" in text


def test_at_least_twenty_cases() -> None:
    assert len(CASES) >= 20


async def test_boot_raises_every_resolution_problem_together(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "app.yaml",
        "- {id: a, name: no_such_pkg_a}\n- {id: b, name: ./nope.py}\n- {id: c, name: json}\n",
    )
    with pytest.raises(ManifestError) as info:
        async with boot(manifest):
            pytest.fail("booted a manifest with unresolvable rows")
    lines = str(info.value).splitlines()
    assert [line.split(" (")[0] for line in lines] == [
        'cannot resolve plugin "no_such_pkg_a" for entry a',
        'cannot resolve plugin "./nope.py" for entry b',
        'cannot resolve plugin "json" for entry c',
    ]
    assert all(f"({manifest}:" in line for line in lines)


def test_problems_of_disabled_rows_are_not_resolved(tmp_path: Path) -> None:
    manifest = write(
        tmp_path,
        "app.yaml",
        "- {id: a, name: no_such_pkg_a, disabled: true}\n"
        "- {id: g, name: 'framework:group', group: true, disabled: true,"
        " config: [{id: b, name: ./nope.py}]}\n",
    )
    assert check_manifest(manifest) == []


def test_alias_bombs_are_refused(tmp_path: Path) -> None:
    levels = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 7)]
    text = "- id: a\n  name: ./configured.py\n  config:\n" + "".join(
        f"    {level}\n" for level in levels
    )
    write(tmp_path, "configured.py", CONFIGURED)
    manifest = write(tmp_path, "app.yaml", text)
    (problem,) = check_manifest(manifest)
    assert "document expands to more than 100000 nodes" in str(problem)
    assert str(problem).startswith(f"failed to parse config file {manifest}: ")


def test_unreadable_files_are_one_problem(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert [str(p) for p in check_manifest(missing)] == [
        f"failed to read config file {missing}: No such file or directory"
    ]
    manifest = write(tmp_path, "app.yaml", "- {id: a, name: json:dumps}\n")
    assert [str(p) for p in check_manifest(manifest, [tmp_path])] == [
        f"failed to read overlay file {tmp_path}: Is a directory"
    ]


def _alias_chain(depth: int) -> str:
    lines = ["    x0: &x0 []"] + [f"    x{i}: &x{i} [*x{i - 1}]" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


def _merge_chain(depth: int) -> str:
    lines = ["    x0: &x0 {a: 1}"] + [f"    x{i}: &x{i} {{<<: *x{i - 1}}}" for i in range(1, depth)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("config", "at"),
    [
        ("    x: " + "[" * 50_000 + "]" * 50_000 + "\n", (4, 105)),
        ("".join("  " * (i + 2) + "k:\n" for i in range(2_000)), (102, 201)),
        (_alias_chain(50_000), (4, 9)),
        (_merge_chain(3_000), (4, 9)),
    ],
    ids=["flow", "block", "alias-chain", "merge-chain"],
)
def test_deep_nesting_is_one_problem_not_a_recursion_error(
    tmp_path: Path, config: str, at: tuple[int, int]
) -> None:
    write(tmp_path, "configured.py", CONFIGURED)
    manifest = tmp_path / "app.yaml"
    manifest.write_text("- id: a\n  name: ./configured.py\n  config:\n" + config)
    (problem,) = check_manifest(manifest)
    line, col = at
    assert str(problem) == (
        f"failed to parse config file {manifest}: {line}:{col}: "
        "lists and mappings nest deeper than 100 levels"
    )
    assert problem.loc is not None
    assert (problem.loc.line, problem.loc.col) == at


def test_nesting_up_to_the_limit_loads(tmp_path: Path) -> None:
    write(tmp_path, "configured.py", CONFIGURED)
    manifest = tmp_path / "app.yaml"
    # The row list, the row and its config mapping are three levels; 97 more lists fit.
    manifest.write_text(
        "- id: a\n  name: ./configured.py\n  config: {greeting: x, nest: "
        + "[" * 97
        + "]" * 97
        + "}\n"
    )
    problems = check_manifest(manifest)
    assert all("nest deeper" not in str(p) for p in problems)
