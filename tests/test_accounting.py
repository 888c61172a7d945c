"""recaudit.mechanisms.accounting checked against things we did not write.

References: closed forms written out here (the analytic Gaussian of Balle &
Wang 2018, binary randomized response's hockey-stick divergence, Laplace's
privacy curve, the binomial privacy loss of k-fold randomized response,
privacy amplification of pure DP by Poisson sampling), the helpers of
recaudit.mechanisms.reference (written before the accountant), and dp-accounting's RDP
accountant, an independent and looser analysis.

Tolerances follow from how the accountant works (mechanisms/accounting.py):

* un-sampled Gaussians go through dp-accounting's analytic Gaussian, a root
  found to ~1e-12 and nudged up by 1e-10·(1 + ε): within 1e-9 relative, and
  never below the exact value;
* every other PLD rounds each privacy loss up to a grid of 2^-17 ≈ 7.6e-6
  (2^-33 for randomized response on its own), so its ε exceeds the exact one
  by at most about (number of events) × grid and falls below it only by
  float rounding (we allow 1e-9 relative for that).
"""
import math

import dp_accounting
import numpy as np
import pytest
from scipy import optimize, special, stats

from recaudit.mechanisms.accounting import (
    DEFAULT_VALUE_DISCRETIZATION,
    Composition,
    GaussianRelease,
    LaplaceRelease,
    PoissonSampled,
    RandomizedResponseRelease,
    _pld,
    account,
    epsilon_for,
    gaussian_mu,
    to_dp_event,
)
from recaudit.mechanisms.reference import analytic_gaussian_epsilon, randomized_response_delta
from recaudit.mechanisms import MaxSense, MultiMaxSense, PairwisePreference

GRID = DEFAULT_VALUE_DISCRETIZATION
FLOAT_SLACK = 1e-9  # relative: how far below an exact value float rounding may put a pessimistic result


def below_ok(value, exact):
    """``value`` is an upper bound of ``exact`` up to float rounding."""
    return value >= exact * (1 - FLOAT_SLACK) - 1e-15


# --------------------------------------------------------------------------
# independent closed forms


def gaussian_delta(eps, sigma, sensitivity=1.0):
    """Balle & Wang (2018), Thm. 8: δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ)."""
    a = sensitivity / sigma
    return stats.norm.cdf(a / 2 - eps / a) - math.exp(eps + stats.norm.logcdf(-a / 2 - eps / a))


def gaussian_epsilon(sigma, delta, sensitivity=1.0):
    a = sensitivity / sigma
    hi = a * a / 2 + a * stats.norm.isf(delta) + 1  # δ(hi) < δ
    return optimize.brentq(lambda e: gaussian_delta(e, sigma, sensitivity) - delta, 0.0, hi,
                           xtol=1e-14, rtol=1e-15)


def rr_composed_delta(eps_prime, epsilon, k):
    """k-fold binary RR: the privacy loss is ε(k − 2j), j ~ Binomial(k, 1 − p), p = e^ε/(1 + e^ε)."""
    p = 1 / (1 + math.exp(-epsilon))
    j = np.arange(k + 1)
    log_pmf = (special.gammaln(k + 1) - special.gammaln(j + 1) - special.gammaln(k - j + 1)
               + (k - j) * math.log(p) + j * math.log1p(-p))
    loss = epsilon * (k - 2 * j)
    return float(np.sum(np.exp(log_pmf) * -np.expm1(np.minimum(eps_prime - loss, 0.0))))


def rr_composed_epsilon(delta, epsilon, k):
    return optimize.brentq(lambda e: rr_composed_delta(e, epsilon, k) - delta, 0.0, k * epsilon, xtol=1e-13)


