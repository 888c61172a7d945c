"""Benchmark: where a local Dask cluster's extra time goes, block by block, next to the process pool.

Run with ``python benchmarks/dask_side_by_side.py [--trials N] [--workers W] [--setting KEY=VALUE ...]``. The
shipped ``continual-naive`` at ``--trials`` runs a world (default 4,000: 16 blocks of 250 full runs a world) runs twice
*at the same time*, on the same cores: once on the process pool of W workers, once on a local Dask cluster of
W workers x 1 thread (``--setting`` overrides one of ``LOCAL_CLUSTER``'s Dask settings in
``audits/dask_cluster.py``, e.g. ``distributed.admin.tick.interval=20ms``, Dask's default). Run one after the
other, two audits on a shared machine see different loads (``benchmarks/dask_vs_processes.py`` tables how much
CPU the other processes took); side by side they see the same one, so what differs is the executor's own cost.
Each block is timed where it runs (its start and end, its thread's and its process's CPU, its process's context
switches) and where the client receives it. Both audits run while this script holds
``/tmp/recaudit-bench.lock``. The table compares the two; the scores must be identical (exit 1 otherwise).
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import resource
import subprocess
import sys
import time
from concurrent.futures import Future
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCK = "/tmp/recaudit-bench.lock"


def timed(fn, *args):
    """In a worker: ``fn(*args)`` and where its time went."""
    before = resource.getrusage(resource.RUSAGE_SELF)
    start, cpu, thread = time.time(), time.process_time(), time.thread_time()
    result = fn(*args)
    after = resource.getrusage(resource.RUSAGE_SELF)
    return result, {"pid": os.getpid(), "start": start, "stop": time.time(), "cpu": time.process_time() - cpu,
                    "thread": time.thread_time() - thread,
                    "switches": after.ru_nvcsw + after.ru_nivcsw - before.ru_nvcsw - before.ru_nivcsw}


class Timed:
    """An executor that runs each task through :func:`timed` and keeps its stamps (and when it came back)."""

    def __init__(self, inner):
        self.inner, self.stamps = inner, []

    @property
    def window(self):
        return self.inner.window

    def share(self, value):
        return self.inner.share(value)

    def submit(self, fn, /, *args):
        outer: Future = Future()

        def back(inner: Future) -> None:
            try:
                result, stamp = inner.result()
            except BaseException as exc:
                outer.set_exception(exc)
                return
            self.stamps.append(stamp | {"back": time.time()})
            outer.set_result(result)

        self.inner.submit(timed, fn, *args).add_done_callback(back)
        return outer


def one(executor: str, trials: int, workers: int, settings: list[str]) -> dict:
    """One audit on ``executor``, its blocks timed: a dict of what the table shows."""
    sys.path.insert(0, str(ROOT))
    import recaudit.audits.dask_cluster as dask_cluster
    import recaudit.audits.runner as runner
    from recaudit.audits.language.scenario import load_scenario

    for setting in settings:
        key, _, value = setting.partition("=")
        dask_cluster.LOCAL_CLUSTER[key] = value
    executors = []
    opened = runner.open_executor

    @contextlib.contextmanager
    def open_timed(*args, **kwargs):
        with opened(*args, **kwargs) as inner:
            executors.append(Timed(inner))
            yield executors[-1]

    runner.open_executor = open_timed
    scenario = load_scenario(ROOT / "scenarios" / "continual-naive.yaml")
    scenario.audit.trials = trials
    begun, cpu = time.time(), time.process_time()
    result = runner.run_scenario(scenario, executor_type=executor, workers=workers)
    wall, cpu = time.time() - begun, time.process_time() - cpu
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    stamps = executors[0].stamps
    gaps = []
    for pid in {s["pid"] for s in stamps}:
        mine = sorted((s for s in stamps if s["pid"] == pid), key=lambda s: s["start"])
        gaps += [b["start"] - a["stop"] for a, b in zip(mine, mine[1:])]
    mean = lambda key: float(np.mean([s[key] for s in stamps]))  # noqa: E731
    return {"wall": wall, "client_cpu": cpu, "cpu": cpu + children.ru_utime + children.ru_stime,
            "blocks": len(stamps), "block_cpu": mean("cpu"), "block_thread": mean("thread"),
            "block_wall": float(np.mean([s["stop"] - s["start"] for s in stamps])),
            "switches": mean("switches"), "gap_ms": 1000 * float(np.mean(gaps)),
            "back_ms": 1000 * float(np.mean([s["back"] - s["stop"] for s in stamps])),
            "first": min(s["start"] for s in stamps) - begun,
            "scores": [t.scores.tolist() for t in result.tests]}


ROWS = [("wall", "wall s", "{:.1f}"), ("cpu", "CPU s (every process)", "{:.1f}"),
        ("client_cpu", "of which the client's process (Dask: with the scheduler and nannies)", "{:.1f}"),
        ("block_cpu", "CPU s a block, its worker's process", "{:.3f}"),
        ("block_thread", "of which the block's own thread", "{:.3f}"),
        ("block_wall", "wall s a block", "{:.2f}"),
        ("switches", "context switches of its worker during a block", "{:.0f}"),
        ("gap_ms", "ms between a worker's blocks", "{:.1f}"),
        ("back_ms", "ms from a block's end to the client", "{:.1f}"),
        ("first", "s from the start to the first block", "{:.2f}")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4_000, help="runs per world (default 4,000)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE",
                        help="a Dask setting of the local cluster (repeatable)")
    parser.add_argument("--one", choices=["processes", "dask"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.trials, args.workers, args.setting)))
        return 0
    command = [sys.executable, __file__, "--trials", str(args.trials), "--workers", str(args.workers)]
    command += [f"--setting={s}" for s in args.setting]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        load = Path("/proc/loadavg").read_text().split()[:3]
        running = {e: subprocess.Popen(command + ["--one", e], stdout=subprocess.PIPE, text=True, env=env)
                   for e in ("processes", "dask")}
        out = {e: p.communicate()[0] for e, p in running.items()}
        load_after = Path("/proc/loadavg").read_text().split()[:3]
    if any(p.returncode for p in running.values()):
        raise SystemExit(f"a run failed: {', '.join(f'{e} exit {p.returncode}' for e, p in running.items())}")
    runs = {e: json.loads(o.splitlines()[-1]) for e, o in out.items()}
    p, d = runs["processes"], runs["dask"]
    print(f"continual-naive at {args.trials} runs a world ({p['blocks']} blocks), {args.workers} workers each, "
          f"side by side; load {' '.join(load)} before, {' '.join(load_after)} after"
          + (f"; Dask settings {', '.join(args.setting)}" if args.setting else "") + "\n")
    print("| | processes | dask | dask / processes |\n| --- | ---: | ---: | ---: |")
    for key, label, form in ROWS:
        ratio = f"{d[key] / p[key]:.3f}" if p[key] else ""
        print(f"| {label} | {form.format(p[key])} | {form.format(d[key])} | {ratio} |")
    same = p["scores"] == d["scores"]
    print(f"\nscores identical: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
