"""Black-box audits: learned attacks on vector/index/mixed outputs, neighbour search, errors.

Statistical assertions: "consistent" verdicts run at alpha = 1e-6, so each
fails falsely with probability ≤ 1e-6 (the bound's validity: the attack is
fitted and the test chosen on runs that are never counted). "Violated"
verdicts have their margins stated; every seed is fixed.
"""
import numpy as np
import pytest

from recaudit.attacks import ATTACKS
from recaudit.attacks.learned import HistogramAttack, LogisticAttack, output_table, unique_rows
from recaudit.audits.harness import (
    NeighbourCandidates,
    assert_dp,
    assert_not_dp,
    candidate_pairs,
    run_audit,
    search_neighbours,
)
from recaudit.audits.pytest_plugin import DPAudit
from recaudit.mechanisms import PrivacyClaim
from recaudit.mechanisms.reference import GaussianCount, LaplaceCount
from recaudit.mechanisms.vector_reference import (
    VECTOR_BROKEN,
    VECTOR_REFERENCE,
    ReportNoisyMax,
)

#: (name, claimed ε, method, trials per world in the default suite). Margins of the broken
#: twins at these sizes (seed 1, measured): vector Laplace ε_LB 1.86 vs 1; Gaussian histogram
#: (GDP) 2.66 vs 2; noisy-max index 2.38 vs 0.5, value 7.0 vs 0.5; sparse vector 1.77 vs 1.
CASES = [
    ("vector_laplace", 1.0, "clopper-pearson", 100_000),
    ("gaussian_histogram", 2.0, "gdp", 100_000),
    ("report_noisy_max_index", 0.5, "clopper-pearson", 50_000),
    ("report_noisy_max_value", 0.5, "clopper-pearson", 50_000),
    ("sparse_vector", 1.0, "clopper-pearson", 100_000),
]


@pytest.mark.parametrize("name, eps, method, trials", CASES, ids=[c[0] for c in CASES])
def test_vector_references_verdicts_without_a_score(name, eps, method, trials):
    # correct: false failure <= 1e-6; broken: a wrong "not shown" needs the bound to drop
    # by the margin above (tens of standard deviations at these sizes)
    correct, broken = VECTOR_REFERENCE[name](eps), VECTOR_BROKEN[name](eps)
    assert not hasattr(correct, "score") and not hasattr(broken, "score")
    ok = assert_dp(correct, trials=trials, alpha=1e-6, seed=1, method=method)
    assert ok.epsilon_lb <= eps
    bad = assert_not_dp(broken, trials=trials, alpha=1e-6, seed=1, method=method)
    assert bad.epsilon_lb > eps


@pytest.mark.slow
@pytest.mark.parametrize("name, eps, method, trials", CASES, ids=[c[0] for c in CASES])
def test_vector_references_verdicts_at_a_million(name, eps, method, trials):
    # the done-means size: 10⁶ runs per world, alpha = 1e-6 both ways
    assert_dp(VECTOR_REFERENCE[name](eps), trials=1_000_000, alpha=1e-6, seed=2, method=method)
    assert_not_dp(VECTOR_BROKEN[name](eps), trials=1_000_000, alpha=1e-6, seed=2, method=method)


def test_auto_picks_the_attack_by_output_shape():
    run = run_audit(ReportNoisyMax(1.0, "index"), trials=5_000, alpha=0.05, seed=3)
    assert run.attack == "histogram"
    run = run_audit(VECTOR_REFERENCE["vector_laplace"](1.0), trials=5_000, alpha=0.05, seed=3)
    assert run.attack in ("logistic", "sparse_boosted")  # the better of the two on the selection runs
    run = run_audit(VECTOR_REFERENCE["vector_laplace"](1.0), trials=5_000, alpha=0.05, seed=3, attack="logistic")
    assert run.attack == "logistic"

    class Scalar:
        claim, neighbours = (1.0, 0.0), (0, 1)

        def sample(self, value, n, rng):
            return value + rng.laplace(0, 1.0, n)

    assert run_audit(Scalar(), trials=5_000, alpha=0.05, seed=3).attack == "identity"
    assert run_audit(LaplaceCount(1.0), trials=5_000, alpha=0.05, seed=3).attack == "score"
    assert {"histogram", "logistic", "boosted", "sparse_boosted"} <= set(ATTACKS)


def test_sorted_sampler_is_not_flagged():
    # a sampler returning its runs sorted: without the seeded permutation the first half
    # (selection) and second half (evaluation) differ systematically. False failure <= 1e-6.
    class Sorted:
        claim, neighbours = (1.0, 0.0), (0, 1)

        def sample(self, value, n, rng):
            return np.sort(value + rng.laplace(0, 1.0, n))

    assert assert_dp(Sorted(), trials=20_000, alpha=1e-6, seed=4).epsilon_lb <= 1.0


