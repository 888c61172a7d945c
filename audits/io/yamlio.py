"""Safe loading of scenario YAML files with line-accurate error reports.

Every problem is reported as one line ``path/to/file.yaml:LINE: dotted.path: message``
and all problems found in a file are reported at once, e.g.::

    scenarios/x.yaml:12: mechanism.epsilon: must be > 0

Public API
----------
``ScenarioError``            exception carrying ``messages: list[str]``
``load_yaml(path)``          -> ``(data, line_map)``
``line_for(line_map, loc)``  -> line of the longest known prefix of ``loc``
``format_validation_error(path, exc, line_map, model_cls=None)`` -> ``list[str]``
``load_and_validate(path, model_cls)`` -> validated model instance
"""

from __future__ import annotations

import os
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any, Iterable, Iterator

import yaml
from pydantic import BaseModel, ValidationError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = [
    "ScenarioError",
    "one_line",
    "load_yaml",
    "line_for",
    "format_validation_error",
    "load_and_validate",
]


_ROOT_LABEL = "<root>"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"
# Upper bound on recorded locations: protects the walk against alias bombs
# ("billion laughs"); beyond it the map is just less precise.
_MAX_LOCATIONS = 200_000
# Upper bound on the values a document holds once every alias is expanded:
# a scenario has a few hundred; an alias bomb has billions.
MAX_EXPANDED_VALUES = 100_000


def one_line(text: str) -> str:
    """``text`` on one line: newlines and other control characters escaped (``\\n``, ``\\x1b``)."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in str(text))


class ScenarioError(Exception):
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


class _ScenarioLoader(yaml.SafeLoader):
    """SafeLoader with a corrected float resolver, no implicit dates, and located constructor faults.

    Duplicate keys are detected while walking the composed node tree (see
    ``_walk``), where the full location of every key is known.
    """

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


def _tag_name(node: Node) -> str:
    return node.tag.rsplit(":", 1)[-1] if isinstance(node.tag, str) else "YAML"


# Private copy of the resolver table with the float entry replaced in place
# (same position, so resolution order is unchanged) and no implicit dates (a
# scenario has no dates: `name: 2020-13-45` is a string); SafeLoader is untouched.
_ScenarioLoader.yaml_implicit_resolvers = {
    first: [
        (tag, _FLOAT_RE if tag == _FLOAT_TAG else regexp)
        for tag, regexp in resolvers
        if tag != _TIMESTAMP_TAG
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _expanded_size(root: Node, path: str) -> int:
    """Values in the document with every alias expanded; raises ScenarioError on recursive aliases.

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
    return sizes[id(root)]


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
    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise ScenarioError(f"{path}: is a directory, not a file") from None
    except PermissionError:
        raise ScenarioError(f"{path}: permission denied") from None
    except OSError as exc:
        if p.is_dir():
            raise ScenarioError(f"{path}: is a directory, not a file") from None
        reason = exc.strerror or exc.__class__.__name__
        raise ScenarioError(f"{path}: cannot read file ({reason})") from None
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ScenarioError(f"{path}:{line}: file is not valid UTF-8 text") from None


