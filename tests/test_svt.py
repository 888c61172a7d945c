"""The harness's default ``auto`` attack on the sparse vector variants of Lyu, Su, Li (tests/svt.py).

A violation is wrongly shown for a correct variant with probability ≤ alpha
per audit (the harness's validity); the broken variants must be caught.
Seeds are fixed, so every outcome is reproducible; the slow tests state the
false-failure probability of their counts.
"""
import numpy as np
import pytest
from scipy import stats

from recaudit.audits.harness import assert_dp, assert_not_dp, run_audit
from tests.svt import variants

SVT = variants()
BROKEN = [name for name, v in SVT.items() if not v.private]
CORRECT = [name for name, v in SVT.items() if v.private]


def test_the_variants_release_sparse_rows():
    rng = np.random.default_rng(0)
    for name, mech in SVT.items():
        out = mech.sample(mech.neighbours[0], 2_000, rng)
        answer = out["answer"] if isinstance(out, dict) else out
        assert answer.shape == (2_000, 10) and set(np.unique(answer)) <= {-1, 0, 1}
        if mech.cutoff is not None:  # stops after its cutoff: nothing answered after the last ⊤
            assert ((answer == 1).sum(axis=1) <= mech.cutoff).all()
        else:
            assert (answer >= 0).all()
    out = SVT["alg3"].sample(SVT["alg3"].neighbours[1], 20_000, rng)
    shown = out["answer"] == 1
    assert 0.05 < shown.any(axis=1).mean() < 0.6  # the numeric answer is rare
    assert (out["value"][~shown] == 0).all() and (out["value"][shown] != 0).all()


@pytest.mark.parametrize("name", ["alg4", "alg5", "alg6"])
def test_auto_catches_the_broken_discrete_variants(name):
    """10⁵ runs per world (seed 0): the histogram attack shows each violation (ε_LB > 1)."""
    bound = assert_not_dp(SVT[name], trials=100_000, alpha=0.05, seed=0)
    assert bound.epsilon_lb > SVT[name].epsilon


@pytest.mark.parametrize("name", CORRECT)
def test_auto_does_not_flag_the_correct_variants(name):
    """Fails falsely with probability ≤ alpha = 0.05 (fixed seed: the outcome never changes)."""
    assert_dp(SVT[name], trials=100_000, alpha=0.05, seed=0)


@pytest.mark.slow
def test_auto_catches_the_numeric_variant_when_its_answer_is_common():
    """Roth's numeric SVT with the threshold at 0 (answers common), 3·10⁴ runs: the chosen classifier catches it."""
    mech = variants(rare_threshold=0.0)["alg3"]
    run = run_audit(mech, trials=30_000, alpha=0.05, seed=0)
    assert run.violated and run.attack in ("logistic", "sparse_boosted")


SEEDS = 20


@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN)
def test_auto_catches_every_broken_variant_on_19_of_20_seeds(name):
    """10⁶ runs per world, seeds 0–19: at least 19 audits show the violation (issue 24's target).

    False-failure probability (a fresh set of 20 seeds failing), from the measured bounds of seeds 0–19
    (docs/guide/estimators.md): the discrete variants' ε_LB sit far above ε = 1 on every seed (Lee–Clifton
    1.60–1.72, Chen 2.97–3.32, Stoddard 10.18–10.19), so for them it is negligible. Roth's numeric ``alg3``
    is caught on 19 of 20 (seed 10 gives 0.979); its ε_LB have mean 1.28 and sd 0.17, so a seed misses with
    probability ≈ 0.05 and 20 fresh seeds miss twice or more with probability ≈ 0.26 — the attack's power on
    ``alg3`` is the gap (the fixed seeds 0–19 pass with no miss to spare).
    """
    runs = [run_audit(SVT[name], trials=10**6, alpha=0.05, seed=s) for s in range(SEEDS)]
    caught = sum(run.violated for run in runs)
    print(name, "caught", caught, "of", SEEDS, [(run.attack, round(run.bound.epsilon_lb, 3)) for run in runs])
    assert caught >= SEEDS - 1


@pytest.mark.slow
@pytest.mark.parametrize("name", CORRECT)
def test_auto_flags_a_correct_variant_no_more_than_alpha(name):
    """10⁶ runs per world, seeds 0–19: more than ``binom.isf(1e-3, 20, 0.05)`` false flags has probability ≤ 1e-3."""
    runs = [run_audit(SVT[name], trials=10**6, alpha=0.05, seed=s) for s in range(SEEDS)]
    flagged = sum(run.violated for run in runs)
    print(name, "flagged", flagged, "of", SEEDS, [round(run.bound.epsilon_lb, 3) for run in runs])
    assert flagged <= stats.binom.isf(1e-3, SEEDS, 0.05)
