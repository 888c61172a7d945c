"""Features of the rare coordinates, for sparse outputs: many ⊥ (a column's usual value) and a rare answer.

Sparse-vector-style mechanisms release a row that is almost always the same
(⊥ in every position) and, rarely, an answer somewhere: a ⊤, or a number.
The signal sits in *where* the rare entry is and *what* it holds, spread
over many columns that are each almost constant — hard for a classifier that
looks at one column at a time. :class:`RareFeatures` learns each column's
usual value (its mode in the fitting runs) and adds, per run, the number of
unusual entries, the first and last unusual column, and the first unusual
continuous column with its value. ``sparse_boosted`` is the gradient-boosted
classifier on the output plus these features.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .learned import BoostedAttack, OutputTable

__all__ = ["RareFeatures", "SparseBoostedAttack"]


def _modes(values: np.ndarray) -> np.ndarray:
    """Each column's most frequent value (the smallest among ties)."""
    modes = np.empty(values.shape[1])
    for j, column in enumerate(values.T):  # one np.unique per column, not per run
        levels, counts = np.unique(column, return_counts=True)
        modes[j] = levels[np.argmax(counts)]
    return modes


class RareFeatures:
    """Per run: count of unusual entries, first/last unusual column, first unusual continuous column and value."""

    #: the added columns: the first four are discrete (counts and column indices), the value continuous
    DISCRETE = np.array([True, True, True, True, False])

    def __init__(self, table: OutputTable):
        self.modes = _modes(table.values)
        self.continuous = ~table.discrete

    def __call__(self, table: OutputTable) -> OutputTable:
        values = table.values
        n, d = values.shape
        rare = values != self.modes[None, :]
        found = rare.any(axis=1)
        first = np.where(found, rare.argmax(axis=1), -1)
        last = np.where(found, d - 1 - rare[:, ::-1].argmax(axis=1), -1)
        numeric = rare & self.continuous[None, :]
        has_value = numeric.any(axis=1)
        column = numeric.argmax(axis=1)
        value = np.where(has_value, values[np.arange(n), column], 0.0)
        extra = np.column_stack([rare.sum(axis=1), first, last, np.where(has_value, column, -1), value])
        return OutputTable(np.hstack([values, extra]), np.concatenate([table.discrete, self.DISCRETE]))


@dataclass
class SparseBoostedAttack(BoostedAttack, kind="sparse_boosted"):
    """``boosted`` on the output plus :class:`RareFeatures` (for sparse outputs: many ⊥, a rare answer)."""

    def fit_outputs(self, table0, table1, seed=0):
        self._rare = RareFeatures(OutputTable(np.vstack([table0.values, table1.values]), table0.discrete))
        self._output_columns = table0.discrete.size
        return super().fit_outputs(table0, table1, seed)

    def _tree_table(self, table: OutputTable) -> OutputTable:
        return self._rare(table)

    def _additive_columns(self, table) -> int:
        # the additive model reads the output's own columns when they are all continuous (rare features aside)
        return 0 if table.discrete[:self._output_columns].any() else self._output_columns
