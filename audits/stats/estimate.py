"""The one result type of the estimators: a bound, or a model's estimate beside an unconditional bound.

Two kinds of figure, never confused (docs/statistics.md, "Two kinds of bound"): a *bound* holds for the
mechanism whatever its output distribution (``valid_for`` is :data:`ANY_MECHANISM`), or under a model the
mechanism guarantees by construction (``model_holds``); an *estimate* rests on a model the mechanism does not
guarantee, and is reported in its own field beside the unconditional bound made on the same data. One rule
for ``uninformative`` and one for "at the ceiling", for every estimator.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


#: ``Estimator.valid_for`` of a bound that holds for any mechanism, whatever its scores' distributions
ANY_MECHANISM = "any mechanism"
#: ``Estimator.valid_for`` of a bound on μ that is a bound on ε only under the Gaussian-DP model
GAUSSIAN_DP = "a Gaussian-DP mechanism"
#: ``Estimator.valid_for`` of a bound that holds only when each world's scores are Gaussian with one variance
GAUSSIAN_SCORES = "Gaussian scores"


@dataclass(frozen=True)
class Estimate:
    """The one result type: the bound a verdict and a headline may use, the estimator's own figure, and its flags.

    ``bound`` is the estimator's own statistical result (``BoundResult``, ``OneRunResult``, ...). When the
    estimator's assumption (``valid_for``) is not :data:`ANY_MECHANISM` and the mechanism does not guarantee
    it (``model_holds``), that figure is an *estimate*: ``fallback`` — an unconditional bound on the same data
    at the same level — is the bound (``epsilon_lb``, ``ceiling``), and the model's figure is
    ``epsilon_estimate``. ``p_value`` is that of the claim's own statement and valid whenever the bound is: for
    Gaussian-DP estimators, of the claim's μ, which a μ lower bound tests whatever the mechanism; for a
    Gaussian fit that is an estimate, the fallback's.
    """

    bound: Any
    p_value: float
    #: the ε_LB the optimal test would reach on this budget if the claim were exactly tight (None: no claim)
    optimal: float | None = None
    #: the test cannot tell the worlds apart whatever the data (its cut calls every run one world, or the
    #: scores carry no ranking): its ε_LB of 0 is no evidence of privacy (see :attr:`uninformative`)
    cannot_tell: bool = False
    #: what ``bound`` assumes (the estimator's ``valid_for``)
    valid_for: str = ANY_MECHANISM
    #: the mechanism guarantees ``valid_for`` by construction (e.g. the likelihood ratio of statistics it
    #: noises with published Gaussian noise, the pair's reach the same in every run)
    model_holds: bool = False
    #: an unconditional bound on the same data (None when ``bound`` is one)
    fallback: Any = None
    #: the claimed ε the test is judged against (0 for a claim of nothing; None: unknown)
    claim_epsilon: float | None = None

    def __post_init__(self) -> None:
        if not self.is_bound and self.fallback is None:
            raise ValueError(f"an estimate resting on {self.valid_for!r} needs an unconditional fallback bound")

    @property
    def is_bound(self) -> bool:
        """Whether the estimator's own figure is a lower bound on this mechanism's ε (its assumption holds)."""
        return self.valid_for == ANY_MECHANISM or self.model_holds

    @property
    def headline(self):
        """The result the printed ε_LB and ceiling come from: ``bound`` if it is one, else ``fallback``."""
        return self.bound if self.is_bound else self.fallback

    @property
    def epsilon_lb(self) -> float:
        """The lower bound on the mechanism's ε at confidence 1 − alpha (never a model's figure)."""
        return float(self.headline.epsilon_lb)

    @property
    def ceiling(self) -> float:
        return float(self.headline.ceiling)

    @property
    def epsilon_estimate(self) -> float | None:
        """The model's ε (e.g. μ converted under the Gaussian-DP model) when it is not a bound, else None."""
        return None if self.is_bound else float(self.bound.epsilon_lb)

    @property
    def estimate_ceiling(self) -> float | None:
        return None if self.is_bound else float(self.bound.ceiling)

    @property
    def uninformative(self) -> bool:
        """The one rule, for every estimator: the test cannot tell the worlds apart, or its ceiling is 0, or its
        ceiling is below the claim (no outcome of these runs could contradict it)."""
        return uninformative(self.cannot_tell, self.ceiling, self.claim_epsilon)

    @property
    def at_ceiling(self) -> bool:
        """The bound sits at its ceiling: the leakage is at least that, and more runs would show more."""
        return at_ceiling(self.epsilon_lb, self.ceiling)

    @property
    def alpha(self) -> float:
        return float(self.bound.alpha)

    @property
    def method(self) -> str:
        return self.bound.method

    @property
    def bound_method(self) -> str:
        """The method of the printed bound (the fallback's when the estimator's own figure is an estimate)."""
        return self.headline.method

    @property
    def threshold_rule(self) -> str:
        return getattr(self.bound, "threshold_rule", "guesses")

    def to_dict(self) -> dict:
        return self.bound.to_dict() | {
            "epsilon_lb": self.epsilon_lb, "ceiling": self.ceiling, "bound_method": self.bound_method,
            "epsilon_estimate": self.epsilon_estimate, "estimate_ceiling": self.estimate_ceiling,
            "valid_for": self.valid_for, "model_holds": self.model_holds, "is_bound": self.is_bound,
            "p_value": self.p_value, "optimal_epsilon_lb": self.optimal, "uninformative": self.uninformative,
            "at_ceiling": self.at_ceiling}


def uninformative(cannot_tell: bool, ceiling: float, claim_epsilon: float | None) -> bool:
    """Whether a bound says nothing: its test cannot tell the worlds apart, its ceiling is 0 (no outcome shows
    any leakage), or its ceiling is below the claimed ε (no outcome could contradict the claim)."""
    below = claim_epsilon is not None and math.isfinite(claim_epsilon) and ceiling < claim_epsilon
    return bool(cannot_tell or not ceiling > 0 or below)


def at_ceiling(epsilon_lb: float, ceiling: float) -> bool:
    """Whether a bound is at its ceiling (``ceiling > 0``; an infinite ceiling only by an infinite bound)."""
    if not ceiling > 0:
        return False
    return bool(epsilon_lb >= ceiling * (1 - 1e-9)) if math.isfinite(ceiling) else math.isinf(epsilon_lb)
