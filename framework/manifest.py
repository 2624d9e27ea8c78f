"""Manifest files: located YAML parsing, row validation, overlays and ``${VAR}`` interpolation.

Nothing here imports or runs a plugin. Every problem is a :class:`ManifestProblem` whose message
names the file and the 1-based line (and column) it comes from.
"""

from __future__ import annotations

import copy
import re
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import ruamel.yaml.main
from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.parser import Parser

__all__ = [
    "GROUP",
    "Entry",
    "EnvRef",
    "Loc",
    "Manifest",
    "ManifestProblem",
    "MissingVariable",
    "interpolate",
    "load_manifest",
]

GROUP: Final = "framework:group"
"""The builtin plugin name of a ``group: true`` row."""

ROW_FIELDS: Final = ("id", "name", "config", "disabled", "group", "inject", "isolate")
_PATCH_FIELDS: Final = frozenset(ROW_FIELDS) - {"id", "name"}
_STD: Final = "tag:yaml.org,2002:"
_ALLOWED_TAGS: Final = frozenset(
    _STD + t for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge")
)
_MAX_NODES: Final = 100_000
_MAX_DEPTH: Final = 100
_TOO_DEEP: Final = f"lists and mappings nest deeper than {_MAX_DEPTH} levels"
_VAR: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


@dataclass(frozen=True)
class Loc:
    """A position in a manifest or overlay file (1-based line and column)."""

    path: str
    line: int
    col: int

    @property
    def at(self) -> str:
        """``path:line``, as used in resolution and config messages."""
        return f"{self.path}:{self.line}"

    @property
    def full(self) -> str:
        """``path:line:col``."""
        return f"{self.path}:{self.line}:{self.col}"


@dataclass(frozen=True)
class ManifestProblem:
    """One manifest problem: a complete message, where it points and the row it concerns."""

    message: str
    loc: Loc | None = None
    entry: str | None = None
    #: A warning (the manifest still boots), not an error.
    warning: bool = False

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class EnvRef:
    """A ``${VAR}`` reference in a row's config."""

    name: str
    has_default: bool
    loc: Loc


class MissingVariable(Exception):
    """Raised when a ``${VAR}`` without default names an unset environment variable."""

    def __init__(self, name: str, loc: Loc | None) -> None:
        where = f" ({loc.at})" if loc is not None else ""
        super().__init__(f'environment variable "{name}" is not set{where}')
        self.name = name
        self.loc = loc


@dataclass
class Entry:
    """One validated manifest row."""

    id: str
    name: str
    loc: Loc
    name_loc: Loc
    explicit_id: bool = True
    config: Any = None
    config_loc: Loc | None = None
    env_refs: tuple[EnvRef, ...] = ()
    children: list[Entry] = field(default_factory=list)
    group: bool = False
    disabled: bool = False
    inject: tuple[str, ...] = ()
    isolate: dict[str, bool | str] | None = None


@dataclass
class Manifest:
    """A parsed manifest (overlays already applied)."""

    path: Path
    entries: list[Entry]
    #: Legal but likely unintended: an overlay whose `config` drops keys of the row's config.
    warnings: list[ManifestProblem] = field(default_factory=list)

    def walk(self, *, enabled_only: bool = False) -> Iterator[Entry]:
        """Every row, depth first; with ``enabled_only``, skip disabled rows and their children."""
        stack = list(reversed(self.entries))
        while stack:
            entry = stack.pop()
            if enabled_only and entry.disabled:
                continue
            yield entry
            stack.extend(reversed(entry.children))

    def find(self, entry_id: str) -> Entry | None:
        """The row with that id, anywhere in the tree."""
        return next((e for e in self.walk() if e.id == entry_id), None)


