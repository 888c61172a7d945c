"""Candidate neighbouring pairs for the harness's neighbour search: classic difference patterns of query answers.

Re-exported by :mod:`recaudit.audits.harness` (``NeighbourCandidates``, ``PATTERNS``, ``candidate_pairs``).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from recaudit.core.errors import ParameterError

__all__ = ["NeighbourCandidates", "PATTERNS", "candidate_pairs"]


class NeighbourCandidates(tuple):
    """Candidate neighbouring pairs ``((d0, d1), …)`` audited as one family (Holm); see :func:`candidate_pairs`."""

    def __new__(cls, pairs):
        pairs = tuple(tuple(p) for p in pairs)
        if not pairs or any(len(p) != 2 for p in pairs):
            raise ParameterError("pairs", "NeighbourCandidates needs a non-empty list of (d0, d1) pairs")
        return super().__new__(cls, pairs)


def _half(d: int) -> np.ndarray:
    return np.where(np.arange(d) < (d + 1) // 2, 1.0, -1.0)


#: Classic difference patterns for a vector of query answers (Ding et al., StatDP, CCS 2018): d1 = d0 + pattern.
PATTERNS: dict[str, Callable[[int], np.ndarray]] = {
    "one_up": lambda d: np.eye(d)[0],
    "one_down": lambda d: -np.eye(d)[0],
    "one_up_rest_down": lambda d: 2 * np.eye(d)[0] - 1,
    "one_down_rest_up": lambda d: 1 - 2 * np.eye(d)[0],
    "all_up": lambda d: np.ones(d),
    "all_down": lambda d: -np.ones(d),
    "half_up_half_down": _half,
}


def candidate_pairs(base, patterns=tuple(PATTERNS)) -> NeighbourCandidates:
    """``(base, base + pattern)`` for each named pattern in :data:`PATTERNS` (duplicates dropped)."""
    base = np.asarray(base, dtype=float)
    if base.ndim != 1 or base.size == 0:
        raise ParameterError("base", f"base must be a non-empty vector of query answers, got shape {base.shape}")
    pairs, seen = [], set()
    for name in patterns:
        if name not in PATTERNS:
            raise ParameterError("patterns", f"unknown pattern {name!r}; known: {', '.join(PATTERNS)}")
        other = base + PATTERNS[name](base.size)
        if other.tobytes() not in seen:
            seen.add(other.tobytes())
            pairs.append((base.copy(), other))
    return NeighbourCandidates(pairs)
