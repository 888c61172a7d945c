"""Tests for recaudit.audits.harness and the pytest plugin (recaudit.audits.pytest_plugin).

"Consistent" assertions run at alpha = 1e-6 (false failure <= 1e-6 by the
bound's validity); "violated" ones have margins stated next to them.
"""
import importlib.metadata
from pathlib import Path

import numpy as np
import pytest

from recaudit.audits.stats.rates import BoundResult
from recaudit.audits.harness import PROBE_DRAWS, as_seed_sequence, assert_dp, assert_not_dp, run_audit
from recaudit.audits.pytest_plugin import DPAudit, seed_from_node_id
from recaudit.mechanisms.reference import (
    GaussianCount,
    GaussianCountWrongScale,
    LaplaceCount,
    LaplaceCountWrongScale,
    RandomizedResponse,
    RandomizedResponseWrongEpsilon,
)

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "harness-example" / "test_my_mechanism.py"


# --------------------------------------------------------------------------
# assert_dp / assert_not_dp


@pytest.mark.parametrize("mech", [LaplaceCount(1.0), RandomizedResponse(1.0)], ids=["laplace", "rr"])
def test_assert_dp_passes_on_correct_mechanisms(mech):
    # false failure <= alpha = 1e-6
    res = assert_dp(mech, alpha=1e-6, seed=1)
    assert isinstance(res, BoundResult) and 0 < res.epsilon_lb <= 1.0


def test_assert_dp_gdp_on_gaussian():
    # GDP is valid here (Gaussian trade-off curve): false failure <= 1e-6
    res = assert_dp(GaussianCount.from_epsilon(1.0), alpha=1e-6, seed=2, method="gdp")
    assert res.method == "gdp" and res.mu_lb is not None and res.epsilon_lb <= 1.0


@pytest.mark.parametrize(
    "mech, method",
    [(LaplaceCountWrongScale(1.0), "clopper-pearson"), (RandomizedResponseWrongEpsilon(1.0), "clopper-pearson"),
     (GaussianCountWrongScale(GaussianCount.from_epsilon(1.0).sigma), "gdp")],
    ids=["laplace", "rr", "gaussian"],
)
def test_assert_dp_raises_on_broken_mechanisms(mech, method):
    # true ε ≈ 2 vs claim 1: ε_LB ≈ 1.9 ± 0.03 at 10⁵ trials, alpha = 1e-6 (tests/test_reference.py)
    with pytest.raises(AssertionError) as info:
        assert_dp(mech, alpha=1e-6, seed=3, method=method)
    msg = str(info.value)
    for needle in ("privacy claim violated", "ε_LB", "ceiling", "FP =", "FN =", "α = 1e-06", "claimed ε",
                   f"method = {method}", "seed = 3"):
        assert needle in msg, needle
    # and assert_not_dp returns the bound that shows it
    res = assert_not_dp(mech, alpha=1e-6, seed=3, method=method)
    assert res.epsilon_lb > 1.0


def test_assert_not_dp_raises_on_correct_mechanism_and_explains():
    with pytest.raises(AssertionError) as info:
        assert_not_dp(LaplaceCount(1.0), alpha=1e-6, seed=4)  # P(not raising) <= 1e-6
    msg = str(info.value)
    assert "not shown violated" in msg and "ε_LB" in msg and "ceiling" in msg
    assert "might still show" in msg  # ceiling 8.1 > claim 1


def test_assert_not_dp_says_when_the_trials_cannot_suffice():
    # 200 trials per world (100 counted): ceiling ≈ 3.3 at alpha = 0.05, below the claim 5,
    # so even a mechanism far above its claim (true ε 10) cannot be shown to violate it.
    # (Randomized response: its claim costs the accountant nothing; a Laplace claim of 5 took 2.4 s of CPU.)
    mech = RandomizedResponseWrongEpsilon(5.0)
    with pytest.raises(AssertionError, match="cannot succeed with 200 trials"):
        assert_not_dp(mech, trials=200, alpha=0.05, seed=5)


def test_overrides_claim_neighbours_and_score():
    mech = LaplaceCount(1.0)
    # a looser claim passed as a tuple; neighbours 3 vs 4 are another adjacent pair
    res = assert_dp(mech, claim=(2.0, 0.0), neighbours=(3, 4), alpha=1e-6, seed=6)
    assert res.epsilon_lb > 0.8
    # a reversed score flips the chosen direction but not the bound's validity
    flipped = assert_dp(mech, score=lambda x: -np.asarray(x), alpha=1e-6, seed=6)
    assert flipped.direction == -1


