"""Clopper–Pearson ε lower bounds for the distinguishing game.

Statistics follow /work/shared/AUDITING.md ("Distinguishing game"): (ε, δ)-DP
implies, for every threshold test, ``FPR + e^ε·FNR ≥ 1 − δ`` and
``FNR + e^ε·FPR ≥ 1 − δ`` (Kairouz, Oh, Viswanath 2015, Thm. 2.1), so with
one-sided Clopper–Pearson upper bounds ``FPR̄``, ``FNR̄`` (each at α/2, union
bound)

    ε_LB = max( ln((1 − δ − FNR̄) / FPR̄),  ln((1 − δ − FPR̄) / FNR̄) )

holds with probability ≥ 1 − α for a threshold fixed before the counted runs
(Jagielski, Ullman, Oprea 2020, "Auditing differentially private machine
learning"). Conventions: world 0 is the negative class, world 1 the positive
class; a false positive is a world-0 run guessed as world 1, a false negative
a world-1 run guessed as world 0. ``direction=+1`` guesses world 1 iff
``score >= t``; ``direction=-1`` guesses world 1 iff ``score <= t``.

Ways to fix the test (``BoundResult.strategy``): :func:`split_epsilon_bound`
(chosen on held-out runs), :func:`bonferroni_epsilon_bound` (best of a
data-independent grid, corrected) and :func:`fixed_threshold_epsilon_bound`
(given in advance). Gaussian DP (f-DP, Dong, Roth, Su 2022):
:func:`gdp_mu_lower_bound`, :func:`gdp_delta`, :func:`gdp_epsilon`,
:func:`split_gdp_bound`. Many tests in one run: :func:`violation_p_value`
turns a test's counts into a p-value for "the mechanism is ε_claim-DP" and
:func:`holm_adjust` controls the family-wise error (Holm 1979).

All functions are pure (no global random state) and vectorised with numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr
from statsmodels.stats.multitest import multipletests

from .pvalues import p_value_from_bound

__all__ = [
    "BoundResult",
    "cp_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "ceiling",
    "threshold_counts",
    "select_threshold",
    "split_epsilon_bound",
    "heldout_epsilon_bound",
    "rare_event_cuts",
    "fixed_threshold_epsilon_bound",
    "bonferroni_epsilon_bound",
    "gdp_mu_lower_bound",
    "gdp_delta",
    "gdp_epsilon",
    "select_gdp_threshold",
    "split_gdp_bound",
    "heldout_gdp_bound",
    "holm_adjust",
    "violation_p_value",
]


# --------------------------------------------------------------------------
# helpers


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    """Return a Python float for 0-d results, else the array."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _check_alpha(alpha: float) -> None:
    if not (0.0 < float(alpha) < 1.0):
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")


def _check_delta(delta) -> None:
    d = np.asarray(delta, dtype=float)
    if np.any(~(d >= 0.0)) or np.any(d >= 1.0):
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")


def _check_direction(direction: int) -> int:
    if direction not in (1, -1):
        raise ValueError(f"direction must be +1 or -1, got {direction!r}")
    return int(direction)


def _as_scores(x, name: str) -> np.ndarray:
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN")
    return a


def _counts_sorted(
    s0: np.ndarray, s1: np.ndarray, t: np.ndarray, direction: int
) -> tuple[np.ndarray, np.ndarray]:
    """(fp, fn) for thresholds ``t`` given *sorted* score arrays ``s0``, ``s1``."""
    if direction == 1:  # world 1 iff score >= t
        fp = s0.size - np.searchsorted(s0, t, side="left")  # #{s0 >= t}
        fn = np.searchsorted(s1, t, side="left")  # #{s1 < t}
    else:  # world 1 iff score <= t
        fp = np.searchsorted(s0, t, side="right")  # #{s0 <= t}
        fn = s1.size - np.searchsorted(s1, t, side="right")  # #{s1 > t}
    return fp.astype(np.int64), fn.astype(np.int64)


def _split_sample(s0, s1, selection_fraction, rng):
    """(selection0, selection1, evaluation0, evaluation1): the first ``floor(f·n)`` runs select."""
    if not (0.0 < float(selection_fraction) < 1.0):
        raise ValueError("selection_fraction must be in (0, 1)")
    if rng is not None:
        gen = np.random.default_rng(rng)
        s0 = s0[gen.permutation(s0.size)]
        s1 = s1[gen.permutation(s1.size)]
    k0 = int(math.floor(selection_fraction * s0.size))
    k1 = int(math.floor(selection_fraction * s1.size))
    if min(k0, k1) < 1 or k0 == s0.size or k1 == s1.size:
        raise ValueError("each world needs at least one selection and one evaluation run")
    return s0[:k0], s1[:k1], s0[k0:], s1[k1:]