def _dotted(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or _ROOT_LABEL


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
                        f"{self.path}:{line}: {_dotted(sub)}: duplicate key {key!r}"
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

    loader = None
    try:
        try:
            loader = _ScenarioLoader(text)  # may raise ReaderError
            node = loader.get_single_node()
            if node is None:
                raise ScenarioError(f"{path}:1: file is empty (expected a mapping of keys)")
            size = _expanded_size(node, path)
            if size > MAX_EXPANDED_VALUES:
                raise ScenarioError(f"{path}:{node.start_mark.line + 1}: aliases expand the document to "
                                    f"{size:.3g} values (more than {MAX_EXPANDED_VALUES}); write the values out")
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


def _step(line_map: dict, cur: tuple, part: Any) -> tuple | None:
    """The map key for ``cur + (part,)``, or None if it is not in the map.

    Integer parts are tried as sequence indices first, then as (stringified)
    mapping keys; other parts are tried as strings.
    """
    cand = cur + (part,)
    if cand in line_map:
        return cand
    if not isinstance(part, str):
        cand = cur + (str(part),)
        if cand in line_map:
            return cand
    return None


def line_for(line_map: dict, loc: Iterable[Any]) -> int:
    """Line of the longest prefix of ``loc`` present in ``line_map`` (else 1)."""
    cur: tuple = ()
    for part in loc:
        nxt = _step(line_map, cur, part)
        if nxt is None:
            break
        cur = nxt
    return line_map.get(cur, 1)


def _clean_loc(loc: tuple, line_map: dict, err_type: str) -> tuple:
    """Strip pydantic's synthetic loc items; return the loc as written in the YAML.

    Pydantic inserts items that are not keys in the input: discriminated-union
    tags (``('mechanism', 'maxsense', 'epsilon')``), union member labels
    (``('x', 'int')``) and ``'[key]'`` for dict-key errors. Validation only
    descends into data that exists, so a str item that is not a key at a
    position we know is synthetic -- except the last item of a ``missing``
    error, which names the absent key. Positions the map doesn't cover (e.g.
    inside a scalar) keep their items unchanged.
    """
    display: list[Any] = []
    cur: tuple | None = ()  # None once we left the map
    n = len(loc)
    for i, part in enumerate(loc):
        last = i == n - 1
        if cur is not None:
            nxt = _step(line_map, cur, part)
            if nxt is not None:
                display.append(nxt[-1])
                cur = nxt
                continue
            if isinstance(part, str) and not (last and err_type == "missing"):
                # Not a key here. Drop it if it is synthetic: a known container
                # position (it has children in the map, or it's the last part).
                if part == "[key]" or last or _has_children(line_map, cur):
                    continue
            cur = None
        if part == "[key]":
            continue
        display.append(part)
    return tuple(display)


def _has_children(line_map: dict, cur: tuple) -> bool:
    n = len(cur)
    return any(len(k) == n + 1 and k[:n] == cur for k in line_map)


# --------------------------------------------------------------------------
# Messages
# --------------------------------------------------------------------------

_TYPE_MESSAGES = {
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be an integer",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "tuple_type": "must be a list",
    "set_type": "must be a list",
    "dict_type": "must be a mapping",
    "model_type": "must be a mapping",
    "model_attributes_type": "must be a mapping",
    "finite_number": "must be a finite number",
    "none_required": "must be null",
    "missing": "required",
}


def _fmt_num(value: Any) -> str:
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return str(value)


def _one_of(expected: str) -> str:
    # pydantic renders choices as "'a', 'b' or 'c'"
    if " or " in expected:
        head, tail = expected.rsplit(" or ", 1)
        return f"must be one of: {head}, {tail}"
    return f"must be {expected}"


def _message(err: dict, allowed_keys: list[str] | None) -> str:
    kind = err.get("type", "")
    ctx = err.get("ctx") or {}
    msg = err.get("msg", "")
    if kind == "greater_than" and "gt" in ctx:
        return f"must be > {_fmt_num(ctx['gt'])}"
    if kind == "greater_than_equal" and "ge" in ctx:
        return f"must be >= {_fmt_num(ctx['ge'])}"
    if kind == "less_than" and "lt" in ctx:
        return f"must be < {_fmt_num(ctx['lt'])}"
    if kind == "less_than_equal" and "le" in ctx:
        return f"must be <= {_fmt_num(ctx['le'])}"
    if kind == "multiple_of" and "multiple_of" in ctx:
        return f"must be a multiple of {_fmt_num(ctx['multiple_of'])}"
    if kind == "extra_forbidden":
        if allowed_keys:
            return f"unknown key (allowed: {', '.join(allowed_keys)})"
        return "unknown key"
    if kind == "union_tag_invalid" and "tag" in ctx:
        disc = str(ctx.get("discriminator", "kind")).strip("'\"")
        expected = ctx.get("expected_tags", "")
        return f"unknown {disc} {ctx['tag']!r} (expected one of: {expected})"
    if kind == "union_tag_not_found":
        disc = str(ctx.get("discriminator", "kind")).strip("'\"")
        return f"missing {disc!r} (needed to select the variant)"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        return _one_of(str(ctx["expected"]))
    if kind in ("too_short", "string_too_short") and "min_length" in ctx:
        unit = "items" if kind == "too_short" else "characters"
        return f"must have at least {ctx['min_length']} {unit}"
    if kind in ("too_long", "string_too_long") and "max_length" in ctx:
        unit = "items" if kind == "too_long" else "characters"
        return f"must have at most {ctx['max_length']} {unit}"
    if kind == "string_pattern_mismatch" and "pattern" in ctx:
        return f"must match pattern {ctx['pattern']!r}"
    if kind in ("value_error", "assertion_error"):
        if isinstance(ctx.get("error"), BaseException) and str(ctx["error"]):
            return str(ctx["error"])
        for prefix in ("Value error, ", "Assertion failed, "):
            if msg.startswith(prefix):
                return msg[len(prefix):]
        return msg
    if kind in _TYPE_MESSAGES:
        return _TYPE_MESSAGES[kind]
    return msg


# --------------------------------------------------------------------------
# Allowed keys for extra_forbidden (navigate the model along pydantic's loc)
# --------------------------------------------------------------------------


def _expand(tp: Any) -> list[Any]:
    """Flatten Annotated / Optional / Union into their member types."""
    origin = typing.get_origin(tp)
    if origin is typing.Annotated:
        return _expand(typing.get_args(tp)[0])
    if origin is typing.Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in typing.get_args(tp):
            out.extend(_expand(arg))
        return out
    return [tp]


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _field_keys(model: type[BaseModel]) -> dict[str, Any]:
    """Input key -> annotation for a model's fields (aliases where set)."""
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        alias = field.validation_alias if isinstance(field.validation_alias, str) else None
        keys[alias or field.alias or name] = field.annotation
        if model.model_config.get("populate_by_name") or model.model_config.get(
            "validate_by_name"
        ):
            keys.setdefault(name, field.annotation)
    return keys


def _literal_values(tp: Any) -> list[Any]:
    vals: list[Any] = []
    for member in _expand(tp):
        if typing.get_origin(member) is typing.Literal:
            vals.extend(typing.get_args(member))
    return vals


def _descend(tp: Any, part: Any) -> list[Any]:
    """Types reached from ``tp`` by one loc item (may consume a union tag)."""
    out: list[Any] = []
    for member in _expand(tp):
        origin = typing.get_origin(member)
        if _is_model(member):
            keys = _field_keys(member)
            if isinstance(part, str) and part in keys:
                out.append(keys[part])
            elif part == member.__name__ or any(
                part in _literal_values(ann) for ann in keys.values()
            ):
                out.append(member)  # union member label / discriminator tag
        elif origin in (list, set, frozenset, tuple) and isinstance(part, int):
            args = [a for a in typing.get_args(member) if a is not Ellipsis]
            if origin is tuple and len(args) > 1:
                out.extend(args[part : part + 1])
            elif args:
                out.append(args[0])
        elif origin is dict and part != "[key]":
            args = typing.get_args(member)
            if len(args) == 2:
                out.append(args[1])
    return out


def _allowed_keys(model_cls: Any, loc: tuple) -> list[str] | None:
    """Field names of the model that owns ``loc``'s last item, if unambiguous."""
    current = [model_cls]
    for part in loc[:-1]:
        nxt: list[Any] = []
        for tp in current:
            nxt.extend(_descend(tp, part))
        if not nxt:
            return None
        current = nxt
    models = {m for tp in current for m in _expand(tp) if _is_model(m)}
    if len(models) != 1:
        return None
    return sorted(_field_keys(models.pop()))


# --------------------------------------------------------------------------
# Formatting & the one-stop loader
# --------------------------------------------------------------------------


def format_validation_error(
    path: str | os.PathLike,
    exc: ValidationError,
    line_map: dict,
    model_cls: type[BaseModel] | None = None,
) -> list[str]:
    """One ``path:line: dotted.path: message`` line per error, sorted by line.

    ``model_cls`` (optional) lets "unknown key" errors list the allowed keys.
    """
    path = os.fspath(path)
    rows: set[tuple[int, str, str]] = set()
    for err in exc.errors():
        raw_loc = tuple(err.get("loc", ()))
        # a validator's error may name the field it is about (ParameterError.field)
        field = getattr((err.get("ctx") or {}).get("error"), "field", None)
        if isinstance(field, str):
            raw_loc += tuple(int(p) if p.isdigit() else p for p in field.split("."))  # list indices as ints
        if err.get("type") == "union_tag_invalid":  # point at the `kind:` line itself
            raw_loc += (str((err.get("ctx") or {}).get("discriminator", "kind")).strip("'\""),)
        loc = _clean_loc(raw_loc, line_map, err.get("type", ""))
        allowed = None
        if err.get("type") == "extra_forbidden" and model_cls is not None:
            try:
                allowed = _allowed_keys(model_cls, raw_loc)
            except Exception:  # best effort only
                allowed = None
        line = line_for(line_map, loc)
        rows.add((line, _dotted(loc), _message(err, allowed)))
    return [f"{path}:{line}: {dotted}: {msg}" for line, dotted, msg in sorted(rows)]


def load_and_validate(path: str | os.PathLike, model_cls: type[BaseModel]) -> BaseModel:
    """Load ``path`` and validate it with ``model_cls.model_validate``.

    Raises ScenarioError listing every problem, one line each.
    """
    data, line_map = load_yaml(path)
    try:
        return model_cls.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(
            format_validation_error(path, exc, line_map, model_cls=model_cls)
        ) from exc
