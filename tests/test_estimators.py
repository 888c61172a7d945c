"""Tests for audits.estimators (Clopper–Pearson ε lower bounds).

Every statistical assertion below uses a fixed seed and states its
false-failure probability (AUDITING.md, "Verdicts and the harness").
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

from audits.estimators import (
    BoundResult,
    ceiling,
    cp_upper,
    epsilon_from_rates,
    epsilon_lower_bound,
    select_threshold,
    split_epsilon_bound,
    threshold_counts,
)
from audits.estimators import _wilson_upper  # private: to re-derive the selection criterion

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


def _criterion(fp, fn, n0, n1, delta, alpha):
    if alpha is None:
        return epsilon_from_rates((fp + 0.5) / (n0 + 1.0), (fn + 0.5) / (n1 + 1.0), delta)
    return epsilon_from_rates(_wilson_upper(fp, n0, alpha / 2), _wilson_upper(fn, n1, alpha / 2), delta)


_scores = st.lists(st.integers(-4, 4).map(float) | st.floats(-3, 3), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(s0=_scores, s1=_scores, delta=st.sampled_from([0.0, 0.01]), alpha=st.sampled_from([None, 0.05]))
def test_select_threshold_maximises_criterion(s0, s1, delta, alpha):
    # brute force over every candidate cut in both directions
    cand = np.append(np.unique(s0 + s1), np.inf)
    best = max(
        float(np.max(_criterion(*_brute_counts(s0, s1, cand, d), len(s0), len(s1), delta, alpha)))
        for d in (1, -1)
    )
    t, d = select_threshold(s0, s1, delta, alpha=alpha)
    fp, fn = _brute_counts(s0, s1, [t], d)
    assert float(_criterion(fp[0], fn[0], len(s0), len(s1), delta, alpha)) == pytest.approx(best, abs=1e-12)


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
    assert res.method == "clopper-pearson" and res.strategy == "split"


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
