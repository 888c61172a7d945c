"""Estimators as registered parts: attack scores in, one :class:`Estimate` out.

Each estimator is a dataclass whose fields are its configuration (they become
its scenario settings in ``audit:``, with their constraints) and whose
``estimate`` turns scores into an ε lower bound at level alpha and the
p-value of "the claim holds". Two kinds of input exist: ``pairs`` (scores of
runs in world 0 and in world 1: the distinguishing game) and ``canaries`` (one
score per canary and its secret world: the one-run game).

One vocabulary: ``class X(Estimator, kind="k")`` registers X in ``ESTIMATORS``;
its ``method`` (the bound's family) and ``threshold_rule`` (how its test's
threshold is chosen; None: it chooses none) are the names a scenario's
``audit.method`` / ``audit.threshold_rule`` and a report's ``method`` /
``threshold_strategy`` use, so :func:`estimator_for` maps a scenario's pair to
the one registered kind. ``threshold`` alone is always a number: the cut.
"""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Le, Lt, MinLen
from pydantic import Field

from recaudit.mechanisms import ParameterError, PrivacyClaim
from recaudit.core.registry import Registry

from . import bounds, gauss_fit, gdp, one_run, one_run_lp, power, rates
from .estimate import ANY_MECHANISM, GAUSSIAN_DP, GAUSSIAN_SCORES, Estimate, at_ceiling, uninformative  # noqa: F401
from .pvalues import p_value_from_bound


class EstimatorError(ParameterError):
    """An estimator's settings are wrong, or it cannot judge this claim (``field`` names the setting at fault)."""


#: every registered estimator, by kind
ESTIMATORS: Registry = Registry("estimator")
SELECTION_FRACTION = Field(description="split: share of trials that pick the threshold")
GUESS_FRACTION = Field(description="one-run: share of canaries guessed in (and out); default: the count planned "
                                   "on the claim (docs/guide/estimators.md)")
#: explicit thresholds (``Explicit``, ``GaussianDPExplicit``): one spec, shared
THRESHOLD_VALUE = Annotated[float | None, Field(description="explicit: the threshold, fixed in advance")]
DIRECTION = Annotated[Literal[1, -1], Field(description="explicit: +1 guesses world 1 when score >= threshold")]


class Estimator(ABC):
    """Turns scores into an :class:`Estimate` against a claim at level alpha."""

    #: the registered name (``class X(Estimator, kind="x")`` sets it and registers X in ``ESTIMATORS``)
    kind: ClassVar[str] = ""
    #: the bound's family and how the test is chosen: a scenario's ``audit.method`` / ``audit.threshold_rule``
    method: ClassVar[str] = "clopper-pearson"
    threshold_rule: ClassVar[str | None] = None
    input: ClassVar[Literal["pairs", "canaries"]] = "pairs"
    #: what the bound assumes: exactly ``ANY_MECHANISM`` when it holds whatever the score distributions,
    #: else words naming the assumption (a figure resting on one is an estimate unless the mechanism
    #: guarantees it)
    valid_for: ClassVar[str] = ANY_MECHANISM
    #: settings of the conformance suite's instance (``recaudit.audits.checks``)
    test_params: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        ESTIMATORS.add(cls, kind)

    def refusal(self, claim: PrivacyClaim) -> str | None:
        """Why this estimator cannot judge ``claim`` (None: it can). The one place an estimator says so."""
        return None

    def supports(self, claim: PrivacyClaim) -> bool:
        return self.refusal(claim) is None

    def require(self, claim: PrivacyClaim) -> None:
        """Raise :class:`EstimatorError` (naming ``method``) when this estimator cannot judge ``claim``."""
        reason = self.refusal(claim)
        if reason is not None:
            raise EstimatorError("method", reason)

    @abstractmethod
    def estimate(self, scores: np.ndarray, worlds: np.ndarray | None, claim: PrivacyClaim,
                 alpha: float, model_holds: bool = False) -> Estimate:
        """``pairs``: ``scores`` of shape (2, runs) and ``worlds`` None; ``canaries``: (m,) and (m,) bits.

        ``model_holds``: the mechanism guarantees this estimator's ``valid_for`` for these scores (then its
        figure is a bound; else, unless ``valid_for`` is :data:`ANY_MECHANISM`, it is an estimate beside an
        unconditional fallback bound).
        """


