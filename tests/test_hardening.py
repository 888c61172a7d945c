"""Issue 21: every validated scenario finishes or is refused before work; every bad file gets one clear line.

Each case: exit 2, one line, ``file:line: field: message`` naming the field to change, before any work
(nothing simulated, nothing written).
"""
from __future__ import annotations

import dataclasses
import re
import time

import pytest
import yaml

from recaudit.audits.cli import main
from tests.conftest import one_error, scenario_text, write_text


def refused(capsys, tmp_path, data_or_text, field: str, command: str = "validate", seconds: float = 10):
    """Run ``command`` on the scenario: exit 2 within ``seconds`` of CPU, one line naming ``field``; returns it."""
    text = data_or_text if isinstance(data_or_text, str) else scenario_text(data_or_text)
    path = write_text(tmp_path, text)
    out = tmp_path / "out"
    started = time.process_time()  # CPU seconds: the machine may be shared
    code, line = one_error(capsys, [command, str(path)] + ([] if command == "validate" else ["--out", str(out)]))
    assert code == 2 and re.match(rf"{re.escape(str(path))}:\d+: {re.escape(field)}: ", line), line
    assert time.process_time() - started < seconds
    assert not out.exists()  # before any work
    return line


# ---------------------------------------------------------------- messages name the cause, and only the cause


@pytest.mark.parametrize("epsilon", [1e6, 1e-300])
def test_an_epsilon_the_accountant_cannot_take_names_mechanism_epsilon(tmp_path, capsys, quickstart_data, epsilon):
    quickstart_data["mechanism"]["epsilon"] = epsilon
    line = refused(capsys, tmp_path, quickstart_data, "mechanism.epsilon")
    assert "outside what the accountant can take (1e-15 to 700" in line and "Noise parameter" not in line


def test_the_accountant_s_warnings_stay_off_the_error_line(tmp_path, capsys):
    # dp-accounting's log1p(-exp(..)) warns at extreme epsilons: the refusal must still be one line
    # (in a fresh process: pytest records warnings itself, so in-process the leak would not show)
    import subprocess
    import sys
    from pathlib import Path

    data = shipped("continual-naive")
    data["mechanism"]["epsilon"], data["audit"]["trials"] = 1e-12, 10
    path = write_text(tmp_path, scenario_text(data))
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "recaudit", "validate", str(path)], capture_output=True, text=True,
                          cwd=root, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and re.fullmatch(rf"{re.escape(str(path))}:\d+: audit\.trials: must be >= 100\n",
                                                 done.stderr), done.stderr


def test_many_keys_without_aliases_are_not_called_aliases(tmp_path, capsys):
    text = "".join(f"k{i}: {i}\n" for i in range(100_000))
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, text))])
    assert code == 2 and "<root>: holds 200,001 values" in line and "aliases expand" not in line


def test_a_long_grid_without_aliases_names_the_grid(tmp_path, capsys):
    epsilons = ", ".join(map(str, range(1, 100_001)))
    text = "name: g\nseed: 1\ngrid:\n  compare: [[{a: 1}, 2]]\n  epsilons: [" + epsilons + "]\n"
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, text))])
    assert code == 2 and re.search(r":5: grid\.epsilons: holds 100,001 values", line) and "aliases expand" not in line


def test_an_empty_file_says_so(tmp_path, capsys):
    code, line = one_error(capsys, ["validate", str(write_text(tmp_path, ""))])
    assert code == 2 and line.endswith(":1: the file is empty (expected a mapping of keys)")


# ---------------------------------------------------------------- calibrations


def test_gaussian_calibration_is_the_smallest_sigma_the_accountant_accepts():
    # against dp-accounting's own analytic-Gaussian epsilon: sigma passes, sigma x (1 - 1e-8) does not
    from recaudit.mechanisms.accounting import _gaussian_epsilon, gaussian_sigma_for

    for epsilon, delta in [(1.0, 1e-6), (0.01, 1e-5), (1e-6, 1e-6), (50.0, 1e-9), (1e-12, 1e-6)]:
        sigma = gaussian_sigma_for(epsilon, delta)
        assert _gaussian_epsilon(1 / sigma, delta) <= epsilon < _gaussian_epsilon(1 / (sigma * (1 - 1e-8)), delta)


