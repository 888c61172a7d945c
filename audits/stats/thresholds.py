"""Threshold tests: error counts of every cut, the cut chosen on selection runs, and the selection split."""
from __future__ import annotations

import math

import numpy as np

from recaudit.core.errors import ParameterError
from .coded import CodedScores
from .rates import (Tally, _as_scores, _check_alpha, _check_delta, _check_direction, _counts_sorted, _wilson_upper,
                    epsilon_from_rates, sorted_scores)


def _split_sample(s0, s1, selection_fraction, rng):
    """(selection0, selection1, evaluation0, evaluation1): the first ``floor(f·n)`` runs select."""
    if not (0.0 < float(selection_fraction) < 1.0):
        raise ParameterError("selection_fraction", "selection_fraction must be in (0, 1)")
    if rng is not None:
        gen = np.random.default_rng(rng)
        s0 = s0[gen.permutation(s0.size)]
        s1 = s1[gen.permutation(s1.size)]
    k0 = int(math.floor(selection_fraction * s0.size))
    k1 = int(math.floor(selection_fraction * s1.size))
    if min(k0, k1) < 1 or k0 == s0.size or k1 == s1.size:
        raise ParameterError("trials", "each world needs at least one selection and one evaluation run")
    return s0[:k0], s1[:k1], s0[k0:], s1[k1:]


# --------------------------------------------------------------------------
# threshold tests