# --------------------------------------------------------------------------
# Gaussian


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0, 5.0])
@pytest.mark.parametrize("delta", [1e-5, 1e-8])
@pytest.mark.parametrize("sensitivity", [1.0, 1.5])
def test_gaussian_matches_the_analytic_closed_form(sigma, delta, sensitivity):
    exact = gaussian_epsilon(sigma, delta, sensitivity)
    assert analytic_gaussian_epsilon(sigma, delta, sensitivity) == pytest.approx(exact, rel=1e-10)
    eps = epsilon_for(GaussianRelease(sigma, sensitivity), delta)
    # measured: at most 2.4e-10 relative above (the root-finder margin); 1e-3 is the brief's bound
    assert exact <= eps <= exact * (1 + 1e-3)
    assert eps == pytest.approx(exact, rel=1e-9)
    assert epsilon_for(GaussianRelease(sigma, sensitivity), 0.0) == math.inf


@pytest.mark.parametrize("sigma", [1.0, 2.0, 5.0])
def test_gaussian_pld_path_agrees_with_the_closed_form(sigma):
    # the discretized PLD (used when Gaussians are composed with other events), on a coarse
    # grid of 2^-13 to stay fast: measured <= 5e-8 relative above exact; pessimistic
    pld = _pld(GaussianRelease(sigma), 2.0**-13)
    for delta in (1e-5, 1e-8):
        exact = gaussian_epsilon(sigma, delta)
        assert exact <= pld.get_epsilon_for_delta(delta) <= exact * (1 + 1e-6)


# --------------------------------------------------------------------------
# randomized response


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0])
def test_randomized_response_matches_its_closed_form(epsilon):
    eps0 = epsilon_for(RandomizedResponseRelease(epsilon), 0.0)
    assert epsilon <= eps0 <= epsilon + 2.0**-33  # one step of the fine RR grid
    assert epsilon_for(RandomizedResponseRelease(1.0), 0.0) == 1.0  # dyadic values are exact
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))
    for eps_prime in (0.0, 0.3 * epsilon, 0.7 * epsilon, 0.95 * epsilon):
        # δ(ε') by a direct sum over the two outputs, and by the reference helper
        direct = max(0.0, keep - math.exp(eps_prime) * (1 - keep)) + max(0.0, (1 - keep) - math.exp(eps_prime) * keep)
        assert randomized_response_delta(eps_prime, epsilon) == pytest.approx(direct, abs=1e-15)
        got = epsilon_for(RandomizedResponseRelease(epsilon), direct)
        # single RR sits on a grid of <= 2^-21 (a 2^22-point budget over its span 2ε): measured <= 4.8e-7
        assert below_ok(got, eps_prime) and got <= eps_prime + 1e-6


@pytest.mark.parametrize(("epsilon", "k"), [(0.25, 4), (0.5, 20), (1.0, 50), (0.1, 100)])
def test_composed_randomized_response_matches_the_binomial_closed_form(epsilon, k):
    event = RandomizedResponseRelease(epsilon, count=k)
    # pure DP: basic composition is tight at δ = 0
    assert k * epsilon <= epsilon_for(event, 0.0) <= k * (epsilon + 2.0**-33)
    for delta in (1e-6, 1e-3):
        exact = rr_composed_epsilon(delta, epsilon, k)
        got = epsilon_for(event, delta)
        # every loss rounded up by < one grid step (<= 2^-17 here): measured <= 1.5e-4 relative above
        assert below_ok(got, exact) and got <= exact * (1 + 1e-3)


def test_large_randomized_response_compositions_stay_cheap_and_sound():
    # 200 bits at ε = 1: on the default grid the dense PLD would span 400 nats in 5e7 points; the
    # grid is coarsened to keep it at 2^22 points (2^-13 here), the result stays an upper bound of
    # the exact binomial value (1000 bits take 2 s and pass too; an unbounded grid ran out of memory)
    event = RandomizedResponseRelease(1.0, count=200)
    assert epsilon_for(event, 0.0) == 200.0
    exact = rr_composed_epsilon(1e-6, 1.0, 200)
    got = epsilon_for(event, 1e-6)
    assert below_ok(got, exact) and got <= exact * (1 + 1e-3)


# --------------------------------------------------------------------------
# Laplace


