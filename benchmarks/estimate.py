"""Benchmark: the cost estimate's time and memory against a measured run of the command a user types.

Run with ``./dev bench estimate [--measured FILE] [scenarios ...]`` (default: every shipped scenario).
Each scenario runs alone, as ``nice -n 10 /usr/bin/time -v recaudit run|grid|sweep SCENARIO --out TMP``
(the command its kind needs, in a fresh process); the table gives the estimated and measured CPU seconds
(user + system: the machine may be shared, and the estimate is for 2 cores) and the estimated and measured
peak memory (the largest resident set, interpreter included), with their ratios. ``--measured FILE`` keeps
each measurement in a JSON file and reuses it, so the estimate can be re-tabled without re-running
(``--table``: table the file, run nothing); ``--cpu S`` skips a scenario needing over S CPU seconds
(default 600). Scenarios run quickest estimate first.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audits.io.limits import estimate_cost, grid_cost, sweep_cost  # noqa: E402
from audits.io.scenario import Scenario, build, grid_points, load_scenario  # noqa: E402
from mechanisms import MECHANISMS  # noqa: E402


def estimate(path: Path) -> tuple[str, float, float]:
    """(command, estimated seconds, estimated bytes) of one scenario."""
    scenario = load_scenario(path)
    if scenario.sweep is not None:
        cost = sweep_cost(scenario, build(scenario.mechanism, MECHANISMS))
        return "sweep", cost["seconds"], cost["memory"]
    if scenario.grid is not None:
        points = [Scenario.model_validate(p.data, context={"base_dir": path.parent}) for p in grid_points(scenario)]
        cost = grid_cost([estimate_cost(p, build(p.mechanism, MECHANISMS)) for p in points])
        return "grid", cost["seconds"], cost["memory"]
    cost = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))
    return "run", cost["seconds"], cost["memory"]


def measure(command: str, path: Path, cpu: float) -> dict | None:
    """CPU seconds and peak resident bytes of ``recaudit COMMAND PATH`` (None: over ``cpu`` CPU seconds)."""
    with tempfile.TemporaryDirectory() as out:
        argv = ["nice", "-n", "10", "/usr/bin/time", "-v", sys.executable, "-m", "audits", command, str(path),
                "--out", out, "--quiet"]
        done = subprocess.run(["prlimit", f"--cpu={cpu:.0f}"] + argv, capture_output=True, text=True, cwd=ROOT,
                              env=os.environ | {"PYTHONPATH": str(ROOT)})
    fields = dict(re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|Maximum resident set size "
                             r"\(kbytes\)|Exit status): (\S+)$", done.stderr, re.M))
    return {"cpu": float(fields["User time (seconds)"]) + float(fields["System time (seconds)"]),
            "peak": float(fields["Maximum resident set size (kbytes)"]) * 1024, "exit": int(fields["Exit status"])} \
        if "Command terminated by signal" not in done.stderr else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--measured", type=Path, help="a JSON file of measurements, reused and added to")
    parser.add_argument("--cpu", type=float, default=600.0)
    parser.add_argument("--table", action="store_true", help="table the --measured file only, running nothing")
    args = parser.parse_args(argv)
    paths = args.scenarios or sorted((ROOT / "scenarios").glob("*.yaml"))
    measured = json.loads(args.measured.read_text()) if args.measured and args.measured.exists() else {}
    print("| scenario | command | estimated CPU s | measured CPU s | est / meas | estimated MB | peak MB | est / meas |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (command, seconds, memory), path in sorted(zip(map(estimate, paths), paths),
                                                   key=lambda e: (e[0][0] == "sweep", e[0][1])):
        key = str(path.resolve())
        if key not in measured and args.table:
            print(f"| {path.stem} | {command} | {seconds:.3g} | not measured | | {memory / 2**20:.3g} | | |")
            continue
        if key not in measured:
            measured[key] = measure(command, path, args.cpu)
            if args.measured:
                args.measured.write_text(json.dumps(measured, indent=1))
        m = measured[key]
        if m is None:
            print(f"| {path.stem} | {command} | {seconds:.3g} | skipped: over {args.cpu:.0f} CPU s | | "
                  f"{memory / 2**20:.3g} | | |", flush=True)
            continue
        failed = "" if m["exit"] in (0, 1) else f" (exit {m['exit']})"
        print(f"| {path.stem} | {command} | {seconds:.3g} | {m['cpu']:.3g}{failed} | {seconds / m['cpu']:.3g} | "
              f"{memory / 2**20:.3g} | {m['peak'] / 2**20:.3g} | {memory / m['peak']:.3g} |", flush=True)


if __name__ == "__main__":
    main()
