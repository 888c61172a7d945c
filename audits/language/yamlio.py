"""Safe loading of scenario YAML files with line-accurate error reports.

Every problem is reported as one line ``path/to/file.yaml:LINE: dotted.path: message``
and all problems found in a file are reported at once, e.g.::

    scenarios/x.yaml:12: mechanism.epsilon: must be > 0

Public API
----------
``ScenarioError``            exception carrying ``messages: list[str]``
``load_yaml(path)``          -> ``(data, line_map)``
Size and nesting limits live in :mod:`recaudit.audits.language.yamllimits`.
Validation errors become lines in :mod:`recaudit.audits.language.validation_errors`.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Any, Iterator

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from recaudit.core.errors import BadInput
from recaudit.core.files import read_bytes

from .yamllimits import MAX_EXPANDED_VALUES, dotted, flow_nesting_refusal, too_large, written_values_refusal

__all__ = [
    "ScenarioError",
    "one_line",
    "load_yaml",
]


_MERGE_TAG = "tag:yaml.org,2002:merge"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
# Upper bound on recorded locations: protects the walk against alias bombs
# ("billion laughs"); beyond it the map is just less precise.
_MAX_LOCATIONS = 200_000


def one_line(text: str) -> str:
    """``text`` on one line: newlines and other control characters escaped (``\\n``, ``\\x1b``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


class ScenarioError(BadInput):
    """A scenario file could not be loaded or validated.

    ``messages`` holds one formatted line per problem; ``str()`` joins them.
    """

    def __init__(self, messages: list[str] | str):
        if isinstance(messages, str):
            messages = [messages]
        self.messages: list[str] = [one_line(m) for m in messages]
        super().__init__("\n".join(self.messages))

    def __str__(self) -> str:
        return "\n".join(self.messages)


# --------------------------------------------------------------------------
# Loader
# --------------------------------------------------------------------------

# YAML 1.1's float regex (used by PyYAML) requires a '.', so `1e-5` loads as
# the string "1e-5". This version also accepts exponent-only forms
# (`1e-5`, `1E5`, `-2e+3`), signed leading-dot forms (`-.5e-3`) and an
# optional exponent sign, while keeping every form the original accepted.
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?(?:[0-9][0-9_]*)[eE][-+]?[0-9]+
    |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.X,
)


class _Located:
    """Constructor faults with the value's location (mixed into both loaders below)."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        # PyYAML's constructors raise plain Python errors for some values
        # (`!!timestamp 2020-13-45` -> ValueError, `!!binary` of bad base64,
        # `!!int` out of range...); give them the value's position.
        try:
            return super().construct_object(node, deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this {_tag_name(node)} value ({type(exc).__name__}: {exc})",
                node.start_mark) from None


class _ScenarioLoader(_Located, yaml.SafeLoader):
    """SafeLoader with a corrected float resolver, no implicit dates, and located constructor faults.

    Duplicate keys are detected while walking the composed node tree (see
    ``_walk``), where the full location of every key is known.
    """


class _FastScenarioLoader(_Located, yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader):
    """The same loader reading through libyaml (15x faster); a file it cannot read is read again by
    ``_ScenarioLoader``, whose messages every refusal keeps."""


def _tag_name(node: Node) -> str:
    return node.tag.rsplit(":", 1)[-1] if isinstance(node.tag, str) else "YAML"


# Private copy of the resolver table with the float entry replaced in place
# (same position, so resolution order is unchanged) and no implicit dates (a
# scenario has no dates: `name: 2020-13-45` is a string); SafeLoader is untouched.
_ScenarioLoader.yaml_implicit_resolvers = _FastScenarioLoader.yaml_implicit_resolvers = {
    first: [
        (tag, _FLOAT_RE if tag == _FLOAT_TAG else regexp)
        for tag, regexp in resolvers
        if tag != _TIMESTAMP_TAG
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _expanded_sizes(root: Node, path: str) -> dict[int, int]:
    """Values under every node with every alias expanded (by node id); raises ScenarioError on recursive aliases.

    Shared nodes are sized once (memoised by identity), so an alias bomb is
    measured in time linear in its text, not in its expansion.
    """
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            on_path.discard(key)
            children = _children(node)
            sizes[key] = min(1 + sum(sizes[id(c)] for c in children), sys.maxsize)
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise ScenarioError(f"{path}:{node.start_mark.line + 1}: recursive alias: a value may not contain itself")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)
    return sizes


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    if isinstance(node, MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _yaml_error_line(exc: yaml.YAMLError, text: str) -> tuple[int, str]:
    """Return (line, one-line description) for a PyYAML error."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else 1
        problem = exc.problem or exc.context or "invalid YAML"
        ctx = exc.context_mark
        if exc.problem and exc.context and exc.problem.startswith("but "):
            # composer: "expected a single document in the stream" + "but found ..."
            return line, f"{exc.context} {exc.problem}"
        if exc.problem and exc.context and ctx is not None and ctx.line + 1 != line:
            # e.g. "could not find expected ':'" is marked on the line *after*
            # the offending one; point at where the construct started too.
            problem = f"{problem} ({exc.context} at line {ctx.line + 1})"
        return line, problem
    if isinstance(exc, yaml.reader.ReaderError):
        pos = exc.position if isinstance(exc.position, int) else 0
        reason = exc.reason or "unreadable character"
        char = exc.character
        code = ord(char) if isinstance(char, str) and len(char) == 1 else char
        if isinstance(code, int):
            reason += f" (character {code:#x})"
        return text.count("\n", 0, pos) + 1, reason
    return 1, str(exc).replace("\n", " ")


def _read_text(path: str) -> str:
    raw = read_bytes(path, ScenarioError)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(f"{path}:{line}: file is not valid UTF-8 text") from None


