"""Tests for recaudit.audits.stats.one_run (Steinke, Nasr, Jagielski 2023 one-run audit)."""
import math
from itertools import product

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats
from scipy.special import expit

from recaudit.audits.stats.one_run import (
    OneRunResult,
    one_run_audit,
    one_run_ceiling,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)


def _brute_p(r, v, eps, delta, m):
    """The formula of docs/statistics.md with explicit binomial pmf sums and a Python max over i."""
    q = math.exp(eps) / (1 + math.exp(eps))
    pmf = [math.comb(r, j) * q**j * (1 - q) ** (r - j) for j in range(r + 1)]
    beta = sum(pmf[v:])
    if v == 0:
        return 1.0
    alpha_star = max(sum(pmf[v - i:v]) / i for i in range(1, v + 1))
    return min(1.0, beta + alpha_star * 2 * m * delta)


@pytest.mark.parametrize("r, m", [(1, 1), (5, 8), (12, 12), (20, 50)])
@pytest.mark.parametrize("delta", [0.0, 1e-4, 1e-2])
def test_p_value_matches_brute_force(r, m, delta):
    for v, eps in product(range(r + 1), (0.0, 0.3, 1.0, 2.5)):
        assert one_run_p_value(r, v, eps, delta, m) == pytest.approx(_brute_p(r, v, eps, delta, m),
                                                                     rel=1e-9, abs=1e-15)


def test_p_value_at_epsilon_zero_is_fair_coin_tail():
    for r, v in [(10, 7), (100, 60), (1_000, 530)]:
        assert one_run_p_value(r, v, 0.0, 0.0, r) == pytest.approx(stats.binom.sf(v - 1, r, 0.5), rel=1e-12)
        # a small δ only adds the α*·2mδ term: p → P[Bin(r, ½) >= v] as δ → 0
        assert one_run_p_value(r, v, 0.0, 1e-9, r) == pytest.approx(stats.binom.sf(v - 1, r, 0.5), rel=1e-5)
    assert one_run_p_value(10, 0, 1.0, 0.1, 10) == 1.0


@settings(max_examples=60, deadline=None)
@given(r=st.integers(1, 400), frac=st.floats(0, 1), delta=st.sampled_from([0.0, 1e-5, 1e-3, 1e-2]),
       m_extra=st.integers(0, 1_000))
def test_p_value_increases_with_epsilon(r, frac, delta, m_extra):
    # one_run_epsilon_lower_bound's root-finding relies on this monotonicity
    v = int(frac * r)
    ps = [one_run_p_value(r, v, e, delta, r + m_extra) for e in np.linspace(0, 8, 60)]
    assert np.all(np.diff(ps) >= -1e-12)


def test_bound_is_the_edge_of_rejection():
    r, v, m, alpha = 1_000, 700, 2_000, 0.05
    for delta in (0.0, 1e-5):
        eps = one_run_epsilon_lower_bound(r, v, m, alpha, delta)
        assert eps > 0
        assert one_run_p_value(r, v, eps * (1 - 1e-6), delta, m) < alpha
        assert one_run_p_value(r, v, eps * (1 + 1e-6) + 1e-9, delta, m) >= alpha


def test_bound_monotone_in_v():
    r, m = 500, 1_000
    for delta in (0.0, 1e-5):
        lbs = [one_run_epsilon_lower_bound(r, v, m, 0.05, delta) for v in range(200, r + 1, 10)]
        assert np.all(np.diff(lbs) >= 0)
        assert lbs[0] == 0.0 and lbs[-1] > 4


def test_all_correct_reaches_ceiling():
    # closed form with δ = 0: q^r = alpha at the edge, so ε = logit(alpha^(1/r))
    for r in (10, 100, 1_000):
        expected = math.log(0.05 ** (1 / r) / (1 - 0.05 ** (1 / r)))
        assert one_run_ceiling(r, r, 0.05) == pytest.approx(expected, rel=1e-8)
    scores = np.arange(100.0)
    included = (scores >= 50).astype(int)
    res = one_run_audit(scores, included, 50, 50, 0.05)
    assert (res.r, res.v, res.m) == (100, 100, 100)
    assert res.epsilon_lb == pytest.approx(res.ceiling)
    assert one_run_ceiling(100, 1_000, 0.05, 1e-5) < one_run_ceiling(100, 1_000, 0.05)  # δ lowers it


def test_audit_counts_guesses_and_abstentions():
    scores = np.array([0.9, 0.1, 0.5, 0.8, 0.2, 0.3])
    included = np.array([1, 0, 1, 0, 1, 0])
    res = one_run_audit(scores, included, k_pos=2, k_neg=2, alpha=0.05)
    # "in": 0.9 (right), 0.8 (wrong); "out": 0.1 (right), 0.2 (wrong); abstain on 0.5, 0.3
    assert (res.r, res.v, res.m, res.k_pos, res.k_neg) == (4, 2, 6, 2, 2)
    assert res.method == "one-run" and isinstance(res, OneRunResult)
    assert res.to_dict()["v"] == 2
    with pytest.raises(ValueError):
        one_run_audit(scores, included, 4, 4)
    with pytest.raises(ValueError):
        one_run_audit(scores, included[:3], 1, 1)