def test_errors_name_the_shape_and_what_is_needed():
    class Ragged:
        claim, neighbours = (1.0, 0.0), (0, 1)

        def sample(self, value, n, rng):
            return [rng.random(k) for k in range(1, 4)]

    with pytest.raises(ValueError, match=r"world 0.*need one output per run on axis 0.*\(1000,\)"):
        run_audit(Ragged(), trials=1_000)

    class Vector5:
        claim, neighbours = (1.0, 0.0), (0, 1)

        def sample(self, value, n, rng):
            return value + rng.laplace(0, 1.0, (n, 5))

    with pytest.raises(ValueError, match=r"expected 1000 scores.*got 5000.*vectors of 5"):
        run_audit(Vector5(), trials=1_000, score=lambda x: np.ravel(x))
    with pytest.raises(ValueError, match="discrete"):
        run_audit(Vector5(), trials=1_000, attack="histogram")
    with pytest.raises(ValueError, match="one number per trial"):
        run_audit(Vector5(), trials=1_000, attack="identity")
    with pytest.raises(ValueError, match="attack must be one of"):
        run_audit(Vector5(), trials=1_000, attack="bogus")
    with pytest.raises(ValueError, match="not both"):
        run_audit(Vector5(), trials=1_000, attack="logistic", score=lambda x: x[:, 0])


def test_gdp_refuses_claims_without_a_gaussian_curve():
    with pytest.raises(ValueError, match="Gaussian trade-off curve"):
        run_audit(LaplaceCount(1.0), claim=PrivacyClaim(1.0, 1e-5, model="central"), method="gdp", trials=1_000)
    with pytest.raises(ValueError, match="Gaussian trade-off curve"):
        run_audit(GaussianCount.from_epsilon(1.0), claim=(1.0, 1e-5), method="gdp", trials=1_000)
    assert run_audit(GaussianCount.from_epsilon(1.0), method="gdp", trials=1_000).bound.method == "gdp"


def test_histogram_attack_is_the_exact_log_ratio():
    rng = np.random.default_rng(5)
    x0 = output_table(rng.integers(0, 3, 30_000), 30_000)
    x1 = output_table(rng.choice(3, 30_000, p=[0.2, 0.3, 0.5]), 30_000)
    attack = HistogramAttack().fit_outputs(x0, x1)
    got = attack.score_outputs(output_table(np.array([0, 1, 2, 7]), 4))
    expected = np.log([0.2, 0.3, 0.5]) - np.log(1 / 3)
    np.testing.assert_allclose(got[:3], expected, atol=0.05)  # ~4 sd of the count noise
    assert got[3] == pytest.approx(0.0)  # an unseen output: the prior ratio
    with pytest.raises(ValueError, match="max_categories"):
        HistogramAttack(max_categories=2).fit_outputs(x0, x1)


def test_mixed_and_structured_outputs_make_one_table():
    table = output_table((np.arange(4), np.ones((4, 2)), np.array([True, False, True, True])), 4)
    assert table.values.shape == (4, 4) and table.discrete.tolist() == [True, False, False, True]
    table = output_table({"i": np.arange(3), "v": np.zeros(3)}, 3)
    assert table.values.shape == (3, 2)
    logistic = LogisticAttack().fit_outputs(output_table(np.zeros((50, 2)), 50), output_table(np.ones((50, 2)), 50))
    assert logistic.score_outputs(output_table(np.ones((1, 2)), 1))[0] > 0


def test_neighbour_search_finds_the_bad_pattern_and_keeps_alpha():
    # noisy max with Laplace(2/ε) is ε-DP for every pattern: no pair flagged (false failure
    # <= 1e-6 over the whole family, Holm). Its broken twin is caught on the worst pair.
    pairs = candidate_pairs([3.0, 3.0, 3.0, 3.0])
    assert len(pairs) == 7 and isinstance(pairs, NeighbourCandidates)
    correct = ReportNoisyMax(0.5, "index")
    search = search_neighbours(correct, pairs, trials=20_000, alpha=1e-6, seed=6)
    assert not search.violated and len(search.runs) == 7
    assert_dp(correct, neighbours=pairs, trials=20_000, alpha=1e-6, seed=6)
    broken = VECTOR_BROKEN["report_noisy_max_index"](0.5)
    with pytest.raises(AssertionError, match="worst of 7 candidate pairs"):
        assert_dp(broken, neighbours=pairs, trials=20_000, alpha=1e-6, seed=6)
    worst = search_neighbours(broken, pairs, trials=20_000, alpha=1e-6, seed=6).worst
    assert worst.bound.epsilon_lb > 0.5
    via_fixture = DPAudit(seed=6).search_neighbours(broken, pairs, trials=20_000, alpha=1e-6).worst
    assert via_fixture.bound == worst.bound
    with pytest.raises(ValueError, match="pattern"):
        candidate_pairs([1.0, 2.0], patterns=["sideways"])


class _WithoutScore:
    """A reference mechanism with its optimal score hidden, so the harness must learn one."""

    def __init__(self, mechanism):
        self.mechanism, self.claim, self.neighbours = mechanism, mechanism.claim, mechanism.neighbours

    def sample(self, value, n, rng):
        return self.mechanism.sample(value, n, rng)


