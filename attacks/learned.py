"""Learned attacks: the score is learned from runs of the two worlds, for outputs of any shape.

A mechanism's outputs for ``n`` runs are normalised by :func:`output_table`
into one table (a 2-D array, one row per run) with a flag per column saying
whether it is discrete (integer or boolean: an index, a count, a bit) or
continuous. Accepted: an array of shape ``(n,)`` (scalars) or ``(n, d, …)``
(vectors, flattened per run), or a tuple/list/dict of such arrays (mixed
outputs, e.g. an index and a value). Anything else is refused with the shape
received and what is needed.

Three attacks learn a score from fitting runs of world 0 and world 1 (higher
means world 1), and must be fitted on runs that are never counted:

* ``histogram`` — the exact-count attack for small discrete outputs: the
  empirical log likelihood ratio of each distinct output (Jeffreys-smoothed
  counts). It is the Neyman–Pearson test itself when every output is seen
  often enough; it refuses continuous outputs and more than
  ``max_categories`` distinct ones.
* ``logistic`` — scikit-learn's logistic regression on the feature map
  (standardised continuous columns, one-hot discrete columns with few
  values); its log-odds is the score. Exact for Gaussian shifts.
* ``boosted`` — scikit-learn's ``HistGradientBoostingClassifier`` on the same
  features: non-linear (clipped Laplace ratios, interactions, mixed outputs).

Each also implements the :class:`recaudit.attacks.base.Attack` contract for
scenarios, reading the ``messages`` view (each run's released bits).
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from recaudit.mechanisms.base import LocalMechanism

from .additive import Additive
from .base import Attack, AttackError

__all__ = ["OutputTable", "output_table", "describe_outputs", "OutputAttack", "HistogramAttack",
           "LogisticAttack", "BoostedAttack", "OUTPUT_ATTACKS"]

#: A discrete column with at most this many distinct fitting values is one-hot encoded.
ONE_HOT_MAX = 32
#: The boosted trees' smallest leaf (scikit-learn's default, passed explicitly: :func:`splittable_columns` relies
#: on it).
MIN_SAMPLES_LEAF = 20


@dataclass(frozen=True)
class OutputTable:
    """Outputs of ``n`` runs as one ``(n, d)`` float table, with which columns are discrete."""

    values: np.ndarray
    discrete: np.ndarray  # (d,) bool

    def __len__(self) -> int:
        return self.values.shape[0]

    @property
    def is_scalar(self) -> bool:
        return self.values.shape[1] == 1

    def take(self, rows) -> "OutputTable":
        if isinstance(rows, np.ndarray) and rows.dtype.kind in "iu":  # np.take copies whole rows: 3x faster
            return OutputTable(np.take(self.values, rows, axis=0), self.discrete)
        return OutputTable(self.values[rows], self.discrete)


def describe_outputs(outputs) -> str:
    """A short description of what a sampler returned (type, shape, dtype)."""
    if isinstance(outputs, np.ndarray):
        return f"an array of shape {outputs.shape} and dtype {outputs.dtype}"
    if isinstance(outputs, dict):
        return "a dict {" + ", ".join(f"{k!r}: {describe_outputs(v)}" for k, v in outputs.items()) + "}"
    if isinstance(outputs, (tuple, list)):
        kinds = sorted({type(x).__name__ for x in outputs})
        if outputs and all(isinstance(x, numbers.Number) for x in outputs):
            return f"a {type(outputs).__name__} of {len(outputs)} numbers"
        if len(outputs) > 4 or outputs and all(np.ndim(x) == 0 for x in outputs):  # many parts: say what they are
            return f"a {type(outputs).__name__} of {len(outputs)} {_kinds(kinds)}"
        return f"a {type(outputs).__name__} of " + ", ".join(describe_outputs(x) for x in outputs)
    return f"a {type(outputs).__name__}"


def _kinds(names: list[str]) -> str:
    """``objects of type dict`` (the first three type names, and how many more)."""
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return "objects of type " + ", ".join(names[:3]) + more


def _object_numbers(a: np.ndarray, what: str, name: str) -> np.ndarray:
    """An object array whose every element is a real number, as floats; anything else is refused."""
    kinds = set(map(type, a.ravel().tolist()))
    odd = sorted(k.__name__ for k in kinds if not issubclass(k, numbers.Real))
    if odd:
        raise AttackError(f"{what}: {name} is an object array of shape {a.shape} holding {_kinds(odd)}; need numbers "
                         "(an object array is read only when every element is a number; labels: an array of "
                         "strings)")
    return a.astype(float)


def _component(x, n: int, what: str, name: str, max_ndim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x) if isinstance(x, np.ndarray) or not isinstance(x, (list, tuple)) else _as_array(x)
    if a.dtype.names:  # a structured array: one component per field
        parts = [_component(a[f], n, what, f"{name}.{f}", max_ndim) for f in a.dtype.names]
        return np.hstack([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if max_ndim is not None and a.ndim > max_ndim and a.shape[:1] == (n,):
        raise AttackError(f"{what}: {name} is an array of shape {a.shape}; need one output per run on axis 0 "
                         f"as ({n},) (scalars) or ({n}, d) (vectors, indices): flatten each output "
                         f"(outputs.reshape({n}, -1)) or return a tuple/dict of such arrays")
    if a.dtype.kind == "O" and a.ndim and a.shape[0] == n:
        a = _object_numbers(a, what, name)
    if a.ndim == 0 or a.shape[0] != n or a.dtype.kind not in "biuf":
        described = describe_outputs(a) if isinstance(x, np.ndarray) else describe_outputs(x)
        raise AttackError(f"{what}: {name} is {described}; "
                         f"need one output per run on axis 0: an array of shape ({n},) (scalars) or ({n}, d) "
                         f"(vectors, indices), numeric or boolean, or a tuple/dict of such arrays (mixed outputs)")
    table = a.reshape(n, -1).astype(float, copy=False)
    if np.isnan(table).any():
        raise AttackError(f"{what}: {name} contains NaN")
    return table, np.full(table.shape[1], a.dtype.kind in "biu")


def _as_array(x) -> np.ndarray:
    """A list's elements as one array (numbers: numeric; anything else: an object array, checked as such)."""
    try:
        a = np.asarray(x)
    except ValueError:  # ragged
        a = np.empty(len(x), dtype=object)
        a[:] = list(x)
    return a