def test_duck_typed_mechanism_and_errors():
    class Bare:
        def sample(self, value, n, rng):
            return value + rng.laplace(0, 1.0, n)

    res = assert_dp(Bare(), claim=(1.0, 0.0), neighbours=(0, 1), alpha=1e-6, seed=7)
    assert res.epsilon_lb <= 1.0
    with pytest.raises(ValueError, match="claim"):
        assert_dp(Bare(), neighbours=(0, 1))
    with pytest.raises(ValueError, match="neighbour"):
        assert_dp(Bare(), claim=(1.0, 0.0))
    with pytest.raises(ValueError, match="scores"):
        assert_dp(Bare(), claim=(1.0, 0.0), neighbours=(0, 1), score=lambda x: x[:10])
    with pytest.raises(ValueError, match="method"):
        assert_dp(Bare(), claim=(1.0, 0.0), neighbours=(0, 1), method="bogus")


def test_seeding_is_reproducible_and_per_world():
    mech = LaplaceCount(1.0)
    a = run_audit(mech, trials=2_000, seed=8)
    b = run_audit(mech, trials=2_000, seed=8)
    c = run_audit(mech, trials=2_000, seed=9)
    assert a.bound == b.bound and a.bound != c.bound
    child = np.random.SeedSequence(8).spawn(1)[0]
    assert run_audit(mech, trials=2_000, seed=child).bound == run_audit(mech, trials=2_000, seed=child).bound

    seen = []

    class Recorder:
        claim, neighbours = (1.0, 0.0), (0, 1)

        def sample(self, value, n, rng):
            out = rng.standard_normal(n)
            seen.append(out)
            return out

    run_audit(Recorder(), trials=100, seed=10)
    root = np.random.SeedSequence(10)
    w0, w1 = (np.random.default_rng(s).standard_normal(100) for s in root.spawn(4)[:2])
    probe = np.random.default_rng(root.spawn(1)[0]).standard_normal(PROBE_DRAWS)
    np.testing.assert_array_equal(seen[0], probe)  # the determinism probe samples first, twice, on its own seed
    np.testing.assert_array_equal(seen[1], probe)
    np.testing.assert_array_equal(seen[2], w0)
    np.testing.assert_array_equal(seen[3], w1)
    assert as_seed_sequence(10).entropy == 10


# --------------------------------------------------------------------------
# pytest plugin


def test_seed_from_node_id_is_stable_and_distinct():
    a = seed_from_node_id("tests/test_x.py::test_a")
    assert a == seed_from_node_id("tests/test_x.py::test_a")
    assert a != seed_from_node_id("tests/test_x.py::test_b")
    assert 0 <= a < 2**64
    audit = DPAudit(seed=123)
    assert audit.run(LaplaceCount(1.0), trials=1_000).seed == 123
    assert audit.run(LaplaceCount(1.0), trials=1_000, seed=5).seed == 5


def _plugin_args():
    """``-p recaudit.audits.pytest_plugin`` unless the installed entry point already loads it."""
    installed = any(ep.value == "recaudit.audits.pytest_plugin"
                    for ep in importlib.metadata.entry_points(group="pytest11"))
    return [] if installed else ["-p", "recaudit.audits.pytest_plugin"]


def test_plugin_runs_the_docs_example(pytester):
    pytester.makepyfile(test_my_mechanism=EXAMPLE.read_text(encoding="utf-8"))
    result = pytester.runpytest(*_plugin_args(), "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_plugin_fixture_seed_marker_and_failure_message(pytester):
    pytester.makepyfile(
        test_seeded="""
        import pytest
        from recaudit.audits.pytest_plugin import seed_from_node_id
        from recaudit.mechanisms.reference import LaplaceCountWrongScale

        @pytest.mark.dp
        def test_seed(dp_audit, request):
            assert dp_audit.seed == seed_from_node_id(request.node.nodeid)
            assert dp_audit.node_id == request.node.nodeid

        @pytest.mark.dp
        def test_broken(dp_audit):
            dp_audit.assert_dp(LaplaceCountWrongScale(1.0), alpha=1e-6)
        """
    )
    result = pytester.runpytest(*_plugin_args(), "--strict-markers", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    expected_seed = seed_from_node_id("test_seeded.py::test_broken")
    result.stdout.fnmatch_lines(["*privacy claim violated*", "*ceiling*", f"*seed = {expected_seed}*"])
    markers = pytester.runpytest(*_plugin_args(), "--markers", "-p", "no:cacheprovider")
    markers.stdout.fnmatch_lines(["@pytest.mark.dp:*"])
