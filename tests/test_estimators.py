"""Tests for recaudit.audits.stats.bounds (Clopper–Pearson ε lower bounds).

Every statistical assertion below uses a fixed seed and states its
false-failure probability (docs/statistics.md, "Verdicts").
"""

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from statsmodels.stats.proportion import proportion_confint

from recaudit.audits.stats.rates import BoundResult, ceiling, cp_upper, epsilon_from_rates, epsilon_lower_bound
from recaudit.audits.stats.thresholds import select_threshold, threshold_counts
from recaudit.audits.stats.bounds import split_epsilon_bound
from recaudit.audits.stats.rates import _wilson_upper  # private: to re-derive the selection criterion

# --------------------------------------------------------------------------
# ceiling


@pytest.mark.parametrize("n, expected", [(100, 3.3), (1_000, 5.6), (10_000, 7.9), (100_000, 10.2)])
def test_ceiling_known_values(n, expected):
    assert ceiling(n, n, 0.05) == pytest.approx(expected, abs=0.05)


def test_ceiling_closed_form_and_vectorised():
    n = np.array([100, 1_000, 10_000, 100_000])
    u = 1.0 - 0.025 ** (1.0 / n)  # CP upper bound for 0 of n at level 1 - alpha/2
    got = ceiling(n, n, 0.05)
    assert isinstance(got, np.ndarray) and got.shape == (4,)
    np.testing.assert_allclose(got, np.log((1.0 - u) / u), rtol=1e-9)
    assert isinstance(ceiling(100, 100, 0.05), float)


# --------------------------------------------------------------------------
# cp_upper


@pytest.mark.parametrize("alpha", [0.05, 0.025, 1e-3, 1e-6])
def test_cp_upper_matches_statsmodels(alpha):
    for n in (1, 2, 7, 50, 1_000):
        k = np.arange(n + 1)
        ours = cp_upper(k, n, alpha)
        ref = proportion_confint(k, n, alpha=2 * alpha, method="beta")[1]
        np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12)


def test_cp_upper_edges_and_types():
    assert cp_upper(5, 5, 0.05) == 1.0
    assert isinstance(cp_upper(3, 10, 0.05), float)
    assert cp_upper(0, 10, 0.05) == pytest.approx(1 - 0.05 ** (1 / 10))
    out = cp_upper(np.array([[0, 1], [2, 3]]), 3, 0.1)
    assert out.shape == (2, 2) and out[1, 1] == 1.0
    assert np.all(np.diff(cp_upper(np.arange(11), 10, 0.05)) > 0)  # monotone in k
    with pytest.raises(ValueError):
        cp_upper(11, 10, 0.05)
    with pytest.raises(ValueError):
        cp_upper(1, 10, 0.0)


# --------------------------------------------------------------------------
# epsilon_from_rates / epsilon_lower_bound


def test_epsilon_from_rates_values():
    assert epsilon_from_rates(0.1, 0.2, 0.0) == pytest.approx(math.log(0.8 / 0.1))
    assert epsilon_from_rates(0.2, 0.1, 0.0) == pytest.approx(math.log(0.8 / 0.1))
    assert epsilon_from_rates(0.1, 0.2, 0.05) == pytest.approx(math.log(0.75 / 0.1))
    assert epsilon_from_rates(0.5, 0.5, 0.0) == 0.0  # no distinguishing power
    assert epsilon_from_rates(0.6, 0.6, 0.0) == 0.0  # clipped at 0
    assert epsilon_from_rates(1.0, 1.0, 0.0) == 0.0  # numerators <= 0
    assert epsilon_from_rates(0.3, 0.9, 0.2) == 0.0  # 1 - δ - FNR <= 0, other term < 0
    got = epsilon_from_rates(np.array([0.1, 0.5]), np.array([0.2, 0.5]))
    np.testing.assert_allclose(got, [math.log(8.0), 0.0])


