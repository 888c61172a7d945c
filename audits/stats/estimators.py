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

from . import bounds, gauss_fit, gdp, one_run, power, rates
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
    #: the ε_LB the optimal test would reach on this budget if the claim were exactly tight (None: no claim)
    optimal: float | None = None
    #: the test cannot tell the worlds apart whatever the data (its cut calls every run one world, or the
    #: scores carry no ranking): its ε_LB of 0 is no evidence of privacy
    uninformative: bool = False

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
        return self.bound.to_dict() | {"p_value": self.p_value, "optimal_epsilon_lb": self.optimal,
                                       "uninformative": self.uninformative}


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


def _pairs_estimate(bound, p_value: float, claim: PrivacyClaim) -> Estimate:
    """The estimate of a distinguishing test: its power at its counted runs, and whether its cut says anything.

    A cut is uninformative when it calls every counted run of both worlds the
    same world (then ε_LB is 0 whatever the mechanism).
    """
    called_one = bound.false_pos + bound.n_pos - bound.false_neg
    optimal = power.optimal_pairs_bound(bound.n_neg, bound.n_pos, claim, bound.alpha, bound.method)
    return Estimate(bound, p_value, optimal, called_one in (0, bound.n_neg + bound.n_pos))


def _no_ranking(scores: np.ndarray) -> bool:
    """Canary scores that are all equal rank nothing: the guesses are the tie-break."""
    return bool(np.ptp(np.asarray(scores, dtype=float)) == 0)


@dataclass(frozen=True)
class Split(Estimator):
    """Clopper–Pearson: the threshold chosen on ``selection_fraction`` of the runs, the bound on the rest."""

    name: ClassVar[str] = "split"
    selection_fraction: Annotated[float, Gt(0), Lt(1)] = 0.5

    def estimate(self, scores, worlds, claim, alpha):
        bound = bounds.split_epsilon_bound(scores[0], scores[1], alpha=alpha, delta=claim.delta,
                                           selection_fraction=self.selection_fraction)
        counts = _counts(bound)
        return _pairs_estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon), claim)


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
        return _pairs_estimate(self._at(scores, alpha, claim.delta), p_value_from_bound(
            lambda a: self._at(scores, a, claim.delta).epsilon_lb, claim.epsilon), claim)


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
        return _pairs_estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon), claim)


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
        return _pairs_estimate(bound, p_value_from_bound(
            lambda a: float(gdp.gdp_epsilon(gdp.gdp_mu_lower_bound(*counts, a), claim.delta)),
            claim.epsilon), claim)


class _Guesses(Estimator):
    """Guess-based one-run estimators: the top ``k`` canaries guessed in, the bottom ``k`` out.

    ``k`` is ``guess_fraction`` of the canaries when given, else planned
    (:func:`audits.stats.power.plan_guesses`): the count that maximises the
    bound this estimator would reach if the claim were exactly tight — a
    function of the number of canaries, the claim and alpha only, fixed
    before any score is seen. The plan's bound is the estimate's ``optimal``.
    """

    input: ClassVar[str] = "canaries"

    def _guesses(self, m: int, claim: PrivacyClaim, alpha: float) -> tuple[int, float | None]:
        k, optimal = power.plan_guesses(m, claim, alpha, self.name)
        if self.guess_fraction is not None:
            k = int(self.guess_fraction * m)
        return k, optimal


@dataclass(frozen=True)
class OneRun(_Guesses):
    """Steinke–Nasr–Jagielski one-run bound from the planned (or ``guess_fraction``) guesses."""

    name: ClassVar[str] = "one-run"
    guess_fraction: Annotated[float, Gt(0), Le(0.5)] | None = None

    def estimate(self, scores, worlds, claim, alpha):
        k, optimal = self._guesses(scores.size, claim, alpha)
        bound = one_run.one_run_audit(scores, np.asarray(worlds).astype(bool), k, k, alpha, claim.delta)
        return Estimate(bound, one_run.one_run_p_value(bound.r, bound.v, claim.epsilon, claim.delta, bound.m),
                        optimal, _no_ranking(scores))


@dataclass(frozen=True)
class FDPOneRun(_Guesses):
    """f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2025) against the claim's Gaussian curve.

    Guesses as ``one-run`` (planned for this estimator's bound); tests "the
    mechanism is μ-GDP" with μ the claim's ``gaussian_mu``, so it refuses
    claims without one. ε figures are μ converted at the claim's δ.
    """

    name: ClassVar[str] = "fdp-one-run"
    guess_fraction: Annotated[float, Gt(0), Le(0.5)] | None = None

    def check_claim(self, claim: PrivacyClaim) -> None:
        GaussianDP().check_claim(claim)

    def estimate(self, scores, worlds, claim, alpha):
        self.check_claim(claim)
        k, optimal = self._guesses(scores.size, claim, alpha)
        bound = one_run.fdp_one_run_audit(scores, np.asarray(worlds).astype(bool), k, k, alpha, claim.delta)
        return Estimate(bound, one_run.fdp_one_run_p_value(bound.r, bound.v, bound.m, claim.gaussian_mu),
                        optimal, _no_ranking(scores))


@dataclass(frozen=True)
class GaussFit(Estimator):
    """Gaussian fit of the canary scores (after "Let's Ask Gauss", 2026): a μ bound from every score.

    Valid when, given its bit, each canary's score is Gaussian with one
    common variance, independently across canaries (isolated canaries under
    Gaussian noise); see :mod:`audits.stats.gauss_fit`. The model is checked
    at ``check_alpha`` (0: not checked) and a rejected model gives no bound.
    Any claim with δ > 0: the Gaussian scores alone imply ε at δ.
    """

    name: ClassVar[str] = "gauss-fit"
    input: ClassVar[str] = "canaries"
    check_alpha: Annotated[float, Ge(0), Lt(1)] = 0.01

    def check_claim(self, claim: PrivacyClaim) -> None:
        if claim.delta <= 0:
            raise EstimatorError("method", "gauss-fit converts a Gaussian μ to ε at the claim's delta, but the "
                                           "mechanism claims pure epsilon-DP (delta = 0); use one-run")

    def estimate(self, scores, worlds, claim, alpha):
        self.check_claim(claim)
        bound = gauss_fit.gauss_fit_audit(scores, worlds, alpha, claim.delta, self.check_alpha)
        p_value = 1.0 if bound.model_rejected else gauss_fit.claim_p_value(bound, claim.epsilon)
        return Estimate(bound, p_value, power.optimal_gauss_fit_bound(bound.n_out, bound.n_in, claim, alpha),
                        _no_ranking(scores) or bound.model_rejected)


ESTIMATORS: dict[str, type[Estimator]] = {
    "split": Split,
    "bonferroni": Bonferroni,
    "explicit": Explicit,
    "gdp": GaussianDP,
    "one-run": OneRun,
    "fdp-one-run": FDPOneRun,
    "gauss-fit": GaussFit,
}


def estimator_settings(cls: type[Estimator]) -> list[str]:
    """The names of an estimator's settings (its dataclass fields)."""
    return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