def test_a_grid_of_300_points_validates_in_seconds(tmp_path, capsys):
    from tests.conftest import SCENARIOS

    data = yaml.safe_load((SCENARIOS / "matrix-completion-rmse-vs-epsilon.yaml").read_text())
    data["grid"]["epsilons"] = [round(0.1 + 0.01 * i, 4) for i in range(100)]  # x 3 mechanisms = 300 points
    path = write_text(tmp_path, scenario_text(data))
    started = time.process_time()  # CPU seconds: the machine may be shared
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err
    assert time.process_time() - started < 5


# ---------------------------------------------------------------- the cost of run, sweep and grid, before work


def shipped(name: str) -> dict:
    from tests.conftest import SCENARIOS

    return yaml.safe_load((SCENARIOS / f"{name}.yaml").read_text())


@pytest.mark.parametrize("command", ["validate", "sweep"])
def test_a_sweep_too_long_to_list_is_refused_in_seconds(tmp_path, capsys, command):
    data = shipped("scaling-maxsense")
    data["sweep"]["replicates"] = 100_000
    data["sweep"]["axes"][0]["values"] = list(range(20, 20_020))  # 2e9 learning curves
    line = refused(capsys, tmp_path, data, "sweep.replicates", command)
    assert "2e+09 learning curves" in line and "over limits.files" in line


def test_a_sweep_over_the_time_limit_names_max_users(tmp_path, capsys):
    data = shipped("scaling-maxsense")
    data["sweep"]["max_users"] = 10 ** 12
    line = refused(capsys, tmp_path, data, "sweep.max_users")
    assert "learning curves of up to" in line and "over limits.hours = 24" in line


def test_the_full_grid_of_a_sweep_is_costed_when_asked_for(tmp_path, capsys):
    data = shipped("scaling-maxsense")
    data["sweep"]["max_users"] = 2 * 10 ** 7
    data["sweep"]["axes"][0]["full_values"] = list(range(100, 500))  # ~40 hours with --full only
    path = write_text(tmp_path, scenario_text(data))
    assert main(["validate", str(path)]) == 0
    code, line = one_error(capsys, ["sweep", str(path), "--full", "--out", str(tmp_path / "out")])
    assert code == 2 and "sweep.max_users (with --full): " in line and "axes' full_values" in line
    assert not (tmp_path / "out").exists()
    data["sweep"]["axes"][0]["full_values"] = list(range(20, 25_020))  # 1.25e5 curves: never runnable
    refused(capsys, tmp_path, data, "sweep.replicates")


def test_sweep_tasks_are_generated_as_they_run(quickstart_data, monkeypatch):
    # run_sweep hands the executor a generator: a 2e9-curve sweep would never be listed (limits aside)
    import recaudit.audits.sweep as sweep_module
    from recaudit.audits.language.scenario import Scenario

    data = shipped("scaling-maxsense")
    data["sweep"]["replicates"], data["sweep"]["max_users"] = 10 ** 9, 1000
    data["limits"] = {"files": 1e12, "hours": 1e12, "memory_gb": 1e12}
    scenario = Scenario.model_validate(data)
    seen = []

    def first_three(executor, todo):
        assert not isinstance(todo, (list, tuple))
        for _ in range(3):
            seen.append(next(todo)[0])
        raise KeyboardInterrupt

    monkeypatch.setattr(sweep_module, "as_finished", first_three)
    with pytest.raises(KeyboardInterrupt):
        sweep_module.run_sweep(scenario, executor_type="serial")
    assert seen == [(0, 0, 0, 0), (0, 0, 1, 0), (0, 0, 2, 0)]


def test_more_workers_than_cores_are_refused(tmp_path, capsys, quickstart_data, monkeypatch):
    monkeypatch.setattr("recaudit.audits.language.limits.cores", lambda: 2)
    quickstart_data["executor"] = {"type": "processes", "workers": 256}
    line = refused(capsys, tmp_path, quickstart_data, "executor.workers", "run")
    assert "256 worker processes, over the machine's 2 cores" in line and "limits.processes" in line
    quickstart_data["executor"]["workers"] = 3
    quickstart_data["limits"] = {"processes": 3}  # raised on purpose
    assert main(["validate", str(write_text(tmp_path, scenario_text(quickstart_data)))]) == 0


