"""The central noise components: LaplaceNoise beside GaussianNoise (scale from sensitivity and ε, what the
accountant sees, what the coins draw, the white-box statement), checked against scipy.stats.laplace."""
import math

import numpy as np
import pytest
from scipy import stats

from recaudit.mechanisms import GaussianNoise, LaplaceNoise, ParameterError
from recaudit.mechanisms.accounting import account


@pytest.mark.parametrize("epsilon, sensitivity, count", [(0.5, 2.0, 1), (1.0, 1.0, 3), (4.0, 0.25, 2)])
def test_laplace_scale_from_sensitivity_and_epsilon(epsilon, sensitivity, count):
    noise = LaplaceNoise.calibrated(epsilon, sensitivity, count)
    assert noise.scale == pytest.approx(count * sensitivity / epsilon)
    claim = account(noise.event(count), 0.0, model="central")
    assert claim.epsilon == pytest.approx(epsilon, rel=1e-4) and claim.delta == 0.0  # the accountant's PLD grid
    # one release: the largest privacy loss between Lap(0, b) and Lap(Δ, b) (scipy's densities) is Δ / b
    x = np.linspace(-20 * noise.scale, 20 * noise.scale, 20_001)
    loss = stats.laplace.logpdf(x, 0.0, noise.scale) - stats.laplace.logpdf(x, sensitivity, noise.scale)
    assert loss.max() == pytest.approx(sensitivity / noise.scale, rel=1e-9)
    assert noise.statement() == ("laplace", noise.scale)


def test_laplace_draws_follow_scipy_laplace():
    """Kolmogorov–Smirnov against scipy.stats.laplace(0, b) on 20,000 seeded draws, and the broken twin's draws
    against its spent scale. Each check of a correct sampler fails with probability 1e-3 at a random seed (its
    level; 3e-3 for the file's three, the Gaussian one included); the seeds are fixed, so the outcome is too.
    The twin (b 2 -> 1) is rejected at any seed: its D is about 0.14 against a 1e-3 critical value near 0.014."""
    rng = np.random.default_rng(7)
    noise = LaplaceNoise(2.0, 1.0)
    draws = noise((20_000,), rng)
    assert stats.kstest(draws, stats.laplace(0.0, 2.0).cdf).pvalue > 1e-3
    twin = LaplaceNoise(2.0, 1.0, spent_scale=1.0)
    assert twin.spent == 1.0 and twin.event().scale == 2.0  # the accountant sees the published b
    twin_draws = twin((20_000,), rng)
    assert stats.kstest(twin_draws, stats.laplace(0.0, 1.0).cdf).pvalue > 1e-3
    assert stats.kstest(twin_draws, stats.laplace(0.0, 2.0).cdf).pvalue < 1e-3


def test_laplace_refuses_what_is_not_a_scale():
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(ParameterError, match="scale"):
            LaplaceNoise(bad, 1.0)
    with pytest.raises(ParameterError, match="epsilon"):
        LaplaceNoise.calibrated(0.0, 1.0)


def test_gaussian_has_the_same_contract():
    noise = GaussianNoise.calibrated(1.0, 1e-5, sensitivity=2.0, count=4)
    claim = account(noise.event(4), 1e-5, model="central")
    assert claim.epsilon == pytest.approx(1.0, rel=1e-3)
    assert noise.statement() == ("gaussian", noise.sigma)
    assert stats.kstest(noise((20_000,), np.random.default_rng(3)), stats.norm(0.0, noise.sigma).cdf).pvalue > 1e-3
