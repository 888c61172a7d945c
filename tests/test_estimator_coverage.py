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

from audits.calibration import ideal_canary_scores
from audits.stats.estimators import ESTIMATORS
from mechanisms.reference import GaussianCount, LaplaceCount, RandomizedResponse

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
                               ALPHA).epsilon_lb > mech.claim.epsilon
    print(f"{name} on {type(mech).__name__}: {exceed} of {AUDITS} above ε (at most {MOST:.0f})")
    assert exceed <= MOST


def _one_run(name, mech, m, seed, **settings):
    est = ESTIMATORS[name](**settings)
    lbs = []
    for child in np.random.SeedSequence(seed).spawn(AUDITS):
        s, b = ideal_canary_scores(mech, m, np.random.default_rng(child))
        lbs.append(est.estimate(s, b, mech.claim, ALPHA).epsilon_lb)
    ratios = np.array(lbs) / mech.claim.epsilon
    print(f"{name} at ε = {mech.claim.epsilon:.3g}: median ε_LB/ε {np.median(ratios):.3f}, 10 % quantile "
          f"{np.quantile(ratios, 0.1):.3f}, {np.sum(ratios > 1)} of {AUDITS} above ε (at most {MOST:.0f})")
    return ratios


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_fdp_one_run_default_median_and_coverage(epsilon):
    """Default (planned) guesses on m = 10⁴ Gaussian canaries: never above ε beyond α, and the median is what
    the plan predicts (its figure is the best median any guess count reaches, about 0.60 ε at ε = 1 and
    0.70 ε at ε = 4; the median's standard error over 200 runs is about 0.01 ε, so it may fall 0.03 ε
    below the plan — three standard errors, about 0.1 % of the time — before the test fails).

    At ε = 4 the issue's goal (median ≥ 0.65 ε) holds; at ε = 1 its goal of 0.6 ε is the limit of the
    f-DP analysis itself (measured 0.599 ε, docs/guide/estimators.md).
    """
    mech = GaussianCount.from_epsilon(epsilon)
    ratios = _one_run("fdp-one-run", mech, 10_000, 242)
    s, b = ideal_canary_scores(mech, 10_000, np.random.default_rng(0))
    planned = ESTIMATORS["fdp-one-run"]().estimate(s, b, mech.claim, ALPHA).optimal / epsilon
    assert np.median(ratios) >= planned - 0.03 and np.sum(ratios > 1) <= MOST
    if epsilon == 4.0:
        assert np.median(ratios) >= 0.65


@pytest.mark.slow
@pytest.mark.parametrize("epsilon", [1.0, 4.0])
def test_gauss_fit_median_and_coverage(epsilon):
    """The Gaussian fit on m = 10⁴ Gaussian canaries: median ε_LB/ε ≥ 0.75, never above ε beyond α."""
    ratios = _one_run("gauss-fit", GaussianCount.from_epsilon(epsilon), 10_000, 243)
    assert np.median(ratios) >= 0.75 and np.sum(ratios > 1) <= MOST


@pytest.mark.slow
def test_snj_one_run_coverage_on_gaussian_canaries():
    assert np.sum(_one_run("one-run", GaussianCount.from_epsilon(1.0), 10_000, 244) > 1) <= MOST
