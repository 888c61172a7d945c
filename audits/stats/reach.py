"""How far an audited pair really moves the white-box statistics, against how far the claim assumes.

A claim's ε comes from the sensitivity its analysis bounds. The known-noise attack measures, per run,
the pair's own reach (``recaudit.attacks.known_noise``): ``μ_pair = sqrt(Σ_t ‖d_t‖²)/σ`` for Gaussian noise, or
``Σ |d|/b`` (a pure ε) for Laplace. The ε that reach implies is what the optimal test on this pair can
show at best; when it is below the claim for the worst pair one can build, the claim's analysis is loose
by ``looseness = ε_claim / ε_pair`` — a finding, not a failure of the audit.
"""
from __future__ import annotations

import math

import numpy as np

from .gdp import gdp_epsilon


def statistic_laws(mechanism) -> set[str]:
    """The noise laws of a mechanism's white-box statistics; ``{"subsampled_gaussian"}`` when a statistic is
    Poisson-sampled (``statistic_sampling`` below 1): a mixture, whose privacy loss is not Gaussian."""
    if sampling_of(mechanism) is not None:
        return {"subsampled_gaussian"}
    return {law for law, _ in getattr(mechanism, "statistic_noise", dict)().values()}


def sampling_of(mechanism) -> tuple[float, int] | None:
    """``(q, T)``: the Poisson rate of a sampled statistic and the rounds (``iterations``) it is released, or None."""
    rates = [q for q in getattr(mechanism, "statistic_sampling", dict)().values() if q < 1.0]
    return (min(rates), int(getattr(mechanism, "iterations", 1))) if rates else None


def _subsampled_epsilon(mu_step: float, sampling: tuple[float, int], delta: float) -> float:
    """ε at δ of ``T`` Poisson-subsampled Gaussian releases of reach ``mu_step`` each (dp-accounting's PLD on a
    pessimistic 2⁻¹² grid: an upper bound on the pair's ε when no round reaches more than ``mu_step``)."""
    from recaudit.mechanisms.accounting import GaussianRelease, PoissonSampled, epsilon_for

    q, steps = sampling
    return float(epsilon_for(PoissonSampled(GaussianRelease(1.0 / mu_step), q, count=steps), delta, 2.0 ** -12))


def pair_reach(law: str, reach: np.ndarray, claim, epsilon_lb: float,
               sampling: tuple[float, int] | None = None) -> dict | None:
    """The report's ``pair_reach`` for one test: the largest reach over its runs and the ε it implies.

    ``subsampled_gaussian`` (``sampling`` = ``(q, T)``): the reach is each run's largest round's μ, and the ε is
    that of ``T`` rounds each at that μ, sampled at ``q`` (an upper bound on the pair's ε)."""
    reach = np.asarray(reach, float)
    if reach.size == 0 or np.isnan(reach).all():
        return None
    top = float(np.nanmax(reach))
    out: dict = {"law": law, "runs": int(np.count_nonzero(~np.isnan(reach)))}
    if law == "subsampled_gaussian":
        epsilon = _subsampled_epsilon(top, sampling, claim.delta) if claim.delta > 0 and top > 0 else (
            math.inf if top > 0 else 0.0)
        out |= {"mu_step": top, "mu_step_median": float(np.nanmedian(reach)), "sampling_rate": sampling[0],
                "steps": sampling[1]}
    elif law == "gaussian":
        epsilon = float(gdp_epsilon(top, claim.delta)) if claim.delta > 0 else math.inf
        out |= {"mu_pair": top, "mu_pair_median": float(np.nanmedian(reach)), "mu_claim": claim.gaussian_mu}
    else:
        epsilon = top
        out |= {"epsilon_pair_median": float(np.nanmedian(reach))}
    claimed = claim.epsilon if claim.promises else None
    out |= {"epsilon_pair": epsilon,
            "looseness": claimed / epsilon if claimed is not None and epsilon > 0 else None,
            "tightness_vs_pair": epsilon_lb / epsilon if epsilon > 0 and math.isfinite(epsilon) else None}
    return out


def reachable_optimal(estimate, reach: dict | None, claim) -> float | None:
    """What the optimal test would show on the same runs if the mechanism were exactly as private as the audited
    pair reaches (``epsilon_pair``, with the pair's μ for Gaussian noise), when that is below the claim; else None.

    The figure to set beside ε_LB when the claim is loose: the ``optimal`` figure of an estimate is computed
    as if the claim were tight, which no audit of this pair can approach (docs/statistics.md, "Tight audits").
    Same estimator and counts as the printed bound (its headline: the unconditional fallback of an estimate).
    """
    import dataclasses

    from . import power

    if not reach or reach.get("epsilon_pair") is None or not claim.promises:
        return None
    eps_pair = float(reach["epsilon_pair"])
    if not (0 < eps_pair < claim.epsilon * (1 - 1e-3)) or not math.isfinite(eps_pair):  # reached: no second figure
        return None
    gaussian = reach["law"] == "gaussian"
    at_pair = dataclasses.replace(claim, epsilon=eps_pair, gaussian_mu=reach["mu_pair"] if gaussian else None)
    bound = estimate.headline
    if hasattr(bound, "false_pos"):  # a distinguishing test's counts
        return power.optimal_pairs_bound(bound.n_neg, bound.n_pos, at_pair, bound.alpha, bound.method)
    if hasattr(bound, "k_pos"):  # one-run guesses (the planned count stays the claim's)
        if bound.method == "fdp-one-run":
            return power.programme_figure(bound.m, at_pair, bound.alpha, bound.k_pos) if gaussian else None
        return power.one_run_figure(bound.m, at_pair, bound.alpha, bound.k_pos)
    if hasattr(bound, "n_in") and at_pair.delta > 0:
        return power.optimal_gauss_fit_bound(bound.n_out, bound.n_in, at_pair, bound.alpha)
    return None


def gaussian_by_construction(laws: set, reaches) -> bool:
    """Whether a pair's privacy loss is exactly Gaussian, so Gaussian-DP bounds on its tests are bounds.

    The mechanism noises every white-box statistic with Gaussian noise of a published σ (``statistic_noise``)
    and the pair's reach μ (``sqrt(Σ_t ‖d_t‖²)/σ``, measured in every run by an attack that replays the
    statistics, ``known_noise``) is the same in every run. The log-likelihood ratio of the statistics is
    then a sum of terms each Gaussian given the past with a variance fixed in advance, so it is exactly
    ``N(∓μ²/2, μ²)`` in the two worlds: the pair's trade-off curve on the statistics is the μ-GDP curve.
    Every test on them, or on a view computed from them (the releases), has error rates on or above that
    curve, so μ_LB ≤ μ and the Gaussian-DP ε of μ_LB is at most the pair's ε at δ, itself at most the
    mechanism's (docs/statistics.md, "Two kinds of bound").
    """
    if laws != {"gaussian"}:
        return False
    for reach in reaches:
        mu = None if reach is None else np.asarray(reach, float)
        if mu is not None and mu.size and np.isfinite(mu).all() and np.max(mu) > 0 \
                and np.ptp(mu) <= 1e-9 * np.max(mu):
            return True
    return False
