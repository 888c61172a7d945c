"""Audit designs against each other: local replay, full protocol runs and canaries in one run.

Statistical assertions use fixed seeds; each states its false-failure
probability. Bounds are made at alpha = 1e-6, so a correct mechanism is
flagged with probability <= 1e-6 per test.
"""
import numpy as np
import pytest

import recaudit.simulator.engine
from recaudit.attacks.base import Attack
from recaudit.audits.designs import DESIGNS, DesignError
from recaudit.audits.language.scenario import load_scenario
from recaudit.audits.language.yamlio import ScenarioError
from recaudit.audits.runner import run_scenario
from recaudit.mechanisms import MaxSense, PairwisePreference
from recaudit.audits.designs.pairs import PairError, UserReplace
from recaudit.simulator.population import SBMPopulation
from tests.conftest import small_world


def tiny_world(data, trials, design, **audit):
    """A world of ~40 users over four query rounds: cheap enough to re-run per trial."""
    data["churn"].update(arrival_rate=40, mean_lifetime=1.0, horizon=1.0, query_interval=0.25,
                         release_interval=1.0)
    data["audit"].update(trials=trials, block_size=trials, design=design, **audit)
    return data


@pytest.fixture
def count_runs(monkeypatch):
    """How many protocol runs the engine starts."""
    runs = []
    original = recaudit.simulator.engine.MechanismRun.__init__

    def counting(self, *args, **kwargs):
        runs.append(1)
        original(self, *args, **kwargs)

    monkeypatch.setattr(recaudit.simulator.engine.MechanismRun, "__init__", counting)
    return runs


@pytest.mark.slow  # ~30 s: thousands of whole protocol runs
def test_full_runs_agree_with_local_replay(write_scenario, quickstart_data, count_runs):
    local = run_scenario(load_scenario(write_scenario(tiny_world(dict(quickstart_data), 20_000, "local_replay",
                                                                 alpha=1e-6))))
    count_runs.clear()
    full = run_scenario(load_scenario(write_scenario(tiny_world(quickstart_data, 2_000, "full_runs", alpha=1e-6))))
    assert len(count_runs) == 1 + 2 * 2_000  # the world, then one whole protocol run per trial
    for result in (local, full):
        assert result.verdict == "consistent" and result.strongest.estimate.epsilon_lb <= 1.0
    # full runs draw the target's sensing vector inside each run: ~35% of runs carry no signal, but the
    # LR test's one-sided error still shows ~epsilon; at 1000 evaluation runs per world the bound's
    # expectation is ~0.6 (0.3 is > 5 standard errors below it)
    assert full.strongest.estimate.epsilon_lb > 0.3
    assert local.strongest.estimate.epsilon_lb > 0.85


@pytest.mark.slow  # ~30 s: thousands of whole protocol runs
def test_full_runs_flag_the_broken_twin(write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 4.0}
    result = run_scenario(load_scenario(write_scenario(tiny_world(quickstart_data, 2_000, "full_runs"))))
    # true epsilon 4: with 1000 evaluation runs per world the bound is ~2; missing epsilon > 1 is > 6 sigma
    assert result.verdict == "violated"


def test_one_run_places_every_canary_in_one_protocol_run(write_scenario, quickstart_data, count_runs):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 4.0}
    data = small_world(quickstart_data, 10_000)
    data["audit"].update(method="one-run", design="one_run")
    result = run_scenario(load_scenario(write_scenario(data)))
    assert len(count_runs) == 1  # the world's own run holds the canaries
    test = result.tests[0]
    assert result.world["canaries"] == 10_000 and test.estimate.bound.m == 10_000
    # true epsilon 4 (and ~35% of canaries unsensed): the top/bottom 10% are right far more often than
    # epsilon = 1 allows (p-value < 1e-10 at these counts)
    assert result.verdict == "violated"


def test_one_run_on_the_correct_mechanism_is_consistent(write_scenario, quickstart_data):
    data = small_world(quickstart_data, 10_000, )
    data["audit"].update(method="one-run", design="one_run", alpha=1e-6)
    result = run_scenario(load_scenario(write_scenario(data)))
    assert result.verdict == "consistent" and 0 < result.strongest.estimate.epsilon_lb <= 1.0


def test_designs_refuse_what_they_cannot_audit(write_scenario, quickstart_data):
    data = dict(quickstart_data)
    data["audit"] = {"design": "full_runs", "trials": 1_000_000}
    with pytest.raises(ScenarioError, match=r"audit\.trials: the run would take about .* hours"):
        load_scenario(write_scenario(data))
    data["limits"] = {"hours": 1e9}  # past the time limit, the design's own cap on user-runs speaks
    with pytest.raises(ScenarioError, match="full_runs re-runs the whole world per trial"):
        load_scenario(write_scenario(data))
    del data["limits"]
    data["audit"] = {"design": "one_run", "method": "clopper-pearson"}
    with pytest.raises(ScenarioError, match="produces canaries but method clopper-pearson needs pairs"):
        load_scenario(write_scenario(data))
    from tests.test_engine import NoisyLikeCount

    with pytest.raises(DesignError, match="valid only for local claims"):
        DESIGNS["local_replay"]().check(NoisyLikeCount(), NoisyLikeCount().claim, None, 100)


