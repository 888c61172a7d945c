"""Issue 34.7: a run, grid, sweep or study refused for exceeding ``limits`` names the field that costs the most.

Each case makes a different field the costly one and checks that the refusal (exit 2, one line, before any
work) names that field, not a fixed one: a refusal that always named the same field would fail the pairs.
"""
from __future__ import annotations

import pytest
import yaml

from tests.conftest import SCENARIOS, one_error, scenario_text, write_text


def shipped(name: str) -> dict:
    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


def refusal(capsys, tmp_path, data: dict | str, command: str = "validate") -> str:
    """The one line of ``recaudit COMMAND`` on the scenario (exit 2, nothing written), without the file's name."""
    path = write_text(tmp_path, data if isinstance(data, str) else scenario_text(data))
    out = tmp_path / "out"
    code, line = one_error(capsys, [command, str(path)] + ([] if command == "validate" else ["--out", str(out)]))
    assert code == 2 and line.startswith(f"{path}"), line
    assert not out.exists()
    return line[len(str(path)):]


# ---------------------------------------------------------------- one run


@pytest.mark.parametrize("changes, field", [
    ({}, "churn.horizon"),  # quickstart's world is its time: its users' arrivals
    ({"audit": {"trials": 10 ** 8, "block_size": 10 ** 6}}, "audit.trials"),  # replayed trials outweigh the world
    ({"audit": {"trials": 10 ** 6, "block_size": 1}, "limits": {"files": 1e9}}, "audit.block_size"),  # blocks
])
def test_a_run_over_its_hours_names_the_costly_field(tmp_path, capsys, quickstart_data, changes, field):
    for section, values in changes.items():
        quickstart_data.setdefault(section, {}).update(values)
    quickstart_data.setdefault("limits", {})["hours"] = 1e-6
    line = refusal(capsys, tmp_path, quickstart_data)
    assert f": {field}: the run would take about" in line, line


def test_a_gram_world_over_its_hours_names_the_items(tmp_path, capsys):
    data = shipped("matrix-completion-utility")  # its server's n x n Gram and eigen-solve every round
    data["population"].update(n_items=4000, n_users=2000)
    data["audit"]["trials"] = 100
    data["limits"] = {"hours": 0.001}
    assert ": population.n_items: the run would take about" in refusal(capsys, tmp_path, data)
    data["population"].update(n_items=100, n_users=2_000_000)  # now its users' rows are the work
    data["limits"] = {"hours": 0.001, "users": 1e9, "memory_gb": 64}
    assert ": population.n_users: the run would take about" in refusal(capsys, tmp_path, data)


# ---------------------------------------------------------------- a grid: its points together


def _grid_limits(data: dict, tmp_path) -> float:
    """Hours between the grid's costliest point and its total: each point passes, together they do not."""
    from recaudit.audits.language.limits import estimate_cost
    from recaudit.audits.language.scenario import Scenario, build, grid_points
    from recaudit.mechanisms import MECHANISMS

    scenario = Scenario.model_validate(data | {"limits": data.get("limits", {}) | {"hours": 1e6}})
    costs = [estimate_cost(p, build(p.mechanism, MECHANISMS))
             for p in (Scenario.model_validate(g.data) for g in grid_points(scenario))]
    seconds = [c["seconds"] for c in costs]
    return (max(seconds) + sum(seconds)) / 2 / 3600


@pytest.mark.parametrize("trials, field", [(None, "population.n_users"), (2_000_000, "audit.trials")])
def test_a_grid_over_its_hours_names_the_costly_field_of_its_costliest_run(tmp_path, capsys, trials, field):
    data = shipped("matrix-completion-rmse-vs-epsilon")
    # its costliest run is McSherry-Mironov's, whose work is its users' rows; with 2,000,000 canaries (users of
    # the one-run audit's run) the trials outweigh them
    if trials:
        data["audit"]["trials"] = trials
        data["limits"] = {"memory_gb": 64, "users": 1e9}
    data.setdefault("limits", {})["hours"] = _grid_limits(data, tmp_path)
    line = refusal(capsys, tmp_path, data, "grid")
    assert f": {field}: the grid's 14 runs would take" in line and f"{field} costs the most in its costliest run" \
        in line and "grid.epsilons" in line, line


# ---------------------------------------------------------------- a sweep


@pytest.mark.parametrize("executor, field", [({"type": "processes", "workers": 2}, "executor.workers"),
                                             ({"type": "serial"}, "population.n_items")])
def test_a_sweep_over_its_memory_names_the_costly_field(tmp_path, capsys, executor, field):
    data = shipped("scaling-regimes")  # its base point is small; the sweep's largest n_items is not
    data["executor"] = executor
    data["sweep"]["axes"].append({"parameter": "population.n_items", "values": [data["population"]["n_items"],
                                                                                100_000]})
    data["limits"] = {"memory_gb": 1}
    line = refusal(capsys, tmp_path, data)
    assert f": {field}: the sweep would need about" in line, line


# ---------------------------------------------------------------- a study


@pytest.mark.parametrize("block, field", [
    ("{kind: mcsherry_mironov_per_user, counts: [1, 2], trials: 2000}", "trials"),
    ("{kind: mcsherry_mironov_per_user, counts: [1, 2, 3, 4, 5, 6, 7, 8], trials: 4, items: 400}", "items"),
    ("{kind: xin_jaakkola, replicates: 3, trials: 10}", "private"),
    ("{kind: xin_jaakkola, replicates: 1, private: 20, trials: 100000}", "trials"),
])
def test_a_study_over_its_hours_names_the_setting_that_costs_the_most(tmp_path, capsys, block, field):
    from recaudit.audits.language.limits import LimitsConfig
    from recaudit.audits.language.studies import StudyScenario

    study = StudyScenario.model_validate({"name": "s", "seed": 0, "study": yaml.safe_load(block)}).build()
    hours = study.estimate(0, LimitsConfig())["seconds"] / 2 / 3600
    line = refusal(capsys, tmp_path, f"name: s\nseed: 0\nlimits: {{hours: {hours}}}\nstudy: {block}\n", "run")
    assert f"over limits.hours = {hours:g} (study.{field} costs the most: lower it, or raise limits.hours" in line, line
