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

All functions are pure (no global random state) and vectorised with numpy.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = [
    "BoundResult",
    "cp_upper",
    "epsilon_from_rates",
    "epsilon_lower_bound",
    "ceiling",
    "threshold_counts",
    "select_threshold",
    "split_epsilon_bound",
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

    ``Beta.ppf(1 − alpha; k + 1, n − k)``, and 1 when ``k == n``
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
    upper = stats.beta.ppf(1.0 - alpha, k + 1.0, b)
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
    scores0, scores1, delta: float = 0.0, *, alpha: float | None = None
) -> tuple[float, int]:
    """Choose (threshold, direction) maximising an ε criterion on a *selection* sample.

    Candidate tests are the partitions cut at the unique pooled scores (plus
    ``+inf``), in both directions. Criterion:

    * ``alpha is None`` (default): the point-estimate ε from
      :func:`epsilon_from_rates` with continuity-corrected rates
      ``(k + 0.5)/(n + 1)``, so perfect separation gives a finite value
      (``ln(2n + 1)``) instead of ``inf``. It is noisy in the tails: a cut
      beyond nearly all world-0 scores can score high on a handful of runs.
    * ``alpha`` given: the ε lower bound at confidence 1 − alpha computed from
      one-sided Wilson upper bounds at alpha/2 (a closed-form stand-in for
      Clopper–Pearson). This penalises cuts with few runs and is what
      :func:`split_epsilon_bound` uses.

    The returned threshold is the midpoint of the chosen cut's gap between
    neighbouring pooled scores (not the score itself), so the test gives the
    same counts on the selection sample but generalises better to fresh runs.
    Ties go to the first maximiser (direction +1 first, then ascending
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
    u = np.unique(np.concatenate([s0, s1]))
    cand = np.append(u, np.inf)

    if alpha is None:
        def crit(fp, fn):
            return epsilon_from_rates((fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0), delta)
    else:
        def crit(fp, fn):
            return epsilon_from_rates(
                _wilson_upper(fp, n0, alpha / 2.0), _wilson_upper(fn, n1, alpha / 2.0), delta
            )

    best = []
    for direction in (1, -1):
        fp, fn = _counts_sorted(s0, s1, cand, direction)
        eps = np.asarray(crit(fp, fn))
        j = int(np.argmax(eps))
        best.append((float(eps[j]), j, direction))
    value, j, direction = max(best, key=lambda b: b[0])  # max() keeps the first on ties

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
    """An ε lower bound with its confidence, ceiling and the test that produced it."""

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

    def to_dict(self) -> dict:
        """Plain JSON-ready dict; a non-finite threshold becomes ``"inf"``/``"-inf"``."""
        d = asdict(self)
        for key in ("epsilon_lb", "ceiling", "alpha", "delta"):
            d[key] = float(d[key])
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
    selection part (Wilson-bound criterion at ``alpha``), and the bound is
    :func:`epsilon_lower_bound` on the evaluation counts — valid because the
    test is independent of those runs (AUDITING.md, "split"). The ceiling is
    that of the evaluation sizes.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    if not (0.0 < float(selection_fraction) < 1.0):
        raise ValueError("selection_fraction must be in (0, 1)")
    s0 = _as_scores(scores0, "scores0")
    s1 = _as_scores(scores1, "scores1")
    if rng is not None:
        gen = np.random.default_rng(rng)
        s0 = s0[gen.permutation(s0.size)]
        s1 = s1[gen.permutation(s1.size)]
    k0 = int(math.floor(selection_fraction * s0.size))
    k1 = int(math.floor(selection_fraction * s1.size))
    if min(k0, k1) < 1 or k0 == s0.size or k1 == s1.size:
        raise ValueError("each world needs at least one selection and one evaluation run")

    threshold, direction = select_threshold(s0[:k0], s1[:k1], delta, alpha=alpha)
    e0, e1 = s0[k0:], s1[k1:]
    fp, fn = threshold_counts(e0, e1, np.array([threshold]), direction)
    fp, fn = int(fp[0]), int(fn[0])
    return BoundResult(
        epsilon_lb=float(epsilon_lower_bound(fp, e0.size, fn, e1.size, alpha, delta)),
        ceiling=float(ceiling(e0.size, e1.size, alpha, delta)),
        alpha=float(alpha),
        delta=float(delta),
        method="clopper-pearson",
        threshold=float(threshold),
        direction=int(direction),
        false_pos=fp,
        n_neg=int(e0.size),
        false_neg=fn,
        n_pos=int(e1.size),
        strategy="split",
    )
