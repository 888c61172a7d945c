"""A black-box mechanism's outputs turned into scores for ``recaudit.audits.harness``: hand-written scores checked, a
determinism probe, labels encoded, and learned attacks fitted on a share of the selection runs."""
from __future__ import annotations

import logging
import math
import time
import warnings
from typing import Callable

import numpy as np

from recaudit.core.errors import ParameterError, RecauditError
from recaudit.attacks.learned import OUTPUT_ATTACKS, HistogramAttack, OutputAttack, unique_rows
from recaudit.attacks.mixed import MixedHistogramAttack, is_mixed
from recaudit.attacks.sparse import SparseBoostedAttack

from .progress_log import PROGRESS_EVERY, duration, visible
from .stats.thresholds import select_threshold

#: the learned attacks ``attack=`` may name
LEARNED = {**OUTPUT_ATTACKS, SparseBoostedAttack.kind: SparseBoostedAttack,
           MixedHistogramAttack.kind: MixedHistogramAttack}
#: Share of the selection runs a learned attack is fitted on (the rest choose the threshold).
FIT_FRACTION = 0.5


def _hand_scores(outputs, score: Callable, trials: int, world: int) -> np.ndarray:
    s = np.asarray(score(outputs), dtype=float).ravel()
    if s.size != trials:
        hint = ""
        if s.size > trials and s.size % trials == 0:
            hint = (f"; the outputs look like vectors of {s.size // trials} per trial: a score must reduce each "
                    "output to one number, or drop score= (and the mechanism's .score) to let a learned "
                    "attack read them")
        raise ParameterError("score", f"world {world}: expected {trials} scores (one per trial), got {s.size}{hint}")
    return s


#: draws per world of the determinism probe and the time estimate before an audit
PROBE_DRAWS = 16
#: an audit expected to take longer than this many seconds logs its estimate first
ESTIMATE_AFTER_SECONDS = 10.0
log = logging.getLogger("recaudit")