def _counts(bound) -> tuple[int, int, int, int]:
    return bound.false_pos, bound.n_neg, bound.false_neg, bound.n_pos


def clopper_pearson_on_counts(bound):
    """The Clopper–Pearson ε bound of a GDP test's own counts, at its level: valid for any mechanism.

    The GDP μ bound and this bound rest on the same two one-sided rate bounds (each at alpha/2), so both
    hold together at 1 − alpha: no level is spent on the second.
    """
    counts = _counts(bound)
    return dataclasses.replace(
        bound, method="clopper-pearson", mu_lb=None, mu_ceiling=None,
        epsilon_lb=float(rates.epsilon_lower_bound(*counts, bound.alpha, bound.delta)),
        ceiling=float(rates.ceiling(bound.n_neg, bound.n_pos, bound.alpha, bound.delta)))


def pairs_estimate(bound, p_value: float, claim: PrivacyClaim, model_holds: bool = False) -> Estimate:
    """The estimate of a distinguishing test: its power at its counted runs, and whether its cut says anything.

    A GDP bound (``bound.method == "gdp"``) rests on the Gaussian-DP model: unless ``model_holds`` its ε is
    an estimate, and the Clopper–Pearson bound of the same counts is the bound. A cut is uninformative when
    it calls every counted run of both worlds the same world (then ε_LB is 0 whatever the mechanism).
    """
    called_one = bound.false_pos + bound.n_pos - bound.false_neg
    gaussian = bound.method == "gdp"
    fallback = clopper_pearson_on_counts(bound) if gaussian and not model_holds else None
    headline = bound.method if fallback is None else fallback.method
    optimal = power.optimal_pairs_bound(bound.n_neg, bound.n_pos, claim, bound.alpha, headline)
    return Estimate(bound, p_value, optimal, called_one in (0, bound.n_neg + bound.n_pos),
                    GAUSSIAN_DP if gaussian else ANY_MECHANISM, model_holds, fallback, _claimed(claim))


def _claimed(claim: PrivacyClaim) -> float | None:
    """The ε a test is judged against: the claim's, 0 for a claim of nothing (its leakage is measured)."""
    return float(claim.epsilon) if claim.promises else 0.0


def _no_ranking(scores: np.ndarray) -> bool:
    """Canary scores that are all equal rank nothing: the guesses are the tie-break."""
    return bool(np.ptp(np.asarray(scores, dtype=float)) == 0)


@dataclass(frozen=True)
class ClopperPearsonSplit(Estimator, kind="split"):
    """Clopper–Pearson: the threshold chosen on ``selection_fraction`` of the runs, the bound on the rest."""

    threshold_rule: ClassVar[str] = "split"
    selection_fraction: Annotated[float, Gt(0), Lt(1), SELECTION_FRACTION] = 0.5

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        bound = bounds.split_epsilon_bound(scores[0], scores[1], alpha=alpha, delta=claim.delta,
                                           selection_fraction=self.selection_fraction)
        counts = _counts(bound)
        return pairs_estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon), claim)


@dataclass(frozen=True)
class Bonferroni(Estimator, kind="bonferroni"):
    """Clopper–Pearson over a threshold grid fixed in advance, Bonferroni-corrected; uses every run."""

    threshold_rule: ClassVar[str] = "bonferroni"
    test_params: ClassVar[dict[str, Any]] = {"score_range": (-3.0, 3.0)}
    thresholds: Annotated[Annotated[list[float], MinLen(1)] | None,
                          Field(description="bonferroni: the fixed threshold grid")] = None
    score_range: Annotated[tuple[float, float] | None,
                           Field(description="bonferroni: grid_size thresholds over it")] = None
    grid_size: Annotated[int, Ge(1)] = 100

    def __post_init__(self) -> None:
        if self.thresholds is None and self.score_range is None:
            raise EstimatorError("thresholds", "threshold_rule: bonferroni needs a grid fixed in advance: "
                                               "thresholds or score_range")
        if self.score_range is not None and not self.score_range[0] < self.score_range[1]:
            raise EstimatorError("score_range", "must be [low, high] with low < high")

    def _at(self, scores, alpha, delta):
        return bounds.bonferroni_epsilon_bound(scores[0], scores[1], alpha, delta, thresholds=self.thresholds,
                                               grid_size=self.grid_size, score_range=self.score_range)

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        return pairs_estimate(self._at(scores, alpha, claim.delta), p_value_from_bound(
            lambda a: self._at(scores, a, claim.delta).epsilon_lb, claim.epsilon), claim)