PAIRWISE = SBMPopulation(n_items=100, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                         like_probability=[[0.9, 0.3], [0.6, 0.1]], ratings_per_user=10)


def test_worst_case_pairs_always_differ():
    # the old picker kept the rated set: 57% of Pairwise-Preference targets differed in no bit here
    rng = np.random.default_rng(0)
    catalogue = PAIRWISE.catalogue(rng)
    for mechanism in (PairwisePreference(epsilon=1.0), MaxSense(epsilon=1.0)):
        pairs = [UserReplace().worst_case_pair(mechanism, PAIRWISE, catalogue, 2, rng) for _ in range(200)]
        assert all(p.differing_bits == p.sketches.shape[1] for p in pairs)
        assert all(p.rows0.rated.sum() == PAIRWISE.ratings_per_user for p in pairs)


def test_a_pair_that_cannot_differ_is_an_error():
    rng = np.random.default_rng(1)
    catalogue = PAIRWISE.catalogue(rng)
    blind = MaxSense(epsilon=1.0, theta=1e-9)  # senses no item: both worlds give sketch 0
    with pytest.raises(PairError, match="differs in none"):
        UserReplace().worst_case_pair(blind, PAIRWISE, catalogue, 1, rng)


class FittedThreshold(Attack):
    """A learning attack for the test: scores by the message bit, remembers what it was fitted on."""

    kind = "fitted"  # not registered: a test fixture
    requires_fit = True
    fitted = None

    def fit(self, mechanism, pair, view, worlds):
        self.fitted = (len(view), np.bincount(worlds).tolist())
        self.sign = 1.0 if view.messages[worlds == 1].mean() >= view.messages[worlds == 0].mean() else -1.0

    def scores(self, mechanism, pair, view):
        assert self.fitted is not None, "scored before fitting"
        return self.sign * view.messages[:, 0].astype(float)


def test_learning_attacks_fit_on_their_own_runs():
    from recaudit.audits.designs import AuditJob
    from recaudit.audits.executors import SerialExecutor
    from recaudit.audits.store import Progress
    from recaudit.audits.stats.bounds import split_epsilon_bound

    mechanism = MaxSense(epsilon=1.0)
    catalogue = PAIRWISE.catalogue(np.random.default_rng(2))
    attack = FittedThreshold()
    job = AuditJob(mechanism, PAIRWISE, catalogue, None, (attack,), mechanism.claim, "messages", 1, 11, 12)
    out = DESIGNS["local_replay"]().scores(job, UserReplace(), 1, 3_000, 1_000, None, SerialExecutor(),
                                           Progress(None, {}, False), lambda _: None)
    # fitted once, on 3000 runs per world of the "train" stream, before any counted run was scored
    assert attack.fitted == (6_000, [3_000, 3_000]) and attack.sign == 1.0
    scores = out.runs[0].scores[0]
    assert scores.shape == (2, 3_000)
    # the fitted bit test on one epsilon = 1 bit: bound ~0.8 at 1500 evaluation runs; 0.4 is > 5 sigma below
    assert 0.4 < split_epsilon_bound(scores[0], scores[1], alpha=1e-6).epsilon_lb <= 1.0


def test_sketch_agreement_orders_runs_as_the_likelihood_ratio(write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "multi_maxsense_broken", "epsilon": 2.0}
    quickstart_data["attack"] = [{"kind": "likelihood_ratio"}, {"kind": "sketch_agreement"}]
    result = run_scenario(load_scenario(write_scenario(small_world(quickstart_data, 4_000))))
    lr, agree = (t.scores for t in result.tests)
    # equal budgets on every bit: agreement is an increasing function of the likelihood ratio
    order = np.argsort(lr, axis=None, kind="stable")
    assert np.all(np.diff(agree.ravel()[order]) >= 0)
    assert result.verdict == "violated"  # the twin spends 2 per bit while publishing 1 (4 in all vs 2 claimed)


def test_an_audit_whose_pair_cannot_differ_fails_loudly(tmp_path, quickstart_data, write_scenario, capsys):
    # a MaxSense that senses (almost) no item: the target's sketch is 0 in both worlds, so the audit could only
    # ever print "consistent"; it must refuse instead, write no report and exit 2
    from recaudit.audits.cli import main

    quickstart_data["mechanism"]["theta"] = 1e-9
    quickstart_data["churn"].update(horizon=2.0, release_interval=1.0)
    quickstart_data["audit"]["trials"] = 2000
    out = tmp_path / "out"
    assert main(["run", str(write_scenario(quickstart_data)), "--out", str(out), "--quiet"]) == 2
    assert "differs in none" in capsys.readouterr().err
    assert not (out / "report.json").exists()