def threshold_counts(
    scores0, scores1, thresholds, direction: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """False positives and false negatives of threshold tests, for every threshold.

    ``direction=+1``: guess world 1 iff score ≥ t, so ``fp[j] = #{scores0 ≥ t_j}``
    and ``fn[j] = #{scores1 < t_j}``. ``direction=-1``: guess world 1 iff
    score ≤ t, so ``fp[j] = #{scores0 ≤ t_j}``, ``fn[j] = #{scores1 > t_j}``.
    O((n + m) log n) via ``np.searchsorted`` on sorted scores. Returns int64
    arrays shaped like ``thresholds``.
    """
    direction = _check_direction(direction)
    s0, s1 = _as_scores(scores0, "scores0"), _as_scores(scores1, "scores1")
    t = np.asarray(thresholds, dtype=float)
    if np.isnan(t).any():
        raise ParameterError("thresholds", "thresholds contain NaN")
    if isinstance(s0, CodedScores) or isinstance(s1, CodedScores):  # counted per value: the same counts
        return _counts_sorted(sorted_scores(s0), sorted_scores(s1), t, direction)
    if t.size <= FEW_THRESHOLDS:  # a few passes over the scores beat sorting them
        shape = t.shape
        t = t.ravel()
        if direction == 1:
            fp = [np.count_nonzero(s0 >= x) for x in t]
            fn = [np.count_nonzero(s1 < x) for x in t]
        else:
            fp = [np.count_nonzero(s0 <= x) for x in t]
            fn = [np.count_nonzero(s1 > x) for x in t]
        return np.array(fp, np.int64).reshape(shape), np.array(fn, np.int64).reshape(shape)
    return _counts_sorted(np.sort(s0), np.sort(s1), t, direction)


#: :func:`threshold_counts` counts directly (no sort) for at most this many thresholds
FEW_THRESHOLDS = 8


def select_threshold(
    scores0, scores1, delta: float = 0.0, *, alpha: float | None = None, simultaneous: bool = True,
    candidates: str = "all", with_value: bool = False,
) -> tuple[float, int] | tuple[float, int, float]:
    """Choose (threshold, direction) maximising an ε criterion on a *selection* sample.

    Candidate tests are the partitions cut at the unique pooled scores (plus
    ``+inf``), in both directions: ``K = 2·(#unique + 1)`` tests. Criterion:

    * ``alpha is None`` (default): the point-estimate ε from
      :func:`epsilon_from_rates` with continuity-corrected rates
      ``(k + 0.5)/(n + 1)``, so perfect separation gives a finite value
      (``ln(2n + 1)``) instead of ``inf``. It is noisy in the tails: a cut
      beyond nearly all world-0 scores can score high on a handful of runs.
    * ``alpha`` given: an ε lower bound from one-sided Wilson upper bounds (a
      closed-form stand-in for Clopper–Pearson). With ``simultaneous=True``
      (default) each rate is bounded at ``alpha/(2K)``, Bonferroni over all
      candidates, so the criterion is a *simultaneous* lower bound and its
      maximiser is not a lucky fluctuation; with ``simultaneous=False`` each
      rate is bounded at alpha/2. Why: for mechanisms whose likelihood ratio
      is flat over a range of cuts (Laplace beyond the two neighbours, every
      cut of a Gaussian in μ terms) the per-cut criterion is maximised by
      noise, often at a tail cut with few runs, and the bound on fresh runs
      collapses (winner's curse; e.g. Laplace ε = 0.5 with 10⁶ runs gave
      ε_LB/ε ≈ 0.68 at the 10th percentile vs 0.98 simultaneous). This is what
      :func:`split_epsilon_bound` uses.

    The returned threshold is the midpoint of the chosen cut's gap between
    neighbouring pooled scores (not the score itself), so the test gives the
    same counts on the selection sample but generalises better to fresh runs.
    ``candidates="rare-event"`` searches only :func:`rare_event_cuts` (the
    correction is then over those). Ties go to the first maximiser (direction +1 first, then ascending
    threshold). Whatever the criterion, the result is a function of the
    selection sample only; validity of a bound computed on fresh runs does not
    depend on it. ``with_value`` also returns the criterion's value at the
    chosen cut (to compare attacks on the same selection runs).
    """
    _check_delta(delta)
    if alpha is not None:
        _check_alpha(alpha)
    s0 = sorted_scores(_as_scores(scores0, "scores0"))
    s1 = sorted_scores(_as_scores(scores1, "scores1"))
    n0, n1 = s0.size, s1.size

    if alpha is None:
        def crit(fp, fn, n_tests):
            return epsilon_from_rates((fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0), delta)
    else:
        def crit(fp, fn, n_tests):
            level = alpha / 2.0 / (n_tests if simultaneous else 1)
            return epsilon_from_rates(_wilson_upper(fp, n0, level), _wilson_upper(fn, n1, level), delta)

    threshold, direction, value = _best_cut(s0, s1, crit, candidates)
    return (threshold, direction, value) if with_value else (threshold, direction)


#: Cut sets :func:`select_threshold` can search: every cut, or DP-Sniper's rare-event grid.
CANDIDATES = ("all", "rare-event")

#: ``rare-event`` searches every cut when the pooled scores have at most this many distinct values.
RARE_EVENT_EXACT = 1024
#: ``rare-event``: evenly spaced pooled quantiles added to the tail cuts.
RARE_EVENT_MIDDLE = 64


def rare_event_cuts(s0: np.ndarray, s1: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices into ``append(u, inf)`` of the rare-event candidate cuts (sorted ``s0``, ``s1``; ``u`` their unique
    union).

    DP-Sniper's idea (Bichsel et al., IEEE S&P 2021): the most telling test
    is often one whose error rate in one world is small, so cuts are placed
    where one world's tail holds 1, 2, 4, … runs (both tails of both worlds),
    plus ``RARE_EVENT_MIDDLE`` evenly spaced pooled quantiles. Few candidates
    (about ``8·log2 n + 128``) keep the simultaneous correction mild, so a
    rare-event cut with a real ratio is not drowned by the correction over a
    million cuts. With at most ``RARE_EVENT_EXACT`` distinct scores (discrete
    outputs) every cut is kept. Depends on the selection sample only.
    """
    if u.size + 1 <= RARE_EVENT_EXACT:
        return np.arange(u.size + 1)
    values = []
    for s in (s0, s1):
        k = 2 ** np.arange(int(math.log2(s.size)) + 1)
        k = k[k <= s.size]
        values += [s[k - 1], s[s.size - k]]
    pooled = np.sort(np.concatenate([s0, s1]))
    values.append(pooled[np.linspace(0, pooled.size - 1, RARE_EVENT_MIDDLE).astype(np.int64)])
    idx = np.searchsorted(u, np.concatenate(values))
    return np.unique(np.concatenate([idx, idx + 1, [u.size]]))


def _distinct_sorted(s: "np.ndarray | Tally") -> np.ndarray:
    """The distinct values of sorted ``s`` (or a tally) in one pass (``np.unique`` would sort again)."""
    if isinstance(s, Tally):
        return s.values
    keep = np.empty(s.size, dtype=bool)
    keep[:1] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def _best_cut(s0: np.ndarray, s1: np.ndarray, crit, candidates: str = "all") -> tuple[float, int, float]:
    """(threshold, direction, value) maximising ``crit(fp, fn, n_tests)`` over the cuts of sorted ``s0``, ``s1``.

    Candidates are the unique pooled scores plus ``+inf`` (``candidates="all"``)
    or the subset :func:`rare_event_cuts` picks, in both directions
    (``n_tests`` = twice their number, passed so criteria can correct for it);
    ties go to the first maximiser (direction +1 first, then ascending
    threshold). The returned threshold is moved to the middle of the chosen
    cut's gap (same partition of the pooled sample, better generalisation).
    """
    if candidates not in CANDIDATES:
        raise ParameterError("candidates", f"candidates must be one of {CANDIDATES}, got {candidates!r}")
    u = np.unique(np.concatenate([_distinct_sorted(s0), _distinct_sorted(s1)]))
    full = np.append(u, np.inf)
    index = np.arange(full.size) if candidates == "all" else rare_event_cuts(s0, s1, u)
    cand = full[index]
    best = []
    for direction in (1, -1):
        fp, fn = _counts_sorted(s0, s1, cand, direction)
        value = np.asarray(crit(fp, fn, 2 * cand.size))
        j = int(np.argmax(value))
        best.append((float(value[j]), int(index[j]), direction))
    value, j, direction = max(best, key=lambda b: b[0])  # max() keeps the first on ties
    cand = full

    # Move the cut to the middle of its gap (same partition of the pooled sample).
    t = float(cand[j])
    if direction == 1 and 0 < j < u.size:  # partition unchanged for t in (u[j-1], u[j]]
        lo, hi = float(u[j - 1]), float(u[j])
        mid = 0.5 * lo + 0.5 * hi
        if lo < mid <= hi:
            t = mid
    elif direction == -1 and j < u.size - 1:  # partition unchanged for t in [u[j], u[j+1])
        lo, hi = float(u[j]), float(u[j + 1])
        mid = 0.5 * lo + 0.5 * hi
        if lo <= mid < hi:
            t = mid
    return t, direction, value
