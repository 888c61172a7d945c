"""Two kinds of figure, never confused (issue 31): bounds (valid for any mechanism, or under a model the mechanism
guarantees) and estimates (a model's figure), and one rule for ``uninformative`` on every estimator.

Deterministic except where stated; every random input has a fixed seed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from recaudit.audits.checks import CLAIMS, estimator_instance
from recaudit.audits.runner import gaussian_by_construction
from recaudit.audits.stats import rates
from recaudit.audits.stats.estimators import ANY_MECHANISM, ESTIMATORS, Estimate, uninformative
from recaudit.audits.stats.gdp import gdp_epsilon
from recaudit.audits.stats.reach import reachable_optimal
from recaudit.mechanisms import PrivacyClaim

GAUSSIAN = CLAIMS["gaussian"]  # μ = 1, δ = 1e-5: every estimator judges it


def _separated(cls, n: int, rng, gap: float = 2.0):
    """Perfectly separated scores (``n`` runs per world, or ``n`` canaries), as the estimator's input."""
    if cls.input == "canaries":
        worlds = np.arange(n) % 2
        return worlds * gap + 0.01 * rng.normal(size=n), worlds
    return np.stack([-gap / 2 + 0.01 * rng.normal(size=n), gap / 2 + 0.01 * rng.normal(size=n)]), None


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_one_uninformative_rule_on_every_estimator(name):
    """A ceiling of 0 is uninformative (5 runs or 8 canaries: no outcome shows anything), so is a ceiling below the
    claim (even with ε_LB > 0); a bound at its ceiling is flagged; a large informative audit is neither."""
    cls = ESTIMATORS[name]
    est = estimator_instance(cls)
    rng = np.random.default_rng(31)
    tiny = est.estimate(*_separated(cls, 8 if cls.input == "canaries" else 5, rng), GAUSSIAN, 0.05)
    assert tiny.ceiling == 0.0 and tiny.epsilon_lb == 0.0 and tiny.uninformative and not tiny.at_ceiling
    small = est.estimate(*_separated(cls, 40, rng), GAUSSIAN, 0.05)  # ceilings 1.4-2.4 < ε = 4.38
    assert 0 < small.epsilon_lb <= small.ceiling < GAUSSIAN.epsilon and small.uninformative
    assert small.at_ceiling  # separated: the bound is its ceiling
    big = est.estimate(*_separated(cls, 4_000, rng, gap=1.0), PrivacyClaim(1.0, 1e-5, gaussian_mu=0.22), 0.05)
    assert big.ceiling > 1.0 and not big.uninformative
    assert uninformative(False, math.inf, 1.0) is False and uninformative(False, 0.0, None) is True


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_model_figure_is_a_bound_only_when_the_mechanism_guarantees_the_model(name):
    """Estimators resting on a model print the unconditional bound of the same data as ε_LB, and their own
    figure as an estimate — unless ``model_holds``; ``any mechanism`` estimators are always bounds."""
    cls = ESTIMATORS[name]
    est = estimator_instance(cls)
    rng = np.random.default_rng(7)
    if cls.input == "canaries":
        worlds = rng.integers(0, 2, 2_000)
        data = (worlds * 0.8 + rng.normal(size=2_000), worlds)
    else:
        data = (np.stack([rng.normal(size=2_000), rng.normal(0.8, 1.0, 2_000)]), None)
    free, held = est.estimate(*data, GAUSSIAN, 0.05), est.estimate(*data, GAUSSIAN, 0.05, model_holds=True)
    assert held.is_bound and held.epsilon_estimate is None and held.epsilon_lb == held.bound.epsilon_lb
    if cls.valid_for == ANY_MECHANISM:
        assert free.is_bound and free.epsilon_lb == held.epsilon_lb
        return
    assert not free.is_bound and free.epsilon_estimate == free.bound.epsilon_lb
    assert free.epsilon_lb == free.fallback.epsilon_lb and free.bound_method != free.method
    assert free.to_dict()["epsilon_lb"] == free.epsilon_lb and free.to_dict()["valid_for"] == cls.valid_for
    with pytest.raises(ValueError, match="fallback"):
        Estimate(free.bound, 0.5, valid_for=cls.valid_for)


