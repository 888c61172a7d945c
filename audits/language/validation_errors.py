"""pydantic validation errors rewritten as ``file:line: dotted.path: message`` lines, and the one-stop loader.

``format_validation_error(path, exc, line_map, model_cls=None)`` -> ``list[str]``;
``load_and_validate(path, model_cls)`` -> validated model instance (raises
``ScenarioError`` listing every problem, one line each); ``line_for(line_map, loc)``
-> the line of the longest known prefix of ``loc``. The line map comes from
:func:`recaudit.audits.language.yamlio.load_yaml`.
"""
from __future__ import annotations

import os
import types
import typing
from typing import Any, Iterable

from pydantic import BaseModel, ValidationError

from .yamlio import ScenarioError, load_yaml
from .yamllimits import dotted


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
        rows.add((line, dotted(loc), _message(err, allowed)))
    # line 0: data held in memory (``scenario_from_data``), which has no lines
    return [f"{path}:{line}: {dotted}: {msg}" if line else f"{path}: {dotted}: {msg}"
            for line, dotted, msg in sorted(rows)]


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
