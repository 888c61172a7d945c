"""Benchmark: one long audit on a local Dask cluster against the process pool, same workers, same report.

Run with ``python benchmarks/dask_vs_processes.py [--trials N] [--workers W] [--out DIR]`` (or ``./dev bench
dask_vs_processes``). The audit is the shipped ``continual-naive`` (full runs of the continual-release
protocol, blocks of 250 runs) at ``--trials`` runs a world (default 60,000: about 10 minutes of wall time on 2
cores); it runs once with ``--executor processes --workers W`` and once with ``--executor dask --workers W`` (a
``LocalCluster`` of W workers x 1 thread), each as ``flock /tmp/recaudit-bench.lock /usr/bin/time -v recaudit
run ...`` so that timed runs of several users of one machine do not overlap. The table gives each run's wall
time, CPU seconds (user + system, workers included), the report's ``timing.total_seconds``, the load average
before and after, and the ratio of wall times; the reports must be identical apart from ``timing`` (exit 1
otherwise).
"""
from __future__ import annotations

import argparse
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


def run(path: Path, executor: str, workers: int, out: Path) -> dict:
    """``recaudit run`` under the bench lock: wall, CPU, the report's timing, load before and after."""
    argv = ["flock", LOCK, "sh", "-c", 'cat /proc/loadavg >&2; "$@"; code=$?; cat /proc/loadavg >&2; exit $code',
            "sh", "/usr/bin/time", "-v", sys.executable, "-m", "recaudit", "run", str(path), "--executor", executor,
            "--workers", str(workers), "--quiet", "--out", str(out)]
    done = subprocess.run(argv, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise SystemExit(f"{executor}: exit {done.returncode}\n{done.stderr}")
    loads = re.findall(r"^(\d+\.\d+) (\d+\.\d+) (\d+\.\d+) ", done.stderr, re.M)
    fields = dict(re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|Elapsed \(wall clock\) time "
                             r"\(h:mm:ss or m:ss\)): (\S+)$", done.stderr, re.M))
    wall = fields["Elapsed (wall clock) time (h:mm:ss or m:ss)"]
    report = json.loads((out / "report.json").read_text())
    return {"wall": sum(float(p) * 60 ** i for i, p in enumerate(reversed(wall.split(":")))),
            "cpu": float(fields["User time (seconds)"]) + float(fields["System time (seconds)"]),
            "total_seconds": report["timing"]["total_seconds"], "load_before": " ".join(loads[0]),
            "load_after": " ".join(loads[-1]), "report": {k: v for k, v in report.items() if k != "timing"}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=60_000, help="runs per world (default 60,000)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("runs/dask-vs-processes"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    path = scenario(args.trials, args.out)
    runs = {executor: run(path, executor, args.workers, args.out / executor) for executor in ("processes", "dask")}
    (args.out / "measured.json").write_text(json.dumps({k: {f: v for f, v in r.items() if f != "report"}
                                                        for k, r in runs.items()}, indent=1))
    print(f"{path.name}: {args.trials} runs a world, {args.workers} workers (dask: {args.workers} x 1 thread)\n")
    print("| executor | wall s | CPU s | `timing.total_seconds` | load before (1, 5, 15 min) | load after | "
          "wall / processes |")
    print("| --- | ---: | ---: | ---: | --- | --- | ---: |")
    for executor, r in runs.items():
        print(f"| {executor} | {r['wall']:.1f} | {r['cpu']:.1f} | {r['total_seconds']:.1f} | {r['load_before']} | "
              f"{r['load_after']} | {r['wall'] / runs['processes']['wall']:.3f} |")
    same = runs["processes"]["report"] == runs["dask"]["report"]
    print(f"\nreports identical apart from timing: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