def test_gdp_on_randomized_response_prints_the_clopper_pearson_bound_and_its_gdp_figure_as_an_estimate():
    """The issue's case: RR at ε = 3 audited against a Gaussian claim. μ_LB converted under Gaussian DP gives far
    more than 3 (the estimate); the printed bound is Clopper–Pearson on the same counts (the same two rate
    bounds), below 3; the verdict still says the Gaussian claim is violated (the μ test holds for any mechanism)."""
    rng = np.random.default_rng(3)
    n, eps = 20_000, 3.0
    keep = 1 / (1 + math.exp(-eps))
    scores = np.stack([(rng.random(n) > keep).astype(float), (rng.random(n) < keep).astype(float)])
    claim = PrivacyClaim(1.0, 1e-5, gaussian_mu=0.268)
    e = ESTIMATORS["gdp"]().estimate(scores, None, claim, 0.05)
    b = e.bound
    assert e.epsilon_estimate > 10 and e.epsilon_lb < eps
    assert e.epsilon_lb == pytest.approx(float(rates.epsilon_lower_bound(b.false_pos, b.n_neg, b.false_neg, b.n_pos,
                                                                         0.05, 1e-5)))
    assert e.p_value < 1e-6 and b.mu_lb > claim.gaussian_mu


def test_gauss_fit_never_headlines_an_unbounded_figure_on_near_separated_scores():
    """Near-separated scores: the fit's μ is huge (an estimate, labelled), the printed bound the one-run bound's,
    with a finite ceiling (the issue measured an unflagged 491,238 with ceiling ∞)."""
    rng = np.random.default_rng(5)
    worlds = rng.integers(0, 2, 1_000)
    scores = worlds + 1e-4 * rng.normal(size=1_000)
    e = ESTIMATORS["gauss-fit"](check_alpha=0.0).estimate(scores, worlds, GAUSSIAN, 0.05)
    assert e.epsilon_estimate > 1e4 and math.isfinite(e.ceiling) and e.epsilon_lb <= e.ceiling < 20
    assert e.at_ceiling and e.bound_method == "one-run"


def test_gaussian_by_construction_needs_gaussian_noise_and_the_same_reach_in_every_run():
    """The pair's privacy loss is exactly Gaussian only with Gaussian noise and a reach fixed in every run."""
    nan = np.full(4, np.nan)
    assert gaussian_by_construction({"gaussian"}, [nan, np.full(4, 0.7)])
    assert not gaussian_by_construction({"gaussian"}, [np.array([0.7, 0.7, 0.69, 0.7])])
    assert not gaussian_by_construction({"laplace"}, [np.full(4, 0.7)])
    assert not gaussian_by_construction({"gaussian", "laplace"}, [np.full(4, 0.7)])
    assert not gaussian_by_construction({"gaussian"}, [nan]) and not gaussian_by_construction({"gaussian"}, ())


def test_the_optimal_figure_at_the_reachable_epsilon():
    """A claim loose for the audited pair: the optimal test's figure at ε_pair (the pair's μ) is below the one at
    the claim, and equals the figure of a claim exactly as private as the pair; none when the pair reaches it."""
    from recaudit.audits.stats.power import optimal_pairs_bound

    rng = np.random.default_rng(11)
    claim = PrivacyClaim(1.0, 1e-5, gaussian_mu=0.268)
    e = ESTIMATORS["gdp"]().estimate(np.stack([rng.normal(size=20_000), rng.normal(0.06, 1, 20_000)]), None,
                                     claim, 0.05, model_holds=True)
    mu_pair = 0.067
    reach = {"law": "gaussian", "mu_pair": mu_pair, "epsilon_pair": float(gdp_epsilon(mu_pair, 1e-5))}
    at_pair = reachable_optimal(e, reach, claim)
    b = e.bound
    assert at_pair == pytest.approx(optimal_pairs_bound(
        b.n_neg, b.n_pos, PrivacyClaim(reach["epsilon_pair"], 1e-5, gaussian_mu=mu_pair), 0.05, "gdp"))
    assert 0 < at_pair < e.optimal
    assert reachable_optimal(e, reach | {"epsilon_pair": 1.5}, claim) is None
