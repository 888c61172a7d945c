"""Estimators as registered parts: attack scores in, one :class:`Estimate` out.

Each estimator is a dataclass whose fields are its configuration (they become
its scenario settings, with their constraints) and whose ``estimate`` turns
scores into an ε lower bound at level alpha and the p-value of "the claim
holds". Two kinds of input exist: ``pairs`` (scores of runs in world 0 and in
world 1: the distinguishing game) and ``canaries`` (one score per canary and
its secret world: the one-run game). A new estimator is one class here (or
in its own module) plus one line in ``ESTIMATORS``.
"""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Le, Lt

from mechanisms import ParameterError, PrivacyClaim

from . import bounds, gdp, one_run, rates
from .pvalues import p_value_from_bound


class EstimatorError(ParameterError):
    """An estimator's settings are wrong, or it cannot judge this claim (``field`` names the setting at fault)."""


@dataclass(frozen=True)
class Estimate:
    """The one result type: a bound, its confidence and ceiling, the counts behind it, and its p-value.

    ``bound`` is the underlying statistical result (``BoundResult`` or
    ``OneRunResult``) for readers who need its details.
    """

    bound: Any
    p_value: float

    @property
    def epsilon_lb(self) -> float:
        return float(self.bound.epsilon_lb)

    @property
    def ceiling(self) -> float:
        return float(self.bound.ceiling)

    @property
    def alpha(self) -> float:
        return float(self.bound.alpha)

    @property
    def method(self) -> str:
        return self.bound.method

    @property
    def strategy(self) -> str:
        return getattr(self.bound, "strategy", "guesses")

    def to_dict(self) -> dict:
        return self.bound.to_dict() | {"p_value": self.p_value}


class Estimator(ABC):
    """Turns scores into an :class:`Estimate` against a claim at level alpha."""

    name: ClassVar[str]
    input: ClassVar[Literal["pairs", "canaries"]] = "pairs"

    def check_claim(self, claim: PrivacyClaim) -> None:
        """Raise :class:`EstimatorError` when this estimator cannot judge ``claim``."""

    @abstractmethod
    def estimate(self, scores: np.ndarray, worlds: np.ndarray | None, claim: PrivacyClaim,
                 alpha: float) -> Estimate:
        """``pairs``: ``scores`` of shape (2, runs) and ``worlds`` None; ``canaries``: (m,) and (m,) bits."""


def _counts(bound) -> tuple[int, int, int, int]:
    return bound.false_pos, bound.n_neg, bound.false_neg, bound.n_pos


@dataclass(frozen=True)
class Split(Estimator):
    """Clopper–Pearson: the threshold chosen on ``selection_fraction`` of the runs, the bound on the rest."""

    name: ClassVar[str] = "split"
    selection_fraction: Annotated[float, Gt(0), Lt(1)] = 0.5

    def estimate(self, scores, worlds, claim, alpha):
        bound = bounds.split_epsilon_bound(scores[0], scores[1], alpha=alpha, delta=claim.delta,
                                           selection_fraction=self.selection_fraction)
        counts = _counts(bound)
        return Estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon))


@dataclass(frozen=True)
class Bonferroni(Estimator):
    """Clopper–Pearson over a threshold grid fixed in advance, Bonferroni-corrected; uses every run."""

    name: ClassVar[str] = "bonferroni"
    thresholds: list[float] | None = None
    score_range: tuple[float, float] | None = None
    grid_size: Annotated[int, Ge(1)] = 100

    def __post_init__(self) -> None:
        if self.thresholds is None and self.score_range is None:
            raise EstimatorError("thresholds", "threshold: bonferroni needs a grid fixed in advance: "
                                               "thresholds or score_range")
        if self.score_range is not None and not self.score_range[0] < self.score_range[1]:
            raise EstimatorError("score_range", "must be [low, high] with low < high")

    def _at(self, scores, alpha, delta):
        return bounds.bonferroni_epsilon_bound(scores[0], scores[1], alpha, delta, thresholds=self.thresholds,
                                               grid_size=self.grid_size, score_range=self.score_range)

    def estimate(self, scores, worlds, claim, alpha):
        return Estimate(self._at(scores, alpha, claim.delta), p_value_from_bound(
            lambda a: self._at(scores, a, claim.delta).epsilon_lb, claim.epsilon))