def _wilson_upper(k: np.ndarray, n: int, alpha: float) -> np.ndarray:
    """One-sided Wilson score upper bound at level 1 − alpha (Wilson 1927).

    Closed-form stand-in for Clopper–Pearson, used only to *choose* a threshold
    (the choice affects power, never validity).
    """
    z = stats.norm.isf(alpha)
    p = k / n
    z2n = z * z / n
    centre = p + z2n / 2.0
    half = z * np.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    return np.minimum((centre + half) / (1.0 + z2n), 1.0)


# --------------------------------------------------------------------------
# confidence bounds and ε


def cp_upper(k, n, alpha: float) -> float | np.ndarray:
    """One-sided Clopper–Pearson upper bound at confidence 1 − alpha.

    ``Beta.ppf(1 − alpha; k + 1, n − k)`` (computed as ``isf(alpha)`` so
    alphas far below 1e-16 stay exact), and 1 when ``k == n``
    (Clopper & Pearson 1934). Equals
    ``statsmodels...proportion_confint(k, n, alpha=2*alpha, method="beta")[1]``.
    Vectorised over ``k`` and ``n`` (broadcast).
    """
    _check_alpha(alpha)
    k = np.asarray(k)
    n = np.asarray(n)
    if np.any(k < 0) or np.any(k > n):
        raise ValueError("need 0 <= k <= n")
    k, n = np.broadcast_arrays(k.astype(float), n.astype(float))
    full = k >= n
    b = np.where(full, 1.0, n - k)  # placeholder b for k == n avoids nan
    upper = stats.beta.isf(alpha, k + 1.0, b)  # = ppf(1 − alpha), accurate for tiny alpha
    # scipy returns nan where the bound rounds to 1 at extreme alphas (e.g. k = 995 of 1000 at 5e-301):
    # 1 is then the bound to float precision, and an upper bound of 1 is always valid
    upper = np.where(np.isnan(upper), 1.0, upper)
    return _scalar_or_array(np.where(full, 1.0, upper))


def epsilon_from_rates(fpr_upper, fnr_upper, delta=0.0) -> float | np.ndarray:
    """δ-aware ε from upper bounds on FPR and FNR (AUDITING.md; Kairouz et al. 2015).

    ``max(ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄))`` clipped below at
    0; a term whose numerator is ≤ 0 contributes 0. A zero denominator with a
    positive numerator gives ``inf``. Vectorised (broadcast).
    """
    _check_delta(delta)
    fpr = np.asarray(fpr_upper, dtype=float)
    fnr = np.asarray(fnr_upper, dtype=float)
    if np.any(~((fpr >= 0) & (fpr <= 1))) or np.any(~((fnr >= 0) & (fnr <= 1))):
        raise ValueError("rates must lie in [0, 1]")
    delta = np.asarray(delta, dtype=float)
    num1 = 1.0 - delta - fnr
    num2 = 1.0 - delta - fpr
    with np.errstate(divide="ignore", invalid="ignore"):
        t1 = np.where(num1 > 0, np.log(np.where(num1 > 0, num1, 1.0)) - np.log(fpr), 0.0)
        t2 = np.where(num2 > 0, np.log(np.where(num2 > 0, num2, 1.0)) - np.log(fnr), 0.0)
    return _scalar_or_array(np.maximum(np.maximum(t1, t2), 0.0))


def epsilon_lower_bound(
    false_pos, n_neg, false_neg, n_pos, alpha: float, delta=0.0
) -> float | np.ndarray:
    """Clopper–Pearson ε lower bound at confidence 1 − alpha (AUDITING.md).

    FPR and FNR are each bounded one-sidedly at alpha/2 (union bound), then
    combined with :func:`epsilon_from_rates`. Valid only if the test
    (threshold, direction) was fixed independently of these counts.
    """
    _check_alpha(alpha)
    fpr = cp_upper(false_pos, n_neg, alpha / 2.0)
    fnr = cp_upper(false_neg, n_pos, alpha / 2.0)
    return epsilon_from_rates(fpr, fnr, delta)