@pytest.mark.parametrize(("scale", "sensitivity"), [(1.0, 1.0), (4.0, 2.0), (10.0, 3.0)])
def test_laplace_matches_its_closed_form(scale, sensitivity):
    epsilon = sensitivity / scale
    eps0 = epsilon_for(LaplaceRelease(scale, sensitivity), 0.0)
    assert epsilon <= eps0 <= epsilon + GRID  # the top loss rounded up to the grid
    for delta in (1e-6, 1e-3, 0.1):
        # δ(ε') = 1 − exp((ε' − ε)/2)  ⇔  ε' = ε + 2 log(1 − δ)
        exact = max(0.0, epsilon + 2 * math.log1p(-delta))
        got = epsilon_for(LaplaceRelease(scale, sensitivity), delta)
        # privacy buckets round each loss up by < one grid step: measured <= 3.2e-6 above
        assert got >= exact - 1e-12 and got <= exact + 2 * GRID


# --------------------------------------------------------------------------
# composition


def test_pure_compositions_add_up_at_delta_zero():
    assert epsilon_for(RandomizedResponseRelease(0.25, count=4), 0.0) == 1.0
    assert 3.0 <= epsilon_for(LaplaceRelease(1.0, count=3), 0.0) <= 3.0 + 3 * GRID
    assert 10.0 <= epsilon_for(LaplaceRelease(10.0, count=100), 0.0) <= 10.0 + 100 * GRID
    mixed = Composition((RandomizedResponseRelease(0.5), LaplaceRelease(2.0), RandomizedResponseRelease(0.25)))
    assert 1.25 <= epsilon_for(mixed, 0.0) <= 1.25 + 3 * GRID
    nested = Composition((mixed, Composition((LaplaceRelease(1.0),), count=2)), count=3)
    assert 3 * 3.25 <= epsilon_for(nested, 0.0) <= 3 * 3.25 + 15 * GRID
    # composition order does not matter
    swapped = Composition((RandomizedResponseRelease(0.25), LaplaceRelease(2.0), RandomizedResponseRelease(0.5)))
    assert epsilon_for(swapped, 1e-4) == epsilon_for(mixed, 1e-4)


def test_pure_compositions_at_positive_delta_are_below_the_sum():
    mixed = Composition((RandomizedResponseRelease(0.5, count=4), LaplaceRelease(1.0, count=3)))
    eps0 = epsilon_for(mixed, 0.0)
    values = [epsilon_for(mixed, d) for d in (1e-9, 1e-6, 1e-3, 0.1)]
    assert all(a >= b for a, b in zip([eps0] + values, values))  # non-increasing in δ
    assert values[-1] < 0.75 * eps0


def test_gaussian_compositions_are_one_gaussian():
    k, sigma, delta = 9, 3.0, 1e-6
    composed = GaussianRelease(sigma, count=k)
    assert gaussian_mu(composed) == pytest.approx(math.sqrt(k) / sigma, rel=1e-15)
    # μ composes as sqrt(Σ μ²): μ = 1, 1 and twice 1 ⇒ sqrt(1 + 1 + 2) = 2
    parts = Composition((GaussianRelease(1.0), GaussianRelease(2.0, sensitivity=2.0), GaussianRelease(1.0, count=2)))
    assert gaussian_mu(parts) == pytest.approx(2.0, rel=1e-15)
    assert epsilon_for(parts, delta) == pytest.approx(gaussian_epsilon(0.5, delta), rel=1e-9)
    exact = gaussian_epsilon(sigma / math.sqrt(k), delta)
    assert exact <= epsilon_for(composed, delta) <= exact * (1 + 1e-9)
    # dp-accounting's own composition of Gaussian PLDs agrees (grid 2^-12, 1e-4 relative)
    pld = dp_accounting.pld.privacy_loss_distribution.from_gaussian_mechanism(
        sigma, value_discretization_interval=2.0**-12).self_compose(k)
    assert epsilon_for(composed, delta) <= pld.get_epsilon_for_delta(delta) <= exact * (1 + 1e-4)
    # RDP is a looser analysis of the same event
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(to_dp_event(composed))
    assert epsilon_for(composed, delta) <= rdp.get_epsilon(delta)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(to_dp_event(parts))
    assert epsilon_for(parts, delta) <= rdp.get_epsilon(delta)


