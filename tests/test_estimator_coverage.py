"""Coverage and one-run tightness of every estimator on known mechanisms (slow: run with ``-m slow``).

Coverage: 200 seeded audits of a correct mechanism at its true ε; a valid
bound at level alpha = 0.05 exceeds ε in at most a fraction alpha of them.
The assertion is a one-sided binomial test of "exceedance rate ≤ alpha"
failing falsely with probability ≤ 1e-3 (at most ``binom.isf(1e-3, 200,
0.05)`` = 22 exceedances). The one-run medians are the figures of issue 24
(plain Gaussian mechanism, m = 10⁴ canaries, δ = 1e-5, default settings).
"""
import numpy as np
import pytest
from scipy import stats

from recaudit.audits.calibration import ideal_canary_scores
from recaudit.audits.stats.estimators import ESTIMATORS
from recaudit.mechanisms.reference import GaussianCount, LaplaceCount, RandomizedResponse

AUDITS = 200
ALPHA = 0.05
MOST = stats.binom.isf(1e-3, AUDITS, ALPHA)


def _pairs(mech, n, rng):
    return np.stack([mech.score(mech.sample(v, n, rng)) for v in mech.neighbours])


PAIRS = [  # (estimator, its settings, mechanism): each at its own claim, which is its true ε
    ("split", {}, LaplaceCount(1.0)),
    ("split", {}, RandomizedResponse(1.0)),
    ("bonferroni", {"score_range": (-3.0, 4.0)}, LaplaceCount(1.0)),
    ("explicit", {"threshold_value": 1.0}, LaplaceCount(1.0)),  # the Laplace likelihood ratio's top cut
    ("gdp", {}, GaussianCount.from_epsilon(1.0)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, settings, mech", PAIRS, ids=lambda x: getattr(x, "__name__", str(x))[:20])
def test_pairs_estimator_coverage(name, settings, mech):
    est = ESTIMATORS[name](**settings)
    exceed = 0
    for child in np.random.SeedSequence(240).spawn(AUDITS):
        exceed += est.estimate(_pairs(mech, 20_000, np.random.default_rng(child)), None, mech.claim,
                               ALPHA, model_holds=_gaussian(mech)).epsilon_lb > mech.claim.epsilon
    print(f"{name} on {type(mech).__name__}: {exceed} of {AUDITS} above ε (at most {MOST:.0f})")
    assert exceed <= MOST


def _gaussian(mech) -> bool:
    """The reference Gaussian mechanism's scores are a Gaussian shift by construction (its model holds)."""
    return isinstance(mech, GaussianCount)


def _one_run(name, mech, m, seed, **settings):
    est = ESTIMATORS[name](**settings)
    lbs = []
    for child in np.random.SeedSequence(seed).spawn(AUDITS):
        s, b = ideal_canary_scores(mech, m, np.random.default_rng(child))
        lbs.append(est.estimate(s, b, mech.claim, ALPHA, model_holds=_gaussian(mech)).epsilon_lb)
    ratios = np.array(lbs) / mech.claim.epsilon
    print(f"{name} at ε = {mech.claim.epsilon:.3g}: median ε_LB/ε {np.median(ratios):.3f}, 10 % quantile "
          f"{np.quantile(ratios, 0.1):.3f}, {np.sum(ratios > 1)} of {AUDITS} above ε (at most {MOST:.0f})")
    return ratios


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_fdp_one_run_default_median_and_coverage(epsilon):
    """Default settings (guesses planned on the claim, ``analysis: programme``) on m = 10⁴ Gaussian canaries:
    never above ε beyond α, and the median meets the issue's goal (0.6 ε at ε = 1, 0.65 ε at ε = 4) and what
    the plan predicts (its programme figure, about 0.62 ε and 0.71 ε).

    The median over 200 runs has a standard error of about 0.007 ε (measured spread of the runs), so the
    plan check allows 3 standard errors below the plan (fails falsely ≤ 0.2 % of seeds), and the goal at
    ε = 1, about 2.5 standard errors below the plan's 0.62, fails falsely on about 1 % of seeds; this seed
    was not chosen. About 15 CPU-minutes at ε = 1 (a linear programme per bisection step), 3 at ε = 4.
    """
    mech = GaussianCount.from_epsilon(epsilon)
    ratios = _one_run("fdp-one-run", mech, 10_000, 242)
    s, b = ideal_canary_scores(mech, 10_000, np.random.default_rng(0))
    planned = ESTIMATORS["fdp-one-run"]().estimate(s, b, mech.claim, ALPHA, model_holds=True).optimal / epsilon
    print(f"plan's figure {planned:.3f}")
    assert np.median(ratios) >= planned - 0.021 and np.sum(ratios > 1) <= MOST
    assert np.median(ratios) >= {1.0: 0.6, 4.0: 0.65}[epsilon]


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_fdp_one_run_recursion_median_and_coverage(epsilon):
    """The paper's recursion alone (``analysis: recursion``): valid, and below the programme (0.599 ε and
    0.685 ε measured on these seeds; its plan's figure is the best median its guesses reach)."""
    mech = GaussianCount.from_epsilon(epsilon)
    ratios = _one_run("fdp-one-run", mech, 10_000, 242, analysis="recursion")
    assert np.sum(ratios > 1) <= MOST and np.median(ratios) >= {1.0: 0.57, 4.0: 0.65}[epsilon]


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_gauss_fit_median_and_coverage(epsilon):
    """The Gaussian fit on m = 10⁴ Gaussian canaries: median ε_LB/ε ≥ 0.75, never above ε beyond α."""
    ratios = _one_run("gauss-fit", GaussianCount.from_epsilon(epsilon), 10_000, 243)
    assert np.median(ratios) >= 0.75 and np.sum(ratios > 1) <= MOST


@pytest.mark.slow
def test_snj_one_run_coverage_on_gaussian_canaries():
    assert np.sum(_one_run("one-run", GaussianCount.from_epsilon(1.0), 10_000, 244) > 1) <= MOST
