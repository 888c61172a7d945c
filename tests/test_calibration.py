"""Slow calibration checks (run with ``-m slow``): coverage and tightness.

Coverage: 200 independent audits at alpha = 0.05 of each reference mechanism
at its true ε. A valid bound exceeds the true ε in each audit with
probability <= 0.05, so the number of exceedances is stochastically smaller
than Bin(200, 0.05). The test fails if a one-sided binomial test
(``scipy.stats.binomtest(..., p=0.05, alternative="greater")``) rejects at
level 1e-3: for a valid estimator that happens with probability <= 1e-3 per
mechanism (the seeds are fixed, so the outcome never changes between runs).
"""
import pytest

from recaudit.audits.calibration import (
    EPSILONS,
    coverage,
    default_coverage,
    markdown_tightness,
    one_run_coverage,
    tightness_table,
)
from recaudit.mechanisms.reference import RandomizedResponse

pytestmark = pytest.mark.slow

LEVEL = 1e-3


def test_coverage_of_reference_mechanisms():
    results = default_coverage(audits=200, trials=10_000, alpha=0.05, seed=2024)
    assert len(results) == 4  # Laplace (CP), Gaussian (GDP at its claim), RR (CP), one-run RR canaries
    for res in results:
        assert res.audits == 200
        assert res.p_value >= LEVEL, (res.name, res.exceed, res.p_value)


def test_coverage_at_a_second_epsilon():
    # ε = 4 randomized response: FPR = 1.8 %, so the bound works near its tails.
    res = coverage(RandomizedResponse(4.0), audits=200, trials=10_000, alpha=0.05, seed=7)
    assert res.p_value >= LEVEL, (res.exceed, res.p_value)
    res = one_run_coverage(RandomizedResponse(4.0), m=1_000, audits=200, alpha=0.05, seed=8)
    assert res.p_value >= LEVEL, (res.exceed, res.p_value)


def test_tightness_goals():
    # Goals from issue 3 at 10⁶ trials/world, alpha = 0.05: RR and Laplace
    # ε_LB/ε >= 0.9, Gaussian via GDP >= 0.8, at every ε in EPSILONS. Each cell
    # is one audit with a fixed seed. The hardest cells are ε = 0.25; over 20
    # other seeds ε_LB/ε was 0.974 ± 0.007 (Laplace), 0.977 ± 0.008 (RR) and
    # 0.893 ± 0.034 (Gaussian GDP, min 0.818): the Gaussian goal is 2.7 sd
    # below its mean, so a new seed would miss it with probability ≈ 0.4 %.
    rows = tightness_table(trials=10**6, canaries=(), seed=0)
    print(markdown_tightness(rows))
    by_name = {row.setting: row for row in rows}
    for name, goal in [("randomized response, CP", 0.9), ("Laplace, CP", 0.9), ("Gaussian, GDP (δ = 1e-05)", 0.8)]:
        ratios = by_name[name].ratios
        assert len(ratios) == len(EPSILONS)
        assert min(ratios) >= goal, (name, ratios)