@dataclass(frozen=True)
class Explicit(Estimator, kind="explicit"):
    """Clopper–Pearson for one test (threshold and direction) fixed in advance; uses every run."""

    threshold_rule: ClassVar[str] = "explicit"
    test_params: ClassVar[dict[str, Any]] = {"threshold_value": 0.0}
    threshold_value: THRESHOLD_VALUE = None
    direction: DIRECTION = 1

    def __post_init__(self) -> None:
        if self.threshold_value is None:
            raise EstimatorError("threshold_value", "required with threshold_rule: explicit")

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        bound = bounds.fixed_threshold_epsilon_bound(scores[0], scores[1], self.threshold_value, self.direction,
                                                     alpha, claim.delta)
        counts = _counts(bound)
        return pairs_estimate(bound, p_value_from_bound(
            lambda a: rates.epsilon_lower_bound(*counts, a, claim.delta), claim.epsilon), claim)


@dataclass(frozen=True)
class GaussianDP(Estimator, kind="gdp"):
    """f-DP: a μ lower bound from the error-rate bounds, converted to ε at the claim's δ.

    μ_LB bounds the smallest μ for which the mechanism is μ-GDP, whatever the
    mechanism: the verdict tests the claim's μ, so it judges only claims with
    a Gaussian trade-off curve (``gaussian_mu``). Its ε is a bound only when
    the mechanism guarantees a Gaussian curve for the pair (``model_holds``);
    else an estimate beside the Clopper–Pearson bound of the same counts
    (:func:`pairs_estimate`).
    """

    method: ClassVar[str] = "gdp"
    valid_for: ClassVar[str] = GAUSSIAN_DP
    threshold_rule: ClassVar[str] = "split"
    selection_fraction: Annotated[float, Gt(0), Lt(1), SELECTION_FRACTION] = 0.5

    def refusal(self, claim: PrivacyClaim) -> str | None:
        if claim.delta <= 0:
            return ("gdp converts mu to epsilon at the claim's delta, but the mechanism claims pure epsilon-DP "
                    "(delta = 0); use clopper-pearson")
        if claim.gaussian_mu is None:
            return ("gdp converts through a Gaussian trade-off curve, but the mechanism's claim has none (its "
                    "privacy events are not all Gaussian); use clopper-pearson")
        return None

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        self.require(claim)
        bound = gdp.split_gdp_bound(scores[0], scores[1], alpha, claim.delta, self.selection_fraction)
        counts = _counts(bound)
        return pairs_estimate(bound, p_value_from_bound(
            lambda a: float(gdp.gdp_epsilon(gdp.gdp_mu_lower_bound(*counts, a), claim.delta)),
            claim.epsilon), claim, model_holds)


@dataclass(frozen=True)
class GaussianDPExplicit(Estimator, kind="gdp-explicit"):
    """f-DP for one test (threshold and direction) fixed in advance; uses every run (no selection split).

    For a likelihood-ratio score under a known noise law (``known_noise``) the cut 0 is fixed by the test's
    theory (equal priors), and for Gaussian scores of a small μ it is the cut whose μ estimate varies least.
    """

    method: ClassVar[str] = "gdp"
    valid_for: ClassVar[str] = GAUSSIAN_DP
    threshold_rule: ClassVar[str] = "explicit"
    test_params: ClassVar[dict[str, Any]] = {"threshold_value": 0.0}
    threshold_value: THRESHOLD_VALUE = None
    direction: DIRECTION = 1
    refusal = GaussianDP.refusal

    def __post_init__(self) -> None:
        if self.threshold_value is None:
            raise EstimatorError("threshold_value", "required with threshold_rule: explicit")

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        self.require(claim)
        bound = gdp.fixed_threshold_gdp_bound(scores[0], scores[1], self.threshold_value, self.direction, alpha,
                                              claim.delta)
        counts = _counts(bound)
        return pairs_estimate(bound, p_value_from_bound(
            lambda a: float(gdp.gdp_epsilon(gdp.gdp_mu_lower_bound(*counts, a), claim.delta)),
            claim.epsilon), claim, model_holds)