@dataclass(frozen=True)
class Explicit(Estimator):
    """Clopper–Pearson for one test (threshold and direction) fixed in advance; uses every run."""

    name: ClassVar[str] = "explicit"
    threshold_value: float | None = None
    direction: Literal[1, -1] = 1

    def __post_init__(self) -> None:
        if self.threshold_value is None:
            raise EstimatorError("threshold_value", "required with threshold: explicit")

    def estimate(self, scores, worlds, claim, alpha):
        bound = bounds.fixed_threshold_epsilon_bound(scores[0], scores[1], self.threshold_value, self.direction,
                                                     alpha, claim.delta)
        counts = _counts(bound)
        return Estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon))


@dataclass(frozen=True)
class GaussianDP(Estimator):
    """f-DP: a μ lower bound from the error-rate bounds, converted to ε at the claim's δ.

    Valid only against a claim with a Gaussian trade-off curve (it carries
    ``gaussian_mu``); on randomized-response or Laplace claims the conversion
    overstates ε, so those are refused.
    """

    name: ClassVar[str] = "gdp"
    selection_fraction: Annotated[float, Gt(0), Lt(1)] = 0.5

    def check_claim(self, claim: PrivacyClaim) -> None:
        if claim.delta <= 0:
            raise EstimatorError("method", "gdp converts mu to epsilon at the claim's delta, but the mechanism "
                                           "claims pure epsilon-DP (delta = 0); use clopper-pearson")
        if claim.gaussian_mu is None:
            raise EstimatorError("method", "gdp converts through a Gaussian trade-off curve, but the mechanism's "
                                           "claim has none (its privacy events are not all Gaussian); "
                                           "use clopper-pearson")

    def estimate(self, scores, worlds, claim, alpha):
        self.check_claim(claim)
        bound = gdp.split_gdp_bound(scores[0], scores[1], alpha, claim.delta, self.selection_fraction)
        counts = _counts(bound)
        return Estimate(bound, p_value_from_bound(
            lambda a: float(gdp.gdp_epsilon(gdp.gdp_mu_lower_bound(*counts, a), claim.delta)),
            claim.epsilon))


@dataclass(frozen=True)
class OneRun(Estimator):
    """Steinke–Nasr–Jagielski one-run bound: ``guess_fraction`` of the canaries guessed in, as many out."""

    name: ClassVar[str] = "one-run"
    input: ClassVar[str] = "canaries"
    guess_fraction: Annotated[float, Gt(0), Le(0.5)] = 0.1

    def estimate(self, scores, worlds, claim, alpha):
        k_pos, k_neg = one_run.default_guess_counts(scores.size, self.guess_fraction)
        bound = one_run.one_run_audit(scores, np.asarray(worlds).astype(bool), k_pos, k_neg, alpha, claim.delta)
        return Estimate(bound, one_run.one_run_p_value(bound.r, bound.v, claim.epsilon, claim.delta, bound.m))


@dataclass(frozen=True)
class FDPOneRun(Estimator):
    """f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2025) against the claim's Gaussian curve.

    Same guesses as ``one-run`` (``guess_fraction`` of the canaries in, as
    many out, fixed in advance); tests "the mechanism is μ-GDP" with μ the
    claim's ``gaussian_mu``, so it refuses claims without one. ε figures are
    μ converted at the claim's δ.
    """

    name: ClassVar[str] = "fdp-one-run"
    input: ClassVar[str] = "canaries"
    guess_fraction: Annotated[float, Gt(0), Le(0.5)] = 0.1

    def check_claim(self, claim: PrivacyClaim) -> None:
        GaussianDP().check_claim(claim)

    def estimate(self, scores, worlds, claim, alpha):
        self.check_claim(claim)
        k_pos, k_neg = one_run.default_guess_counts(scores.size, self.guess_fraction)
        bound = one_run.fdp_one_run_audit(scores, np.asarray(worlds).astype(bool), k_pos, k_neg, alpha,
                                          claim.delta)
        return Estimate(bound, one_run.fdp_one_run_p_value(bound.r, bound.v, bound.m, claim.gaussian_mu))


ESTIMATORS: dict[str, type[Estimator]] = {
    "split": Split,
    "bonferroni": Bonferroni,
    "explicit": Explicit,
    "gdp": GaussianDP,
    "one-run": OneRun,
    "fdp-one-run": FDPOneRun,
}


def estimator_settings(cls: type[Estimator]) -> list[str]:
    """The names of an estimator's settings (its dataclass fields)."""
    return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