def _same_outputs(a, b) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_outputs(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and not isinstance(a, np.ndarray):
        return isinstance(b, (tuple, list)) and len(a) == len(b) and all(map(_same_outputs, a, b))
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and bool(np.all((a == b) | ((a != a) & (b != b))))  # NaN equals NaN here


def _probe(mechanism, value, trials: int, seed: np.random.SeedSequence,
           progress: bool | None = None) -> tuple[str | None, Callable[[str], None]]:
    """Sample ``PROBE_DRAWS`` twice with one seed: why the run will not reproduce (None: it will), and a
    ``step(what)`` that logs the audit's steps when ``progress`` is on (None: when the audit is expected to
    take over ``PROGRESS_EVERY`` seconds at the probe's pace; the estimate is logged first, and a stderr
    handler added when logging is not set up)."""
    start = time.perf_counter()
    first = mechanism.sample(value, PROBE_DRAWS, np.random.default_rng(seed))
    second = mechanism.sample(value, PROBE_DRAWS, np.random.default_rng(seed))
    expected = (time.perf_counter() - start) / (2 * PROBE_DRAWS) * 2 * trials
    on = progress if progress is not None else expected > PROGRESS_EVERY
    if on:
        visible()
    if on or expected > ESTIMATE_AFTER_SECONDS:
        log.info("the audit will take about %s (%s draws per world at the probe's pace)", duration(expected),
                 f"{trials:,}")
    declared = getattr(mechanism, "not_reproducible", None)
    if declared:
        reason = declared
    elif not _same_outputs(first, second):
        reason = ("the same seed gave different outputs in a probe of two samples: the mechanism draws "
                  "randomness it is not given through rng")
    else:
        reason = None
    if reason:  # shown on every audit (pytest lists it under passing tests too), not only in failure messages
        warnings.warn(NotReproducibleWarning(f"{type(mechanism).__name__}: NOT REPRODUCIBLE: {reason}"), stacklevel=4)
    return reason, (_Steps(expected) if on else lambda what: None)


class NotReproducibleWarning(UserWarning, RecauditError):
    """The seed does not reproduce the audit (the probe's two draws with one seed differed, or the mechanism
    says so): its figures cannot be re-run exactly."""


class _Steps:
    """Logs ``what`` with the time spent and the time left of an audit expected to take ``expected`` s."""

    def __init__(self, expected: float):
        self.expected, self.began = expected, time.monotonic()

    def __call__(self, what: str) -> None:
        spent = time.monotonic() - self.began
        left = f", about {duration(self.expected - spent)} left" if self.expected > spent else ""
        log.info("%s: %s in%s", what, duration(spent), left)


def _encode_categories(outputs: list) -> list:
    """Outputs that are labels (arrays of strings) as integer codes, the same code for a label in both worlds.

    Object arrays are not labels: their text (``str`` of an object holds its address) would tell the worlds
    apart by where Python put them. They are read as numbers, or refused (``output_table``).
    """
    arrays = [np.asarray(out) if not isinstance(out, (dict, tuple, list)) else None for out in outputs]
    if any(a is None or a.dtype.kind not in "US" for a in arrays):
        return outputs
    labels = np.concatenate([a.reshape(len(a), -1) for a in arrays]).astype(str)
    _, codes = np.unique(labels, return_inverse=True)
    codes = codes.reshape(labels.shape).astype(np.int64)
    split = np.cumsum([len(a) for a in arrays])[:-1]
    return [c.reshape(a.shape) for c, a in zip(np.split(codes, split), arrays)]


def _split_sizes(n: int, selection_fraction: float) -> int:
    k = int(math.floor(selection_fraction * n))
    if k < 1 or k >= n:
        raise ParameterError("trials", f"trials = {n} per world leaves no selection or no evaluation run")
    return k


def _auto_candidates(table0, table1) -> list[OutputAttack]:
    """What ``auto`` chooses among: the histogram alone for small discrete outputs; for mixed outputs whose
    discrete part takes few values, ``mixed_histogram`` (the likelihood ratio factored by the output's type:
    counts of each discrete part, a fitted ratio of the numbers within it) and ``logistic``, and
    ``sparse_boosted`` too while the fitting runs are no more than it reads (``max_fit`` per world); else
    ``logistic`` (exact for Gaussian shifts) and ``sparse_boosted`` (gradient boosting on the output plus
    features of its rare coordinates: non-linear, and it finds a rare answer among many ⊥).
    """
    if table0.discrete.all():
        histogram = HistogramAttack()
        distinct = unique_rows(np.vstack([table0.values, table1.values]))[0].shape[0]
        if distinct <= histogram.max_categories:
            return [histogram]
    if is_mixed(table0):
        mixed = MixedHistogramAttack()
        types = unique_rows(np.vstack([table0.values, table1.values])[:, table0.discrete])[0].shape[0]
        if types <= mixed.max_categories:
            boosted = LEARNED["sparse_boosted"]()
            # the trees pool what neighbouring types share, which counts when each type has few runs; they read
            # at most max_fit runs per world, so past that the per-type ratio (every fitting run) is kept alone
            few = len(table0) <= boosted.max_fit
            return [mixed, LEARNED["logistic"](), *([boosted] if few else [])]
    return [LEARNED["logistic"](), LEARNED["sparse_boosted"]()]


def _learned_scores(attack, tables, selection_fraction: float, seed, alpha: float,
                    delta: float) -> tuple[list, list, str]:
    """Fit on the first part of each world's selection runs; score the rest of them and the evaluation runs.

    ``attack="auto"`` fits every candidate (:func:`_auto_candidates`) and keeps
    the one whose best cut on the rest of the selection runs has the largest
    simultaneous criterion (:func:`recaudit.audits.stats.thresholds.select_threshold`,
    corrected over the candidates too): a choice made on selection runs only,
    so the evaluation runs stay fresh and the bound valid, and one that does
    not hang on a single classifier's luck.
    """
    select, fitted = [], []
    for table in tables:
        k = _split_sizes(len(table), selection_fraction)
        f = int(math.floor(FIT_FRACTION * k))
        if f < 1 or f >= k:
            raise ParameterError("trials", f"trials = {len(table)} per world are too few to fit a learned attack")
        fitted.append(table.take(slice(0, f)))
        select.append((table.take(slice(f, k)), table.take(slice(k, None))))
    if attack == "auto":
        candidates = _auto_candidates(*fitted)
    else:
        candidates = [LEARNED[attack]() if isinstance(attack, str) else attack]
    best = None
    for candidate in candidates:
        candidate.fit_outputs(fitted[0], fitted[1], seed=seed)
        sel = [candidate.score_outputs(t_sel) for t_sel, _ in select]
        value = (select_threshold(sel[0], sel[1], delta, alpha=alpha / len(candidates), candidates="rare-event",
                                  with_value=True)[2] if len(candidates) > 1 else 0.0)
        if best is None or value > best[0]:
            best = (value, candidate, sel)
    _, chosen, sel = best
    evaluation = [chosen.score_outputs(t_eval) for _, t_eval in select]
    return sel, evaluation, chosen.kind
