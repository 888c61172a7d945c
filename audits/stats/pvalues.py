"""The one p-value inversion: a bound that grows with alpha becomes the p-value of "the claim holds"."""
from __future__ import annotations

import math
from typing import Callable

P_FLOOR = 1e-300


def p_value_from_bound(bound_at: Callable[[float], float], epsilon_claim: float, tol: float = 1e-10) -> float:
    """``inf{alpha : bound_at(alpha) > epsilon_claim}``, by bisection on ``ln alpha``.

    Valid as the p-value of "the mechanism is epsilon_claim-DP" whenever the
    test is fixed and its bound grows with alpha (its rejection regions are
    nested; Lehmann & Romano, *Testing Statistical Hypotheses*, §3.3), so
    ``p < alpha`` exactly when the bound at alpha exceeds the claim. Returns 1
    when even alpha → 1 does not reject, and ``P_FLOOR`` when even that alpha
    rejects.
    """
    def rejects(log_alpha: float) -> bool:
        return float(bound_at(math.exp(log_alpha))) > epsilon_claim

    lo, hi = math.log(P_FLOOR), math.log1p(-1e-12)
    if not rejects(hi):
        return 1.0
    if rejects(lo):
        return P_FLOOR
    while hi - lo > tol * max(1.0, abs(lo)):  # invariant: rejects(hi), not rejects(lo)
        mid = 0.5 * (lo + hi)
        if rejects(mid):
            hi = mid
        else:
            lo = mid
    return float(math.exp(hi))
