"""Power: what the optimal test would show at a budget if the claim were exactly tight; one-run guess plans.

"Exactly tight" is the claim's own trade-off curve: the μ-GDP curve when
the claim carries ``gaussian_mu``, else the tightest (ε, δ)-DP curve
(:func:`recaudit.audits.stats.planning.trade_off_curve`). Every figure here is a
function of the claim and the budget only — never of the scores — so an
estimator may use it to fix its settings in advance (the one-run guess
counts) without losing validity, and a report may print it beside the
measured bound (docs/statistics.md, "Tight audits").

The figures are medians, approximately: the bound evaluated at the
*expected* error counts of the best test on the curve (each bound grows
with its counts' favourable direction, so the median count gives about the
median bound).
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize

from .gauss_fit import mu_lower_bound
from .gdp import gdp_epsilon, gdp_mu, gdp_mu_lower_bound
from .one_run import fdp_one_run_mu_lower_bound, one_run_epsilon_lower_bound
from .one_run_lp import lp_mu_lower_bound
from .planning import trade_off_curve
from .rates import epsilon_lower_bound

__all__ = ["claim_curve", "optimal_pairs_bound", "optimal_gauss_fit_bound", "plan_guesses", "programme_figure",
           "one_run_figure", "GUESS_GRID"]

#: candidate guess counts per side the one-run plan compares (log-spaced from 1 to m/2)
GUESS_GRID = 48


def claim_curve(claim):
    """FNR as a function of FPR for a mechanism exactly as private as ``claim``; None if it promises nothing."""
    if not claim.promises or not math.isfinite(claim.epsilon):
        return None
    if claim.gaussian_mu is not None:
        return trade_off_curve("gaussian", mu=claim.gaussian_mu)
    return trade_off_curve("pure", claim.epsilon, claim.delta)


def _fpr_grid(n: int, epsilon: float) -> np.ndarray:
    """A log grid of FPRs, plus the corner ``1/(1 + e^ε)`` of the pure curve."""
    return np.append(np.geomspace(min(0.5, 0.1 / n), 0.5, 64), 1.0 / (1.0 + math.exp(epsilon)))


def optimal_pairs_bound(n_neg: int, n_pos: int, claim, alpha: float, method: str = "clopper-pearson") -> float | None:
    """ε_LB of the best test fixed in advance, counted on ``n_neg``/``n_pos`` runs, if the claim were tight.

    ``method``: ``"clopper-pearson"`` or ``"gdp"`` (μ bound converted at the
    claim's δ). The best test is the best point of the claim's curve on a log
    grid of FPRs, at its expected counts. None for a claim of nothing.
    """
    curve = claim_curve(claim)
    if curve is None:
        return None
    fpr = _fpr_grid(min(n_neg, n_pos), claim.epsilon)
    fp, fn = fpr * n_neg, np.clip(curve(fpr), 0.0, 1.0) * n_pos
    if method == "gdp":
        return float(gdp_epsilon(float(np.max(gdp_mu_lower_bound(fp, n_neg, fn, n_pos, alpha))), claim.delta))
    return float(np.max(epsilon_lower_bound(fp, n_neg, fn, n_pos, alpha, claim.delta)))


def _expected_right(m: int, k: int, curve) -> int:
    """Expected right guesses when the top ``k`` canaries are guessed in and the bottom ``k`` out.

    A canary is in with probability ½; guessing "in" above a cut of FPR ``a``
    guesses ``m·(a + 1 − f(a))/2`` canaries, ``m·(1 − f(a))/2`` of them right;
    the claim curves are symmetric, so the bottom ``k`` are right as often.
    """
    share = k / m
    a = optimize.brentq(lambda x: 0.5 * (x + 1.0 - float(curve(x))) - share, 0.0, 1.0, xtol=1e-12)
    return min(2 * k, int(round(m * (1.0 - float(curve(a))))))


@functools.lru_cache(maxsize=256)
def plan_guesses(m: int, claim, alpha: float, method: str = "one-run") -> tuple[int, float]:
    """``(k, ε)``: guesses per side maximising the expected one-run bound if the claim were tight, and that bound.

    ``method``: ``"one-run"`` (Steinke–Nasr–Jagielski) or ``"fdp-one-run"``
    (Gaussian trade-off, converted at the claim's δ). Depends on ``m``, the
    claim and alpha only, so the guesses are fixed before the scores are
    seen. Ties go to the fewest guesses. When no count shows anything at
    the claim (too few canaries), and for a claim of nothing, a quarter of
    the canaries per side (enough to catch a gross break).
    """
    curve = claim_curve(claim)
    if curve is None or m < 4:
        return m // 4, None
    best = (-1.0, 0)
    for k in np.unique(np.geomspace(1, m // 2, GUESS_GRID).astype(np.int64)):
        k = int(k)
        v = _expected_right(m, k, curve)
        if method == "fdp-one-run":
            eps = float(gdp_epsilon(fdp_one_run_mu_lower_bound(2 * k, v, m, alpha), claim.delta))
        else:
            eps = one_run_epsilon_lower_bound(2 * k, v, m, alpha, claim.delta)
        if eps > best[0]:
            best = (eps, k)
    if best[0] <= 0:  # no count shows anything at the claim: a quarter per side still catches gross breaks
        return m // 4, 0.0
    return best[1], best[0]


@functools.lru_cache(maxsize=256)
def programme_figure(m: int, claim, alpha: float, k: int) -> float | None:
    """The f-DP programme's bound (:mod:`recaudit.audits.stats.one_run_lp`) at ``k`` guesses a side and the expected
    right
    guesses if the claim were tight: the ``optimal`` figure of ``fdp-one-run`` with ``analysis: programme``.

    ``k`` itself is planned on the recursion (:func:`plan_guesses`): the programme costs ~10³× more per
    evaluation, and its bound is flat in ``k`` near the recursion's best (docs/guide/estimators.md).
    """
    curve = claim_curve(claim)
    if curve is None or claim.gaussian_mu is None or k < 1:
        return None
    return float(gdp_epsilon(lp_mu_lower_bound(2 * k, _expected_right(m, k, curve), m, alpha), claim.delta))


@functools.lru_cache(maxsize=256)
def one_run_figure(m: int, claim, alpha: float, k: int) -> float | None:
    """The Steinke–Nasr–Jagielski bound at ``k`` guesses a side and the expected right guesses if the claim were
    tight: the power figure of a one-run bound made on guesses planned for another estimator (the fallback of
    ``fdp-one-run`` and ``gauss-fit``)."""
    curve = claim_curve(claim)
    if curve is None or k < 1:
        return None
    return float(one_run_epsilon_lower_bound(2 * k, _expected_right(m, k, curve), m, alpha, claim.delta))


def optimal_gauss_fit_bound(n_out: int, n_in: int, claim, alpha: float) -> float | None:
    """The Gaussian-fit bound at its expected t statistic if the claim were tight (None for a claim of nothing).

    The tight scores are Gaussian with μ the claim's ``gaussian_mu``, or the
    μ whose curve is exactly (ε, δ)-DP for other claims.
    """
    if not claim.promises or not math.isfinite(claim.epsilon) or not claim.delta > 0:
        return None
    mu = claim.gaussian_mu if claim.gaussian_mu is not None else gdp_mu(claim.epsilon, claim.delta)
    c = math.sqrt(n_out * n_in / (n_out + n_in))
    return float(gdp_epsilon(mu_lower_bound(mu * c, c, n_out + n_in - 2, alpha), claim.delta))