def interpolate(value: Any, environ: Mapping[str, str], refs: tuple[EnvRef, ...] = ()) -> Any:
    """Return a copy of ``value`` with ``${VAR}``/``${VAR:-default}`` expanded in string values.

    Raises :class:`MissingVariable` (located through ``refs``) for an unset variable without
    default.
    """
    if isinstance(value, str):
        return _VAR.sub(lambda m: _expand(m, environ, refs), value)
    if isinstance(value, dict):
        return {k: interpolate(v, environ, refs) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, environ, refs) for v in value]
    return value


def _expand(match: re.Match[str], environ: Mapping[str, str], refs: tuple[EnvRef, ...]) -> str:
    name, default = match.group(1), match.group(2)
    if name in environ:
        return environ[name]
    if default is not None:
        return default
    ref = next((r for r in refs if r.name == name and not r.has_default), None)
    raise MissingVariable(name, ref.loc if ref is not None else None)


def load_manifest(
    path: str | Path, patches: Sequence[str | Path] = (), *, text: str | None = None
) -> tuple[Manifest | None, list[ManifestProblem]]:
    """Parse and validate ``path`` (or ``text``, located as ``path``), then apply each overlay of
    ``patches`` in order."""
    base = _Reader(Path(path), text=text)
    entries = base.read_rows()
    problems = base.problems
    if entries is None or problems:
        return None, problems
    manifest = Manifest(Path(path), entries)
    for patch_path in patches:
        reader = _Reader(Path(patch_path), overlay=True)
        for node in reader.read_top() or ():
            try:
                reader.apply_patch(manifest, node)
            except _Problems:
                break
        if reader.problems:
            return None, reader.problems
    return manifest, []


class _Problems(Exception):
    """Internal: stop reading the current row or patch."""


class _TooDeep(Exception):
    """Internal: a list or mapping nests deeper than `_MAX_DEPTH`, starting at `mark`."""

    def __init__(self, mark: Any) -> None:
        super().__init__(_TOO_DEEP)
        self.mark = mark


class _DepthParser(Parser):
    """ruamel's parser, stopping at the first list or mapping that nests deeper than
    `_MAX_DEPTH`: the composer (and the row reader) recurse, the event stream does not, so the
    file is parsed once and never composed past the limit."""

    def reset_parser(self) -> None:
        super().reset_parser()
        self.depth = 0

    def get_event(self) -> Any:
        event = super().get_event()
        if isinstance(event, CollectionStartEvent):
            self.depth += 1
            if self.depth > _MAX_DEPTH:
                raise _TooDeep(event.start_mark)
        elif isinstance(event, CollectionEndEvent):
            self.depth -= 1
        return event


#: libyaml's parser (ruamel.yaml.clib), None when the extension is not installed.
_CPARSER: Final[Any] = getattr(ruamel.yaml.main, "CParser", None)


def _libyaml_agrees(text: str) -> bool:
    """Whether libyaml composes `text` as ruamel's pure-Python parser does, so its composer (about
    seven times faster: docs/performance.md, "Start-up (P11)") may: the extension is installed,
    the text holds no tab (libyaml accepts some the pure parser refuses) and no directive
    (libyaml ignores `%YAML 1.1`), it parses, and nothing nests deeper than `_MAX_DEPTH` (its
    composer recurses in C). libyaml's event stream, counted here, does not recurse."""
    if _CPARSER is None or "\t" in text:
        return False
    parser, depth = _CPARSER(text), 0
    try:
        while (event := parser.get_event()) is not None:
            if isinstance(event, CollectionStartEvent):
                depth += 1
                if depth > _MAX_DEPTH:
                    return False
            elif isinstance(event, CollectionEndEvent):
                depth -= 1
            elif isinstance(event, DocumentStartEvent) and (event.version or event.tags):
                return False
    except YAMLError:
        return False
    return True


