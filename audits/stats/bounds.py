"""Clopper–Pearson ε lower bounds of the distinguishing game, one builder per way of fixing the test.

:func:`split_epsilon_bound` (chosen on held-out runs), :func:`heldout_epsilon_bound`
(on a split the caller made), :func:`bonferroni_epsilon_bound` (best of a
data-independent grid, corrected) and :func:`fixed_threshold_epsilon_bound`
(given in advance). Rates and ε: :mod:`.rates`; cuts: :mod:`.thresholds`;
Gaussian DP: :mod:`.gdp`; p-values and Holm: :mod:`.pvalues`.
"""
from __future__ import annotations

import math

import numpy as np

from recaudit.core.errors import ParameterError
from .rates import (BoundResult, _as_scores, _check_alpha, _check_delta, _check_direction, _counts_sorted,
                    ceiling,
                    epsilon_lower_bound)
from .thresholds import _split_sample, select_threshold, threshold_counts


# --------------------------------------------------------------------------
# split bound


def split_epsilon_bound(
    scores0,
    scores1,
    alpha: float,
    delta: float = 0.0,
    selection_fraction: float = 0.5,
    rng=None,
) -> BoundResult:
    """ε lower bound at confidence 1 − alpha with the threshold chosen on held-out runs.

    Each world's scores are split into a selection part (the first
    ``floor(selection_fraction · n)`` entries) and an evaluation part (the
    rest). Trials are independent runs, so this deterministic split needs no
    shuffling; pass ``rng`` (a seed or ``np.random.Generator``) only if the
    arrays' order may depend on the scores (e.g. sorted input), to permute
    each array first. The test is chosen by :func:`select_threshold` on the
    selection part (simultaneous Wilson-bound criterion at ``alpha``), and the bound is
    :func:`epsilon_lower_bound` on the evaluation counts — valid because the
    test is independent of those runs (docs/statistics.md, "The distinguishing game"). The ceiling is
    that of the evaluation sizes.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    s0 = _as_scores(scores0, "scores0")
    s1 = _as_scores(scores1, "scores1")
    return heldout_epsilon_bound(*_split_sample(s0, s1, selection_fraction, rng), alpha, delta)

def _counted_bound(scores0: np.ndarray, scores1: np.ndarray, threshold: float, direction: int, alpha: float,
                   delta: float, threshold_rule: str, test_alpha: float | None = None) -> BoundResult:
    """The Clopper–Pearson bound of one fixed test counted on ``scores0``/``scores1``.

    ``test_alpha`` is the level the test is counted at when it differs from the family's ``alpha``
    (Bonferroni: ``alpha`` split over the grid).
    """
    test_alpha = alpha if test_alpha is None else test_alpha
    fp, fn = threshold_counts(scores0, scores1, np.array([float(threshold)]), direction)
    fp, fn = int(fp[0]), int(fn[0])
    return BoundResult(
        epsilon_lb=float(epsilon_lower_bound(fp, scores0.size, fn, scores1.size, test_alpha, delta)),
        ceiling=float(ceiling(scores0.size, scores1.size, test_alpha, delta)),
        alpha=float(alpha), delta=float(delta), method="clopper-pearson", threshold=float(threshold),
        direction=int(direction), false_pos=fp, n_neg=int(scores0.size), false_neg=fn,
        n_pos=int(scores1.size), threshold_rule=threshold_rule)


def heldout_epsilon_bound(
    select0, select1, eval0, eval1, alpha: float, delta: float = 0.0, candidates: str = "all"
) -> BoundResult:
    """:func:`split_epsilon_bound` on a split made by the caller: choose on ``select*``, count ``eval*``.

    For attacks that learn: they fit on runs of their own, score both
    parts, and the test is chosen (:func:`select_threshold`, ``candidates``
    as there) on the selection scores only.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    sel0, sel1 = _as_scores(select0, "select0"), _as_scores(select1, "select1")
    e0, e1 = _as_scores(eval0, "eval0"), _as_scores(eval1, "eval1")
    threshold, direction = select_threshold(sel0, sel1, delta, alpha=alpha, candidates=candidates)
    return _counted_bound(e0, e1, threshold, direction, alpha, delta, "split")



# --------------------------------------------------------------------------
# fixed tests: explicit threshold, Bonferroni grid


def fixed_threshold_epsilon_bound(
    scores0, scores1, threshold: float, direction: int, alpha: float, delta: float = 0.0
) -> BoundResult:
    """ε lower bound at confidence 1 − alpha for a test fixed before the runs (docs/statistics.md).

    Every run is counted (no selection split): :func:`epsilon_lower_bound`
    on the counts of the given (threshold, direction). Valid only if the test
    was chosen without looking at these scores, e.g. the likelihood-ratio
    test of a known mechanism (Jagielski, Ullman, Oprea 2020).
    """
    _check_alpha(alpha)
    _check_delta(delta)
    direction = _check_direction(direction)
    s0 = _as_scores(scores0, "scores0")
    s1 = _as_scores(scores1, "scores1")
    return _counted_bound(s0, s1, threshold, direction, alpha, delta, "explicit")


def bonferroni_epsilon_bound(
    scores0,
    scores1,
    alpha: float,
    delta: float = 0.0,
    thresholds=None,
    grid_size: int = 100,
    score_range: tuple[float, float] | None = None,
) -> BoundResult:
    """Best ε lower bound over a data-independent grid of tests, Bonferroni-corrected.

    The grid must be fixed before seeing the scores: pass ``thresholds``
    explicitly, or ``score_range=(lo, hi)`` (known from the mechanism, e.g.
    its output range) for ``grid_size`` evenly spaced thresholds; with
    neither a ``ValueError`` is raised, because a grid spanning the observed
    scores would depend on the data. Every threshold is tried in both
    directions, so ``K = 2·len(grid)`` tests are made and each is bounded at
    confidence ``1 − alpha/K`` (FPR and FNR each at ``alpha/(2K)`` =
    ``alpha/(2·grid·directions)``). By the union bound all K bounds hold
    together with probability ≥ 1 − alpha, so their maximum is a valid ε
    lower bound (Bonferroni 1936; the grid-search audit of Jagielski, Ullman,
    Oprea 2020). Uses every run (no split); the ceiling is that of all runs
    at ``alpha/K``.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    if thresholds is None:
        if score_range is None:
            raise ParameterError("thresholds", "give thresholds or score_range=(lo, hi): a grid spanning the observed "
                "scores would depend on the data and invalidate the correction"
            )
        lo, hi = (float(x) for x in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) or int(grid_size) < 1:
            raise ParameterError("score_range", "need finite lo < hi and grid_size >= 1")
        thresholds = np.linspace(lo, hi, int(grid_size))
    grid = np.asarray(thresholds, dtype=float).ravel()
    if grid.size == 0 or np.isnan(grid).any():
        raise ParameterError("thresholds", "thresholds must be a non-empty array without NaN")
    s0 = np.sort(_as_scores(scores0, "scores0"))
    s1 = np.sort(_as_scores(scores1, "scores1"))
    n_tests = 2 * grid.size
    alpha_each = alpha / n_tests
    candidates = []
    for direction in (1, -1):
        fp, fn = _counts_sorted(s0, s1, grid, direction)
        eps = np.atleast_1d(epsilon_lower_bound(fp, s0.size, fn, s1.size, alpha_each, delta))
        j = int(np.argmax(eps))
        candidates.append((float(eps[j]), float(grid[j]), direction))
    _, threshold, direction = max(candidates, key=lambda c: c[0])
    return _counted_bound(s0, s1, threshold, direction, alpha, delta, "bonferroni", test_alpha=alpha_each)