def test_epsilon_lower_bound_randomized_response():
    # Randomized response with ε = 1: the guess "world 1 iff output = 1" is a
    # fixed test with FPR = FNR = 1/(1 + e), so fp, fn ~ Bin(n, 1/(1 + e)).
    eps, n = 1.0, 100_000
    rng = np.random.default_rng(20240611)
    fp = rng.binomial(n, expit(-eps))
    fn = rng.binomial(n, expit(-eps))
    lb = epsilon_lower_bound(fp, n, fn, n, alpha=1e-6)
    # "lb <= ε": the test is fixed before the counts, so P(lb > ε) <= alpha = 1e-6.
    assert lb <= eps
    # "lb >= 0.9": expected lb ≈ 0.97; dropping below 0.9 needs the counts to
    # exceed their means by > 10 standard deviations: probability < 1e-20.
    assert lb >= 0.9


def test_delta_lowers_bound():
    fp, fn, n = 300, 400, 10_000
    deltas = np.array([0.0, 1e-4, 1e-3, 1e-2, 0.1])
    lbs = epsilon_lower_bound(fp, n, fn, n, 0.05, deltas)
    assert lbs[0] > 0
    assert np.all(np.diff(lbs) < 0)
    assert ceiling(1_000, 1_000, 0.05, delta=1e-2) < ceiling(1_000, 1_000, 0.05)
    # a δ that swallows all the evidence gives 0
    assert epsilon_lower_bound(fp, n, fn, n, 0.05, delta=0.99) == 0.0


# --------------------------------------------------------------------------
# threshold_counts


def _brute_counts(s0, s1, thresholds, direction):
    fp, fn = [], []
    for t in thresholds:
        if direction == 1:
            fp.append(sum(s >= t for s in s0))
            fn.append(sum(s < t for s in s1))
        else:
            fp.append(sum(s <= t for s in s0))
            fn.append(sum(s > t for s in s1))
    return np.array(fp), np.array(fn)


_small = st.lists(st.integers(-5, 5).map(float) | st.floats(-3, 3), min_size=1, max_size=30)


@settings(max_examples=200, deadline=None)
@given(s0=_small, s1=_small, extra=st.lists(st.floats(-6, 6), max_size=10), direction=st.sampled_from([1, -1]))
def test_threshold_counts_matches_brute_force(s0, s1, extra, direction):
    thresholds = np.array(sorted(set(s0 + s1 + extra)) + [np.inf, -np.inf])
    fp, fn = threshold_counts(s0, s1, thresholds, direction)
    bfp, bfn = _brute_counts(s0, s1, thresholds, direction)
    np.testing.assert_array_equal(fp, bfp)
    np.testing.assert_array_equal(fn, bfn)
    # reversing the scores and the thresholds swaps the direction
    rfp, rfn = threshold_counts(-np.array(s0), -np.array(s1), -thresholds, -direction)
    np.testing.assert_array_equal(rfp, fp)
    np.testing.assert_array_equal(rfn, fn)


def test_threshold_counts_rejects_bad_input():
    with pytest.raises(ValueError):
        threshold_counts([0.0, np.nan], [1.0], [0.5])
    with pytest.raises(ValueError):
        threshold_counts([0.0], [1.0], [0.5], direction=0)


# --------------------------------------------------------------------------
# select_threshold


def test_select_threshold_separated_point_estimate():
    rng = np.random.default_rng(1)
    s0, s1 = rng.uniform(0, 1, 200), rng.uniform(2, 3, 300)
    t, d = select_threshold(s0, s1)
    assert d == 1 and s0.max() < t < s1.min()
    assert t == pytest.approx((s0.max() + s1.min()) / 2)
    t, d = select_threshold(-s0, -s1)
    assert d == -1 and -s1.min() < t < -s0.max()
    # a low score means world 1 here; the criterion with alpha behaves alike
    t, d = select_threshold(s1, s0, alpha=0.05)
    assert d == -1 and s0.max() < t < s1.min()


def test_select_threshold_large_input_is_fast():
    rng = np.random.default_rng(2)
    n = 200_000
    t, d = select_threshold(rng.laplace(0, 1, n), rng.laplace(1, 1, n), alpha=0.05)
    assert d == 1 and np.isfinite(t)


def _criterion(fp, fn, n0, n1, delta, alpha, n_tests=1):
    if alpha is None:
        return epsilon_from_rates((fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0), delta)
    level = alpha / 2 / n_tests  # Bonferroni over the candidate tests when simultaneous
    return epsilon_from_rates(_wilson_upper(fp, n0, level), _wilson_upper(fn, n1, level), delta)


