"""Issue 34.3, 34.5, 34.8: every connection has a deadline, nothing is left running, a Dask cluster is used.

* an address where a web server listens is refused within the stated timeout (it hung for minutes);
* SIGTERM, SIGINT and SIGKILL to a run's process leave no worker behind (they lived on with PPID 1), the
  run exits with its documented code within 10 s, and ``--resume`` finishes the report of an unbroken run;
* on a real ``LocalCluster`` the tasks in flight follow the cluster's threads, a cap holds, and a worker
  running other versions is refused in one line.
"""
from __future__ import annotations

import http.server
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from recaudit.audits.cli import main
from tests.conftest import SCENARIOS, one_error, scenario_text, small_world, write_text

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads the process table in /proc")


# ---------------------------------------------------------------- 34.3: a deadline on every connection


def test_a_web_server_at_the_dask_address_is_refused_within_the_timeout(tmp_path, capsys, quickstart_data,
                                                                       monkeypatch):
    pytest.importorskip("distributed")
    import recaudit.audits.dask_cluster as dask_cluster

    monkeypatch.setattr(dask_cluster, "DASK_CONNECT_TIMEOUT", 3)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"tcp://127.0.0.1:{server.server_address[1]}"
    quickstart_data["executor"] = {"type": "dask", "address": address}
    path = write_text(tmp_path, scenario_text(small_world(quickstart_data, 400)))
    started = time.monotonic()
    try:
        code, line = one_error(capsys, ["run", str(path), "--out", str(tmp_path / "out")])
    finally:
        server.shutdown()
        server.server_close()
    assert code == 2 and line == (f"executor.address: '{address}' did not answer as a Dask scheduler within 3 s "
                                  "(another service listens on that port?)")
    assert time.monotonic() - started < 3 + 3  # the deadline, and the moment to say so
    assert not (tmp_path / "out" / "progress").exists()  # nothing simulated


# ---------------------------------------------------------------- 34.5: nothing left running