def test_gaussian_composed_with_randomized_response_is_sandwiched():
    # no closed form; but the composition is at least each part and at most basic composition
    # (grid 2^-13 for speed: the Gaussian PLD at 2^-17 takes a second)
    delta, grid = 1e-5, 2.0**-13
    event = Composition((GaussianRelease(4.0), RandomizedResponseRelease(0.5)))
    got = epsilon_for(event, delta, grid)
    gauss = gaussian_epsilon(4.0, delta)
    assert max(gauss, 0.5) < got <= gauss + 0.5 + 2 * grid
    assert gaussian_mu(event) is None
    assert epsilon_for(event, 0.0) == math.inf


# --------------------------------------------------------------------------
# Poisson sampling (add/remove)

SAMPLED_GRID = 2.0**-12  # sampled Gaussian PLDs take seconds at the default grid; ε moves < 1e-6 relative


def test_sampled_gaussian_is_amplified_and_tighter_than_rdp():
    q, sigma, k, delta = 0.1, 2.0, 10, 1e-5
    sampled = PoissonSampled(GaussianRelease(sigma), q, count=k)
    got = epsilon_for(sampled, delta, SAMPLED_GRID)
    assert got < epsilon_for(GaussianRelease(sigma, count=k), delta)
    rdp = dp_accounting.rdp.RdpAccountant()
    rdp.compose(to_dp_event(sampled))
    assert got <= rdp.get_epsilon(delta)
    # a finer grid moves ε by little (discretization converges)
    assert epsilon_for(sampled, delta, 2.0**-14) == pytest.approx(got, rel=1e-4)
    # m Gaussians on one subsample are one Gaussian of σ/sqrt(m)
    two = PoissonSampled(GaussianRelease(2 * sigma, count=4), q, count=k)
    assert epsilon_for(two, delta, SAMPLED_GRID) == pytest.approx(got, rel=1e-12)
    assert gaussian_mu(sampled) is None and epsilon_for(sampled, 0.0, SAMPLED_GRID) == math.inf
    # sampling everyone is no sampling
    assert epsilon_for(PoissonSampled(GaussianRelease(sigma), 1.0, count=k), delta) == \
        epsilon_for(GaussianRelease(sigma, count=k), delta)
    assert gaussian_mu(PoissonSampled(GaussianRelease(sigma), 1.0, count=k)) == pytest.approx(math.sqrt(k) / sigma)


def test_sampled_laplace_matches_amplification_at_delta_zero():
    # the largest privacy loss of ε-DP under Poisson sampling q (remove direction) is log(1 + q(e^ε − 1))
    q, scale, k = 0.1, 1.0, 10
    exact = math.log1p(q * math.expm1(1.0 / scale))
    sampled = PoissonSampled(LaplaceRelease(scale), q)
    assert exact <= epsilon_for(sampled, 0.0) <= exact + GRID
    assert k * exact <= epsilon_for(PoissonSampled(LaplaceRelease(scale), q, count=k), 0.0) <= k * (exact + GRID)
    assert epsilon_for(sampled, 1e-3) < epsilon_for(sampled, 0.0) < epsilon_for(LaplaceRelease(scale), 0.0)


# --------------------------------------------------------------------------
# dp-accounting's vocabulary


def test_to_dp_event():
    assert to_dp_event(GaussianRelease(3.0, sensitivity=1.5)) == dp_accounting.GaussianDpEvent(2.0)
    assert to_dp_event(LaplaceRelease(3.0, sensitivity=1.5, count=4)) == \
        dp_accounting.SelfComposedDpEvent(dp_accounting.LaplaceDpEvent(2.0), 4)
    rr = to_dp_event(RandomizedResponseRelease(1.0))
    assert rr.num_buckets == 2 and rr.noise_parameter == pytest.approx(2 / (1 + math.e), rel=1e-15)
    composed = to_dp_event(Composition((GaussianRelease(1.0), RandomizedResponseRelease(1.0)), count=2))
    assert isinstance(composed, dp_accounting.SelfComposedDpEvent) and composed.count == 2
    assert isinstance(composed.event, dp_accounting.ComposedDpEvent) and len(composed.event.events) == 2
    sampled = to_dp_event(PoissonSampled(GaussianRelease(2.0, sensitivity=0.5, count=4), 0.01, count=3))
    assert sampled == dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(0.01, dp_accounting.GaussianDpEvent(2.0)), 3)


