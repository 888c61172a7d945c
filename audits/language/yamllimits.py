"""Limits on what a scenario document holds, checked before the loader builds it.

``MAX_EXPANDED_VALUES`` bounds the values, written out or through aliases
(alias bombs); ``MAX_FLOW_DEPTH`` bounds the nesting of ``[ ]`` and ``{ }``:
PyYAML's scanner is quadratic in flow nesting and only fails on Python's
recursion limit, so a deep document is refused from a linear libyaml pass first.
Each check returns the one-line refusal (``file:line: ...``) or ``None``.
"""

from __future__ import annotations

from typing import Any, Iterable

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_ROOT_LABEL = "<root>"
# Upper bound on the values a document holds once every alias is expanded:
# a scenario has a few hundred; an alias bomb has billions.
MAX_EXPANDED_VALUES = 100_000
# Deepest nesting of flow collections ([ ] and { }) a document may have: a scenario
# has two or three; PyYAML itself fails on Python's recursion limit near 300.
MAX_FLOW_DEPTH = 100


def flow_nesting_refusal(text: str, path: str) -> str | None:
    """The refusal of a text whose ``[ ]``/``{ }`` nest deeper than ``MAX_FLOW_DEPTH``, at the line where they do."""
    if text.count("[") + text.count("{") <= MAX_FLOW_DEPTH or not hasattr(yaml, "CSafeLoader"):
        return None  # too few brackets to nest that deep (or no libyaml: the loader's RecursionError catches it)
    depth = 0
    try:
        for event in yaml.parse(text, Loader=yaml.CSafeLoader):
            if isinstance(event, yaml.CollectionStartEvent) and event.flow_style:
                depth += 1
                if depth > MAX_FLOW_DEPTH:
                    return _too_deep(path, event.start_mark.line + 1)
            elif isinstance(event, yaml.CollectionEndEvent) and depth:
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        # libyaml scans a line's tokens before their events, so its own limit (1,000 levels) may come first
        if "nesting depth" in (exc.problem or "") and exc.problem_mark is not None:
            return _too_deep(path, exc.problem_mark.line + 1)
    except yaml.YAMLError:
        pass  # the loader reports it, with its line
    return None


def _too_deep(path: str, line: int) -> str:
    return f"{path}:{line}: YAML error: nested too deeply (more than {MAX_FLOW_DEPTH} levels of [ ] or {{ }})"


def too_large(root: Node, sizes: dict[int, int], path: str) -> str:
    """The refusal of a document over ``MAX_EXPANDED_VALUES``: what aliases expand to, or where the values are."""
    size = sizes[id(root)]
    if size > len(sizes):  # a node counted more than once: an alias repeats it
        return (f"{path}:{root.start_mark.line + 1}: aliases expand the document to {size:.3g} values (more than "
                f"{MAX_EXPANDED_VALUES}); write the values out")
    node, loc = root, []
    while True:  # down to the part that holds most of the values
        pairs = (node.value if isinstance(node, MappingNode) else
                 [(i, child) for i, child in enumerate(node.value)] if isinstance(node, SequenceNode) else [])
        key, child = max(pairs, key=lambda p: sizes[id(p[1])], default=(None, None))
        if child is None or sizes[id(child)] <= sizes[id(node)] // 2:
            break
        loc.append(key if isinstance(key, int) else key.value if isinstance(key, ScalarNode) else "?")
        node = child
    return _holds_too_many(path, node.start_mark.line + 1, loc, sizes[id(node)])


def _holds_too_many(path: str, line: int, loc: list, count: int) -> str:
    return (f"{path}:{line}: {dotted(loc)}: holds {count:,} values (a whole scenario may hold "
            f"{MAX_EXPANDED_VALUES:,}; shipped ones hold a few hundred)")


def written_values_refusal(text: str, path: str) -> str | None:
    """The refusal of a long text holding more than ``MAX_EXPANDED_VALUES`` values written out, counted from
    libyaml's parse events (seconds faster than composing them); aliases count once here."""
    if len(text) < 100_000:
        return None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    stack: list[list] = [[[], 0, 1, False, None]]  # [loc, values, line, is mapping, pending key]
    big: list[tuple[list, int, int]] = []
    try:
        for event in yaml.parse(text, Loader=loader):
            frame = stack[-1]
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                key = (frame[4] if frame[3] else frame[4] or 0) if len(stack) > 1 else None
                loc = frame[0] + ([] if key is None else [key])
                stack.append([loc, 1, event.start_mark.line + 1, isinstance(event, yaml.MappingStartEvent), None])
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                loc, count, line = stack.pop()[:3]
                if count > MAX_EXPANDED_VALUES // 2:
                    big.append((loc, count, line))
                _count_value(stack[-1], count, None)
            elif isinstance(event, (yaml.ScalarEvent, yaml.AliasEvent)):
                _count_value(frame, 1, getattr(event, "value", None))
    except yaml.YAMLError:
        return None  # the loader reports it, with its line
    if big and big[-1][1] > MAX_EXPANDED_VALUES:
        total = big[-1][1]
        loc, count, line = max((b for b in big if b[1] > total // 2), key=lambda b: len(b[0]))
        return _holds_too_many(path, line, loc, count)
    return None


def _count_value(frame: list, count: int, scalar) -> None:
    """A finished value of ``count`` values inside ``frame``: mapping keys alternate with their values;
    a sequence's pending key is the next item's index."""
    if not frame[3]:
        frame[4] = (frame[4] or 0) + 1
    elif frame[4] is None:
        frame[4] = scalar if scalar is not None else "?"
    else:
        frame[4] = None
    frame[1] += count


def dotted(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or _ROOT_LABEL
