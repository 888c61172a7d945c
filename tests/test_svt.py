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
from tests.svt_heldout import SETTINGS as heldout_settings_, heldout

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


def test_auto_catches_the_numeric_variant_when_its_answer_is_common():
    """Roth's numeric SVT with the threshold at 0 (answers common), 10⁵ runs per world (1.5 s CPU).

    False-failure probability: over seeds 200–219 its ε_LB had mean 1.57, sd 0.14, lowest 1.33 (the attack chosen:
    mixed_histogram 9, sparse_boosted 9, logistic 2), so a seed misses ε = 1 about four sd below the mean (~1e-4).
    """
    mech = variants(rare_threshold=0.0)["alg3"]
    run = run_audit(mech, trials=100_000, alpha=0.05, seed=0)
    assert run.violated and run.attack in ("mixed_histogram", "logistic", "sparse_boosted")


def test_mixed_histogram_recovers_a_type_factored_likelihood_ratio():
    """A type d (P(d = 1) = 0.3 vs 0.5) and a number N(d, 1) vs N(1.5·d, 1): the score is the exact log ratio
    up to sampling error (correlation > 0.99 on 20,000 fresh runs; the fit's error is ~1 %)."""
    from recaudit.attacks.learned import output_table
    from recaudit.attacks.mixed import MixedHistogramAttack

    rng = np.random.default_rng(5)

    def draw(world, n):
        d = (rng.random(n) < (0.3, 0.5)[world]).astype(np.int64)
        x = np.where(d == 1, rng.normal((1.0, 1.5)[world], 1.0, n), 0.0)
        return {"type": d, "x": x}

    tables = [output_table(draw(w, 50_000), 50_000) for w in (0, 1)]
    attack = MixedHistogramAttack().fit_outputs(*tables)
    test = draw(0, 20_000)
    score = attack.score_outputs(output_table(test, 20_000))
    d, x = test["type"], test["x"]
    exact = np.where(d == 1, np.log(0.5 / 0.3) - ((x - 1.5) ** 2 - (x - 1.0) ** 2) / 2, np.log(0.5 / 0.7))
    assert np.corrcoef(score, exact)[0, 1] > 0.99


SEEDS = 20


@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN)
def test_auto_catches_every_broken_variant_on_19_of_20_seeds(name):
    """10⁶ runs per world, seeds 0–19: at least 19 audits show the violation (issue 24's target).

    False-failure probability (a fresh set of 20 seeds failing), from the measured bounds of seeds 0–19
    (docs/guide/estimators.md): the discrete variants' ε_LB sit far above ε = 1 on every seed (Lee–Clifton
    1.60–1.72, Chen 2.97–3.32, Stoddard 10.18–10.19), so for them it is negligible. Roth's numeric ``alg3`` (now
    scored by ``mixed_histogram``) is caught on 20 of 20 with ε_LB 1.224–1.852, mean 1.44, sd 0.14: a seed misses
    with probability ≈ 1e-3 and 20 fresh seeds miss twice or more with probability ≈ 1e-4.
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


# --------------------------------------------------------------------------
# held-out settings (tests/svt_heldout.py: fixed before the attack was run on them; docs/guide/estimators.md)

HELDOUT = list(heldout_settings_)


@pytest.mark.parametrize("setting", ["H1-c1-T3-k20"])
def test_auto_does_not_flag_numeric_svt_done_right(setting):
    """Alg. 7 (a fresh Laplace number at each ⊤) goes through mixed_histogram; 10⁵ runs per world. Fails falsely
    with probability ≤ alpha = 0.05 (fixed seed: the outcome never changes)."""
    run = run_audit(heldout(setting)["alg7"], trials=100_000, alpha=0.05, seed=0)
    assert run.attack in ("mixed_histogram", "logistic", "sparse_boosted") and not run.violated


H2_GAP = pytest.mark.xfail(strict=True, reason="measured 17 of 20 (ε_LB 0.977–1.243, mean 1.09): shown with no "
                           "margin; cause not established (cutoff 2: 301 types, 108 of them, 6 % of runs, too rare "
                           "for their own numeric fit); fixed seeds, so deterministic")


@pytest.mark.slow
@pytest.mark.parametrize("setting", [pytest.param(s, marks=H2_GAP) if s.startswith("H2") else s for s in HELDOUT])
def test_auto_catches_roth_on_held_out_settings(setting):
    """10⁶ runs per world, seeds 0–19, each held-out setting: at least 19 audits show Roth's violation.

    3–9 CPU-s per audit. Measured (docs/guide/estimators.md, "Fixtures and the held-out evaluation"): H1, H3 and
    H4 pass; H2 (cutoff 2) does not — its ε_LB sit just above ε = 1 and 3 of 20 seeds missed, a known gap of the
    attack, marked xfail (strict: the seeds are fixed) rather than tuned to pass.
    """
    runs = [run_audit(heldout(setting)["roth"], trials=10**6, alpha=0.05, seed=s) for s in range(SEEDS)]
    caught = sum(run.violated for run in runs)
    print(setting, "caught", caught, "of", SEEDS, [(run.attack, round(run.bound.epsilon_lb, 3)) for run in runs])
    assert caught >= SEEDS - 1


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["alg7", "alg1", "alg2"])
@pytest.mark.parametrize("setting", HELDOUT)
def test_auto_flags_held_out_correct_variants_no_more_than_alpha(setting, variant):
    """10⁶ runs per world, seeds 0–19: more than ``binom.isf(1e-3, 20, 0.05)`` false flags has probability ≤ 1e-3."""
    runs = [run_audit(heldout(setting)[variant], trials=10**6, alpha=0.05, seed=s) for s in range(SEEDS)]
    flagged = sum(run.violated for run in runs)
    print(setting, variant, "flagged", flagged, "of", SEEDS, [round(run.bound.epsilon_lb, 3) for run in runs])
    assert flagged <= stats.binom.isf(1e-3, SEEDS, 0.05)
