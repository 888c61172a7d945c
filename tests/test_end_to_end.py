"""The whole path: scenario file -> world -> trials -> bound -> verdict -> reports."""
import importlib.util
import json

import numpy as np
import pytest

from recaudit.audits.cli import main
from recaudit.audits.reports.report import write_reports
from recaudit.audits.runner import run_scenario
from recaudit.audits.language.scenario import load_scenario
from tests.conftest import small_world


def load_small(write_scenario, data, trials=40_000, alpha=None, **audit):
    data = small_world(data, trials)
    if alpha is not None:
        data["audit"]["alpha"] = alpha
    data["audit"].update(audit)
    return load_scenario(write_scenario(data))


def test_correct_mechanism_is_consistent_and_tight(write_scenario, quickstart_data):
    # alpha = 1e-6: the bound exceeds the true epsilon with probability <= 1e-6,
    # so this assertion fails falsely with probability <= 1e-6.
    result = run_scenario(load_small(write_scenario, quickstart_data, trials=100_000, alpha=1e-6))
    assert result.verdict == "consistent"
    bound = result.strongest.bound
    assert bound.epsilon_lb <= result.claim.epsilon
    # the LR attack on one bit is optimal: at 50k evaluation trials per world and
    # alpha = 1e-6 the bound's expectation is ~0.95; 0.85 is > 10 standard errors below
    assert bound.epsilon_lb >= 0.85
    assert result.utility["final_accuracy"] is not None


def test_broken_twin_is_flagged(write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 2.0}
    result = run_scenario(load_small(write_scenario, quickstart_data, alpha=0.05))
    # true epsilon is 2; with 20k evaluation trials per world the bound's standard
    # error is ~0.03, so missing the violation (bound <= 1) is a > 25-sigma event.
    assert result.verdict == "violated" and result.strongest.bound.epsilon_lb > 1.5


def test_same_seed_same_report_and_other_seed_differs(tmp_path, write_scenario, quickstart_data):
    scenario = load_small(write_scenario, quickstart_data, trials=4_000)
    results = [run_scenario(scenario) for _ in range(2)]
    reports = [write_reports(result, tmp_path / f"r{i}") for i, result in enumerate(results)]
    for r in reports:
        r.pop("timing")
    assert reports[0] == reports[1]
    np.testing.assert_array_equal(results[0].tests[0].scores, results[1].tests[0].scores)
    other = scenario.model_copy(update={"seed": scenario.seed + 1})
    assert write_reports(run_scenario(other), tmp_path / "r2")["audit"]["counts"] != reports[0]["audit"]["counts"]


@pytest.mark.parametrize("executor", ["processes", "dask"])
def test_any_executor_gives_the_same_scores(write_scenario, quickstart_data, executor):
    scenario = load_small(write_scenario, quickstart_data, trials=6_000)
    serial = run_scenario(scenario)
    other = run_scenario(scenario, executor_type=executor, workers=2)
    np.testing.assert_array_equal(serial.tests[0].scores, other.tests[0].scores)
    assert serial.tests[0].bound == other.tests[0].bound


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info
    return [lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas"]


def test_a_run_computes_with_blas_on_one_thread_in_process_and_in_workers():
    from recaudit.audits.executors import open_executor
    from threadpoolctl import threadpool_limits

    with threadpool_limits(2, user_api="blas"):  # as on a 2-core machine, whatever this one has
        assert set(_blas_threads()) == {2}
        with open_executor("serial") as serial:
            assert set(serial.submit(_blas_threads).result()) == {1}
        with open_executor("processes", workers=2) as pool:
            assert all(set(pool.submit(_blas_threads).result()) == {1} for _ in range(4))
        assert set(_blas_threads()) == {2}  # restored after the run
        # a local Dask cluster's workers are forked from this process: its BLAS threads came with them (two
        # workers of two BLAS threads on two cores: 18 % more CPU, 39 % more wall than the pool)
        if importlib.util.find_spec("distributed") is not None:  # the dask extra
            with open_executor("dask", workers=2) as cluster:
                assert all(set(cluster.submit(_blas_threads).result()) == {1} for _ in range(4))
            assert set(_blas_threads()) == {2}


def test_resume_reuses_saved_blocks_and_refuses_foreign_progress(tmp_path, write_scenario, quickstart_data):
    scenario = load_small(write_scenario, quickstart_data, trials=8_000)
    out = tmp_path / "run"
    first = run_scenario(scenario, out)
    blocks = sorted((out / "progress").glob("block-*.npz"))
    assert len(blocks) == 4
    blocks[1].unlink()
    messages = []
    resumed = run_scenario(scenario, out, resume=True, report=messages.append)
    assert "resumed 3 of 4 trial blocks" in messages
    np.testing.assert_array_equal(first.tests[0].scores, resumed.tests[0].scores)
    with pytest.raises(RuntimeError, match="another scenario or seed"):
        run_scenario(scenario.model_copy(update={"seed": 1}), out, resume=True)


def test_cli_writes_all_reports(tmp_path, write_scenario, quickstart_data, capsys):
    path = write_scenario(small_world(quickstart_data, 4_000))
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "report.json").read_text())
    for key in ("schema_version", "scenario", "seed", "packages", "claim", "audit", "verdict", "utility", "timing"):
        assert key in report
    for key in ("epsilon_lb", "alpha", "confidence", "ceiling", "counts", "method", "threshold_strategy"):
        assert key in report["audit"]
    for key in ("claim", "epsilon_lb", "confidence", "ceiling", "method", "threshold_strategy", "tightness",
                "verdict", "holm_adjusted_p_value"):
        assert key in report["tests"][0]
    assert report["claim"] == {"epsilon": 1.0, "delta": 0.0, "model": "local", "unit": "user",
                               "neighbouring": "replace", "view": "messages"}
    text = (out / "report.md").read_text()
    assert "Verdict: consistent" in text and "ceiling" in text
    assert not (out / "trials.csv").exists()  # on request only (--csv, recaudit export)
    assert len(list((out / "progress").glob("block-*.npz"))) == 4  # the score store
    timing = report["timing"]
    assert timing["total_seconds"] >= timing["world_seconds"] + timing["audit_seconds"] + timing["writing_seconds"]
    assert timing["cpu_seconds"] > 0
    assert (out / "accuracy.svg").stat().st_size > 0
    assert "verdict consistent" in capsys.readouterr().out