class _Guesses(Estimator):
    """Guess-based one-run estimators: the top ``k`` canaries guessed in, the bottom ``k`` out.

    ``k`` is ``guess_fraction`` of the canaries when given, else planned
    (:func:`recaudit.audits.stats.power.plan_guesses`): the count that maximises the
    bound this estimator would reach if the claim were exactly tight — a
    function of the number of canaries, the claim and alpha only, fixed
    before any score is seen. The plan's bound is the estimate's ``optimal``.
    """

    input: ClassVar[str] = "canaries"

    def _guesses(self, m: int, claim: PrivacyClaim, alpha: float) -> tuple[int, float | None]:
        k, optimal = power.plan_guesses(m, claim, alpha, self.kind)
        if self.guess_fraction is not None:
            k = int(self.guess_fraction * m)
        return k, optimal


@dataclass(frozen=True)
class OneRun(_Guesses, kind="one-run"):
    """Steinke–Nasr–Jagielski one-run bound from the planned (or ``guess_fraction``) guesses."""

    method: ClassVar[str] = "one-run"
    guess_fraction: Annotated[Annotated[float, Gt(0), Le(0.5)] | None, GUESS_FRACTION] = None

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        k, optimal = self._guesses(scores.size, claim, alpha)
        bound = one_run.one_run_audit(scores, np.asarray(worlds).astype(bool), k, k, alpha, claim.delta)
        return Estimate(bound, one_run.one_run_p_value(bound.r, bound.v, claim.epsilon, claim.delta, bound.m),
                        optimal, _no_ranking(scores), claim_epsilon=_claimed(claim))


@dataclass(frozen=True)
class FDPOneRun(_Guesses, kind="fdp-one-run"):
    """f-DP one-run bound (Mahloujifar, Melis, Chaudhuri 2025) against the claim's Gaussian curve.

    Guesses as ``one-run`` (planned for the recursion's bound); tests "the
    mechanism is μ-GDP" with μ the claim's ``gaussian_mu``, so it refuses
    claims without one. ε figures are μ converted at the claim's δ.
    ``analysis: programme`` (default) bounds the tail of the right guesses with
    every test the per-canary guarantee allows (:mod:`recaudit.audits.stats.one_run_lp`);
    ``recursion`` with the paper's nested tests only (faster, looser).
    """

    method: ClassVar[str] = "fdp-one-run"
    valid_for: ClassVar[str] = GAUSSIAN_DP
    guess_fraction: Annotated[Annotated[float, Gt(0), Le(0.5)] | None, GUESS_FRACTION] = None
    analysis: Annotated[Literal["programme", "recursion"], Field(
        description="fdp-one-run: programme (every test the guarantee allows, a linear programme) or recursion "
                    "(the paper's nested tests)")] = "programme"

    def refusal(self, claim: PrivacyClaim) -> str | None:
        return GaussianDP().refusal(claim)

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        self.require(claim)
        k, optimal = self._guesses(scores.size, claim, alpha)
        bound = one_run.fdp_one_run_audit(scores, np.asarray(worlds).astype(bool), k, k, alpha, claim.delta)
        p_value = one_run.fdp_one_run_p_value(bound.r, bound.v, bound.m, claim.gaussian_mu)
        if self.analysis == "programme":
            mu_lb = one_run_lp.lp_mu_lower_bound(bound.r, bound.v, bound.m, alpha)
            mu_ceiling = max(bound.mu_ceiling, one_run_lp.lp_mu_lower_bound(bound.r, bound.r, bound.m, alpha))
            bound = dataclasses.replace(bound, mu_lb=mu_lb, epsilon_lb=float(gdp.gdp_epsilon(mu_lb, claim.delta)),
                                        mu_ceiling=mu_ceiling,
                                        ceiling=float(gdp.gdp_epsilon(mu_ceiling, claim.delta)))
            if mu_lb > claim.gaussian_mu:  # else both p-values are ≥ alpha: the recursion's suffices
                p_value = min(p_value, one_run_lp.tail_bound(bound.r, bound.v, bound.m, claim.gaussian_mu, alpha))
            optimal = power.programme_figure(bound.m, claim, alpha, k) if optimal is not None else None
        fallback = None
        if not model_holds:  # the Steinke–Nasr–Jagielski bound of the same guesses: valid for any mechanism
            fallback = one_run.OneRunResult(
                epsilon_lb=one_run.one_run_epsilon_lower_bound(bound.r, bound.v, bound.m, alpha, claim.delta),
                ceiling=one_run.one_run_ceiling(bound.r, bound.m, alpha, claim.delta), alpha=bound.alpha,
                delta=bound.delta, r=bound.r, v=bound.v, m=bound.m, k_pos=bound.k_pos, k_neg=bound.k_neg)
            optimal = power.one_run_figure(bound.m, claim, alpha, k)
        return Estimate(bound, p_value, optimal, _no_ranking(scores), self.valid_for, model_holds, fallback,
                        _claimed(claim))