def ceiling(n_neg, n_pos, alpha: float, delta=0.0) -> float | np.ndarray:
    """Largest ε_LB ``n_neg``/``n_pos`` runs can show: 0 false positives and 0 false negatives.

    With δ = 0 and n_neg = n_pos = n this is ``ln((1 − u)/u)``,
    ``u = 1 − (alpha/2)^(1/n)`` (≈ 3.3, 5.6, 7.9, 10.2 for n = 10², …, 10⁵ at α = 0.05).
    """
    return epsilon_lower_bound(
        np.zeros_like(np.asarray(n_neg)), n_neg, np.zeros_like(np.asarray(n_pos)), n_pos, alpha, delta
    )


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
    s0 = np.sort(_as_scores(scores0, "scores0"))
    s1 = np.sort(_as_scores(scores1, "scores1"))
    t = np.asarray(thresholds, dtype=float)
    if np.isnan(t).any():
        raise ValueError("thresholds contain NaN")
    return _counts_sorted(s0, s1, t, direction)


def select_threshold(
    scores0, scores1, delta: float = 0.0, *, alpha: float | None = None, simultaneous: bool = True,
    candidates: str = "all",
) -> tuple[float, int]:
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
    depend on it.
    """
    _check_delta(delta)
    if alpha is not None:
        _check_alpha(alpha)
    s0 = np.sort(_as_scores(scores0, "scores0"))
    s1 = np.sort(_as_scores(scores1, "scores1"))
    n0, n1 = s0.size, s1.size

    if alpha is None:
        def crit(fp, fn, n_tests):
            return epsilon_from_rates((fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0), delta)
    else:
        def crit(fp, fn, n_tests):
            level = alpha / 2.0 / (n_tests if simultaneous else 1)
            return epsilon_from_rates(_wilson_upper(fp, n0, level), _wilson_upper(fn, n1, level), delta)

    return _best_cut(s0, s1, crit, candidates)


#: Cut sets :func:`select_threshold` can search: every cut, or DP-Sniper's rare-event grid.
CANDIDATES = ("all", "rare-event")

#: ``rare-event`` searches every cut when the pooled scores have at most this many distinct values.
RARE_EVENT_EXACT = 1024
#: ``rare-event``: evenly spaced pooled quantiles added to the tail cuts.
RARE_EVENT_MIDDLE = 64


def rare_event_cuts(s0: np.ndarray, s1: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Indices into ``append(u, inf)`` of the rare-event candidate cuts (sorted ``s0``, ``s1``; ``u`` their unique union).

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


def _best_cut(s0: np.ndarray, s1: np.ndarray, crit, candidates: str = "all") -> tuple[float, int]:
    """(threshold, direction) maximising ``crit(fp, fn, n_tests)`` over the cuts of sorted ``s0``, ``s1``.

    Candidates are the unique pooled scores plus ``+inf`` (``candidates="all"``)
    or the subset :func:`rare_event_cuts` picks, in both directions
    (``n_tests`` = twice their number, passed so criteria can correct for it);
    ties go to the first maximiser (direction +1 first, then ascending
    threshold). The returned threshold is moved to the middle of the chosen
    cut's gap (same partition of the pooled sample, better generalisation).
    """
    if candidates not in CANDIDATES:
        raise ValueError(f"candidates must be one of {CANDIDATES}, got {candidates!r}")
    u = np.unique(np.concatenate([s0, s1]))
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
    return t, direction


# --------------------------------------------------------------------------
# split bound


@dataclass(frozen=True)
class BoundResult:
    """An ε lower bound with its confidence, ceiling and the test that produced it.

    ``method`` is ``"clopper-pearson"`` or ``"gdp"``; ``strategy`` says how the
    test was fixed: ``"split"`` (chosen on held-out runs), ``"bonferroni"``
    (best of a data-independent grid, corrected) or ``"explicit"`` (given).
    For ``method="gdp"`` the ε figures are Gaussian-DP conversions of the
    μ bounds ``mu_lb``/``mu_ceiling`` at ``delta``.
    """

    epsilon_lb: float
    ceiling: float
    alpha: float
    delta: float
    method: str
    threshold: float
    direction: int
    false_pos: int
    n_neg: int
    false_neg: int
    n_pos: int
    strategy: str = "split"
    mu_lb: float | None = None
    mu_ceiling: float | None = None

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; a non-finite threshold becomes ``"inf"``/``"-inf"``.

        ``mu_lb``/``mu_ceiling`` (GDP bounds only) stay ``None`` for the other methods.
        """
        d = asdict(self)
        for key in ("epsilon_lb", "ceiling", "alpha", "delta"):
            d[key] = float(d[key])
        for key in ("mu_lb", "mu_ceiling"):
            d[key] = None if d[key] is None else float(d[key])
        for key in ("direction", "false_pos", "n_neg", "false_neg", "n_pos"):
            d[key] = int(d[key])
        t = float(self.threshold)
        d["threshold"] = t if math.isfinite(t) else ("inf" if t > 0 else "-inf")
        d["method"], d["strategy"] = str(self.method), str(self.strategy)
        return d


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
    test is independent of those runs (AUDITING.md, "split"). The ceiling is
    that of the evaluation sizes.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    s0 = _as_scores(scores0, "scores0")
    s1 = _as_scores(scores1, "scores1")
    return heldout_epsilon_bound(*_split_sample(s0, s1, selection_fraction, rng), alpha, delta)

