"""Benchmark: one long audit on a local Dask cluster against the process pool, same workers, same report.

Run with ``python benchmarks/dask_vs_processes.py [--trials N] [--workers W] [--out DIR]`` (or ``./dev bench
dask_vs_processes``). The audit is the shipped ``continual-naive`` (full runs of the continual-release
protocol, blocks of 250 runs) at ``--trials`` runs a world (default 60,000: 4-6 minutes of wall time on 2
quiet cores, about 10 on loaded ones); it runs once with ``--executor processes --workers W`` and once with
``--executor dask --workers W`` (a ``LocalCluster`` of W workers x 1 thread), each as ``/usr/bin/time -v
recaudit run ...``, both while this script holds ``/tmp/recaudit-bench.lock`` (taken once for the pair, so
that no other timed run of the machine's users comes between them). ``--order dask,processes`` runs Dask
first. The table gives each run's wall time, CPU seconds (user + system, workers included), the report's
``timing.total_seconds``, the load average before and after, the CPU the machine's other processes used
meanwhile (in cores: from ``/proc/stat``'s busy time less the run's own CPU; on 2 cores what they take the
run has not), and the ratio of wall times; the reports must be identical apart from ``timing`` (exit 1
otherwise).
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
LOCK = "/tmp/recaudit-bench.lock"


def scenario(trials: int, folder: Path) -> Path:
    data = yaml.safe_load((ROOT / "scenarios" / "continual-naive.yaml").read_text())
    data["name"] = f"continual-naive-{trials}"
    data["audit"]["trials"] = trials
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def busy_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``: all but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def run(path: Path, executor: str, workers: int, out: Path) -> dict:
    """``recaudit run`` (the caller holds the bench lock): wall, CPU, the report's timing, load before and after,
    the other processes' CPU meanwhile."""
    argv = ["sh", "-c", 'cat /proc/loadavg >&2; "$@"; code=$?; cat /proc/loadavg >&2; exit $code',
            "sh", "/usr/bin/time", "-v", sys.executable, "-m", "recaudit", "run", str(path), "--executor", executor,
            "--workers", str(workers), "--quiet", "--out", str(out)]
    busy = busy_seconds()
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    busy = busy_seconds() - busy
    if done.returncode != 0:
        raise SystemExit(f"{executor}: exit {done.returncode}\n{done.stderr}")
    loads = re.findall(r"^(\d+\.\d+) (\d+\.\d+) (\d+\.\d+) ", done.stderr, re.M)
    fields = dict(re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|Elapsed \(wall clock\) time "
                             r"\(h:mm:ss or m:ss\)): (\S+)$", done.stderr, re.M))
    wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"]
    report = json.loads((out / "report.json").read_text())
    seconds = sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":"))))
    cpu = float(fields["User time (seconds)"]) + float(fields["System time (seconds)"])
    return {"wall": seconds, "cpu": cpu, "others_cores": max(0.0, busy - cpu) / seconds,
            "total_seconds": report["timing"]["total_seconds"], "load_before": " ".join(loads[0]),
            "load_after": " ".join(loads[-1]), "report": {k: v for k, v in report.items() if k != "timing"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60_000, help="runs per world (default 60,000)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/dask-vs-processes"))
    parser.add_argument("--order", choices=["processes,dask", "dask,processes"], default="processes,dask",
                        help="which runs first (default processes,dask)")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = scenario(args.trials, args.out)
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # both runs under one hold: no other timed run between them
        runs = {executor: run(path, executor, args.workers, args.out / executor)
                for executor in args.order.split(",")}
    runs = {executor: runs[executor] for executor in ("processes", "dask")}
    (args.out / "measured.json").write_text(json.dumps({k: {f: v for f, v in r.items() if f != "report"}
                                                        for k, r in runs.items()}, indent=1))
    print(f"{path.name}: {args.trials} runs a world, {args.workers} workers (dask: {args.workers} x 1 thread)\n")
    print("| executor | wall s | CPU s | `timing.total_seconds` | load before (1, 5, 15 min) | load after | "
          "other processes' CPU (cores) | wall / processes |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: | ---: |")
    for executor, r in runs.items():
        print(f"| {executor} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['total_seconds']:.1f} | {r['load_before']} | "
              f"{r['load_after']} | {r['others_cores']:.2f} | {r['wall'] / runs['processes']['wall']:.3f} |")
    same = runs["processes"]["report"] == runs["dask"]["report"]
    print(f"\nreports identical apart from timing: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