def test_fail_on_violation_exit_code(tmp_path, write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 3.0}
    path = write_scenario(small_world(quickstart_data, 20_000))
    assert main(["run", str(path), "--out", str(tmp_path / "o"), "--quiet", "--fail-on-violation"]) == 1


def test_several_targets_and_attacks_form_a_holm_family(write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 2.0}
    quickstart_data["attack"] = [{"kind": "likelihood_ratio"}, {"kind": "likelihood_ratio"}]
    result = run_scenario(load_small(write_scenario, quickstart_data, trials=20_000, targets=2))
    assert len(result.tests) == 4 and {t.target for t in result.tests} == {0, 1}
    # every bound is made at alpha / 4 so the four hold together at 1 - alpha
    assert all(t.bound.alpha == pytest.approx(0.05 / 4) for t in result.tests)
    assert all(t.adjusted_p_value >= t.p_value for t in result.tests)
    # true epsilon 2 vs claim 1 with 10k evaluation trials per world: power is ~1
    assert result.verdict == "violated" and all(t.verdict == "violated" for t in result.tests)


def test_p_value_and_bound_agree(write_scenario, quickstart_data):
    result = run_scenario(load_small(write_scenario, quickstart_data, trials=20_000))
    test = result.tests[0]
    from recaudit.audits.stats.pvalues import violation_p_value

    b = test.bound
    expected = violation_p_value(b.false_pos, b.n_neg, b.false_neg, b.n_pos, result.claim.epsilon, 0.0)
    assert test.p_value == pytest.approx(expected, rel=1e-6)


def test_gdp_needs_a_claim_with_delta(write_scenario, quickstart_data):
    from recaudit.audits.language.yamlio import ScenarioError

    quickstart_data["audit"]["method"] = "gdp"
    with pytest.raises(ScenarioError, match="audit: method: gdp .* claims pure epsilon-DP"):
        load_scenario(write_scenario(quickstart_data))


@pytest.mark.parametrize("audit", [
    {"threshold_rule": "bonferroni", "score_range": [-2.0, 2.0], "grid_size": 9},
    {"threshold_rule": "explicit", "threshold_value": 0.0, "direction": 1},
])
def test_other_estimators_run_end_to_end(write_scenario, quickstart_data, audit):
    # alpha = 1e-6: a correct mechanism is flagged with probability <= 1e-6
    result = run_scenario(load_small(write_scenario, quickstart_data, trials=20_000, alpha=1e-6, **audit))
    assert result.verdict == "consistent" and 0.5 < result.strongest.bound.epsilon_lb <= 1.0


def test_one_run_audit_of_canaries(write_scenario, quickstart_data):
    quickstart_data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 4.0}
    result = run_scenario(load_small(write_scenario, quickstart_data, trials=10_000, method="one-run"))
    test = result.tests[0]
    assert test.bound.method == "one-run" and test.bound.m == 10_000
    assert test.worlds.shape == (10_000,) and 0.45 < test.worlds.mean() < 0.55
    # true epsilon 4: the top/bottom 10% of 10^4 canaries are ~98% right, far above what epsilon 1 allows
    assert result.verdict == "violated"
