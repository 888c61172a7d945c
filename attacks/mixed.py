"""The likelihood ratio of a mixed output, factored by its type: exact counts for the discrete part, a fitted
density ratio for the numbers given it.

Many mechanisms release a discrete *type* (which queries were answered, an index, ⊥ or ⊤ at each position)
with numbers whose meaning depends on it (the value released at the answered position). The likelihood
ratio of such an output factors exactly:

    log p₁(d, x) / p₀(d, x) = log P₁(d) / P₀(d) + log p₁(x | d) / p₀(x | d),

``d`` the row of discrete columns and ``x`` the continuous ones. ``mixed_histogram`` estimates the first term
as the ``histogram`` attack does (Jeffreys-smoothed counts of each distinct ``d``) and the second, in every
type seen often enough in both worlds, by logistic regression on the continuous columns that vary within
that type, each expanded into piecewise-linear pieces between quantile knots that are denser in the tails
(an additive log ratio, exact for one number per type and for independent per-column noise). A classifier
over the whole row must learn the interaction of "where" and "how much" from the few runs of each type;
here each type's numbers are compared only with the same type's, and every fitting run counts. Types seen
rarely score their counts alone.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms.base import LocalMechanism

from .base import AttackError
from .learned import OutputAttack, OutputTable, _one_thread, unique_rows

__all__ = ["MixedHistogramAttack", "is_mixed"]

#: quantile knots of a type's continuous column, denser in the tails where rare-event cuts fall
TAIL_QUANTILES = np.array([0.0, 0.001, 0.005, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.65, 0.8, 0.9, 0.95, 0.98,
                           0.995, 0.999, 1.0])
#: fitting runs (both worlds) a knot needs beyond it, on its tail's side
PIECE_RUNS = 100


def is_mixed(table: OutputTable) -> bool:
    """Some columns discrete, some continuous."""
    return bool(table.discrete.any() and not table.discrete.all())


class _TypeRatio:
    """log p₁(x | d) − log p₀(x | d) for one type: logistic regression on tail-dense piecewise-linear pieces."""

    def __init__(self, x: np.ndarray, y: np.ndarray, columns: np.ndarray):
        from sklearn.linear_model import LogisticRegression

        self.columns = columns
        # a knot only where PIECE_RUNS fitting runs lie beyond it: tail pieces fitted on a handful of runs
        # would decide the rare-event cuts by noise
        q = TAIL_QUANTILES[np.minimum(TAIL_QUANTILES, 1 - TAIL_QUANTILES) * len(y) >= PIECE_RUNS]
        q = np.r_[0.0, q, 1.0]
        x = x[:, columns]
        self.knots = [np.unique(np.quantile(c, q)) for c in x.T]
        self.mean, self.scale = x.mean(axis=0), np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
        with _one_thread():
            self.model = LogisticRegression(C=1.0, max_iter=1000).fit(self._features(x), y)
        # the logistic's log-odds carry the type's fitting prior log(n₁/n₀); the conditional ratio does not
        self.prior = math.log(max(int(y.sum()), 1) / max(int((1 - y).sum()), 1))

    def _features(self, x: np.ndarray) -> np.ndarray:
        parts = [(x - self.mean) / self.scale]
        for j, k in enumerate(self.knots):
            if k.size > 1:
                width = np.maximum(np.diff(k), 1e-12)
                parts.append((np.clip(x[:, [j]], k[:-1], k[1:]) - k[:-1]) / width)
        return np.hstack(parts)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with _one_thread():
            return self.model.decision_function(self._features(x[:, self.columns])) - self.prior


@dataclass
class MixedHistogramAttack(OutputAttack, kind="mixed_histogram"):
    """Counts of each discrete type plus, within each type seen often, a fitted ratio of its numbers.

    ``max_categories`` distinct types at most (else refused, as ``histogram``); a type's numbers are modelled
    when it has ``min_type_runs`` fitting runs in each world (at most ``max_type_runs`` per world are read).
    """

    max_categories: int = 4096
    min_type_runs: int = 200
    max_type_runs: int = 100_000

    def refusal(self, mechanism, view) -> str | None:
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and not isinstance(mechanism, LocalMechanism):
            reason = (f"{self.kind} counts exact output types: it reads a local randomizer's messages (a "
                      f"LocalMechanism); {mechanism.kind}'s are not (use logistic or boosted)")
        return reason

    def fit_outputs(self, table0, table1, seed=0):
        discrete = table0.discrete
        n0, n1 = len(table0), len(table1)
        values = np.vstack([table0.values, table1.values])
        types, inverse = unique_rows(values[:, discrete])
        if types.shape[0] > self.max_categories:
            raise AttackError(f"the mixed_histogram attack saw {types.shape[0]} distinct discrete parts in its "
                              f"fitting runs (max_categories = {self.max_categories}): use attack='logistic' or "
                              "'boosted'")
        world = np.repeat([0, 1], [n0, n1])
        c0 = np.bincount(inverse[:n0], minlength=types.shape[0])
        c1 = np.bincount(inverse[n0:], minlength=types.shape[0])
        k = types.shape[0] + 1
        self._types = types
        self._log_ratio = np.log((c1 + 0.5) / (n1 + 0.5 * k)) - np.log((c0 + 0.5) / (n0 + 0.5 * k))
        self._unseen = math.log(0.5 / (n1 + 0.5 * k)) - math.log(0.5 / (n0 + 0.5 * k))
        self._ratios: dict[int, _TypeRatio] = {}
        continuous = np.flatnonzero(~discrete)
        order = np.argsort(inverse, kind="stable")
        starts = np.searchsorted(inverse[order], np.arange(types.shape[0] + 1))
        for t in np.flatnonzero((c0 >= self.min_type_runs) & (c1 >= self.min_type_runs)):
            rows = order[starts[t]:starts[t + 1]]
            rows = np.concatenate([rows[world[rows] == w][:self.max_type_runs] for w in (0, 1)])
            x = values[rows]
            varying = continuous[x[:, continuous].std(axis=0) > 0]
            if varying.size:
                self._ratios[int(t)] = _TypeRatio(x, world[rows], varying)
        return self

    def score_outputs(self, table):
        types = self._types
        merged, inverse = unique_rows(np.vstack([types, table.values[:, table.discrete]]))
        lookup = np.full(merged.shape[0], -1)
        lookup[inverse[:types.shape[0]]] = np.arange(types.shape[0])
        which = lookup[inverse[types.shape[0]:]]
        score = np.where(which >= 0, self._log_ratio[np.maximum(which, 0)], self._unseen)
        if self._ratios:
            order = np.argsort(which, kind="stable")
            starts = np.searchsorted(which[order], np.arange(types.shape[0] + 1))
            for t, ratio in self._ratios.items():
                rows = order[starts[t]:starts[t + 1]]
                if rows.size:
                    score[rows] += ratio(table.values[rows])
        return score
