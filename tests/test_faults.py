"""Every fault of issue 11 (except the ratings loader's): one clear line and the right exit code.

Exit codes: 0 done, 1 violated (only with --fail-on-violation), 2 bad input, 3 internal error.
"""
from __future__ import annotations

import re
import time

import pytest

from recaudit.audits import cli
from recaudit.audits.cli import main
from tests.conftest import line_of, one_error, scenario_text, small_world, write_text


# ---------------------------------------------------------------- names decide where files go


@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a\0b", "x" * 300, ".hidden", "a/b", "", "a b"])
def test_unsafe_names_are_refused_at_load(tmp_path, capsys, quickstart_data, name):
    quickstart_data["name"] = name
    text = scenario_text(quickstart_data)
    path = write_text(tmp_path, text)
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2
    assert line.startswith(f"{path}:{line_of(text, 'name:')}: name: ")
    assert "\0" not in line


def test_an_unsafe_name_writes_nothing_outside(tmp_path, capsys, quickstart_data, monkeypatch):
    monkeypatch.chdir(tmp_path)
    quickstart_data["name"] = "../../escaped"
    path = write_text(tmp_path, scenario_text(small_world(quickstart_data, 400)))
    assert main(["run", str(path)]) == 2
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "runs").exists()


# ---------------------------------------------------------------- validate refuses what would hang or crash


@pytest.mark.parametrize("edit, field", [
    ({"population": {"n_items": 100001, "ratings_per_user": 10}, "mechanism": {"kind": "pairwise_preference",
                                                                               "epsilon": 1.0}}, "population.n_items"),
    ({"audit": {"trials": 1e12}}, "audit.trials"),
    ({"churn": {"horizon": float("inf")}}, "churn.horizon"),
    ({"churn": {"horizon": 1e300}}, "churn.horizon"),
    ({"churn": {"query_interval": 1e-300}}, "churn.query_interval"),
    ({"mechanism": {"epsilon": float("nan")}}, "mechanism.epsilon"),
    ({"executor": {"workers": 1000000}}, "executor.workers"),
    ({"executor": {"type": "dask", "address": "not an address"}}, "executor.address"),
])
def test_scenarios_that_would_hang_or_exhaust_memory_are_refused(tmp_path, capsys, quickstart_data, edit, field):
    for section, values in edit.items():
        if section == "mechanism" and "kind" in values:
            quickstart_data[section] = values
        else:
            quickstart_data.setdefault(section, {}).update(values)
    path = write_text(tmp_path, scenario_text(quickstart_data))
    started = time.monotonic()
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and re.match(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: ", line), line
    assert time.monotonic() - started < 10


def test_limits_are_configurable(tmp_path, capsys, quickstart_data):
    quickstart_data["audit"]["trials"] = 2_000_000_000
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and "audit.trials: the run would need about 30 GiB" in line  # the process and:
    assert "scores 29.8 GiB" in line  # 2 worlds x 2e9 x 8 bytes
    quickstart_data["limits"] = {"memory_gb": 100}
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and "audit.trials: 2e+09 trials" in line and "over limits.trials = 1e+09" in line
    quickstart_data["audit"]["trials"] = 20_000_000_000  # 2 x 2e10 target rows of 100 items, scored: ~8e12 cells
    quickstart_data["limits"] = {"trials": 1e11, "memory_gb": 1000, "files": 1e6, "hours": 4}
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and re.search(r"audit\.trials: the run would take about [\d.e+]+ hours on 2 cores", line), line
    assert "over limits.hours = 4" in line
    quickstart_data["limits"] = {"trials": 1e11, "memory_gb": 1000, "hours": 1e6, "files": 1e6}
    path = write_text(tmp_path, scenario_text(quickstart_data))
    assert main(["validate", str(path)]) == 0


def test_time_estimate_names_what_to_lower(tmp_path, capsys, quickstart_data):
    # a world of 1e12 arrivals at 100 items: ~1e14 cells (days at any throughput), the world dominates
    quickstart_data["churn"] = {**quickstart_data.get("churn", {}), "arrival_rate": 1e8, "horizon": 10_000}
    quickstart_data["limits"] = {"users": 1e13, "memory_gb": 1e6}  # (~100 TB: what the engine keeps per arrival)
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and "churn.horizon: the run would take about" in line and "world" in line, line
    # full_runs re-runs the world per trial: the audit dominates, so the trials are what to lower
    from recaudit.audits.language.limits import estimate_cost
    from recaudit.audits.language.scenario import Scenario, build
    from recaudit.mechanisms import MECHANISMS
    data = {**quickstart_data, "limits": {}, "churn": {"arrival_rate": 50, "horizon": 10}}
    data["audit"] = {**data["audit"], "design": "full_runs", "trials": 1000}
    cost = estimate_cost(scenario := Scenario.model_validate(data), build(scenario.mechanism, MECHANISMS))
    assert cost["audit_seconds"] > 2 * 1000 * cost["world_seconds"]  # two worlds per trial, plus scoring


def test_memory_estimate_follows_the_pairwise_table(quickstart_data):
    # pairwise keeps two N x N tables of 8 bytes: the extrapolation from small N must find 16 N^2 bytes
    from recaudit.audits.language.limits import estimate_cost
    from recaudit.audits.language.scenario import Scenario, build
    from recaudit.mechanisms import MECHANISMS

    quickstart_data["mechanism"] = {"kind": "pairwise_preference", "epsilon": 1.0}
    quickstart_data["population"]["n_items"] = 4096
    scenario = Scenario.model_validate(quickstart_data)
    cost = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))
    assert cost["state"] == pytest.approx(16 * 4096 ** 2, rel=0.01)