def test_the_workers_flag_is_held_to_the_cores_too(tmp_path, capsys, quickstart_data, monkeypatch):
    monkeypatch.setattr("recaudit.audits.language.limits.cores", lambda: 2)
    path = write_text(tmp_path, scenario_text(quickstart_data))
    code, line = one_error(capsys, ["run", str(path), "--executor", "processes", "--workers", "8", "--out",
                                    str(tmp_path / "out")])
    assert code == 2 and "executor.workers (with --executor --workers): 8 worker processes" in line
    assert not (tmp_path / "out").exists()


def test_workers_count_in_the_memory_estimate(tmp_path, capsys, quickstart_data):
    quickstart_data["executor"] = {"type": "processes", "workers": 100}
    quickstart_data["limits"] = {"processes": 100, "memory_gb": 4}
    line = refused(capsys, tmp_path, quickstart_data, "executor.workers")
    from recaudit.audits.language.limits import GIB, PROCESS_BYTES

    batch = 4096 * 100 * 8  # each process's batch of users' rows over the 100 items
    assert f"workers {100 * (PROCESS_BYTES + batch) / GIB:.3g} GiB" in line, line


@pytest.mark.parametrize("trials, limits, needle", [
    (10 ** 6, {}, "1e+06 trial blocks (targets x trials / block_size), each saved as a file, over limits.files"),
    (10 ** 7, {"files": 1e8, "hours": 1}, "of which {hours:.3g} hours for 1e+07 blocks"),
])
def test_per_block_overhead_is_costed(tmp_path, capsys, quickstart_data, trials, limits, needle):
    from recaudit.audits.language.limits import SECONDS_PER

    quickstart_data["audit"].update(trials=trials, block_size=1)
    quickstart_data["limits"] = limits
    line = refused(capsys, tmp_path, quickstart_data, "audit.block_size", "run")
    assert needle.format(hours=trials * SECONDS_PER["blocks"] / 3600) in line, line


@pytest.mark.parametrize("panel, field", [({}, "population.n_users"), ({"n_users": 10 ** 9}, "panel.n_users")])
def test_a_large_panel_is_blamed_on_its_size(tmp_path, capsys, panel, field):
    data = shipped("matrix-completion-utility")
    data["panel"] = panel
    data["population"]["n_users"] = 10 ** 9
    line = refused(capsys, tmp_path, data, field)
    assert "arrival_rate" not in line and "horizon" not in line


def test_a_grid_is_costed_as_the_sum_of_its_runs(tmp_path, capsys):
    data = shipped("matrix-completion-rmse-vs-epsilon")
    data["limits"] = {"hours": 0.03}  # each point is well under 108 s; the 14 together are not
    line = refused(capsys, tmp_path, data, "population.n_users", "grid")  # the field its costliest run costs most
    assert "the grid's 14 runs would take" in line and "over limits.hours = 0.03" in line and "grid.epsilons" in line


def test_every_mechanism_states_a_round_cost():
    import math

    from recaudit.mechanisms import MECHANISMS, WorldInfo
    from recaudit.mechanisms.costs import RoundCost

    for kind, cls in MECHANISMS.items():
        cost = cls(**cls.test_params()).round_cost(WorldInfo(1000, 20, 2), 1e4)
        assert isinstance(cost, RoundCost), kind
        assert all(math.isfinite(v) and v >= 0 for v in dataclasses.astuple(cost)), (kind, cost)


def test_a_gram_server_is_costed_from_its_own_round_cost(tmp_path, capsys):
    # 20,000 items: the n x n Gram is 3 GiB, under 8; with its noise and every round's noisy triangle, far over
    data = shipped("matrix-completion-utility")
    data["population"].update(n_items=20_000, n_users=1000)
    line = refused(capsys, tmp_path, data, "population.n_items")
    assert "the run would need about" in line and "over limits.memory_gb = 8" in line
    from recaudit.mechanisms import MECHANISMS, WorldInfo

    gram = MECHANISMS["private_frank_wolfe"](epsilon=1.0, iterations=10).round_cost(WorldInfo(20_000, 80, 2), 1000)
    assert gram.state_bytes == 8 * 20_000 ** 2 * (4 + 10 / 2)  # Gram, noise, two temporaries, 10 half triangles


