"""p-values of "the claim holds" (the one inversion of a bound that grows with alpha) and Holm's correction."""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from recaudit.core.errors import ParameterError
from .rates import _check_alpha, _check_delta, epsilon_lower_bound

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


# --------------------------------------------------------------------------
# p-values and multiple testing


def holm_adjust(p_values, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Holm's step-down correction (Holm 1979): ``(reject, adjusted_p_values)``.

    Controls the family-wise error rate at alpha across all the tests of one
    run (docs/statistics.md, "Verdicts"); the same arithmetic as
    ``statsmodels.stats.multitest.multipletests(method="holm")`` (which the tests compare it with), without
    the full garbage collection statsmodels runs on every call (a quarter second in a run's process).
    """
    _check_alpha(alpha)
    p = np.asarray(p_values, dtype=float).ravel()
    if p.size == 0 or np.any(~((p >= 0) & (p <= 1))):
        raise ParameterError("p_values", "p_values must be a non-empty array in [0, 1]")
    order = np.argsort(p)
    ranked = p[order]
    steps = np.arange(p.size, 0, -1)
    above = np.flatnonzero(ranked > alpha / steps)  # step down: reject until the first p above its level
    reject_ranked = np.arange(p.size) < (above[0] if above.size else p.size)
    adjusted_ranked = np.minimum(np.maximum.accumulate(ranked * steps), 1.0)
    reject, adjusted = np.empty(p.size, dtype=bool), np.empty(p.size)
    reject[order], adjusted[order] = reject_ranked, adjusted_ranked
    return reject, adjusted


def violation_p_value(
    false_pos, n_neg, false_neg, n_pos, epsilon_claim: float, delta: float = 0.0, *, tol: float = 1e-10
) -> float:
    """p-value of the hypothesis "the mechanism is (ε_claim, δ)-DP" from one fixed test's counts.

    The test "reject if :func:`epsilon_lower_bound` at level alpha exceeds
    ε_claim" has rejection regions nested in alpha (the bound grows with
    alpha), so its p-value is ``inf{alpha : ε_LB(alpha) > ε_claim}`` and
    ``p < alpha ⇔ ε_LB(alpha) > ε_claim`` (:func:`recaudit.audits.stats.pvalues.p_value_from_bound`).
    Feed several of them to :func:`holm_adjust`.
    """
    _check_delta(delta)
    return p_value_from_bound(
        lambda a: float(epsilon_lower_bound(false_pos, n_neg, false_neg, n_pos, a, delta)), epsilon_claim, tol)