def output_table(outputs, n: int, what: str = "outputs", max_ndim: int | None = None) -> OutputTable:
    """Normalise ``n`` runs' outputs into an :class:`OutputTable`; a clear :class:`AttackError` (a ``ValueError``)
    otherwise.

    ``what`` names the source in errors (e.g. ``"world 0: sample(0, n, rng)"``). ``max_ndim`` (the harness:
    2) refuses arrays of more axes instead of flattening each run's output. An object array is read only when
    every element is a number.
    """
    if isinstance(outputs, dict):
        items = list(outputs.items())
    elif isinstance(outputs, (tuple, list)) and outputs and all(np.ndim(x) > 0 for x in outputs) \
            and len(outputs) != n:
        items = [(f"part {i}", x) for i, x in enumerate(outputs)]
    else:
        items = [("the output", outputs)]
    if not items:
        raise AttackError(f"{what}: got an empty {type(outputs).__name__}; need one output per run")
    try:
        parts = [_component(x, n, what, name, max_ndim) for name, x in items]
    except ValueError as e:
        if len(items) == 1 and not isinstance(outputs, np.ndarray):
            raise AttackError(f"{what}: returned {describe_outputs(outputs)}; need one output per run on axis 0: "
                             f"an array of shape ({n},) (scalars) or ({n}, d) (vectors, indices), or a tuple/dict "
                             f"of such arrays (mixed outputs)") from None
        raise e from None
    values = parts[0][0] if len(parts) == 1 else np.hstack([p[0] for p in parts])
    return OutputTable(values, np.concatenate([p[1] for p in parts]))


