"""Planning an audit: how many trials show a given true ε against a claim, and the ceiling.

The distinguishing game counts one fixed test on ``n`` evaluation runs per
world: ``FP ~ Bin(n, FPR)``, ``FN ~ Bin(n, FNR)``, independent. The claim is
shown violated when :func:`recaudit.audits.stats.rates.epsilon_lower_bound` of the
counts exceeds it. That event is, for each ``FP = k``, ``FN ≤ j*(k)``, where
by Clopper–Pearson duality (``cp_upper(j) < x ⇔ P[Bin(n, x) ≤ j] < a``)
``j*(k) = F⁻¹_{Bin(n, x(k))}(a) − 1`` for each of the bound's two terms; so
the power is the exact sum ``Σ_k P[FP = k]·P[FN ≤ max(j₁*(k), j₂*(k))]``.

Which test? The one the mechanism's trade-off curve allows at the true ε:
``shape="pure"`` is the tightest ε-DP curve (``FNR = max(1 − e^ε FPR,
e^{−ε}(1 − FPR))``: randomized response at its corner, Laplace-like tails
elsewhere), ``shape="gaussian"`` the μ-GDP curve whose ε at ``delta`` is the
true ε. The plan takes the best test on a grid of FPRs, so it assumes an
attack that reaches the curve; a learned attack needs its fitting runs on
top (the harness fits on a quarter of the runs by default), and a weaker
attack needs more.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from recaudit.core.errors import ParameterError
from .rates import ceiling, cp_upper
from .pvalues import P_FLOOR

__all__ = ["SHAPES", "Plan", "detection_power", "plan_trials", "trade_off_curve", "trials_for_ceiling"]

SHAPES = ("pure", "gaussian")


def detection_power(n: int, fpr: float, fnr: float, claimed_epsilon: float, alpha: float,
                    delta: float = 0.0) -> float:
    """P[ε_LB > claimed ε] for one fixed test with true rates ``fpr``, ``fnr`` on ``n`` runs per world (exact)."""
    n = int(n)
    if n < 1 or not (0 <= fpr <= 1 and 0 <= fnr <= 1):
        raise ParameterError("n", "need n >= 1 and rates in [0, 1]")
    a = alpha / 2.0
    lo, hi = (int(x) for x in stats.binom.ppf([1e-13, 1 - 1e-13], n, fpr))
    k = np.arange(max(lo - 1, 0), min(hi + 1, n) + 1)
    fpr_ub = np.asarray(cp_upper(k, n, a), dtype=float)
    growth = math.exp(claimed_epsilon)
    x1 = 1.0 - delta - growth * fpr_ub  # term 1 exceeds the claim iff FNR̄ < x1
    x2 = (1.0 - delta - fpr_ub) / growth  # term 2 exceeds the claim iff FNR̄ < x2
    x = np.clip(np.maximum(x1, x2), 0.0, 1.0)
    j_star = np.where(x > 0, stats.binom.ppf(a, n, x) - 1, -1)
    caught = np.where(j_star >= 0, stats.binom.cdf(j_star, n, fnr), 0.0)
    return float(np.clip(np.sum(stats.binom.pmf(k, n, fpr) * caught), 0.0, 1.0))


def trade_off_curve(shape: str, epsilon: float | None = None, delta: float = 0.0, mu: float | None = None):
    """FNR as a function of FPR on the tightest curve of its kind (vectorised).

    ``shape="pure"``: the tightest (ε, δ)-DP curve ``max(1 − δ − e^ε·FPR,
    e^{−ε}(1 − δ − FPR), 0)``; ``shape="gaussian"``: the μ-GDP curve
    ``Φ(Φ⁻¹(1 − FPR) − μ)``, with μ given or the one whose ε at ``delta`` is
    ``epsilon`` (:func:`recaudit.audits.stats.gdp.gdp_mu`).
    """
    if shape == "pure":
        growth = math.exp(epsilon)
        return lambda f: np.maximum(np.maximum(1.0 - delta - growth * f, (1.0 - delta - f) / growth), 0.0)
    if shape == "gaussian":
        if mu is None:
            if not delta > 0:
                raise ParameterError("shape", "shape='gaussian' needs delta > 0 (a Gaussian curve has no pure ε)")
            from .gdp import gdp_mu

            mu = gdp_mu(epsilon, delta)
        return lambda f: stats.norm.cdf(stats.norm.isf(f) - mu)
    raise ParameterError("shape", f"shape must be one of {SHAPES}, got {shape!r}")


@dataclass(frozen=True)
class Plan:
    """Trials per world for the asked power, the test assumed, and the ceiling at that size."""

    trials: int
    evaluation_runs: int
    power: float
    fpr: float
    fnr: float
    ceiling: float
    trials_for_ceiling: int
    true_epsilon: float
    claimed_epsilon: float
    alpha: float
    delta: float
    shape: str

    def to_dict(self) -> dict:
        return asdict(self)


def trials_for_ceiling(claimed_epsilon: float, alpha: float, delta: float = 0.0,
                       selection_fraction: float = 0.5) -> int:
    """Fewest trials per world whose ceiling (perfect separation) exceeds the claim: below it no audit can."""
    n = 1
    while float(ceiling(n, n, alpha, delta)) <= claimed_epsilon:
        n *= 2
        if n > 2**50:
            raise ParameterError("delta", "no trial count reaches this claim (δ too large?)")
    lo, hi = n // 2, n
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if float(ceiling(mid, mid, alpha, delta)) > claimed_epsilon else (mid, hi)
    return math.ceil(hi / (1.0 - selection_fraction))


def plan_trials(true_epsilon: float, claimed_epsilon: float, alpha: float = 1e-3, power: float = 0.9,
                delta: float = 0.0, shape: str = "pure", selection_fraction: float = 0.5,
                max_trials: int = 10**9) -> Plan:
    """Fewest trials per world with ``P[ε_LB > claimed ε] ≥ power`` when the mechanism's true ε is ``true_epsilon``.

    Searches evaluation sizes (doubling, then bisection to 2 %) and, at
    each, the best test on a log grid of FPRs of the ``shape`` curve; the
    returned ``trials`` adds the selection share. Raises when even
    ``max_trials`` do not reach the power.
    """
    if not true_epsilon > claimed_epsilon >= 0:
        raise ParameterError("true_epsilon", "a violation exists only when true_epsilon > claimed_epsilon >= 0")
    if not 0 < power < 1:
        raise ParameterError("power", "power must be in (0, 1)")
    curve = trade_off_curve(shape, true_epsilon, delta)

    def best(n: int) -> tuple[float, float, float]:
        grid = np.unique(np.concatenate([np.geomspace(max(0.1 / n, P_FLOOR), 0.5, 40),
                                         [1.0 / (1.0 + math.exp(true_epsilon))]]))
        fnr = np.clip(curve(grid), 0.0, 1.0)
        powers = [detection_power(n, f, g, claimed_epsilon, alpha, delta) for f, g in zip(grid, fnr)]
        j = int(np.argmax(powers))
        return powers[j], float(grid[j]), float(fnr[j])

    limit = int(max_trials * (1.0 - selection_fraction))
    n = 16
    while best(n)[0] < power:
        n *= 2
        if n > limit:
            raise ParameterError("max_trials",
                                 f"more than {max_trials} trials per world would be needed for power {power}")
    lo, hi = n // 2, n
    while hi - lo > max(1, hi // 50):
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if best(mid)[0] >= power else (mid, hi)
    got, fpr, fnr = best(hi)
    return Plan(trials=math.ceil(hi / (1.0 - selection_fraction)), evaluation_runs=hi, power=got, fpr=fpr, fnr=fnr,
                ceiling=float(ceiling(hi, hi, alpha, delta)),
                trials_for_ceiling=trials_for_ceiling(claimed_epsilon, alpha, delta, selection_fraction),
                true_epsilon=float(true_epsilon), claimed_epsilon=float(claimed_epsilon), alpha=float(alpha),
                delta=float(delta), shape=shape)
