"""Gaussian differential privacy (f-DP, Dong, Roth, Su 2022): μ bounds, the (ε, δ) curve, and GDP bounds."""
from __future__ import annotations

import math

import numpy as np
from scipy import optimize, stats
from scipy.special import log_ndtr

from recaudit.core.errors import ParameterError
from .rates import (BoundResult, _as_scores, _check_alpha, _check_delta, _scalar_or_array, _wilson_upper, cp_upper,
                    sorted_scores)
from .thresholds import _best_cut, _split_sample, threshold_counts


# --------------------------------------------------------------------------
# Gaussian differential privacy (f-DP)


def gdp_mu_lower_bound(false_pos, n_neg, false_neg, n_pos, alpha: float) -> float | np.ndarray:
    """Lower bound on μ at confidence 1 − alpha for a μ-GDP mechanism (Dong, Roth, Su 2022).

    μ-GDP means every test has ``FNR ≥ Φ(Φ⁻¹(1 − FPR) − μ)``, i.e.
    ``μ ≥ Φ⁻¹(1 − FPR) − Φ⁻¹(FNR)``; the right side decreases in both rates,
    so with one-sided Clopper–Pearson upper bounds ``FPR̄``, ``FNR̄`` (each at
    alpha/2) ``μ_LB = Φ⁻¹(1 − FPR̄) − Φ⁻¹(FNR̄)``, clipped at 0 (docs/statistics.md;
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
        raise ParameterError("mu", "need mu >= 0 and no NaN")
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
        raise ParameterError("mu", "mu must be >= 0")
    _check_delta(delta)
    out = np.array([_gdp_epsilon_scalar(float(m), float(d)) for m, d in zip(mu.ravel(), delta.ravel())])
    return _scalar_or_array(out.reshape(mu.shape))


def gdp_mu(epsilon: float, delta: float) -> float:
    """The μ whose μ-GDP curve is exactly (ε, δ)-DP: the root of ``gdp_delta(ε, μ) = δ`` (0 < δ < 1).

    ``δ_μ(ε)`` grows with μ, so the root is unique; the inverse of :func:`gdp_epsilon`.
    """
    _check_delta(delta)
    if not (delta > 0 and epsilon >= 0):
        raise ParameterError("epsilon", "need epsilon >= 0 and delta > 0")
    hi = 1.0
    while float(gdp_delta(epsilon, hi)) < delta:
        hi *= 2.0
    return float(optimize.brentq(lambda m: float(gdp_delta(epsilon, m)) - delta, 0.0, hi, xtol=1e-13))


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
    s0 = sorted_scores(_as_scores(scores0, "scores0"))
    s1 = sorted_scores(_as_scores(scores1, "scores1"))
    n0, n1 = s0.size, s1.size

    def crit(fp, fn, n_tests):
        level = alpha / 2.0 / (n_tests if simultaneous else 1)
        return _mu_from_rates(_wilson_upper(fp, n0, level), _wilson_upper(fn, n1, level))

    return _best_cut(s0, s1, crit, candidates)[:2]


def split_gdp_bound(
    scores0,
    scores1,
    alpha: float,
    delta: float,
    selection_fraction: float = 0.5,
    rng=None,
) -> BoundResult:
    """GDP ε lower bound at confidence 1 − alpha, test chosen on held-out runs (docs/statistics.md).

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
        raise ParameterError("delta", "the GDP conversion needs delta > 0 (μ-GDP is never pure ε-DP)")
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
        raise ParameterError("delta", "the GDP conversion needs delta > 0 (μ-GDP is never pure ε-DP)")
    sel0, sel1 = _as_scores(select0, "select0"), _as_scores(select1, "select1")
    e0, e1 = _as_scores(eval0, "eval0"), _as_scores(eval1, "eval1")
    threshold, direction = select_gdp_threshold(sel0, sel1, alpha, candidates=candidates)
    return _counted_gdp_bound(e0, e1, threshold, direction, alpha, delta, "split")


def fixed_threshold_gdp_bound(scores0, scores1, threshold: float, direction: int, alpha: float,
                              delta: float) -> BoundResult:
    """The GDP bound of one test fixed before the runs, counted on every run (no selection split).

    Valid only if the test was chosen without looking at these scores — e.g. the likelihood-ratio score of
    a known noise law cut at 0 (equal priors), where for Gaussian scores the μ estimate's variance is least.
    """
    _check_alpha(alpha)
    _check_delta(delta)
    if not float(delta) > 0.0:
        raise ParameterError("delta", "the GDP conversion needs delta > 0 (μ-GDP is never pure ε-DP)")
    if direction not in (1, -1):
        raise ParameterError("direction", "direction must be +1 or -1")
    return _counted_gdp_bound(_as_scores(scores0, "scores0"), _as_scores(scores1, "scores1"), threshold,
                              direction, alpha, delta, "explicit")


def _counted_gdp_bound(e0, e1, threshold, direction, alpha, delta, threshold_rule: str) -> BoundResult:
    fp, fn = threshold_counts(e0, e1, np.array([float(threshold)]), direction)
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
        threshold_rule=threshold_rule,
        mu_lb=mu_lb,
        mu_ceiling=mu_ceiling,
    )