@dataclass(frozen=True)
class GaussFit(Estimator, kind="gauss-fit"):
    """Gaussian fit of the canary scores (after "Let's Ask Gauss", 2026): a μ bound from every score.

    A bound only when, given its bit, each canary's score is Gaussian with one
    common variance, independently across canaries, *by construction* (the
    runner's ``model_holds``); see :mod:`recaudit.audits.stats.gauss_fit`.
    Otherwise its figure is an estimate: no goodness-of-fit test can make it
    a bound (randomized response with Gaussian jitter passes the checks at
    10⁴ canaries and the fit overstates ε; docs/statistics.md, "Validity"),
    and the bound, the verdict and the power figure are those of ``one-run``
    on the same canaries. The model is checked at ``check_alpha`` (0: not
    checked): a rejected model gives no estimate.
    Any claim with δ > 0: the Gaussian scores alone imply ε at δ.
    """

    method: ClassVar[str] = "gauss-fit"
    valid_for: ClassVar[str] = GAUSSIAN_SCORES
    input: ClassVar[str] = "canaries"
    check_alpha: Annotated[float, Ge(0), Lt(1),
                           Field(description="gauss-fit: level of the Gaussian model checks (0: none)")] = 0.01

    def refusal(self, claim: PrivacyClaim) -> str | None:
        if claim.delta <= 0:
            return ("gauss-fit converts a Gaussian μ to ε at the claim's delta, but the mechanism claims pure "
                    "epsilon-DP (delta = 0); use one-run")
        return None

    def estimate(self, scores, worlds, claim, alpha, model_holds=False):
        self.require(claim)
        bound = gauss_fit.gauss_fit_audit(scores, worlds, alpha, claim.delta, 0.0 if model_holds else self.check_alpha)
        if model_holds:  # Gaussian scores by construction: the fit's bound is a bound
            return Estimate(bound, gauss_fit.claim_p_value(bound, claim.epsilon),
                            power.optimal_gauss_fit_bound(bound.n_out, bound.n_in, claim, alpha), _no_ranking(scores),
                            self.valid_for, True, None, _claimed(claim))
        # else the fit is an estimate: the bound, the verdict and the power are the one-run bound's (planned guesses)
        guesses = OneRun().estimate(scores, worlds, claim, alpha)
        return Estimate(bound, guesses.p_value, guesses.optimal, guesses.cannot_tell, self.valid_for, False,
                        guesses.bound, _claimed(claim))


def estimator_for(method: str, threshold_rule: str) -> type[Estimator]:
    """The registered estimator of a scenario's ``(method, threshold_rule)``: its ``method``, and its
    ``threshold_rule`` unless it chooses none."""
    for cls in ESTIMATORS.values():
        if cls.method == method and cls.threshold_rule in (None, threshold_rule):
            return cls
    named = [cls for cls in ESTIMATORS.values() if cls.method == method]
    if named:
        raise EstimatorError("threshold_rule",
                             f"the {method} method chooses its threshold by {named[0].threshold_rule}")
    raise EstimatorError("method", f"unknown method {method!r}; registered: {', '.join(methods())}")


def methods() -> list[str]:
    """Every ``audit.method`` a registered estimator answers to."""
    return list(dict.fromkeys(cls.method for cls in ESTIMATORS.values()))


def threshold_rules() -> list[str]:
    """Every ``audit.threshold_rule`` a registered estimator answers to."""
    return list(dict.fromkeys(cls.threshold_rule for cls in ESTIMATORS.values() if cls.threshold_rule is not None))


def estimator_settings(cls: type[Estimator]) -> list[str]:
    """The names of an estimator's settings (its dataclass fields)."""
    return [f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")]