class OutputAttack(Attack):
    """A learned attack on output tables: ``fit_outputs`` on fitting runs, ``score_outputs`` on others."""

    requires_fit: ClassVar[bool] = True
    views = ("messages",)

    def refusal(self, mechanism, view) -> str | None:
        """In scenarios a learned attack reads the messages of a local mechanism (one array row per user); a
        central or joint mechanism's messages go to a trusted server as other types (sparse rows)."""
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and getattr(mechanism, "claim_model", "local") != "local":
            reason = (f"{self.kind} learns from a local mechanism's messages; {mechanism.kind} makes a "
                      f"{mechanism.claim_model} claim (its messages go to a trusted server)")
        return reason

    def fit_outputs(self, table0: OutputTable, table1: OutputTable, seed: Any = 0) -> "OutputAttack":
        raise NotImplementedError

    def score_outputs(self, table: OutputTable) -> np.ndarray:
        raise NotImplementedError

    # --- the Attack contract (scenarios): the messages view's bits are the output
    @staticmethod
    def _table(view) -> OutputTable:
        if view.kind != "messages" or view.messages is None:
            raise AttackError(f"attack: learned attacks read the 'messages' view in scenarios, not {view.kind!r}")
        return output_table(np.asarray(view.messages), len(view.messages), "messages view")

    def fit(self, mechanism, pair, view, worlds) -> None:
        table = self._table(view)
        worlds = np.asarray(worlds)
        self.fit_outputs(table.take(worlds == 0), table.take(worlds == 1))

    def scores(self, mechanism, pair, view) -> np.ndarray:
        return self.score_outputs(self._table(view))