# --------------------------------------------------------------------------
# validation and claims


@pytest.mark.parametrize("make", [
    lambda: GaussianRelease(-1.0),
    lambda: GaussianRelease(0.0),
    lambda: GaussianRelease(math.nan),
    lambda: GaussianRelease(math.inf),
    lambda: GaussianRelease(1.0, sensitivity=0.0),
    lambda: GaussianRelease(1.0, count=0),
    lambda: GaussianRelease(1.0, count=1.5),
    lambda: GaussianRelease(1.0, count=True),
    lambda: LaplaceRelease(-2.0),
    lambda: LaplaceRelease(1.0, count=-1),
    lambda: RandomizedResponseRelease(0.0),
    lambda: RandomizedResponseRelease(1.0, count=0),
    lambda: Composition(()),
    lambda: Composition((GaussianRelease(1.0), "noise")),
    lambda: PoissonSampled(RandomizedResponseRelease(1.0), 0.1),
    lambda: PoissonSampled(Composition((GaussianRelease(1.0),)), 0.1),
    lambda: PoissonSampled(LaplaceRelease(1.0, count=2), 0.1),
    lambda: PoissonSampled(GaussianRelease(1.0), 0.0),
    lambda: PoissonSampled(GaussianRelease(1.0), 1.5),
])
def test_invalid_events_are_refused(make):
    with pytest.raises(ValueError):
        make()


def test_error_messages_say_what_is_wrong():
    with pytest.raises(ValueError, match="sigma"):
        GaussianRelease(-1.0)
    with pytest.raises(ValueError, match="count"):
        RandomizedResponseRelease(1.0, count=0)
    with pytest.raises(ValueError, match="GaussianRelease or a LaplaceRelease"):
        PoissonSampled(RandomizedResponseRelease(1.0), 0.1)
    with pytest.raises(ValueError, match="delta"):
        epsilon_for(GaussianRelease(1.0), 1.0)
    with pytest.raises(ValueError, match="privacy event"):
        epsilon_for("gaussian", 1e-5)


def test_events_are_hashable_and_normalised():
    assert GaussianRelease(np.float64(2.0), count=np.int64(3)) == GaussianRelease(2.0, count=3)
    assert hash(Composition([GaussianRelease(1.0)])) == hash(Composition((GaussianRelease(1.0),)))


def test_account_fills_the_claim():
    claim = account(GaussianRelease(2.0, count=4), 1e-5, model="central", unit="rating", neighbouring="add_remove")
    assert (claim.model, claim.unit, claim.neighbouring, claim.delta) == ("central", "rating", "add_remove", 1e-5)
    assert claim.gaussian_mu == pytest.approx(1.0)
    assert claim.epsilon == epsilon_for(GaussianRelease(2.0, count=4), 1e-5)
    rr = account(RandomizedResponseRelease(0.5, count=2))
    assert (rr.delta, rr.model, rr.unit, rr.neighbouring, rr.gaussian_mu) == (0.0, "local", "user", "replace", None)
    assert 1.0 <= rr.epsilon <= 1.0 + 2 * 2.0**-33  # each leaf on the fine RR grid
    assert account(LaplaceRelease(1.0), 1e-3).gaussian_mu is None
    with pytest.raises(ValueError, match="delta > 0"):
        account(GaussianRelease(2.0))
    with pytest.raises(ValueError, match="delta > 0"):
        account(Composition((GaussianRelease(2.0), LaplaceRelease(1.0))))
    sampled = PoissonSampled(LaplaceRelease(1.0), 0.1)
    with pytest.raises(ValueError, match="add/remove"):
        account(sampled)  # replace neighbouring by default
    assert account(sampled, neighbouring="add_remove").gaussian_mu is None


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