def test_bad_workers_flag_is_refused(tmp_path, capsys, write_scenario, quickstart_data):
    path = write_scenario(small_world(quickstart_data, 400))
    code, line = one_error(capsys, ["run", str(path), "--workers", "1000000", "--out", str(tmp_path / "o")])
    assert code == 2 and line.startswith("--workers: must be between 1 and 256")


def test_unreachable_dask_scheduler_fails_fast_before_the_simulation(tmp_path, capsys, write_scenario,
                                                                     quickstart_data):
    pytest.importorskip("distributed")
    data = small_world(quickstart_data, 400)
    data["executor"] = {"type": "dask", "address": "tcp://127.0.0.1:1"}
    path = write_scenario(data)
    started = time.monotonic()
    code = main(["run", str(path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2 and "executor.address: cannot reach the Dask scheduler" in err
    assert "simulating" not in err  # refused before any work
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("kind", ["file", "under_a_file", "unwritable"])
def test_bad_out_is_refused_before_the_simulation(tmp_path, capsys, write_scenario, quickstart_data, kind):
    path = write_scenario(small_world(quickstart_data, 400))
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("not a folder")
    elif kind == "under_a_file":
        (tmp_path / "f").write_text("")
        out = tmp_path / "f" / "out"
    else:
        out.mkdir()
        out.chmod(0o500)
        if _can_write(out):
            pytest.skip("running as a user who can write anywhere (root)")
    code, line = one_error(capsys, ["run", str(path), "--out", str(out)])
    assert code == 2 and line.startswith(f"{out}: cannot")


def _can_write(folder) -> bool:
    try:
        (folder / "probe").write_text("")
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


def test_a_crash_exits_3_never_1(tmp_path, capsys, write_scenario, quickstart_data, monkeypatch):
    path = write_scenario(small_world(quickstart_data, 400))

    def crash(*args, **kwargs):
        raise TypeError("something\nbroke \x1b[31m")

    monkeypatch.setattr("recaudit.audits.runner.run_scenario", crash)
    code, line = one_error(capsys, ["run", str(path), "--fail-on-violation", "--out", str(tmp_path / "o")])
    assert code == cli.EXIT_INTERNAL == 3
    assert "internal error" in line and "TypeError: something\\nbroke \\x1b[31m" in line


# ---------------------------------------------------------------- the YAML loader


@pytest.mark.parametrize("text, needle, expected", [
    ("seed: 1\nname: !!timestamp 2020-13-45\n", "name:", "YAML error: cannot read this timestamp value"),
    ("seed: 1\nname: q\nx: !!bool maybe\n", "x:", "YAML error: cannot read this bool value (KeyError"),
    ("seed: 1\nx: !!int ''\n", "x:", "YAML error: cannot read this int value (IndexError"),
    ("seed: 1\nx: !!float .\n", "x:", "YAML error: cannot read this float value (ValueError"),
    ("seed: 1\nx: " + "[" * 5000 + "1" + "]" * 5000 + "\n", "x:", "YAML error: nested too deeply"),
    ("", None, "file is empty"),
])
def test_loader_faults_become_one_located_line(tmp_path, capsys, text, needle, expected):
    path = write_text(tmp_path, text)
    code, line = one_error(capsys, ["validate", str(path)])
    where = line_of(text, needle) if needle else 1
    assert code == 2 and line.startswith(f"{path}:{where}: ") and expected in line, line


def test_dates_are_strings(tmp_path, capsys, quickstart_data):
    text = scenario_text(quickstart_data).replace("name: quickstart", "name: 2020-13-45")
    path = write_text(tmp_path, text)
    assert main(["validate", str(path)]) == 0


def test_a_name_with_control_characters_is_refused_in_one_escaped_line(tmp_path, capsys, quickstart_data):
    quickstart_data["name"] = "a\x1bb\nVerdict: consistent"
    text = scenario_text(quickstart_data)
    path = write_text(tmp_path, text)
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and line.startswith(f"{path}:{line_of(text, 'name:')}: name: must be 1 to 100")


def test_control_characters_in_messages_are_escaped(tmp_path, capsys, quickstart_data):
    quickstart_data["mechanism"]["kind"] = "max\x1b[2Jsense\nVerdict: consistent"
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["validate", str(path)])
    assert code == 2 and "\\x1b[2J" in line and "\\nVerdict" in line
