"""Gaussian fit of one run's canary scores: a μ lower bound from the scores themselves, not from guesses.

After "Let's Ask Gauss" (Agrawal, Wei, Singh, Magdon-Ismail, Zikas, 2026):
one-run audits that threshold canaries into guesses throw away most of what
the scores say. When each canary's score is Gaussian given its secret bit —
``N(a, σ²)`` out, ``N(a + d, σ²)`` in, independently across canaries (the
white-box score of an isolated canary under Gaussian noise: its projection on
its own direction) — the scores of one world are a post-processing of the
mechanism's output, so the mechanism is at least as distinguishable as
``N(0, 1)`` from ``N(d/σ, 1)``: its trade-off curve lies below ``G_{d/σ}``
and its ε at any δ is at least ``ε_{d/σ}(δ)`` (Dong, Roth, Su 2022,
Cor. 2.13) — whatever its claim.

The bound on ``d/σ`` is exact under that model: the two-sample t statistic
is noncentral-t with ``n₀ + n₁ − 2`` degrees of freedom and noncentrality
``(d/σ)·√(n₀n₁/(n₀ + n₁))``, whose survival function grows with the
noncentrality, so inverting it (``scipy.stats.nct``) gives a one-sided
lower confidence bound at level ``1 − alpha``.

Validity rests on the model; it is checked before any bound is given.
D'Agostino–Pearson normality in each world and Levene's equal-variance test
(scipy), each at ``check_alpha``: a rejected model gives no bound (ε_LB = 0,
``model_rejected``). The check only ever withholds a bound, so under the
model the error stays ≤ alpha; a model that is wrong yet passes (few canaries,
mild departures) is the estimator's stated risk — use the guess-based
estimators when canaries interfere or scores are not Gaussian.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import optimize, stats

from recaudit.core.errors import ParameterError
from .gdp import gdp_epsilon, gdp_mu

__all__ = ["GaussFitResult", "model_check", "mu_lower_bound", "mu_p_value", "gauss_fit_audit", "claim_p_value"]


@dataclass(frozen=True)
class GaussFitResult:
    """A Gaussian-fit bound: μ (= d/σ) estimate and lower bound, ε at δ, and the model check."""

    epsilon_lb: float
    ceiling: float  # unbounded: no count caps a fitted μ
    alpha: float
    delta: float
    mu_hat: float
    mu_lb: float
    n_out: int
    n_in: int
    check_p_value: float
    model_rejected: bool
    method: str = "gauss-fit"

    def to_dict(self) -> dict:
        d = asdict(self)
        for key in ("epsilon_lb", "ceiling", "alpha", "delta", "mu_hat", "mu_lb", "check_p_value"):
            d[key] = float(d[key])
        return d


def _split(scores, worlds) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=float).ravel()
    b = np.asarray(worlds).ravel()
    if s.size != b.size or not np.isin(b, (0, 1)).all() or np.isnan(s).any():
        raise ParameterError("scores", "need one finite score and one 0/1 world per canary")
    out, inside = s[b == 0], s[b == 1]
    if min(out.size, inside.size) < 3:
        raise ParameterError("scores", "the Gaussian fit needs at least 3 canaries in each world")
    return out, inside


def _t_statistic(out: np.ndarray, inside: np.ndarray) -> tuple[float, float, int]:
    """(t, c, df): pooled two-sample t, the factor ``√(n₀n₁/(n₀+n₁))`` and degrees of freedom."""
    n0, n1 = out.size, inside.size
    df = n0 + n1 - 2
    pooled = ((n0 - 1) * out.var(ddof=1) + (n1 - 1) * inside.var(ddof=1)) / df
    c = math.sqrt(n0 * n1 / (n0 + n1))
    diff = float(inside.mean() - out.mean())
    if pooled <= 0:  # every score equal within each world: no spread to standardise by
        return (0.0 if diff == 0 else math.copysign(math.inf, diff)), c, df
    return diff / math.sqrt(pooled) * c, c, df


def model_check(out: np.ndarray, inside: np.ndarray) -> float:
    """Smallest p-value of the model checks: normality in each world (D'Agostino–Pearson), equal variances (Levene)."""
    if np.ptp(out) == 0 or np.ptp(inside) == 0:
        return 0.0
    ps = [stats.normaltest(x).pvalue for x in (out, inside) if x.size >= 20]
    ps.append(stats.levene(out, inside, center="mean").pvalue)
    return float(min(ps))


def mu_p_value(t: float, c: float, df: int, mu: float) -> float:
    """p-value of "d/σ ≤ mu" given the observed t: ``P[T ≥ t]`` at noncentrality ``mu·c``."""
    if math.isinf(t):
        return 0.0 if t > 0 else 1.0
    return float(stats.nct.sf(t, df, mu * c)) if mu > 0 else float(stats.t.sf(t, df))


def mu_lower_bound(t: float, c: float, df: int, alpha: float) -> float:
    """``sup{μ : P_μ[T ≥ t] < alpha}`` (0 if even μ = 0 is not rejected); inf for perfect separation."""
    if mu_p_value(t, c, df, 0.0) >= alpha:
        return 0.0
    if math.isinf(t):
        return math.inf
    hi = max(1.0, 2.0 * t / c)
    while mu_p_value(t, c, df, hi) < alpha:
        hi *= 2.0
    return float(optimize.brentq(lambda mu: mu_p_value(t, c, df, mu) - alpha, 0.0, hi, xtol=1e-10))


def gauss_fit_audit(scores, worlds, alpha: float, delta: float, check_alpha: float = 0.01) -> GaussFitResult:
    """The Gaussian-fit bound of one run's canaries (see the module docstring for the model and its check)."""
    if not delta > 0:
        raise ParameterError("delta", "the Gaussian conversion needs delta > 0")
    out, inside = _split(scores, worlds)
    t, c, df = _t_statistic(out, inside)
    check = model_check(out, inside) if check_alpha > 0 else 1.0
    rejected = check < check_alpha
    mu_lb = 0.0 if rejected else mu_lower_bound(t, c, df, alpha)
    return GaussFitResult(epsilon_lb=float(gdp_epsilon(mu_lb, delta)), ceiling=math.inf, alpha=float(alpha),
                          delta=float(delta), mu_hat=t / c, mu_lb=mu_lb, n_out=int(out.size), n_in=int(inside.size),
                          check_p_value=check, model_rejected=bool(rejected))


def claim_p_value(result: GaussFitResult, epsilon: float) -> float:
    """p-value of "the mechanism is (ε, δ)-DP" under the model: of ``d/σ ≤ μ*``, μ* the μ exactly (ε, δ)-DP.

    ``p < alpha`` exactly when ``result.epsilon_lb`` at alpha exceeds ε (both
    invert the same noncentral-t family).
    """
    if not math.isfinite(epsilon):
        return 1.0
    c = math.sqrt(result.n_out * result.n_in / (result.n_out + result.n_in))
    return mu_p_value(result.mu_hat * c, c, result.n_out + result.n_in - 2, gdp_mu(epsilon, result.delta))
