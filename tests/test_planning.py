"""Audit planning (recaudit.audits.stats.planning, ``recaudit plan``): exact power, checked by simulation."""
import numpy as np
import pytest

from recaudit.audits.cli import main
from recaudit.audits.harness import run_audit
from recaudit.audits.stats.rates import ceiling, epsilon_lower_bound
from recaudit.audits.stats.planning import detection_power, plan_trials, trials_for_ceiling
from recaudit.mechanisms.reference import RandomizedResponseWrongEpsilon


@pytest.mark.parametrize("n, fpr, fnr, claim, delta", [(200, 0.1, 0.15, 1.0, 0.0), (5_000, 0.002, 0.9, 1.5, 1e-5),
                                                         (1_000, 0.3, 0.3, 0.5, 0.0)])
def test_detection_power_matches_simulation(n, fpr, fnr, claim, delta):
    # 20 000 simulated count pairs: the Monte-Carlo estimate has sd <= 0.0036, so 0.02 is > 5 sd
    rng = np.random.default_rng(51)
    fp, fn = rng.binomial(n, fpr, 20_000), rng.binomial(n, fnr, 20_000)
    simulated = np.mean(epsilon_lower_bound(fp, n, fn, n, 1e-3, delta) > claim)
    assert detection_power(n, fpr, fnr, claim, 1e-3, delta) == pytest.approx(simulated, abs=0.02)


def test_plan_reaches_its_power_through_the_harness():
    # randomized response at true eps 2 claiming 1: the plan's trial count, audited 300 times by the
    # harness (which must also find the test on its selection half). Rejections ~ Bin(150, >= 0.9)
    # if the plan is right; fewer than 120 is 4 sd below 135: probability < 1e-4 at power 0.9.
    plan = plan_trials(2.0, 1.0, alpha=1e-3, power=0.9)
    assert plan.power >= 0.9 and plan.trials == 2 * plan.evaluation_runs
    mech = RandomizedResponseWrongEpsilon(1.0)
    seeds = np.random.SeedSequence(52).spawn(150)
    caught = sum(run_audit(mech, trials=plan.trials, alpha=1e-3, seed=s).violated for s in seeds)
    assert caught >= 120
    # one step smaller has less than the asked power (the search is tight to 2 %)
    assert detection_power(int(plan.evaluation_runs * 0.95), plan.fpr, plan.fnr, 1.0, 1e-3) < 0.9


def test_ceiling_and_errors():
    n = trials_for_ceiling(3.0, 0.05)
    assert ceiling(n // 2, n // 2, 0.05) > 3.0 >= ceiling(n // 2 - 1, n // 2 - 1, 0.05)
    with pytest.raises(ValueError, match="true_epsilon > claimed_epsilon"):
        plan_trials(1.0, 1.0)
    with pytest.raises(ValueError, match="delta > 0"):
        plan_trials(2.0, 1.0, shape="gaussian")
    # a Gaussian curve at the same (true) ε is harder to catch than the tightest pure-DP one
    assert plan_trials(3.0, 1.0, alpha=1e-3, delta=1e-5, shape="gaussian").trials > plan_trials(3.0, 1.0).trials


def test_plan_command(capsys):
    assert main(["plan", "--true-epsilon", "2", "--claimed-epsilon", "1"]) == 0
    out = capsys.readouterr().out
    assert "trials per world" in out and "ceiling" in out
    assert main(["plan", "--true-epsilon", "1", "--claimed-epsilon", "2"]) == 2
