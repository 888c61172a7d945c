"""Benchmark: the process pool's overhead per task, the audit's job sent with every task or once per worker.

Run with ``python benchmarks/pool_share.py [SCENARIO] [--tasks N] [--workers W]`` (default: the shipped
``maxsense-movielens-100k``, whose job holds the MovieLens-100K file's population: about 0.85 MB pickled; it
needs ``recaudit data fetch movielens-100k``). The scenario's audit job is built as ``recaudit run`` builds it
(stopped before its blocks), then ``N`` tasks that do nothing but read the job run through ``as_finished`` on
a ``processes`` executor of W workers, twice: the job passed with every task (what
``concurrent.futures.ProcessPoolExecutor`` does with a task's arguments) and passed as ``pool.share(job)``
(sent once per worker). Each is timed under ``flock /tmp/recaudit-bench.lock`` (wall, and CPU of this process
and its reaped workers); the table gives both, per task.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import pickle
import resource
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def audit_job(scenario: str):
    """The job ``recaudit run SCENARIO`` hands its design's blocks (captured before any block runs)."""
    import recaudit.audits.designs.base as base
    import recaudit.audits.designs.sequential_blocks as sequential
    from recaudit.audits.cli import main

    captured = {}

    def capture(block, job, *args, **kwargs):
        captured["job"] = job
        raise KeyboardInterrupt

    base.run_blocks = sequential.base.run_blocks = capture
    with tempfile.TemporaryDirectory() as out:
        main(["run", scenario, "--out", f"{out}/run", "--quiet"])
    return captured["job"]


def read(job, i: int) -> int:
    return i


def timed(job, tasks: int, workers: int, share: bool) -> tuple[float, float]:
    """(wall, CPU) seconds of ``tasks`` tasks reading ``job`` on a fresh pool (CPU: this process + its workers)."""
    from recaudit.audits.executors import as_finished, open_executor

    before = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    started = time.perf_counter()
    with open_executor("processes", workers=workers) as pool:
        sent = pool.share(job) if share else job
        assert sum(1 for _ in as_finished(pool, ((i, read, (sent, i)) for i in range(tasks)))) == tasks
    wall = time.perf_counter() - started
    after = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    cpu = sum(a.ru_utime + a.ru_stime - b.ru_utime - b.ru_stime for a, b in zip(after, before))
    return wall, cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="maxsense-movielens-100k")
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args(argv)
    job = audit_job(args.scenario)
    size = len(pickle.dumps(job))
    print(f"{args.scenario}: job {size / 1e6:.2f} MB pickled; {args.tasks} tasks on {args.workers} workers\n")
    print("| job sent | wall s | CPU s | wall ms / task | CPU ms / task | load |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    with open("/tmp/recaudit-bench.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for _ in range(args.repeats):
            for share in (False, True):
                load = os.getloadavg()[0]
                wall, cpu = timed(job, args.tasks, args.workers, share)
                print(f"| {'once per worker' if share else 'with every task'} | {wall:.2f} | {cpu:.2f} | "
                      f"{1000 * wall / args.tasks:.2f} | {1000 * cpu / args.tasks:.2f} | {load:.1f} |", flush=True)


if __name__ == "__main__":
    main()
