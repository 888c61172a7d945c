"""The f-DP one-run bound from every test the per-canary guarantee allows (recaudit.audits.stats.one_run_lp)."""
import numpy as np
import pytest
from scipy import stats

from recaudit.audits.stats.one_run import fdp_one_run_mu_lower_bound, one_run_audit
from recaudit.audits.stats.one_run_lp import lp_mu_lower_bound, max_tail, tail_bound


def test_programme_tail_bounds_the_simulated_tail_of_gaussian_canaries():
    # Independent recomputation: m = 200 canaries, each score bit·μ + N(0, 1) (exactly μ-GDP per canary),
    # 20 guessed in and 20 out, 20,000 simulated runs. The programme bounds P[V ≥ v] for EVERY μ-GDP
    # mechanism, so it must sit above the simulated tail of this one. The check allows 4.5 Monte-Carlo
    # standard errors: a false failure has probability < 4e-6 per v, < 3e-5 over the 6 values.
    mu, m, k, runs = 1.0, 200, 20, 20_000
    rng = np.random.default_rng(71)
    bits = rng.integers(0, 2, (runs, m))
    scores = bits * mu + rng.normal(size=(runs, m))
    order = np.argsort(scores, axis=1)
    right = (np.take_along_axis(bits, order[:, m - k:], 1).sum(1) + (k - np.take_along_axis(bits, order[:, :k], 1)
                                                                         .sum(1)))
    for v in range(26, 38, 2):
        tail = np.mean(right >= v)
        assert max_tail(2 * k, v, m, mu, 0.05) >= tail - 4.5 * np.sqrt(tail * (1 - tail) / runs) - 1e-9


def test_programme_is_at_least_the_recursion_and_tighter_at_the_issue_setting():
    # m = 10⁴, 395 guesses per side (the plan at ε = 1, δ = 1e-5), 505 right (about the median):
    # the recursion rejects μ ≤ 0.1641, the programme μ ≤ 0.1699 (measured; both are deterministic).
    r, v, m = 790, 505, 10_000
    rec, lp = fdp_one_run_mu_lower_bound(r, v, m, 0.05), lp_mu_lower_bound(r, v, m, 0.05)
    assert rec == pytest.approx(0.1641, abs=1e-3) and lp == pytest.approx(0.1699, abs=1e-3)
    for r, v, m in [(40, 34, 200), (318, 250, 10_000), (100, 100, 1_000)]:
        assert lp_mu_lower_bound(r, v, m, 0.05) >= fdp_one_run_mu_lower_bound(r, v, m, 0.05)


def test_rejection_shrinks_with_mu_and_the_p_value_agrees():
    # the bisection's premise: once μ is not rejected, no larger μ is (checked on a grid)
    r, v, m, alpha = 40, 34, 200, 0.05
    tails = [tail_bound(r, v, m, mu, alpha) for mu in np.linspace(0.0, 3.0, 31)]
    assert np.all(np.diff(tails) >= -1e-9)
    mu = lp_mu_lower_bound(r, v, m, alpha)
    assert tail_bound(r, v, m, 0.99 * mu, alpha) < alpha <= tail_bound(r, v, m, 1.01 * mu, alpha)


def test_null_guesses_reject_nothing():
    # chance-level guesses: v = r/2 rejects not even μ = 0 (the programme itself allows P[V >= v] >= ½: the
    # premise that lets lp_mu_lower_bound skip it there); and no right guess rejects nothing
    assert max_tail(400, 200, 10_000, 0.0, 0.05) >= 0.5 and max_tail(401, 200, 10_000, 0.5, 0.05) >= 0.5
    assert lp_mu_lower_bound(400, 200, 10_000, 0.05) == 0.0 and lp_mu_lower_bound(40, 0, 200, 0.05) == 0.0
    # 30 null audits (scores independent of the bits), 50 guesses a side: each positive with probability
    # ≤ 0.05, so more than 8 has probability < 1e-3
    rng = np.random.default_rng(72)
    positive = 0
    for _ in range(30):
        res = one_run_audit(rng.normal(size=1_000), rng.integers(0, 2, 1_000), 50, 50)
        positive += lp_mu_lower_bound(res.r, res.v, res.m, 0.05) > 0
    assert positive <= stats.binom.isf(1e-3, 30, 0.05)


@pytest.mark.slow  # ~7 s CPU: two solves of a 2,000-guess programme
def test_a_programme_presolve_stumbles_on_is_solved_without_it():
    # r = 2,000, v = 1,200, m = 10⁴, μ = 0.1: HiGHS's presolve reports numerical trouble (status 4);
    # solved without presolve (and by its interior-point method: 0.0040044) the tail bound is 0.0040044
    assert max_tail(2_000, 1_200, 10_000, 0.1, 0.05) == pytest.approx(0.0040044, abs=1e-6)