def test_randomized_response_canaries_valid_and_tight():
    # m = 10⁴ canaries through ε = 1 randomized response, guessing on all of them:
    # v ~ Bin(10⁴, q) exactly, so P(ε_LB > 1) <= alpha = 1e-6 by the theorem.
    # At v = E[v] the bound is 0.893; it falls below 0.75 only if v <= 7012,
    # 6.7 sd below its mean: P = P[Bin(10⁴, q) <= 7012] ≈ 1.5e-11.
    rng = np.random.default_rng(31)
    m, eps = 10_000, 1.0
    included = rng.integers(0, 2, m)
    flip = rng.random(m) < expit(-eps)
    scores = np.where(flip, 1 - included, included).astype(float)
    res = one_run_audit(scores, included, m // 2, m // 2, alpha=1e-6, rng=rng)
    assert res.r == m
    assert 0.75 <= res.epsilon_lb <= eps


def test_no_signal_gives_zero():
    # scores independent of inclusion: P(ε_LB > 0) <= alpha = 1e-6
    rng = np.random.default_rng(32)
    res = one_run_audit(rng.normal(size=5_000), rng.integers(0, 2, 5_000), 1_000, 1_000, alpha=1e-6, delta=1e-5)
    assert res.epsilon_lb == 0.0


# --------------------------------------------------------------------------
# f-DP one-run (Mahloujifar, Melis, Chaudhuri 2025)

from recaudit.audits.stats.gdp import gdp_epsilon  # noqa: E402
from recaudit.audits.stats.estimators import ESTIMATORS, EstimatorError  # noqa: E402
from recaudit.audits.stats.one_run import (  # noqa: E402
    fdp_one_run_audit,
    fdp_one_run_mu_lower_bound,
    fdp_one_run_p_value,
)
from recaudit.mechanisms import PrivacyClaim  # noqa: E402
from recaudit.mechanisms.accounting import GaussianRelease, account  # noqa: E402
from recaudit.mechanisms.reference import analytic_gaussian_sigma  # noqa: E402


def _gaussian_canaries(rng, m, sigma):
    included = rng.integers(0, 2, m)
    return included + rng.normal(0.0, sigma, m), included


def test_fdp_bound_edges_and_p_value_agree():
    r, v, m, alpha = 2_000, 1_500, 10_000, 0.05
    mu = fdp_one_run_mu_lower_bound(r, v, m, alpha)
    assert mu > 0
    # p < alpha exactly for the mu the bound rejects (nested rejection regions)
    assert fdp_one_run_p_value(r, v, m, mu * 0.99) < alpha <= fdp_one_run_p_value(r, v, m, mu * 1.01)
    assert fdp_one_run_mu_lower_bound(r, r // 2, m, alpha) == 0.0  # chance-level guesses reject nothing
    assert fdp_one_run_p_value(r, 0, m, 0.5) == 1.0
    lbs = [fdp_one_run_mu_lower_bound(r, v, m, alpha) for v in range(1_100, r + 1, 100)]
    assert np.all(np.diff(lbs) >= 0)


def test_fdp_coverage_on_true_gaussian_canaries():
    # 300 audits of exactly mu-GDP canaries (score = bit + N(0, sigma²)) at alpha = 0.05: the number
    # rejecting the true mu is Bin(300, p <= 0.05); more than 28 has probability < 1e-3 if p <= 0.05.
    rng = np.random.default_rng(41)
    sigma = analytic_gaussian_sigma(2.0, 1e-5)
    rejected = 0
    for _ in range(300):
        s, b = _gaussian_canaries(rng, 2_000, sigma)
        res = fdp_one_run_audit(s, b, 200, 200, alpha=0.05, delta=1e-5)
        rejected += res.mu_lb > 1.0 / sigma
    assert rejected <= 28


def test_fdp_is_tighter_than_steinke_nasr_jagielski_on_gaussian_canaries():
    # m = 10⁴ Gaussian canaries at eps = 4 (delta 1e-5), 10% guessed each way, alpha = 0.05, 20 seeds:
    # single runs gave ε_LB/ε ≈ 0.57 (f-DP) vs 0.40 (SNJ) with run-to-run spread ≈ 0.05, so a median
    # gap below 0.1 would need a many-sd shift; a median above 1 needs more than half of 20 audits
    # to fail at 5% each (probability < 1e-9).
    sigma = analytic_gaussian_sigma(4.0, 1e-5)
    rng = np.random.default_rng(42)
    ratios = []
    for _ in range(20):
        s, b = _gaussian_canaries(rng, 10_000, sigma)
        f = fdp_one_run_audit(s, b, 1_000, 1_000, alpha=0.05, delta=1e-5)
        o = one_run_audit(s, b, 1_000, 1_000, alpha=0.05, delta=1e-5)
        ratios.append((f.epsilon_lb / 4.0, o.epsilon_lb / 4.0))
    fdp, snj = np.median(ratios, axis=0)
    assert fdp > snj + 0.1 and fdp <= 1.0
    assert f.epsilon_lb == pytest.approx(gdp_epsilon(f.mu_lb, 1e-5)) and f.to_dict()["method"] == "fdp-one-run"


def test_fdp_estimator_needs_a_gaussian_claim():
    est = ESTIMATORS["fdp-one-run"](guess_fraction=0.1)
    with pytest.raises(EstimatorError, match="Gaussian trade-off curve"):
        est.require(PrivacyClaim(1.0, 1e-5))
    assert not est.supports(PrivacyClaim(1.0, 1e-5))
    sigma = analytic_gaussian_sigma(4.0, 1e-5)
    claim = account(GaussianRelease(sigma), 1e-5, model="central")
    s, b = _gaussian_canaries(np.random.default_rng(43), 10_000, sigma)
    estimate = est.estimate(s, b, claim, 0.05)
    assert 0 < estimate.epsilon_lb <= claim.epsilon and estimate.p_value > 0.05
    # a claim of far less noise than the canaries carry (mu 4x too small) is rejected: its p-value is tiny
    weak = account(GaussianRelease(4 * sigma), 1e-5, model="central")
    assert est.estimate(s, b, weak, 0.05).p_value < 1e-6