def _counted_bound(scores0: np.ndarray, scores1: np.ndarray, threshold: float, direction: int, alpha: float,
                   delta: float, strategy: str, test_alpha: float | None = None) -> BoundResult:
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
        n_pos=int(scores1.size), strategy=strategy)


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
    """ε lower bound at confidence 1 − alpha for a test fixed before the runs (AUDITING.md).

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
            raise ValueError(
                "give thresholds or score_range=(lo, hi): a grid spanning the observed "
                "scores would depend on the data and invalidate the correction"
            )
        lo, hi = (float(x) for x in score_range)
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi) or int(grid_size) < 1:
            raise ValueError("need finite lo < hi and grid_size >= 1")
        thresholds = np.linspace(lo, hi, int(grid_size))
    grid = np.asarray(thresholds, dtype=float).ravel()
    if grid.size == 0 or np.isnan(grid).any():
        raise ValueError("thresholds must be a non-empty array without NaN")
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


# --------------------------------------------------------------------------
# Gaussian differential privacy (f-DP)


def gdp_mu_lower_bound(false_pos, n_neg, false_neg, n_pos, alpha: float) -> float | np.ndarray:
    """Lower bound on μ at confidence 1 − alpha for a μ-GDP mechanism (Dong, Roth, Su 2022).

    μ-GDP means every test has ``FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)``, i.e.
    ``μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)``; the right side decreases in both rates,
    so with one-sided Clopper–Pearson upper bounds ``FPR̄``, ``FNR̄`` (each at
    alpha/2) ``μ_LB = Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄)``, clipped at 0 (AUDITING.md;
    Nasr et al. 2023, "Tight auditing of differentially private machine
    learning"). The expression is symmetric in the two rates, so it covers
    both test directions. Valid only for a test fixed before these counts.
    """
    _check_alpha(alpha)
    fpr = cp_upper(false_pos, n_neg, alpha / 2.0)
    fnr = cp_upper(false_neg, n_pos, alpha / 2.0)
    return _scalar_or_array(_mu_from_rates(fpr, fnr))


def _mu_from_rates(fpr, fnr) -> np.ndarray:
    """``max(0, Φ⁻¹(1 − FPR) − Φ⁻¹(FNR))`` (−inf terms at rates of 1 clip to 0)."""
    with np.errstate(invalid="ignore"):
        mu = stats.norm.isf(np.asarray(fpr, dtype=float)) - stats.norm.ppf(np.asarray(fnr, dtype=float))
    return np.maximum(np.nan_to_num(mu, nan=0.0, neginf=0.0), 0.0)


def _log_gdp_delta(epsilon, mu):
    """``ln δ_μ(ε)`` via ``log_ndtr``: ``ln Φ(a) + ln(1 − e^{ε + ln Φ(b) − ln Φ(a)})`` (0 < μ < inf)."""
    la = log_ndtr(-epsilon / mu + mu / 2.0)
    lb = log_ndtr(-epsilon / mu - mu / 2.0)
    with np.errstate(divide="ignore"):
        return la + np.log(-np.expm1(np.minimum(epsilon + lb - la, 0.0)))


def gdp_delta(epsilon, mu) -> float | np.ndarray:
    """δ(ε) of μ-GDP: ``Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)`` (Dong, Roth, Su 2022, Cor. 2.13).

    This is also the exact curve of the Gaussian mechanism with
    ``μ = sensitivity/σ`` (Balle & Wang 2018, Thm. 8). Computed as
    ``Φ(a)·(1 − exp(ε + ln Φ(b) − ln Φ(a)))`` with ``scipy.special.log_ndtr``
    so the difference of two tiny terms keeps full relative precision.
    ``μ = 0`` gives ``max(0, 1 − e^ε)`` (identical worlds), ``μ = inf`` gives 1.
    Vectorised (broadcast).
    """
    eps, mu = np.broadcast_arrays(np.asarray(epsilon, dtype=float), np.asarray(mu, dtype=float))
    if np.any(~(mu >= 0)) or np.isnan(eps).any():
        raise ValueError("need mu >= 0 and no NaN")
    regular = (mu > 0) & np.isfinite(mu)
    mu_safe = np.where(regular, mu, 1.0)
    with np.errstate(over="ignore"):
        value = np.exp(_log_gdp_delta(eps, mu_safe))
    identical = np.maximum(-np.expm1(eps), 0.0)
    return _scalar_or_array(np.where(regular, value, np.where(mu == 0, identical, 1.0)))


def _gdp_epsilon_scalar(mu: float, delta: float) -> float:
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    if delta <= 0.0:
        return math.inf
    if delta >= gdp_delta(0.0, mu):  # = 2Φ(μ/2) − 1
        return 0.0
    # δ_μ(hi) < Φ(−hi/μ + μ/2) ≤ δ for hi ≥ μ²/2 + μ·Φ⁻¹(1 − δ): a bracket.
    hi = mu * mu / 2.0 + mu * float(stats.norm.isf(delta)) + 1.0
    log_delta = math.log(delta)
    return float(optimize.brentq(lambda e: float(_log_gdp_delta(e, mu)) - log_delta, 0.0, hi,
                                 xtol=1e-13, rtol=1e-13, maxiter=500))


def gdp_epsilon(mu, delta) -> float | np.ndarray:
    """The ε with ``gdp_delta(ε, μ) = δ``: μ-GDP ⇒ (ε, δ)-DP (Dong, Roth, Su 2022, Cor. 2.13).

    ``δ_μ(ε)`` decreases strictly in ε, so the root is unique; found with
    ``scipy.optimize.brentq`` on ``ln δ_μ(ε) − ln δ``. Returns 0 when
    ``δ ≥ δ_μ(0) = 2Φ(μ/2) − 1`` and ``inf`` when ``δ = 0 < μ``.
    E.g. μ = 1, δ = 1e-5 gives ε ≈ 4.38. Broadcasts; one root-find per element.
    """
    mu, delta = np.broadcast_arrays(np.asarray(mu, dtype=float), np.asarray(delta, dtype=float))
    if np.any(~(mu >= 0)):
        raise ValueError("mu must be >= 0")
    _check_delta(delta)
    out = np.array([_gdp_epsilon_scalar(float(m), float(d)) for m, d in zip(mu.ravel(), delta.ravel())])
    return _scalar_or_array(out.reshape(mu.shape))


def select_gdp_threshold(scores0, scores1, alpha: float, *, simultaneous: bool = True,
                         candidates: str = "all") -> tuple[float, int]:
    """Choose (threshold, direction) maximising a μ lower bound on a *selection* sample.

    Criterion: ``Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄)`` with one-sided Wilson upper
    bounds (closed-form stand-in for Clopper–Pearson; affects power only), at
    ``alpha/(2K)`` over the ``K`` candidate tests when ``simultaneous``
    (default), else at alpha/2. For a Gaussian mechanism every cut has the
    same true μ, so without the correction the maximiser is a noise-driven
    tail cut (see :func:`select_threshold`). Candidates and tie-breaking as
    in :func:`select_threshold`.
    """
    _check_alpha(alpha)
    s0 = np.sort(_as_scores(scores0, "scores0"))
    s1 = np.sort(_as_scores(scores1, "scores1"))
    n0, n1 = s0.size, s1.size

    def crit(fp, fn, n_tests):
        level = alpha / 2.0 / (n_tests if simultaneous else 1)
        return _mu_from_rates(_wilson_upper(fp, n0, level), _wilson_upper(fn, n1, level))

    return _best_cut(s0, s1, crit, candidates)


def split_gdp_bound(
    scores0,
    scores1,
    alpha: float,
    delta: float,
    selection_fraction: float = 0.5,
    rng=None,
) -> BoundResult:
    """GDP ε lower bound at confidence 1 − alpha, test chosen on held-out runs (AUDITING.md).

    Split as in :func:`split_epsilon_bound`; the test maximising the μ bound
    on the selection part (:func:`select_gdp_threshold`) is evaluated on the
    rest, giving ``mu_lb`` (:func:`gdp_mu_lower_bound`) and
    ``epsilon_lb = gdp_epsilon(mu_lb, delta)``; ``mu_ceiling``/``ceiling``
    are the same at perfect separation (0 false positives and negatives).

    Validity: ``mu_lb`` is a valid lower bound on μ for any μ-GDP mechanism.
    The ε figure is a lower bound on the mechanism's ε at ``delta`` when its
    trade-off curve is Gaussian (the Gaussian mechanism, Balle & Wang 2018;
    Nasr et al. 2023): then its (ε, δ) curve is ``gdp_delta(·, μ)``, which
    grows with μ. For other shapes (e.g. Laplace, randomized response) use
    the Clopper–Pearson bounds. Needs ``delta > 0`` (μ-GDP with μ > 0 is not
    pure DP, so δ = 0 would give ε = inf).
    """
    _check_alpha(alpha)
    _check_delta(delta)
    if not float(delta) > 0.0:
        raise ValueError("the GDP conversion needs delta > 0 (μ-GDP is never pure ε-DP)")
    s0 = _as_scores(scores0, "scores0")
    s1 = _as_scores(scores1, "scores1")
    return heldout_gdp_bound(*_split_sample(s0, s1, selection_fraction, rng), alpha, delta)


def heldout_gdp_bound(
    select0, select1, eval0, eval1, alpha: float, delta: float, candidates: str = "all"
) -> BoundResult:
    """:func:`split_gdp_bound` on a split made by the caller (see :func:`heldout_epsilon_bound`)."""
    _check_alpha(alpha)
    _check_delta(delta)
    if not float(delta) > 0.0:
        raise ValueError("the GDP conversion needs delta > 0 (μ-GDP is never pure ε-DP)")
    sel0, sel1 = _as_scores(select0, "select0"), _as_scores(select1, "select1")
    e0, e1 = _as_scores(eval0, "eval0"), _as_scores(eval1, "eval1")
    threshold, direction = select_gdp_threshold(sel0, sel1, alpha, candidates=candidates)
    fp, fn = threshold_counts(e0, e1, np.array([threshold]), direction)
    fp, fn = int(fp[0]), int(fn[0])
    mu_lb = float(gdp_mu_lower_bound(fp, e0.size, fn, e1.size, alpha))
    mu_ceiling = float(gdp_mu_lower_bound(0, e0.size, 0, e1.size, alpha))
    return BoundResult(
        epsilon_lb=float(gdp_epsilon(mu_lb, delta)),
        ceiling=float(gdp_epsilon(mu_ceiling, delta)),
        alpha=float(alpha),
        delta=float(delta),
        method="gdp",
        threshold=float(threshold),
        direction=int(direction),
        false_pos=fp,
        n_neg=int(e0.size),
        false_neg=fn,
        n_pos=int(e1.size),
        strategy="split",
        mu_lb=mu_lb,
        mu_ceiling=mu_ceiling,
    )


# --------------------------------------------------------------------------
# p-values and multiple testing


def holm_adjust(p_values, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down correction (Holm 1979): ``(reject, adjusted_p_values)``.

    Controls the family-wise error rate at alpha across all the tests of one
    run (AUDITING.md, "Verdicts"); wraps
    ``statsmodels.stats.multitest.multipletests(method="holm")``.
    """
    _check_alpha(alpha)
    p = np.asarray(p_values, dtype=float).ravel()
    if p.size == 0 or np.any(~((p >= 0) & (p <= 1))):
        raise ValueError("p_values must be a non-empty array in [0, 1]")
    reject, adjusted, _, _ = multipletests(p, alpha=alpha, method="holm")
    return np.asarray(reject, dtype=bool), np.asarray(adjusted, dtype=float)


def violation_p_value(
    false_pos, n_neg, false_neg, n_pos, epsilon_claim: float, delta: float = 0.0, *, tol: float = 1e-10
) -> float:
    """p-value of the hypothesis "the mechanism is (ε_claim, δ)-DP" from one fixed test's counts.

    The test "reject if :func:`epsilon_lower_bound` at level alpha exceeds
    ε_claim" has rejection regions nested in alpha (the bound grows with
    alpha), so its p-value is ``inf{alpha : ε_LB(alpha) > ε_claim}`` and
    ``p < alpha ⇔ ε_LB(alpha) > ε_claim`` (:func:`audits.stats.pvalues.p_value_from_bound`).
    Feed several of them to :func:`holm_adjust`.
    """
    _check_delta(delta)
    return p_value_from_bound(
        lambda a: float(epsilon_lower_bound(false_pos, n_neg, false_neg, n_pos, a, delta)), epsilon_claim, tol)