_scores = st.lists(st.integers(-4, 4).map(float) | st.floats(-3, 3), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(s0=_scores, s1=_scores, delta=st.sampled_from([0.0, 0.01]), alpha=st.sampled_from([None, 0.05]),
       simultaneous=st.booleans())
def test_select_threshold_maximises_criterion(s0, s1, delta, alpha, simultaneous):
    # brute force over every candidate cut in both directions
    cand = np.append(np.unique(s0 + s1), np.inf)
    n_tests = 2 * cand.size if simultaneous else 1
    best = max(
        float(np.max(_criterion(*_brute_counts(s0, s1, cand, d), len(s0), len(s1), delta, alpha, n_tests)))
        for d in (1, -1)
    )
    t, d = select_threshold(s0, s1, delta, alpha=alpha, simultaneous=simultaneous)
    fp, fn = _brute_counts(s0, s1, [t], d)
    got = float(_criterion(fp[0], fn[0], len(s0), len(s1), delta, alpha, n_tests))
    assert got == pytest.approx(best, abs=1e-12)


def _sorting_select(s0, s1, **kw):
    """select_threshold with every score array sorted (the tally path switched off)."""
    import recaudit.audits.stats.thresholds as thresholds

    tallying = thresholds.sorted_scores
    thresholds.sorted_scores = np.sort
    try:
        return select_threshold(s0, s1, **kw)
    finally:
        thresholds.sorted_scores = tallying


def test_tallied_scores_choose_the_cut_sorting_chooses():
    # scores of a few distinct values are counted per value instead of sorted: the same cut, direction and
    # criterion, bit for bit, at sizes where only a strided sample of the scores finds the values
    rng = np.random.default_rng(11)
    for _ in range(60):
        values = rng.normal(size=rng.integers(1, 10)) * rng.choice([1e-3, 1.0, 100.0])
        s0, s1 = (rng.choice(values, rng.integers(1, 20_000), p=rng.dirichlet(np.ones(values.size)))
                  for _ in range(2))
        for kw in ({}, {"alpha": 0.05}, {"alpha": 1e-3, "candidates": "rare-event", "with_value": True}):
            assert np.array(select_threshold(s0, s1, **kw)).tobytes() == np.array(_sorting_select(s0, s1,
                                                                                                  **kw)).tobytes()


def test_tally_counts_every_score_or_declines():
    from recaudit.audits.stats.rates import tally

    s = np.full(100_000, 2.0)
    s[12_345] = 5.0  # not in the strided sample: the counts fall one short, so the scores are sorted instead
    assert tally(s) is None
    s[::2] = -1.0
    counted = tally(np.where(np.arange(s.size) == 12_345, 2.0, s))
    assert counted.values.tolist() == [-1.0, 2.0] and counted.size == s.size
    assert counted.searchsorted([-1.0, 0.0, 2.0, 3.0]).tolist() == [0, 50_000, 50_000, 100_000]
    assert counted.searchsorted([-1.0, 2.0], side="right").tolist() == [50_000, 100_000]
    assert tally(np.zeros(5000)) is None  # zero is left to sorting (-0.0 and 0.0)


# --------------------------------------------------------------------------
# split_epsilon_bound


def test_split_perfect_separation_reaches_ceiling():
    rng = np.random.default_rng(3)
    s0, s1 = rng.uniform(0, 1, 1_000), rng.uniform(2, 3, 600)
    res = split_epsilon_bound(s0, s1, alpha=0.05, selection_fraction=0.3)
    assert (res.n_neg, res.n_pos) == (700, 420)
    assert (res.false_pos, res.false_neg) == (0, 0)
    assert res.ceiling == pytest.approx(ceiling(700, 420, 0.05))
    assert res.epsilon_lb == pytest.approx(res.ceiling)
    assert res.method == "clopper-pearson" and res.threshold_rule == "split"


def test_split_direction_reversal_gives_same_bound():
    rng = np.random.default_rng(4)
    s0, s1 = rng.laplace(0, 1, 4_000), rng.laplace(1, 1, 4_000)
    a = split_epsilon_bound(s0, s1, alpha=0.05)
    b = split_epsilon_bound(-s0, -s1, alpha=0.05)
    assert a.direction == 1 and b.direction == -1
    assert b.threshold == -a.threshold
    assert (a.false_pos, a.false_neg) == (b.false_pos, b.false_neg)
    assert b.epsilon_lb == a.epsilon_lb > 0


def test_split_null_gives_zero():
    # Identical worlds are 0-DP; the test is chosen on runs disjoint from the
    # counted ones, so P(ε_LB > 0) <= alpha = 1e-6.
    rng = np.random.default_rng(5)
    s0, s1 = rng.normal(0, 1, 20_000), rng.normal(0, 1, 20_000)
    assert split_epsilon_bound(s0, s1, alpha=1e-6).epsilon_lb == 0.0


def test_split_laplace_valid_and_powerful():
    # Laplace mechanism, sensitivity 1, scale 1: exactly 1-DP.
    eps, n = 1.0, 20_000
    rng = np.random.default_rng(6)
    s0, s1 = rng.laplace(0, 1 / eps, n), rng.laplace(1, 1 / eps, n)
    res = split_epsilon_bound(s0, s1, alpha=1e-6)
    # "<= ε": threshold chosen on disjoint runs, so P(ε_LB > ε) <= alpha = 1e-6.
    assert res.epsilon_lb <= eps
    # ">= 0.6" (power): over 300 seeds ε_LB had min 0.74, median 0.85,
    # sd ≈ 0.025; 0.6 is ~10 sd below the median (false failure ≪ 1e-6 under
    # a normal approximation).
    assert res.epsilon_lb >= 0.6


def test_split_delta_lowers_bound():
    # δ also changes which test is selected, so compare on the selected test.
    rng = np.random.default_rng(7)
    s0, s1 = rng.laplace(0, 1, 10_000), rng.laplace(1, 1, 10_000)
    b = split_epsilon_bound(s0, s1, alpha=0.05, delta=0.05)
    undelta = epsilon_lower_bound(b.false_pos, b.n_neg, b.false_neg, b.n_pos, 0.05)
    assert 0 < b.epsilon_lb < undelta
    assert b.ceiling < split_epsilon_bound(s0, s1, alpha=0.05).ceiling


def test_split_rng_is_deterministic_and_optional():
    s0 = np.sort(np.random.default_rng(8).normal(0, 1, 2_000))  # sorted: order depends on scores
    s1 = np.sort(np.random.default_rng(9).normal(2, 1, 2_000))
    r1 = split_epsilon_bound(s0, s1, 0.05, rng=10)
    r2 = split_epsilon_bound(s0, s1, 0.05, rng=np.random.default_rng(10))
    assert r1 == r2
    assert r1.epsilon_lb > 1.0


def test_bound_result_to_dict_is_json_ready():
    rng = np.random.default_rng(11)
    res = split_epsilon_bound(rng.normal(0, 1, 500), rng.normal(1, 1, 500), alpha=0.05)
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert set(d) == {f.name for f in dataclasses.fields(BoundResult)}
    for key in ("epsilon_lb", "ceiling", "alpha", "delta"):
        assert type(d[key]) is float
    for key in ("direction", "false_pos", "n_neg", "false_neg", "n_pos"):
        assert type(d[key]) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.epsilon_lb = 0.0  # type: ignore[misc]
    inf = dataclasses.replace(res, threshold=math.inf).to_dict()
    assert inf["threshold"] == "inf"
    json.dumps(inf, allow_nan=False)


def test_split_rejects_bad_input():
    with pytest.raises(ValueError):
        split_epsilon_bound([0.0], [1.0], 0.05)
    with pytest.raises(ValueError):
        split_epsilon_bound(np.zeros(10), np.ones(10), 0.05, selection_fraction=1.0)


# --------------------------------------------------------------------------
# fixed tests: explicit threshold and Bonferroni grid

from recaudit.audits.stats.bounds import bonferroni_epsilon_bound, fixed_threshold_epsilon_bound  # noqa: E402
from recaudit.audits.stats.gdp import (gdp_delta, gdp_epsilon, gdp_mu_lower_bound, select_gdp_threshold,  # noqa: E402
                              split_gdp_bound)
from recaudit.audits.stats.pvalues import holm_adjust, violation_p_value  # noqa: E402


def test_fixed_threshold_counts_every_run():
    rng = np.random.default_rng(12)
    s0, s1 = rng.laplace(0, 1, 5_000), rng.laplace(1, 1, 5_000)
    res = fixed_threshold_epsilon_bound(s0, s1, threshold=1.0, direction=1, alpha=0.05)
    fp, fn = threshold_counts(s0, s1, [1.0], 1)
    assert (res.false_pos, res.false_neg, res.n_neg, res.n_pos) == (fp[0], fn[0], 5_000, 5_000)
    assert res.epsilon_lb == pytest.approx(epsilon_lower_bound(fp[0], 5_000, fn[0], 5_000, 0.05))
    assert res.ceiling == pytest.approx(ceiling(5_000, 5_000, 0.05))
    assert res.threshold_rule == "explicit" and res.method == "clopper-pearson"


def test_fixed_threshold_laplace_valid_and_powerful():
    # The likelihood-ratio test "x >= 1" of Lap(0, 1) vs Lap(1, 1) is fixed in
    # advance, so P(ε_LB > 1) <= alpha = 1e-6. Expected ε_LB ≈ 0.95 (FPR = e^-1/2,
    # 1 - FNR = 1/2, 10⁵ runs); < 0.8 needs a > 10 sd deviation (p ≪ 1e-9).
    rng = np.random.default_rng(13)
    s0, s1 = rng.laplace(0, 1, 100_000), rng.laplace(1, 1, 100_000)
    res = fixed_threshold_epsilon_bound(s0, s1, 1.0, 1, alpha=1e-6)
    assert 0.8 <= res.epsilon_lb <= 1.0


def test_bonferroni_requires_a_data_independent_grid():
    with pytest.raises(ValueError, match="score_range"):
        bonferroni_epsilon_bound(np.zeros(10), np.ones(10), 0.05)
    with pytest.raises(ValueError):
        bonferroni_epsilon_bound(np.zeros(10), np.ones(10), 0.05, score_range=(1.0, 0.0))


def test_bonferroni_matches_brute_force_over_the_grid():
    rng = np.random.default_rng(14)
    s0, s1 = rng.normal(0, 1, 3_000), rng.normal(1, 1, 3_000)
    grid = np.linspace(-3, 4, 15)
    res = bonferroni_epsilon_bound(s0, s1, 0.05, thresholds=grid)
    per_test = 0.05 / (2 * grid.size)  # every (threshold, direction) pair
    best = max(
        float(epsilon_lower_bound(fp[0], 3_000, fn[0], 3_000, per_test))
        for t in grid for d in (1, -1) for fp, fn in [_brute_counts(s0, s1, [t], d)]
    )
    assert res.epsilon_lb == pytest.approx(best)
    assert res.threshold_rule == "bonferroni" and res.threshold in grid
    assert res.ceiling == pytest.approx(ceiling(3_000, 3_000, per_test))
    same = bonferroni_epsilon_bound(s0, s1, 0.05, score_range=(-3, 4), grid_size=15)
    assert same == res


def test_bonferroni_null_gives_zero_and_separation_gives_ceiling():
    # identical worlds: all 200 tests hold together w.p. >= 1 - 1e-6, so ε_LB = 0
    rng = np.random.default_rng(15)
    s0, s1 = rng.normal(0, 1, 20_000), rng.normal(0, 1, 20_000)
    assert bonferroni_epsilon_bound(s0, s1, 1e-6, score_range=(-4, 4)).epsilon_lb == 0.0
    res = bonferroni_epsilon_bound(np.zeros(1_000), np.ones(1_000), 0.05, thresholds=[0.5])
    assert res.epsilon_lb == pytest.approx(res.ceiling)
    assert res.ceiling < ceiling(1_000, 1_000, 0.05)  # the correction costs a little


# --------------------------------------------------------------------------
# Gaussian DP


def test_gdp_known_value_mu_one():
    assert gdp_epsilon(1.0, 1e-5) == pytest.approx(4.38, abs=0.01)
    assert gdp_delta(gdp_epsilon(1.0, 1e-5), 1.0) == pytest.approx(1e-5, rel=1e-9)


def test_gdp_delta_matches_dp_accounting_gaussian():
    # Independent implementation: Google's dp_accounting privacy-loss classes.
    GaussianPrivacyLoss = pytest.importorskip("dp_accounting.pld.privacy_loss_mechanism").GaussianPrivacyLoss

    for sigma in (0.3, 1.0, 3.7):
        ref = GaussianPrivacyLoss(sigma, sensitivity=1.0)
        for eps in (0.0, 0.1, 1.0, 3.0, 10.0):
            assert gdp_delta(eps, 1.0 / sigma) == pytest.approx(ref.get_delta_for_epsilon(eps), rel=1e-6, abs=1e-300)


@settings(max_examples=100, deadline=None)
@given(mu=st.floats(0.01, 8.0), log10_delta=st.floats(-12, -1))
def test_gdp_round_trip(mu, log10_delta):
    delta = 10.0 ** log10_delta
    eps = gdp_epsilon(mu, delta)
    if eps == 0.0:
        assert delta >= gdp_delta(0.0, mu) * (1 - 1e-12)
    else:
        assert gdp_delta(eps, mu) == pytest.approx(delta, rel=1e-7)


def test_gdp_delta_edges_and_stability():
    assert gdp_delta(0.0, 1.0) == pytest.approx(2 * stats_norm_cdf(0.5) - 1)
    assert gdp_delta(1.0, 0.0) == 0.0
    assert gdp_delta(1.0, np.inf) == 1.0
    d = gdp_delta(np.linspace(0, 40, 200), 2.0)
    assert np.all(np.diff(d) < 0) and np.all(d > 0)  # no cancellation to 0 or below
    assert gdp_delta(30.0, 2.0) == pytest.approx(3.3e-50, rel=0.5)  # tiny but exact in log space
    assert gdp_epsilon(0.0, 1e-5) == 0.0 and gdp_epsilon(1.0, 0.0) == math.inf
    assert gdp_epsilon(1.0, 0.5) == 0.0  # δ above δ(0) = 0.383
    np.testing.assert_allclose(gdp_epsilon([1.0, 1.0], [1e-5, 1e-6]), [gdp_epsilon(1.0, 1e-5), gdp_epsilon(1.0, 1e-6)])


def stats_norm_cdf(x):
    from scipy.stats import norm

    return float(norm.cdf(x))


def test_gdp_mu_lower_bound_formula_and_clipping():
    from scipy.stats import norm

    fpr, fnr = cp_upper(300, 1_000, 0.025), cp_upper(200, 1_000, 0.025)
    assert gdp_mu_lower_bound(300, 1_000, 200, 1_000, 0.05) == pytest.approx(norm.isf(fpr) - norm.ppf(fnr))
    assert gdp_mu_lower_bound(200, 1_000, 300, 1_000, 0.05) == pytest.approx(norm.isf(fpr) - norm.ppf(fnr))
    assert gdp_mu_lower_bound(500, 1_000, 500, 1_000, 0.05) == 0.0
    assert gdp_mu_lower_bound(1_000, 1_000, 1_000, 1_000, 0.05) == 0.0  # rates of 1: no nan


def test_split_gdp_perfect_separation_reaches_ceiling():
    res = split_gdp_bound(np.zeros(2_000), np.ones(2_000), alpha=0.05, delta=1e-5)
    assert res.method == "gdp" and res.threshold_rule == "split"
    assert (res.false_pos, res.false_neg) == (0, 0)
    assert res.mu_lb == pytest.approx(res.mu_ceiling)
    assert res.mu_ceiling == pytest.approx(gdp_mu_lower_bound(0, 1_000, 0, 1_000, 0.05))
    assert res.epsilon_lb == pytest.approx(res.ceiling) and res.ceiling == pytest.approx(
        gdp_epsilon(res.mu_ceiling, 1e-5))
    d = res.to_dict()
    json.dumps(d, allow_nan=False)
    assert type(d["mu_lb"]) is float and type(d["mu_ceiling"]) is float


def test_split_gdp_gaussian_valid_and_tight():
    # Gaussian mechanism σ = 2 (μ = 0.5): exactly μ-GDP, so P(μ_LB > 0.5) <= alpha = 1e-6.
    rng = np.random.default_rng(16)
    s0, s1 = rng.normal(0, 2, 200_000), rng.normal(1, 2, 200_000)
    res = split_gdp_bound(s0, s1, alpha=1e-6, delta=1e-5)
    assert res.mu_lb <= 0.5 and res.epsilon_lb <= gdp_epsilon(0.5, 1e-5)
    # Power: SE of μ̂ at a central cut with 10⁵ counted runs is ≈ 0.0056 per
    # rate; the 1e-6 bounds cost ≈ 2·5.0·0.0056 ≈ 0.056, so μ_LB ≈ 0.44;
    # below 0.38 needs a > 7 sd miss (p < 1e-11).
    assert res.mu_lb >= 0.38


def test_split_gdp_needs_positive_delta():
    with pytest.raises(ValueError, match="delta > 0"):
        split_gdp_bound(np.zeros(10), np.ones(10), 0.05, 0.0)


def test_simultaneous_selection_avoids_tail_cuts():
    # Laplace (scale 2, ε = 0.5): every cut t >= 1 (and t <= 0) has the same
    # likelihood-ratio bound, so the per-cut criterion is maximised by noise,
    # here at a tail cut (t ≈ -9.2, seed 0); the simultaneous criterion keeps
    # to the well-populated cuts near the two neighbours.
    rng = np.random.default_rng(0)
    s0, s1 = rng.laplace(0, 2, 50_000), rng.laplace(1, 2, 50_000)
    t, _ = select_threshold(s0, s1, alpha=0.05)
    assert -0.5 < t < 1.5
    t_naive, _ = select_threshold(s0, s1, alpha=0.05, simultaneous=False)
    assert t_naive < -5
    # Gaussian in μ terms: every cut has the same μ; the simultaneous pick is central.
    s0, s1 = rng.normal(0, 2, 50_000), rng.normal(1, 2, 50_000)
    t, _ = select_gdp_threshold(s0, s1, 0.05)
    assert -2.0 < t < 3.0


# --------------------------------------------------------------------------
# p-values and Holm


def test_holm_adjust_matches_statsmodels_and_step_down():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    reject, adjusted = holm_adjust(p, 0.05)
    # Holm: sorted p 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1, running max
    np.testing.assert_allclose(adjusted, [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_array_equal(reject, [True, False, False, True])
    with pytest.raises(ValueError):
        holm_adjust([1.5], 0.05)
    from statsmodels.stats.multitest import multipletests

    rng = np.random.default_rng(3)  # bit for bit the same as statsmodels, ties and exact levels included
    for size, alpha in ((1, 0.05), (5, 0.05), (9, 0.1), (12, 0.01)):
        for p in (rng.random(size) ** 4, np.round(rng.random(size), 1), np.full(size, alpha / size)):
            expected_reject, expected, _, _ = multipletests(p, alpha=alpha, method="holm")
            reject, adjusted = holm_adjust(p, alpha)
            assert reject.tolist() == expected_reject.tolist() and adjusted.tobytes() == expected.tobytes()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(20, 5_000),
    fp_frac=st.floats(0.0, 0.6),
    fn_frac=st.floats(0.0, 0.6),
    claim=st.floats(0.0, 3.0),
    delta=st.sampled_from([0.0, 1e-3]),
    log10_alpha=st.floats(-8, -0.5),
)
def test_violation_p_value_equivalence(n, fp_frac, fn_frac, claim, delta, log10_alpha):
    fp, fn = int(fp_frac * n), int(fn_frac * n)
    p = violation_p_value(fp, n, fn, n, claim, delta)
    alpha = 10.0 ** log10_alpha
    if abs(math.log(alpha) - math.log(p)) < 1e-6:  # on the boundary itself
        return
    assert (p < alpha) == (epsilon_lower_bound(fp, n, fn, n, alpha, delta) > claim)


def test_violation_p_value_edges():
    assert violation_p_value(500, 1_000, 500, 1_000, 0.0) == 1.0  # no evidence at all
    assert violation_p_value(0, 100_000, 0, 100_000, 1.0) < 1e-100  # overwhelming
    p = violation_p_value(2_000, 10_000, 5_000, 10_000, 0.8)  # ≈ 1e-4
    assert 1e-6 < p < 1e-2
    assert epsilon_lower_bound(2_000, 10_000, 5_000, 10_000, p * 1.001) > 0.8
    assert epsilon_lower_bound(2_000, 10_000, 5_000, 10_000, p * 0.999) <= 0.8
