"""Claims come from the accountant: checked against closed forms we did not derive from it, and composition.

Tolerances: the accountant's PLDs round every privacy loss up to a grid of
1e-5 (1e-10 for randomized response), so its ε may exceed the exact value by
about (number of events) x grid, never fall below it (up to float rounding).
"""
import math

import numpy as np
import pytest
from scipy import optimize, stats

import dp_accounting
from mechanisms import MaxSense, MultiMaxSense, PairwisePreference
from mechanisms.accounting import (Composition, GaussianRelease, LaplaceRelease, RandomizedResponseRelease,
                                   account, epsilon_for, gaussian_mu, to_dp_event)


def gaussian_delta(eps, sigma, sensitivity=1.0):
    """Balle & Wang (2018), Thm. 8, written out here independently."""
    a = sensitivity / (2 * sigma) - eps * sigma / sensitivity
    b = -sensitivity / (2 * sigma) - eps * sigma / sensitivity
    return stats.norm.cdf(a) - math.exp(eps) * stats.norm.cdf(b)


def gaussian_epsilon(sigma, delta, sensitivity=1.0):
    return optimize.brentq(lambda e: gaussian_delta(e, sigma, sensitivity) - delta, 0.0, 500.0, xtol=1e-12)


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
def test_gaussian_matches_the_analytic_closed_form(sigma, delta):
    exact = gaussian_epsilon(sigma, delta, sensitivity=1.5)
    assert epsilon_for(GaussianRelease(sigma, sensitivity=1.5), delta) == pytest.approx(exact, rel=1e-3)
    assert epsilon_for(GaussianRelease(sigma, sensitivity=1.5), delta) >= exact * (1 - 1e-9)


@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_randomized_response_matches_its_closed_form(eps):
    assert epsilon_for(RandomizedResponseRelease(eps), 0.0) == pytest.approx(eps, abs=1e-9)
    # hockey-stick divergence of binary RR at eps' < eps: p - e^{eps'} (1 - p), p = e^eps / (1 + e^eps)
    p = 1 / (1 + math.exp(-eps))
    for eps_prime in (0.0, eps / 2):
        delta = p - math.exp(eps_prime) * (1 - p)
        assert epsilon_for(RandomizedResponseRelease(eps), delta) == pytest.approx(eps_prime, abs=1e-6)


@pytest.mark.parametrize("scale", [0.5, 1.0, 4.0])
def test_laplace_matches_its_closed_form(scale):
    eps = 2.0 / scale  # sensitivity 2
    assert epsilon_for(LaplaceRelease(scale, sensitivity=2.0), 0.0) == pytest.approx(eps, rel=1e-4)
    # delta(eps') = 1 - exp((eps' - eps) / 2) for 0 <= eps' <= eps
    eps_prime = eps / 3
    delta = 1 - math.exp((eps_prime - eps) / 2)
    assert epsilon_for(LaplaceRelease(scale, sensitivity=2.0), delta) == pytest.approx(eps_prime, abs=1e-4)


def test_pure_compositions_add_up():
    assert epsilon_for(RandomizedResponseRelease(0.25, count=4), 0.0) == pytest.approx(1.0, abs=1e-8)
    assert epsilon_for(LaplaceRelease(1.0, count=3), 0.0) == pytest.approx(3.0, rel=1e-4)
    mixed = Composition((RandomizedResponseRelease(0.5), LaplaceRelease(2.0), RandomizedResponseRelease(0.25)))
    assert epsilon_for(mixed, 0.0) == pytest.approx(1.25, rel=1e-4)


def test_gaussian_composition_is_one_gaussian_and_tighter_than_rdp():
    k, sigma, delta = 9, 3.0, 1e-6
    composed = GaussianRelease(sigma, count=k)
    assert gaussian_mu(composed) == pytest.approx(math.sqrt(k) / sigma)
    assert epsilon_for(composed, delta) == pytest.approx(gaussian_epsilon(sigma / math.sqrt(k), delta), rel=1e-3)
    two = Composition((GaussianRelease(1.0), GaussianRelease(2.0, sensitivity=2.0)))
    assert gaussian_mu(two) == pytest.approx(math.sqrt(2.0))
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(to_dp_event(composed))
    assert epsilon_for(composed, delta) <= rdp.get_epsilon(delta)


def test_claims_carry_the_curve_and_refuse_gaussians_at_delta_zero():
    claim = account(GaussianRelease(2.0), 1e-5, model="central")
    assert claim.model == "central" and claim.gaussian_mu == pytest.approx(0.5)
    assert account(RandomizedResponseRelease(1.0)).gaussian_mu is None
    with pytest.raises(ValueError):
        account(GaussianRelease(2.0), 0.0)
    with pytest.raises(ValueError):
        GaussianRelease(-1.0)


def test_mechanism_claims_compose_over_answers():
    # Multi-MaxSense releases Q bits at eps/Q: eps in all; three answers triple it (composition in the accountant)
    assert MultiMaxSense(epsilon=2.5).claim.epsilon == pytest.approx(2.5, abs=1e-8)
    assert MaxSense(epsilon=1.0).claim_for(3).epsilon == pytest.approx(3.0, abs=1e-8)
    assert PairwisePreference(epsilon=0.7).claim.epsilon == pytest.approx(0.7, abs=1e-8)
    twin = MultiMaxSense(epsilon=2.5)
    assert twin.privacy_event(2) == RandomizedResponseRelease(2.5 / 3, count=6)
    assert np.isclose(twin.claim_for(2).epsilon, 5.0)
