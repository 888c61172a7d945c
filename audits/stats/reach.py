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


def pair_reach(law: str, reach: np.ndarray, claim, epsilon_lb: float) -> dict | None:
    """The report's ``pair_reach`` for one test: the largest reach over its runs and the ε it implies."""
    reach = np.asarray(reach, float)
    if reach.size == 0 or np.isnan(reach).all():
        return None
    top = float(np.nanmax(reach))
    out: dict = {"law": law, "runs": int(np.count_nonzero(~np.isnan(reach)))}
    if law == "gaussian":
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