class _Reader:
    """Reads one YAML file into rows (or patches), collecting problems."""

    def __init__(self, path: Path, *, overlay: bool = False, text: str | None = None) -> None:
        self.path = path
        self.text = text
        self.overlay = overlay
        self.problems: list[ManifestProblem] = []
        self._yaml = YAML(typ="safe", pure=True)
        self._yaml.Parser = _DepthParser
        self._budget = _MAX_NODES

    # --- problems -------------------------------------------------------------------------------

    def loc(self, node: Node) -> Loc:
        mark = node.start_mark
        return Loc(str(self.path), mark.line + 1, mark.column + 1)

    def fail(
        self, node: Node | Loc, problem: str, entry: str | None = None, *, syntax: bool = False
    ) -> _Problems:
        loc = node if isinstance(node, Loc) else self.loc(node)
        if syntax:
            kind = "overlay file" if self.overlay else "config file"
            head = f"failed to parse {kind} {loc.path}"
        elif self.overlay:
            head = f"failed to apply overlay {loc.path}"
        else:
            head = f"failed to validate config file {loc.path}"
        self.problems.append(
            ManifestProblem(f"{head}: {loc.line}:{loc.col}: {problem}", loc, entry)
        )
        return _Problems()

    # --- YAML -----------------------------------------------------------------------------------

    def read_top(self) -> list[Node] | None:
        """The top-level list's item nodes, or None after recording a problem."""
        kind = "overlay file" if self.overlay else "config file"
        try:
            text = self.text if self.text is not None else self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            self.problems.append(ManifestProblem(f"failed to read {kind} {self.path}: {reason}"))
            return None
        try:
            root = self._compose(text)
        except _TooDeep as exc:
            self.fail(
                Loc(str(self.path), exc.mark.line + 1, exc.mark.column + 1), _TOO_DEEP, syntax=True
            )
            return None
        except MarkedYAMLError as exc:
            self.problems.append(self._syntax_problem(exc, kind))
            return None
        except YAMLError as exc:
            line = str(exc).strip().splitlines()[0]
            loc = Loc(str(self.path), 1, 1)
            self.problems.append(
                ManifestProblem(f"failed to parse {kind} {self.path}: 1:1: {line}", loc)
            )
            return None
        if not isinstance(root, SequenceNode) or root.tag != _STD + "seq":
            self.problems.append(
                ManifestProblem(
                    f"failed to validate {kind} {self.path}: {kind} must be a top-level list",
                    Loc(str(self.path), 1, 1) if root is None else self.loc(root),
                )
            )
            return None
        return list(root.value)

    def _compose(self, text: str) -> Any:
        """The root node, composed by libyaml where it agrees with the pure parser; anything
        else, and every problem (in the pure parser's words), goes through the pure parser."""
        if _libyaml_agrees(text):
            try:
                return YAML(typ="safe").compose(text)
            except YAMLError:
                pass
        return self._yaml.compose(text)

    def _syntax_problem(self, exc: MarkedYAMLError, kind: str) -> ManifestProblem:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
        text = exc.problem or exc.context or "invalid YAML"
        if exc.problem and exc.context:
            where = exc.context_mark
            at = f" at {where.line + 1}:{where.column + 1}" if where is not None else ""
            text = f"{exc.problem} ({exc.context}{at})"
        return ManifestProblem(
            f"failed to parse {kind} {self.path}: {line}:{col}: {text}",
            Loc(str(self.path), line, col),
        )

    def check_tag(self, node: Node) -> None:
        if node.tag not in _ALLOWED_TAGS:
            tag = str(node.tag)
            tag = "!!" + tag[len(_STD) :] if tag.startswith(_STD) else tag
            raise self.fail(node, f'tag "{tag}" is not allowed (only plain YAML data)', syntax=True)
        self._budget -= 1
        if self._budget < 0:
            raise self.fail(node, f"document expands to more than {_MAX_NODES} nodes", syntax=True)

    def items(self, node: MappingNode, seen: tuple[Node, ...] = ()) -> list[tuple[str, Node, Node]]:
        """Key/value pairs of a mapping (merge keys applied, duplicates refused)."""
        self.check_tag(node)
        pairs: dict[str, tuple[Node, Node]] = {}
        merged: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            self.check_tag(key_node)
            if key_node.tag == _STD + "merge":
                for source in self._merge_sources(value_node):
                    if source in seen:
                        raise self.fail(source, "recursive alias", syntax=True)
                    if len(seen) >= _MAX_DEPTH:
                        raise self.fail(source, _TOO_DEEP, syntax=True)
                    for key, k, v in self.items(source, (*seen, node)):
                        merged.setdefault(key, (k, v))
                continue
            if not isinstance(key_node, ScalarNode) or key_node.tag == _STD + "null":
                raise self.fail(key_node, "mapping keys must be strings")
            key = str(self._yaml.constructor.construct_object(key_node, deep=True))
            if key in pairs:
                first = self.loc(pairs[key][0])
                raise self.fail(
                    key_node, f'duplicate key "{key}" (first at line {first.line})', syntax=True
                )
            pairs[key] = (key_node, value_node)
        for key, pair in merged.items():
            pairs.setdefault(key, pair)
        return [(key, k, v) for key, (k, v) in pairs.items()]

    def _merge_sources(self, node: Node) -> list[MappingNode]:
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self.fail(source, "a merge key (<<) takes a mapping or a list of mappings")
        return list(sources)

    def plain(self, node: Node, seen: tuple[Node, ...] = ()) -> Any:
        """Plain Python data (dict/list/str/int/float/bool/None/date) for a node."""
        if node in seen:
            raise self.fail(node, "recursive alias", syntax=True)
        if len(seen) >= _MAX_DEPTH:
            raise self.fail(node, _TOO_DEEP, syntax=True)
        self.check_tag(node)
        if isinstance(node, ScalarNode):
            return self._yaml.constructor.construct_object(node, deep=True)
        if isinstance(node, SequenceNode):
            return [self.plain(item, (*seen, node)) for item in node.value]
        assert isinstance(node, MappingNode)
        return {key: self.plain(v, (*seen, node)) for key, _, v in self.items(node, seen)}

    def env_refs(self, node: Node, seen: tuple[Node, ...] = ()) -> Iterator[EnvRef]:
        """``${VAR}`` references in the string scalars under ``node`` (values only)."""
        if node in seen or len(seen) >= _MAX_DEPTH:
            return
        if isinstance(node, ScalarNode):
            if node.tag == _STD + "str":
                for m in _VAR.finditer(str(node.value)):
                    yield EnvRef(m.group(1), m.group(2) is not None, self.loc(node))
        elif isinstance(node, SequenceNode):
            for item in node.value:
                yield from self.env_refs(item, (*seen, node))
        elif isinstance(node, MappingNode):
            for _, _, value in self.items(node):
                yield from self.env_refs(value, (*seen, node))

    # --- rows -----------------------------------------------------------------------------------

    def read_rows(self) -> list[Entry] | None:
        nodes = self.read_top()
        if nodes is None:
            return None
        entries = self.rows(nodes)
        self.check_unique(entries)
        return entries

    def rows(self, nodes: list[Node]) -> list[Entry]:
        entries = []
        for node in nodes:
            try:
                entries.append(self.row(node))
            except _Problems:
                continue
        return entries

    def check_unique(self, entries: list[Entry], others: Iterable[Entry] = ()) -> None:
        seen = {e.id: e for e in others}
        for entry in Manifest(self.path, entries).walk():
            first = seen.setdefault(entry.id, entry)
            if first is not entry:
                self.fail(
                    entry.loc, f'duplicate id "{entry.id}" (first at {first.loc.at})', entry.id
                )

    def row(self, node: Node) -> Entry:
        self.check_tag(node)
        if not isinstance(node, MappingNode):
            raise self.fail(node, f"entry must be a mapping, got {_kind(node)}")
        fields = {key: (k, v) for key, k, v in self.items(node)}
        ident = self._id(fields)
        label = f" in entry {ident}" if ident else ""
        for key, (key_node, _) in fields.items():
            if key not in ROW_FIELDS:
                raise self.fail(key_node, f'unknown field "{key}"{label}', ident)
        if "name" not in fields:
            raise self.fail(node, f'missing field "name"{label}', ident)
        name_node = fields["name"][1]
        entry = Entry(
            id=ident or secrets.token_hex(4),
            name=self.string(name_node, "name", ident),
            loc=self.loc(node),
            name_loc=self.loc(name_node),
            explicit_id=ident is not None,
        )
        self.update(entry, {k: v for k, (_, v) in fields.items() if k not in ("id", "name")})
        return entry

    def _id(self, fields: dict[str, tuple[Node, Node]]) -> str | None:
        if "id" not in fields:
            return None
        return self.string(fields["id"][1], "id", None)

    def string(self, node: Node, what: str, ident: str | None) -> str:
        value = self.plain(node)
        if not isinstance(value, str) or not value:
            label = f" of entry {ident}" if ident else ""
            raise self.fail(node, f'"{what}"{label} must be a non-empty string', ident)
        return value

    def update(self, entry: Entry, fields: dict[str, Node]) -> None:
        """Set row fields from their nodes (used by rows and by patches)."""
        label = f" of entry {entry.id}" if entry.explicit_id else ""
        ident = entry.id if entry.explicit_id else None
        flags: dict[str, bool] = {}
        for key in ("disabled", "group"):
            if key in fields:
                value = self.plain(fields[key])
                if not isinstance(value, bool):
                    raise self.fail(fields[key], f'"{key}"{label} must be true or false', ident)
                flags[key] = value
        entry.disabled = flags.get("disabled", entry.disabled)
        group = flags.get("group", entry.group)
        if "inject" in fields:
            entry.inject = self.inject(fields["inject"], label, ident)
        if "isolate" in fields:
            entry.isolate = self.isolate(fields["isolate"], label, ident)
        if group and entry.name != GROUP:
            raise self.fail(
                entry.name_loc, f'group entry {entry.id} must be named "{GROUP}"', ident
            )
        if not group and entry.name == GROUP:
            raise self.fail(entry.name_loc, f'"{GROUP}" needs "group: true"{label}', ident)
        entry.group = group
        if "config" in fields:
            self.config(entry, fields["config"], label, ident)

    def config(self, entry: Entry, node: Node, label: str, ident: str | None) -> None:
        entry.config_loc = self.loc(node)
        if entry.group:
            self.check_tag(node)
            if isinstance(node, ScalarNode) and node.tag == _STD + "null":
                entry.children = []
            elif isinstance(node, SequenceNode):
                entry.children = self.rows(list(node.value))
            else:
                raise self.fail(node, f'"config"{label} (a group) must be a list of entries', ident)
            entry.config, entry.env_refs = None, ()
            return
        value = self.plain(node)
        if value is not None and not isinstance(value, dict):
            raise self.fail(node, f'"config"{label} must be a mapping, got {_kind(node)}', ident)
        entry.config, entry.env_refs, entry.children = value, tuple(self.env_refs(node)), []

    def inject(self, node: Node, label: str, ident: str | None) -> tuple[str, ...]:
        value = self.plain(node)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(node, f'"inject"{label} must be a list of service names', ident)
        return tuple(value)

    def isolate(self, node: Node, label: str, ident: str | None) -> dict[str, bool | str] | None:
        value = self.plain(node)
        if value is None:
            return None
        ok = isinstance(value, dict) and all(
            isinstance(v, bool) or (isinstance(v, str) and v) for v in value.values()
        )
        if not ok:
            raise self.fail(
                node, f'"isolate"{label} must map service names to true, false or a label', ident
            )
        return dict(value)

    # --- overlays -------------------------------------------------------------------------------

    def apply_patch(self, manifest: Manifest, node: Node) -> None:
        self.check_tag(node)
        if not isinstance(node, MappingNode):
            raise self.fail(node, f"patch must be a mapping, got {_kind(node)}")
        fields = {key: (k, v) for key, k, v in self.items(node)}
        ident = self._id(fields)
        allowed = {"id", "name", "insert"} if "insert" in fields else {"id", "name", *_PATCH_FIELDS}
        for key, (key_node, _) in fields.items():
            if key not in allowed:
                why = (
                    " (an insert patch takes only id, name and insert)" if key in ROW_FIELDS else ""
                )
                raise self.fail(key_node, f'unknown patch field "{key}"{why}', ident)
        if ident is None and "insert" not in fields:
            raise self.fail(node, 'a patch needs "id" or "insert"')
        target = None
        if ident is not None:
            target = manifest.find(ident)
            if target is None:
                raise self.fail(fields["id"][1], f'no entry with id "{ident}"', ident)
            if "name" in fields:
                guard = self.string(fields["name"][1], "name", ident)
                if guard != target.name:
                    raise self.fail(
                        fields["name"][1],
                        f'patch for entry {ident} expects name "{guard}", '
                        f'but the entry is "{target.name}" ({target.name_loc.at})',
                        ident,
                    )
        if "insert" in fields:
            self._insert(manifest, target, fields["insert"][1])
            return
        assert target is not None
        patched = copy.deepcopy(target)
        self.update(patched, {k: v for k, (_, v) in fields.items() if k in _PATCH_FIELDS})
        if "config" in fields:
            self._warn_dropped_keys(manifest, target, patched, fields["config"][1])
        subtree = {id(e) for e in Manifest(self.path, [target]).walk()}
        before = len(self.problems)
        self.check_unique(patched.children, (e for e in manifest.walk() if id(e) not in subtree))
        if len(self.problems) > before:
            raise _Problems
        _replace_entry(manifest, target, patched)

    def _warn_dropped_keys(
        self, manifest: Manifest, target: Entry, patched: Entry, node: Node
    ) -> None:
        """An overlay's `config` replaces the row's whole config: warn about the keys it drops."""
        if target.group or not isinstance(target.config, dict):
            return
        kept = patched.config if isinstance(patched.config, dict) else {}
        dropped = [key for key in target.config if key not in kept]
        if not dropped:
            return
        loc = self.loc(node)
        names = ", ".join(f'"{key}"' for key in dropped)
        where = (target.config_loc or target.loc).at
        manifest.warnings.append(
            ManifestProblem(
                f"the config of entry {target.id} is replaced, not merged: it drops {names} "
                f"of {where} (repeat the keys to keep them)",
                loc,
                target.id,
                warning=True,
            )
        )

    def _insert(self, manifest: Manifest, target: Entry | None, node: Node) -> None:
        self.check_tag(node)
        if not isinstance(node, SequenceNode):
            raise self.fail(node, f'"insert" must be a list of entries, got {_kind(node)}')
        if target is not None and not target.group:
            raise self.fail(
                node, f"cannot insert into entry {target.id}: it is not a group", target.id
            )
        before = len(self.problems)
        rows = self.rows(list(node.value))
        self.check_unique(rows, manifest.walk())
        if len(self.problems) > before:
            raise _Problems
        (target.children if target is not None else manifest.entries).extend(rows)


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    return {
        "str": "a string",
        "int": "an integer",
        "float": "a number",
        "bool": "a boolean",
        "null": "null",
    }.get(str(node.tag)[len(_STD) :], "a scalar")


def _replace_entry(manifest: Manifest, old: Entry, new: Entry) -> None:
    for siblings in [manifest.entries, *(e.children for e in manifest.walk())]:
        for index, entry in enumerate(siblings):
            if entry is old:
                siblings[index] = new
                return
