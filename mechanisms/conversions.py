"""Claims stated in other currencies — zCDP ρ, Rényi (α, ε_α), μ-GDP — as (ε, δ) privacy claims.

Each conversion is the tightest valid one recaudit knows and is named in the
claim (``PrivacyClaim.conversion``), because the choice decides how loose the
(ε, δ) figure is:

* μ-GDP → (ε, δ): the exact curve ``δ(ε) = Φ(−ε/μ + μ/2) − e^ε Φ(−ε/μ − μ/2)``
  (Dong, Roth, Su 2022), inverted by dp-accounting's analytic Gaussian.
* ρ-zCDP of a **Gaussian** mechanism → μ = √(2ρ) (its privacy-loss
  distribution is exactly μ-GDP), then the curve above.
* ρ-zCDP of any mechanism, and Rényi DP → (ε, δ): dp-accounting's RDP
  conversion (Canonne, Kamath, Steinke 2020 / Asoodeh et al.), minimised
  over orders; ρ-zCDP is RDP with ε_α = ρα at every order α > 1. Valid for
  every mechanism, looser than the Gaussian curve for a Gaussian.
"""
from __future__ import annotations

import math

import numpy as np
from dp_accounting.rdp import rdp_privacy_accountant

from recaudit.core.errors import ParameterError
from .accounting import _gaussian_epsilon
from .claims import Model, Neighbouring, PrivacyClaim, Unit

#: the Rényi orders the zCDP conversion minimises over (dense near 1, up to 10^4)
RDP_ORDERS = np.concatenate([1.0 + np.geomspace(1e-3, 1.0, 60)[:-1], np.geomspace(2.0, 1e4, 300)])


def _check(name: str, value: float, low: float = 0.0) -> float:
    value = float(value)
    if not (math.isfinite(value) and value > low):
        raise ParameterError(name, f"{name} must be a finite number > {low:g}, got {value}")
    return value


def _delta(delta: float) -> float:
    delta = float(delta)
    if not 0.0 < delta < 1.0:
        raise ParameterError("delta", f"delta must be in (0, 1) to convert to (ε, δ), got {delta}")
    return delta


def from_gdp(mu: float, delta: float, *, model: Model = "central", unit: Unit = "user",
             neighbouring: Neighbouring = "replace") -> PrivacyClaim:
    """A μ-GDP claim: ε at δ on the Gaussian trade-off curve; the claim keeps μ (GDP estimators use it)."""
    mu, delta = _check("mu", mu), _delta(delta)
    return PrivacyClaim(_gaussian_epsilon(mu, delta), delta, model, unit, neighbouring, gaussian_mu=mu,
                        conversion=f"{mu:.6g}-GDP, ε at δ from the Gaussian trade-off curve")


def from_zcdp(rho: float, delta: float, *, gaussian: bool = False, model: Model = "central", unit: Unit = "user",
              neighbouring: Neighbouring = "replace") -> PrivacyClaim:
    """A ρ-zCDP claim as (ε, δ): exact through μ = √(2ρ) for a Gaussian mechanism, else through RDP."""
    rho, delta = _check("rho", rho), _delta(delta)
    if gaussian:
        mu = math.sqrt(2.0 * rho)
        return PrivacyClaim(_gaussian_epsilon(mu, delta), delta, model, unit, neighbouring, gaussian_mu=mu,
                            conversion=f"{rho:.6g}-zCDP of a Gaussian mechanism = {mu:.6g}-GDP (μ = √(2ρ)), "
                                       "ε at δ from the Gaussian trade-off curve")
    epsilon, order = rdp_privacy_accountant.compute_epsilon(RDP_ORDERS, rho * RDP_ORDERS, delta)
    return PrivacyClaim(float(epsilon), delta, model, unit, neighbouring,
                        conversion=f"{rho:.6g}-zCDP as Rényi DP (ε_α = ρα), converted at order α = {order:.4g} "
                                   "(dp-accounting)")


def from_renyi(order: float, epsilon_order: float, delta: float, *, model: Model = "central", unit: Unit = "user",
               neighbouring: Neighbouring = "replace") -> PrivacyClaim:
    """An (α, ε_α)-Rényi DP claim as (ε, δ) through dp-accounting's RDP conversion."""
    order, epsilon_order, delta = _check("order", order, 1.0), _check("epsilon_order", epsilon_order), _delta(delta)
    epsilon, _ = rdp_privacy_accountant.compute_epsilon([order], [epsilon_order], delta)
    return PrivacyClaim(float(epsilon), delta, model, unit, neighbouring,
                        conversion=f"({order:.6g}, {epsilon_order:.6g})-Rényi DP converted by dp-accounting")