def _children(pid: int) -> set[int]:
    """Every live descendant of ``pid`` (from /proc: each process's parent)."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pids: set[int]) -> set[int]:
    alive = set()
    for pid in pids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":  # a zombie has exited (only its parent's bookkeeping is left)
            alive.add(pid)
    return alive


def _scenario(tmp_path: Path) -> Path:
    data = yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text())
    data["churn"].update(arrival_rate=200, horizon=10.0, release_interval=5.0)
    data["audit"].update(trials=200_000, block_size=1_000, targets=2)  # 200 blocks a target, 20 units
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _report(out: Path) -> dict:
    report = json.loads((out / "report.json").read_text())
    report.pop("timing")
    return report


@pytest.mark.parametrize("executor, signum, code", [
    ("processes", signal.SIGTERM, 143),
    pytest.param("processes", signal.SIGINT, 130, marks=pytest.mark.slow),
    pytest.param("processes", signal.SIGKILL, -signal.SIGKILL, marks=pytest.mark.slow),
    pytest.param("dask", signal.SIGTERM, 143, marks=pytest.mark.slow),
    pytest.param("dask", signal.SIGINT, 130, marks=pytest.mark.slow),
    pytest.param("dask", signal.SIGKILL, -signal.SIGKILL, marks=pytest.mark.slow)])
def test_a_signalled_run_leaves_no_worker_and_resumes(tmp_path, executor, signum, code):
    if executor == "dask":
        pytest.importorskip("distributed")
    path = _scenario(tmp_path)
    run = [sys.executable, "-m", "recaudit", "run", str(path), "--executor", executor, "--workers", "2",
           "--quiet"]
    assert main(["run", str(path), "--quiet", "--out", str(tmp_path / "reference")]) == 0  # serial: same report
    out = tmp_path / "out"
    process = subprocess.Popen(run + ["--out", str(out)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        workers: set[int] = set()
        while len(workers) < 2 or not list((out / "progress").glob("block-*.npz")):  # working, one unit saved
            assert process.poll() is None and time.monotonic() < deadline, "the run ended before the signal"
            workers |= _children(process.pid)
            time.sleep(0.02)
        workers |= _children(process.pid)
        process.send_signal(signum)  # to the main process only, as `kill PID` does
        sent = time.monotonic()
        assert process.wait(timeout=10) == code
        while _alive(workers) and time.monotonic() - sent < 10:
            time.sleep(0.05)
        assert not _alive(workers), f"left running: {_alive(workers)}"
        assert time.monotonic() - sent < 10
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if code > 0:
        assert process.stderr.read().strip().endswith("(finished blocks are saved; --resume continues)")
    resumed = subprocess.run(run[:-1] + ["--out", str(out), "--resume"], capture_output=True, text=True)
    assert resumed.returncode == 0 and "resumed" in resumed.stderr
    assert _report(out) == _report(tmp_path / "reference")


# ---------------------------------------------------------------- 34.8: a real cluster, really used


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, protocol="tcp://",
                                  host="127.0.0.1", dashboard_address=None) as local:
        yield local


_LOCK, _STATE = threading.Lock(), {"running": 0, "most": 0}


def _task(i: int) -> int:
    """0.2 s of waiting, counted while it runs (the cluster's workers are threads of this process)."""
    with _LOCK:
        _STATE["running"] += 1
        _STATE["most"] = max(_STATE["most"], _STATE["running"])
    time.sleep(0.2)
    with _LOCK:
        _STATE["running"] -= 1
    return i


def _in_flight(executor, tasks: int) -> tuple[int, int]:
    """(the most tasks in flight, the most running at once) over ``tasks`` tasks of 0.2 s each."""
    from recaudit.audits.executors import as_finished

    _STATE.update(running=0, most=0)
    submitted = finished = most = 0

    def todo():
        nonlocal submitted
        for i in range(tasks):
            submitted += 1
            yield i, _task, (i,)

    for _ in as_finished(executor, todo()):
        most = max(most, submitted - finished)
        finished += 1
    return most, _STATE["most"]


def test_tasks_in_flight_follow_the_cluster_s_threads(cluster):
    from recaudit.audits.executors import open_executor

    with open_executor("dask", workers=1, address=cluster.scheduler_address) as executor:  # workers: not used
        assert executor.threads == 4 and executor.window == 8
        in_flight, running = _in_flight(executor, 24)
    assert in_flight == 8  # 2 per thread of the cluster (the scenario's `workers` was 1)
    assert running == 4  # every thread of the cluster busy at once
    with open_executor("dask", address=cluster.scheduler_address, max_in_flight=3) as executor:
        assert executor.window == 3
        in_flight, running = _in_flight(executor, 9)
    assert in_flight == 3 and running == 3


def _described(value) -> tuple[str, int]:
    return type(value).__name__, len(value)


@pytest.mark.parametrize("value", [{}, {"a": 1, "b": [2, 3]}, [], [1, 2, 3], (4, 5)])
def test_a_shared_container_reaches_tasks_whole(cluster, value):
    """``share`` gives one future for the whole value: a dict, list or tuple was scattered element by element (an
    empty dict crashed ``scatter``)."""
    from recaudit.audits.executors import open_executor

    with open_executor("dask", address=cluster.scheduler_address) as executor:
        shared = executor.share(value)
        assert executor.submit(_described, shared).result(timeout=60) == (type(value).__name__, len(value))
        assert executor.share(value) is shared


def _tick_ms(dask_worker=None, dask_scheduler=None) -> float:
    return (dask_worker or dask_scheduler).periodic_callbacks["tick"].callback_time


def test_a_local_cluster_s_event_loops_check_their_health_every_second_not_every_20_ms():
    """Each check woke a worker 50 times a second and took the GIL from its block (docs/guide/dask.md)."""
    pytest.importorskip("distributed")
    from recaudit.audits.executors import open_executor

    with open_executor("dask", workers=2) as executor:
        workers = executor.client.run(_tick_ms)  # in the workers' own (forked) processes
        scheduler = executor.client.run_on_scheduler(_tick_ms)
    assert len(workers) == 2 and set(workers.values()) == {1000} and scheduler == 1000


def test_a_worker_with_other_versions_is_refused_in_one_line(monkeypatch):
    distributed = pytest.importorskip("distributed")
    import numpy

    from recaudit.audits.dask_cluster import versions
    from recaudit.audits.executors import ExecutorUnavailable, open_executor

    real = versions()
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as other:  # a worker process of its own
        worker = next(iter(other.scheduler_info["workers"]))
        monkeypatch.setattr(numpy, "__version__", "0.0")  # this client's numpy, not the worker's
        with pytest.raises(ExecutorUnavailable) as refused:
            with open_executor("dask", address=other.scheduler_address):
                pytest.fail("a mismatched cluster was used")
    assert str(refused.value) == (f"executor.address: worker {worker} runs recaudit {real['recaudit']} with numpy "
                                  f"{real['numpy']}; this client runs recaudit {real['recaudit']} with numpy 0.0: "
                                  "install the same versions on every worker (docs/guide/dask.md)")


def test_a_run_on_a_cluster_sends_its_job_once_and_gives_the_serial_report(cluster, tmp_path, quickstart_data,
                                                                          monkeypatch):
    from recaudit.audits.dask_cluster import DaskExecutor

    data = small_world(quickstart_data, 4_000)
    data["audit"]["block_size"] = 250  # 16 blocks a target
    serial = write_text(tmp_path, scenario_text(data), "serial.yaml")
    data["executor"] = {"type": "dask", "address": cluster.scheduler_address}
    on_cluster = write_text(tmp_path, scenario_text(data), "cluster.yaml")
    sent = []
    share = DaskExecutor.share

    def counted(self, value):
        future = share(self, value)
        sent.append(future.key)
        return future

    monkeypatch.setattr(DaskExecutor, "share", counted)
    assert main(["run", str(on_cluster), "--out", str(tmp_path / "c"), "--quiet"]) == 0
    assert main(["run", str(serial), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    assert len(sent) == 1  # the job went to the cluster once (to every worker), 32 blocks named it
    assert _report(tmp_path / "c")["tests"] == _report(tmp_path / "s")["tests"]


# ---------------------------------------------------------------- the process pool: a job once per worker


class _Counted:
    """A job that counts how often this process pickles it (the pool pickles a task's arguments here)."""

    pickled = 0

    def __init__(self, payload: list[int]):
        self.payload = payload

    def __reduce__(self):
        type(self).pickled += 1
        return _Counted, (self.payload,)


def _read(job: _Counted, i: int) -> tuple[int, int]:
    import os

    return job.payload[i], os.getpid()


def test_the_process_pool_sends_a_shared_job_once_per_worker_not_once_a_task():
    from recaudit.audits.executors import as_finished, open_executor

    job = _Counted(list(range(100)))
    for share, most in ((True, 2), (False, 40)):  # shared: in the workers' initializer; not: with every task
        _Counted.pickled = 0
        with open_executor("processes", workers=2) as pool:
            sent = pool.share(job) if share else job
            results = dict(as_finished(pool, ((i, _read, (sent, i)) for i in range(40))))
        assert [results[i][0] for i in range(40)] == list(range(40))
        assert len({pid for _, pid in results.values()}) <= 2
        assert _Counted.pickled <= most and (share or _Counted.pickled == 40), (share, _Counted.pickled)