SCALARS = [
    ("laplace", lambda: LaplaceCount(1.0), "clopper-pearson", ("logistic", "boosted")),
    ("gaussian", lambda: GaussianCount.from_epsilon(1.0), "gdp", ("logistic", "boosted")),
    ("randomized_response",
     lambda: __import__("recaudit.mechanisms.reference").mechanisms.reference.RandomizedResponse(1.0),
     "clopper-pearson", ("histogram",)),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, make, method, attacks", SCALARS, ids=[s[0] for s in SCALARS])
def test_learned_attack_within_5_percent_of_the_likelihood_ratio(name, make, method, attacks):
    # 10⁶ trials per world, the same seed (same runs): the exact likelihood-ratio score (the
    # mechanism's own) against learned ones. Measured ratios (seed 1, alpha 0.05): Laplace 1.000
    # (logistic), 0.999 (boosted); Gaussian 0.999, 0.990; randomized response 1.000 (histogram).
    # The spread of either bound at this size is ~0.005, so 5 % is many sd away.
    mech = make()
    exact = run_audit(mech, trials=1_000_000, alpha=0.05, seed=1, method=method).bound.epsilon_lb
    for attack in attacks:
        learned = run_audit(_WithoutScore(mech), trials=1_000_000, alpha=0.05, seed=1, method=method,
                            attack=attack).bound.epsilon_lb
        assert learned >= 0.95 * exact, attack


COVERAGE = [
    ("noisy_max_index", lambda: ReportNoisyMax(1.0, "index"), 2_000),
    ("laplace_logistic", lambda: _WithoutScore(LaplaceCount(1.0)), 2_000),
    ("vector_laplace_boosted", lambda: VECTOR_REFERENCE["vector_laplace"](1.0), 2_000),
]


@pytest.mark.slow
@pytest.mark.parametrize("name, make, trials", COVERAGE, ids=[c[0] for c in COVERAGE])
def test_learned_attack_coverage(name, make, trials):
    # 500 audits of a correct mechanism (true ε = claimed ε) at alpha = 0.05, each on its own spawned
    # seed. Each exceeds the true ε with probability <= 0.05, so exceedances ~ Bin(500, <= 0.05):
    # more than 40 (3.1 sd above 25) has probability < 1e-3.
    mech = make()
    attack = "logistic" if "logistic" in name else "auto"
    seeds = np.random.SeedSequence(7).spawn(500)
    exceed = sum(run_audit(mech, trials=trials, alpha=0.05, seed=s, attack=attack).bound.epsilon_lb > 1.0
                 for s in seeds)
    assert exceed <= 40


@pytest.mark.parametrize("kind", ["histogram", "logistic"])
def test_learned_attacks_run_in_scenarios(write_scenario, quickstart_data, kind):
    # the quickstart (MaxSense, eps = 1) with a learned attack instead of the likelihood ratio: fitted on
    # the design's own training stream. Consistent with probability >= 1 - alpha (alpha = 1e-6).
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario
    from tests.conftest import small_world

    data = small_world(quickstart_data, 20_000)
    data["attack"] = {"kind": kind}
    data["audit"]["alpha"] = 1e-6
    result = run_scenario(load_scenario(write_scenario(data)))
    assert result.verdict == "consistent" and 0 < result.strongest.estimate.epsilon_lb <= 1.0


def test_epsilon_curve_from_one_fixed_test():
    run = run_audit(VECTOR_REFERENCE["vector_laplace"](1.0), trials=20_000, alpha=1e-3, seed=8, attack="logistic")
    curve = run.epsilon_curve([0.0, 1e-3, 1e-2, 0.1])
    assert curve[0] == pytest.approx(run.bound.epsilon_lb) and np.all(np.diff(curve) <= 0)


def test_cp_upper_at_extreme_alpha_is_a_number():
    # p-values bisect alpha down to 1e-300; scipy's beta.isf gives nan there when the bound is ~1
    from recaudit.audits.stats.rates import cp_upper

    assert cp_upper(995, 1_000, 5e-301) == 1.0
    assert 0.99 < cp_upper(990, 1_000, 5e-301) <= 1.0


@pytest.mark.parametrize("values", [
    np.random.default_rng(0).integers(-1, 2, size=(50_000, 10)).astype(float),  # SVT-like rows, one key each
    np.array([[3, 1], [1, 7], [3, 0], [1, 7]]),
    np.array([[2**61, 0], [-(2**61), 1], [2**61, 0]]),  # ranges too wide for one int64 key: NumPy's row sort
    np.random.default_rng(1).normal(size=(6, 2)),  # not integers: NumPy's row sort
])
def test_unique_rows_equals_numpy_row_unique(values):
    """The histogram's fast row unique gives NumPy's rows, order and inverse exactly."""
    rows, inverse = np.unique(values, axis=0, return_inverse=True)
    fast_rows, fast_inverse = unique_rows(values)
    np.testing.assert_array_equal(fast_rows, rows)
    np.testing.assert_array_equal(fast_inverse, inverse.ravel())