def test_a_block_of_batched_runs_is_blamed_on_its_size(tmp_path, capsys):
    # measured: 20,000 runs of this panel at 40 items in one block peaked at 5.2 GB (estimated 152 MB before
    # blocks were counted); blocks of 10^5 runs at 60 items in each of 2 workers would need ~130 GiB
    data = shipped("tight-private-projected-gradient")
    data["population"]["n_items"] = 60
    data["audit"].update(trials=100_000, block_size=100_000)
    line = refused(capsys, tmp_path, data, "audit.block_size")
    assert "runs " in line and "over limits.memory_gb = 8" in line


def test_a_ratings_file_is_costed_at_its_own_size(tmp_path):
    # a file population states no n_items: the estimate reads the file's (cached) counts
    from recaudit.audits.language.limits import estimate_cost, world_facts
    from recaudit.audits.language.scenario import build, load_scenario
    from recaudit.mechanisms import MECHANISMS

    rows = [f"{u},{i},{1 + (u + i) % 5}" for u in range(40) for i in range(0, 300, 3)]
    (tmp_path / "r.csv").write_text("user,item,rating\n" + "\n".join(rows) + "\n")
    path = write_text(tmp_path, ratings_scenario(tmp_path, "r.csv").replace("path: r.csv\n",
                                                                            "path: r.csv\n  bootstrap: true\n"))
    scenario = load_scenario(path)
    world, size = world_facts(scenario)
    assert (world.n_items, world.ratings_per_user, size) == (100, 100, None)  # bootstrap: no fixed size
    assert estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))["batch"] == 4096 * 100 * 8


# ---------------------------------------------------------------- ratings files: one line naming the file


def ratings_scenario(tmp_path, name: str, limits: dict | None = None) -> str:
    return (f"name: f\nseed: 1\npopulation:\n  kind: ratings_file\n  path: {name}\n"
            "mechanism: {kind: maxsense, epsilon: 1.0}\n" + (f"limits: {limits}\n" if limits else ""))


def ratings_refused(capsys, tmp_path, name: str, limits: dict | None = None) -> str:
    line = refused(capsys, tmp_path, ratings_scenario(tmp_path, name, limits), "population.path")
    assert f"{tmp_path / name}" in line
    return line


def test_a_ratings_file_over_the_size_limit_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    with open(tmp_path / "big.csv", "wb") as f:
        f.truncate(2 * 2 ** 30)  # 2 GiB of holes: nothing is written, and nothing may be read
    monkeypatch.setattr("recaudit.simulator.ratings._layout", lambda *a: pytest.fail("the file was read"))
    line = ratings_refused(capsys, tmp_path, "big.csv")
    assert "is 2 GiB, over limits.ratings_gb = 1" in line
    line = ratings_refused(capsys, tmp_path, "big.csv", {"ratings_gb": 1.5})
    assert "over limits.ratings_gb = 1.5" in line


def test_a_directory_is_not_a_missing_file(tmp_path, capsys):
    (tmp_path / "ratings").mkdir()
    assert "is a directory, not a ratings file" in ratings_refused(capsys, tmp_path, "ratings")