class _Walker:
    """Walk a composed node tree: record line numbers, find duplicate keys."""

    def __init__(self, loader: yaml.SafeLoader, path: str):
        self.loader = loader
        self.path = path
        self.lines: dict[tuple, int] = {(): 1}
        self.errors: list[str] = []
        self._checked: set[int] = set()  # mapping nodes already dup-checked
        self._stack: set[int] = set()  # nodes on the current path (recursion)

    def _record(self, loc: tuple, line: int) -> bool:
        if loc in self.lines:
            return True
        if len(self.lines) >= _MAX_LOCATIONS:
            return False
        self.lines[loc] = line
        return True

    def _key(self, node: Node) -> Any:
        """Python value of a scalar key node (None for complex keys)."""
        if not isinstance(node, ScalarNode):
            return None
        return self.loader.construct_object(node)

    def walk(self, node: Node, loc: tuple) -> None:
        if id(node) in self._stack:  # recursive alias: `&a [*a]`
            return
        self._stack.add(id(node))
        try:
            if isinstance(node, MappingNode):
                self._walk_mapping(node, loc)
            elif isinstance(node, SequenceNode):
                for i, item in enumerate(node.value):
                    if self._record(loc + (i,), item.start_mark.line + 1):
                        self.walk(item, loc + (i,))
        finally:
            self._stack.discard(id(node))

    def _walk_mapping(self, node: MappingNode, loc: tuple) -> None:
        check_dups = id(node) not in self._checked
        self._checked.add(id(node))
        seen: set[Any] = set()
        merges: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append((key_node, value_node))
                continue
            key = self._key(key_node)
            if key is None:
                continue
            try:
                is_dup = key in seen
            except TypeError:  # unhashable; the constructor will complain
                continue
            line = key_node.start_mark.line + 1
            sub = loc + (str(key),)
            if is_dup:
                if check_dups:
                    self.errors.append(
                        f"{self.path}:{line}: {dotted(sub)}: duplicate key {key!r}"
                    )
                continue
            seen.add(key)
            if self._record(sub, line):
                self.walk(value_node, sub)
        # `<<: *base` merge keys: explicit keys win, merged ones get the line of
        # the `<<` key (their values are walked at their anchor definitions).
        for merge_key, merge_value in merges:
            line = merge_key.start_mark.line + 1
            for key_node, value_node in self._merged_pairs(merge_value, set()):
                key = self._key(key_node)
                try:
                    if key is None or key in seen:
                        continue
                except TypeError:
                    continue
                seen.add(key)
                sub = loc + (str(key),)
                if self._record(sub, line):
                    self.walk(value_node, sub)

    def _merged_pairs(self, node: Node, active: set[int]) -> Iterator[tuple[Node, Node]]:
        if id(node) in active:
            return
        active = active | {id(node)}
        if isinstance(node, SequenceNode):
            for item in node.value:
                yield from self._merged_pairs(item, active)
        elif isinstance(node, MappingNode):
            nested = []
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG:
                    nested.append(value_node)
                else:
                    yield key_node, value_node
            for value_node in nested:
                yield from self._merged_pairs(value_node, active)


def load_yaml(path: str | os.PathLike) -> tuple[object, dict[tuple, int]]:
    """Load a scenario file safely.

    Returns ``(data, line_map)``: the plain Python data and a map from each
    location tuple (mapping keys as ``str``, sequence indices as ``int``) to its
    1-based line. Mapping entries map to the line of their key, sequence items
    to the line where the item starts, and the root ``()`` to line 1.

    Raises ScenarioError (one line per problem) for unreadable files, YAML
    syntax errors, duplicate keys, empty files and non-mapping documents.
    """
    path = os.fspath(path)
    text = _read_text(path)
    refusal = flow_nesting_refusal(text, path) or written_values_refusal(text, path)
    if refusal:
        raise ScenarioError(refusal)
    if yaml.__with_libyaml__:
        try:
            return _load(text, path, _FastScenarioLoader)
        except Exception:  # (a refusal, or anything libyaml's marks make go wrong in wording one)
            pass  # read again below, for the pure-Python reader's message (or its reading, where it is laxer)
    return _load(text, path, _ScenarioLoader)


def _load(text: str, path: str, loader_class: type) -> tuple[object, dict[tuple, int]]:
    loader = None
    try:
        try:
            loader = loader_class(text)  # may raise ReaderError
            node = loader.get_single_node()
            if node is None:
                raise ScenarioError(f"{path}:1: the file is empty (expected a mapping of keys)")
            sizes = _expanded_sizes(node, path)
            if sizes[id(node)] > MAX_EXPANDED_VALUES:
                raise ScenarioError(too_large(node, sizes, path))
            walker = _Walker(loader, path)
            walker.walk(node, ())
            if walker.errors:
                raise ScenarioError(walker.errors)
            data = loader.construct_document(node)
        except yaml.YAMLError as exc:
            line, problem = _yaml_error_line(exc, text)
            kind = (
                "YAML error"
                if isinstance(exc, yaml.constructor.ConstructorError)
                else "YAML syntax error"
            )
            raise ScenarioError(f"{path}:{line}: {kind}: {problem}") from None
        except RecursionError:
            line = loader.get_mark().line + 1 if loader is not None else 1
            raise ScenarioError(f"{path}:{line}: YAML error: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()

    if not isinstance(data, dict):
        got = "null" if data is None else _type_name(data)
        raise ScenarioError(
            f"{path}:{node.start_mark.line + 1}: top level must be a mapping of keys, got {got}"
        )
    return data, walker.lines


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


# --------------------------------------------------------------------------
# Locations
# --------------------------------------------------------------------------
