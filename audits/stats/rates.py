"""Error rates to ε: one-sided Clopper–Pearson bounds, the ε they imply, the ceiling, and the result type.

(ε, δ)-DP implies, for every threshold test, ``FPR + e^ε·FNR ≥ 1 − δ`` and
``FNR + e^ε·FPR ≥ 1 − δ`` (Kairouz, Oh, Viswanath 2015, Thm. 2.1), so with
one-sided Clopper–Pearson upper bounds ``FPR̄``, ``FNR̄`` (each at α/2, union
bound)

    ε_LB = max( ln((1 − δ − FNR̄) / FPR̄),  ln((1 − δ − FPR̄) / FNR̄) )

holds with probability ≥ 1 − α for a threshold fixed before the counted runs
(Jagielski, Ullman, Oprea 2020). Conventions: world 0 is the negative class,
world 1 the positive class; a false positive is a world-0 run guessed as world
1. ``direction=+1`` guesses world 1 iff ``score >= t``; ``direction=-1`` iff
``score <= t``. All functions are pure and vectorised with numpy.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from recaudit.core.errors import ParameterError
from .coded import CodedScores, Tally


# --------------------------------------------------------------------------
# helpers


def _scalar_or_array(x: np.ndarray) -> float | np.ndarray:
    """Return a Python float for 0-d results, else the array."""
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x


def _check_alpha(alpha: float) -> None:
    if not (0.0 < float(alpha) < 1.0):
        raise ParameterError("alpha", f"alpha must be in (0, 1), got {alpha!r}")


def _check_delta(delta) -> None:
    d = np.asarray(delta, dtype=float)
    if np.any(~(d >= 0.0)) or np.any(d >= 1.0):
        raise ParameterError("delta", f"delta must be in [0, 1), got {delta!r}")


def _check_direction(direction: int) -> int:
    if direction not in (1, -1):
        raise ParameterError("direction", f"direction must be +1 or -1, got {direction!r}")
    return int(direction)


def _as_scores(x, name: str) -> "np.ndarray | CodedScores":
    if isinstance(x, CodedScores):  # kept coded (its table holds no NaN)
        if x.size == 0:
            raise ParameterError(name, f"{name} is empty")
        return x.ravel()
    a = np.asarray(x, dtype=float).ravel()
    if a.size == 0:
        raise ParameterError(name, f"{name} is empty")
    if np.isnan(a.min()):  # the minimum is NaN iff some score is (a reduction: no mask of the scores is made)
        raise ParameterError(name, f"{name} contains NaN")
    return a


#: :func:`tally` counts scores of at most this many distinct values (one comparison pass per value)
TALLY_VALUES = 8


def tally(s: np.ndarray) -> Tally | None:
    """``s`` (NaN-free) as a :class:`Tally` when it takes at most ``TALLY_VALUES`` values, else None.

    The values are read off an evenly strided sample and their counts must add up to every score (else
    None). Zero is left to sorting: -0.0 and 0.0 count as one value, and which one sorting keeps shows in a
    threshold.
    """
    values = np.unique(s[::max(1, s.size // 512)])
    if values.size > TALLY_VALUES or np.any(values == 0.0):
        return None
    counts = np.array([np.count_nonzero(s == v) for v in values], dtype=np.int64)
    return Tally(values, counts) if counts.sum() == s.size else None


def sorted_scores(s: "np.ndarray | CodedScores") -> "np.ndarray | Tally":
    """``s`` sorted, or its :class:`Tally` (the same counts at every cut) when it is coded or takes a few values."""
    if isinstance(s, CodedScores):
        return s.tally()
    return tally(s) or np.sort(s)


def _counts_sorted(
    s0: "np.ndarray | Tally", s1: "np.ndarray | Tally", t: np.ndarray, direction: int
) -> tuple[np.ndarray, np.ndarray]:
    """(fp, fn) for thresholds ``t`` given *sorted* score arrays (or tallies) ``s0``, ``s1``."""
    if direction == 1:  # world 1 iff score >= t
        fp = s0.size - s0.searchsorted(t, side="left")  # #{s0 >= t}
        fn = s1.searchsorted(t, side="left")  # #{s1 < t}
    else:  # world 1 iff score <= t
        fp = s0.searchsorted(t, side="right")  # #{s0 <= t}
        fn = s1.size - s1.searchsorted(t, side="right")  # #{s1 > t}
    return np.asarray(fp).astype(np.int64), np.asarray(fn).astype(np.int64)


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
        raise ParameterError("k", "need 0 <= k <= n")
    k, n = np.broadcast_arrays(k.astype(float), n.astype(float))
    full = k >= n
    b = np.where(full, 1.0, n - k)  # placeholder b for k == n avoids nan
    upper = stats.beta.isf(alpha, k + 1.0, b)  # = ppf(1 − alpha), accurate for tiny alpha
    # scipy returns nan where the bound rounds to 1 at extreme alphas (e.g. k = 995 of 1000 at 5e-301):
    # 1 is then the bound to float precision, and an upper bound of 1 is always valid
    upper = np.where(np.isnan(upper), 1.0, upper)
    return _scalar_or_array(np.where(full, 1.0, upper))


def epsilon_from_rates(fpr_upper, fnr_upper, delta=0.0) -> float | np.ndarray:
    """δ-aware ε from upper bounds on FPR and FNR (docs/statistics.md; Kairouz et al. 2015).

    ``max(ln((1 − δ − FNR̄)/FPR̄), ln((1 − δ − FPR̄)/FNR̄))`` clipped below at
    0; a term whose numerator is ≤ 0 contributes 0. A zero denominator with a
    positive numerator gives ``inf``. Vectorised (broadcast).
    """
    _check_delta(delta)
    fpr = np.asarray(fpr_upper, dtype=float)
    fnr = np.asarray(fnr_upper, dtype=float)
    if np.any(~((fpr >= 0) & (fpr <= 1))) or np.any(~((fnr >= 0) & (fnr <= 1))):
        raise ParameterError("rates", "rates must lie in [0, 1]")
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
    """Clopper–Pearson ε lower bound at confidence 1 − alpha (docs/statistics.md).

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


@dataclass(frozen=True)
class BoundResult:
    """An ε lower bound with its confidence, ceiling and the test that produced it.

    ``method`` is ``"clopper-pearson"`` or ``"gdp"``; ``threshold_rule`` says how the
    test's threshold was fixed: ``"split"`` (chosen on held-out runs), ``"bonferroni"``
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
    threshold_rule: str = "split"
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
        d["method"], d["threshold_rule"] = str(self.method), str(self.threshold_rule)
        return d