def test_an_unreadable_file_is_refused_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "r.csv").write_text("user,item,rating\na,b,4\n")

    def denied(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("recaudit.simulator.rating_formats.open", denied,
                        raising=False)  # root may read anything: pretend
    assert ratings_refused(capsys, tmp_path, "r.csv").endswith("r.csv: permission denied")


def test_a_file_not_in_utf8_is_refused_with_its_line(tmp_path, capsys):
    (tmp_path / "r.csv").write_bytes(b"user,item,rating\na,b,4\nc,\xe9,3\n")
    assert re.search(r"r\.csv:3: not UTF-8 text", ratings_refused(capsys, tmp_path, "r.csv"))


@pytest.mark.parametrize("text, sep", [("user item rating\na b 4\n", "spaces"), ("1 2 4 9\n1 3 4 9\n", "spaces"),
                                       ("userId;movieId;rating\n1;2;4\n", "semicolons")])
def test_the_wrong_separator_is_named_with_the_line(tmp_path, capsys, text, sep):
    (tmp_path / "r.csv").write_text(text)
    line = ratings_refused(capsys, tmp_path, "r.csv")
    assert re.search(rf"r\.csv:1: missing columns .*separated by {sep}, this format's by commas", line), line


def test_a_huge_bad_line_is_cut_to_a_readable_length(tmp_path, capsys):
    (tmp_path / "r.csv").write_text("user,item,rating\na,b,4\nc,d," + "9" * 5_000_000 + "x\n")
    line = ratings_refused(capsys, tmp_path, "r.csv")
    assert len(line) < 600 and "(cut: " in line


# ---------------------------------------------------------------- a requested epsilon the accountant rounds


def test_a_tiny_epsilon_is_reported_with_the_requested_value_and_why(tmp_path, capsys, quickstart_data):
    import json

    from tests.conftest import small_world

    quickstart_data["mechanism"]["epsilon"] = 1e-12
    path = write_text(tmp_path, scenario_text(small_world(quickstart_data, 400)))
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    claim = json.loads((tmp_path / "out" / "report.json").read_text())["claim"]
    assert claim["requested_epsilon"] == 1e-12 and claim["epsilon"] == pytest.approx(2 ** -33)
    assert "rounds every privacy loss up to its grid (2^-33" in claim["note"]
    assert "requested ε = 1e-12 per answer is accounted as 1.16e-10" in (tmp_path / "out" / "report.md").read_text()


# ---------------------------------------------------------------- a Dask address that is not a scheduler


def test_a_dask_address_answering_another_protocol_gets_a_clear_line(tmp_path, capsys, quickstart_data):
    import socket
    import threading

    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)

    def answer():  # a web server, say
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            client.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
            client.close()

    threading.Thread(target=answer, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
    from tests.conftest import small_world

    quickstart_data["executor"] = {"type": "dask", "address": address}
    path = write_text(tmp_path, scenario_text(small_world(quickstart_data, 400)))
    try:
        code, line = one_error(capsys, ["run", str(path), "--out", str(tmp_path / "out")])
    finally:
        server.close()
    assert code == 2 and line == f"executor.address: '{address}' answers, but not as a Dask scheduler (another " \
                                 "service listens on that port?)"


@pytest.mark.parametrize("trouble, expected", [
    ("loop", r"r\.csv: cannot read it \(Too many levels of symbolic links\)"),
    ("dangling", r"r\.csv: is a link to gone\.csv, which does not exist"),
    ("directory", r"r\.csv: is a directory, not a ratings file"),
    ("unreadable", r"r\.csv: permission denied"),
    ("missing", r"ratings file not found: .*r\.csv"),
    ("under_a_file", r"r\.csv: cannot read it \(Not a directory\)"),
    ("fifo", r"r\.csv: is not a regular file"),
])
@pytest.mark.parametrize("command", ["validate", "run"])
def test_every_kind_of_path_trouble_is_one_line(tmp_path, capsys, monkeypatch, trouble, expected, command):
    import os

    name = "r.csv"
    if trouble == "loop":
        os.symlink("r2.csv", tmp_path / "r.csv")
        os.symlink("r.csv", tmp_path / "r2.csv")
    elif trouble == "dangling":
        os.symlink("gone.csv", tmp_path / "r.csv")
    elif trouble == "directory":
        (tmp_path / "r.csv").mkdir()
    elif trouble == "unreadable":
        (tmp_path / "r.csv").write_text("user,item,rating\na,b,4\n")
        (tmp_path / "r.csv").chmod(0)
        if os.access(tmp_path / "r.csv", os.R_OK):  # root reads anything: pretend it cannot
            def denied(*args, **kwargs):
                raise PermissionError(13, "Permission denied")
            monkeypatch.setattr("recaudit.simulator.rating_formats.open", denied, raising=False)
    elif trouble == "under_a_file":
        (tmp_path / "f").write_text("")
        name = "f/r.csv"
    elif trouble == "fifo":
        os.mkfifo(tmp_path / "r.csv")
    line = refused(capsys, tmp_path, ratings_scenario(tmp_path, name), "population.path", command)
    assert re.search(expected, line), line