def unique_rows(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, axis=0, return_inverse=True)``, the same rows in the same (lexicographic) order.

    Integer-valued rows whose column ranges fit one int64 are read as one mixed-radix number each (the first
    column most significant, so the order is lexicographic) and sorted as a 1-D array: for 10⁶ runs of ten
    columns that is ~20x faster than NumPy's row-wise sort.
    """
    values = np.asarray(values)
    if values.ndim == 2 and values.size and np.issubdtype(values.dtype, np.number):
        low, high = values.min(axis=0), values.max(axis=0)
        span = (high - low).astype(float) + 1.0
        if (np.all(np.isfinite(span)) and float(np.prod(span)) < 2.0 ** 62
                and np.array_equal(values, np.round(values))):
            strides = np.append(np.cumprod(span[:0:-1].astype(np.int64))[::-1], 1)
            keys = (values - low).astype(np.int64) @ strides
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            return values[first], inverse.ravel()
    rows, inverse = np.unique(values, axis=0, return_inverse=True)
    return rows, inverse.ravel()


@dataclass
class HistogramAttack(OutputAttack, kind="histogram"):
    """Exact counts: score = smoothed log P̂(output | world 1) − log P̂(output | world 0).

    For small discrete outputs (indices, bit vectors, capped counts). Counts
    get Jeffreys' ½ per cell; an output never seen while fitting scores the
    prior log ratio (0 for equal fitting sizes).
    """

    max_categories: int = 4096

    def refusal(self, mechanism, view) -> str | None:
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and not isinstance(mechanism, LocalMechanism):
            reason = (f"{self.kind} counts exact outputs: it reads a local randomizer's discrete messages (a "
                      f"LocalMechanism); {mechanism.kind}'s are not (use logistic or boosted)")
        return reason

    def __post_init__(self) -> None:
        if int(self.max_categories) < 2:
            raise AttackError("max_categories must be >= 2", field="max_categories")

    def fit_outputs(self, table0, table1, seed=0):
        if not table0.discrete.all():
            raise AttackError("the histogram attack counts exact outputs and needs discrete ones (integer or "
                             f"boolean columns); columns {np.flatnonzero(~table0.discrete).tolist()} are "
                             "continuous: use attack='logistic' or 'boosted'")
        n0, n1 = len(table0), len(table1)
        cats, inverse = unique_rows(np.vstack([table0.values, table1.values]))
        if cats.shape[0] > self.max_categories:
            raise AttackError(f"the histogram attack saw {cats.shape[0]} distinct outputs in its fitting runs "
                             f"(max_categories = {self.max_categories}); it is for small discrete outputs: "
                             "use attack='logistic' or 'boosted'")
        c0 = np.bincount(inverse[:n0], minlength=cats.shape[0])
        c1 = np.bincount(inverse[n0:], minlength=cats.shape[0])
        k = cats.shape[0] + 1  # one cell more for outputs never seen
        self._cats = cats
        self._log_ratio = np.log((c1 + 0.5) / (n1 + 0.5 * k)) - np.log((c0 + 0.5) / (n0 + 0.5 * k))
        self._unseen = math.log(0.5 / (n1 + 0.5 * k)) - math.log(0.5 / (n0 + 0.5 * k))
        return self

    def score_outputs(self, table):
        cats = self._cats
        merged, inverse = unique_rows(np.vstack([cats, table.values]))
        lookup = np.full(merged.shape[0], self._unseen)
        lookup[inverse[:cats.shape[0]]] = self._log_ratio
        return lookup[inverse[cats.shape[0]:]]


class _FeatureMap:
    """Standardised continuous columns; discrete columns with ≤ ONE_HOT_MAX fitting values one-hot (plus raw)."""

    def __init__(self, values: np.ndarray, discrete: np.ndarray):
        self.levels = {}
        for j in np.flatnonzero(discrete):
            levels = np.unique(values[:, j])
            if levels.size <= ONE_HOT_MAX:
                self.levels[int(j)] = levels
        self.mean = values.mean(axis=0)
        self.scale = values.std(axis=0)
        self.scale[self.scale == 0] = 1.0

    def __call__(self, values: np.ndarray) -> np.ndarray:
        parts = [(values - self.mean) / self.scale]
        for j, levels in self.levels.items():
            parts.append((values[:, [j]] == levels[None, :]).astype(float))
        return np.hstack(parts)


def _fit_rows(table0, table1, max_fit: int | None) -> tuple[np.ndarray, np.ndarray]:
    if max_fit is not None:
        table0, table1 = table0.take(slice(0, max_fit)), table1.take(slice(0, max_fit))
    x = np.vstack([table0.values, table1.values])
    y = np.repeat([0, 1], [len(table0), len(table1)])
    return x, y


@dataclass
class LogisticAttack(OutputAttack, kind="logistic"):
    """scikit-learn ``LogisticRegression`` on the feature map; score = its log-odds."""

    C: float = 1.0
    max_fit: int | None = 50_000

    def fit_outputs(self, table0, table1, seed=0):
        from sklearn.linear_model import LogisticRegression

        x, y = _fit_rows(table0, table1, self.max_fit)
        self._features = _FeatureMap(x, table0.discrete)
        with _one_thread():
            self._model = LogisticRegression(C=self.C, max_iter=1000).fit(self._features(x), y)
        return self

    def score_outputs(self, table):
        with _one_thread():
            return self._model.decision_function(self._features(table.values))


@dataclass
class BoostedAttack(OutputAttack, kind="boosted"):
    """scikit-learn ``HistGradientBoostingClassifier`` on the feature map; score = its raw log-odds.

    For speed it is fitted on at most ``max_fit`` runs per world with early stopping, and, for continuous
    outputs, an additive model (logistic regression on piecewise-linear splines of every column: the exact
    form of the log ratio of independent per-column noise, e.g. Laplace or Gaussian histograms) on the
    first ``additive_fit`` of them; the one with the smaller log-loss on ``held_out`` further fitting runs
    per world scores. Seeded from the audit's seed (the early-stopping split is random).
    """

    max_iter: int = 200
    learning_rate: float = 0.1
    max_leaf_nodes: int = 15
    max_fit: int | None = 50_000
    held_out: int = 20_000
    additive_fit: int = 50_000  # runs per world the additive model is fitted on

    def fit_outputs(self, table0, table1, seed=0):
        from sklearn.ensemble import HistGradientBoostingClassifier

        fit = min(len(table0), len(table1)) if self.max_fit is None else self.max_fit
        fit = min(fit, len(table0) // 2, len(table1) // 2) if min(len(table0), len(table1)) > 1 else fit
        # only the first fit + held_out runs per world are read: the trees' features are made for those alone
        table0, table1 = (self._tree_table(t.take(slice(0, fit + self.held_out))) for t in (table0, table1))
        x, y = _fit_rows(table0, table1, fit)
        check = [t.take(slice(fit, fit + self.held_out)) for t in (table0, table1)]
        sequence = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
        random_state = int(sequence.generate_state(1)[0])
        self._features = _FeatureMap(x, table0.discrete)
        features = self._features(x)
        self._splittable = splittable_columns(features, MIN_SAMPLES_LEAF)
        with _one_thread():
            boosted = HistGradientBoostingClassifier(
                max_iter=self.max_iter, learning_rate=self.learning_rate, max_leaf_nodes=self.max_leaf_nodes,
                min_samples_leaf=MIN_SAMPLES_LEAF, early_stopping=True,
                random_state=random_state).fit(features[:, self._splittable], y)
            self._model, self._additive = boosted, None
            columns = self._additive_columns(table0)
            if columns and min(len(c) for c in check) > 0:
                few = np.flatnonzero((np.arange(len(y)) - np.where(y == 1, fit, 0)) < self.additive_fit)
                additive = Additive(x[few, :columns], y[few])
                held = np.vstack([c.values for c in check])
                truth = np.repeat([0, 1], [len(c) for c in check])
                worse = _log_losses(additive.decision(held[:, :columns]), truth) - _log_losses(
                    boosted.decision_function(self._tree_features(held)), truth)
                # the additive model scores a million runs in a fraction of the trees' time: it is kept unless
                # the trees are better by more than two standard errors of the paired difference (one-SE rule)
                if worse.mean() <= 2.0 * worse.std() / math.sqrt(worse.size):
                    self._additive = additive
        return self

    def _tree_features(self, values: np.ndarray) -> np.ndarray:
        """The trees' input: the feature map's columns a split can use (:func:`splittable_columns`)."""
        return self._features(values)[:, self._splittable]

    def _tree_table(self, table: OutputTable) -> OutputTable:
        """What the trees read of the output (the output itself; ``sparse_boosted`` adds features)."""
        return table

    def _additive_columns(self, table) -> int:
        """How many leading columns the additive model reads (0: none; it is for continuous outputs only)."""
        return 0 if table.discrete.any() else table.values.shape[1]

    def score_outputs(self, table):
        if self._additive is not None:
            return self._additive.decision(table.values[:, :self._additive.columns])
        if len(table) > 1 and table.discrete.all():  # a run's score is a function of its row: each distinct row once
            rows, inverse = unique_rows(table.values)
            if rows.shape[0] < len(table):
                return self._tree_scores(OutputTable(rows, table.discrete))[inverse]
        return self._tree_scores(table)

    def _tree_scores(self, table: OutputTable) -> np.ndarray:
        with _one_thread():
            return self._model.decision_function(self._tree_features(self._tree_table(table).values))


def splittable_columns(features: np.ndarray, min_leaf: int) -> np.ndarray:
    """The columns of ``features`` a tree with leaves of at least ``min_leaf`` rows can split, as indices.

    A column whose rows all but fewer than ``min_leaf`` share one value is never split (one side of any split
    would hold only the others) on these rows or any subset of them (the early-stopping split): leaving it out
    gives the same trees and scores, and saves its histograms in every node (``sparse_boosted``'s count and
    column features on a continuous histogram: 11 of 16 columns). The shared value is looked for in three rows;
    a column is kept (never wrongly dropped) when all three are among the others. At least one column is kept.
    """
    n = features.shape[0]
    others = np.min([(features != features[r]).sum(axis=0) for r in sorted({0, n // 2, n - 1})], axis=0) \
        if n else np.zeros(features.shape[1], dtype=int)
    keep = np.flatnonzero(others >= min_leaf)
    return keep if keep.size else np.arange(min(1, features.shape[1]))


def _one_thread():
    """OpenMP and BLAS limited to one thread: on a shared machine their threads spin more than they work
    (measured: the boosted fit took 28 s of CPU with two threads on a busy 2-core machine, 0.8 s with one; the
    logistic fits' BLAS products 1.2 s of a 10⁶-run audit's 3.4 s)."""
    return _thread_pools().limit(limits=1)


@functools.lru_cache(maxsize=1)
def _thread_pools():
    """The process's thread pools, found once (2 ms each time; a limit on them then costs 30 µs). First asked
    inside a fit, once scikit-learn has loaded its OpenMP runtime."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def _log_losses(log_odds: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Per-run log-loss of log-odds predictions of labels ``truth`` (0/1)."""
    return np.logaddexp(0.0, np.where(truth == 1, -log_odds, log_odds))


#: The learned attacks by name (the harness's ``attack=`` and scenarios' ``kind``).
OUTPUT_ATTACKS: dict[str, type[OutputAttack]] = {cls.kind: cls for cls in (HistogramAttack, LogisticAttack,
                                                                             BoostedAttack)}
