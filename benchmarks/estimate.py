"""Benchmark: the cost estimate's time and memory against a measured run of the command a user types.

Run with ``./dev bench estimate [--measured FILE] [scenarios ...]`` (default: every shipped scenario).
Each scenario runs alone, as ``nice -n 10 /usr/bin/time -v recaudit run|grid|sweep SCENARIO --out TMP``
(the command its kind needs, in a fresh process); the table gives the estimated and measured CPU seconds
(user + system: the machine may be shared, and the estimate is for 2 cores) and the estimated and measured
peak memory (the largest resident set, interpreter included), with their ratios. ``--measured FILE`` keeps
each measurement in a JSON file and reuses it, so the estimate can be re-tabled without re-running
(``--table``: table the file, run nothing); ``--cpu S`` skips a scenario needing over S CPU seconds
(default 600). Scenarios run quickest estimate first. ``--fit`` then prices the time estimate's kinds of work
(``recaudit.audits.language.limits.SECONDS_PER``) from the measured rows: a linear programme, the smallest sum of
estimated /
measured with every estimate at least ``--margin`` (default 1.25) times its measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recaudit.audits.language.limits import (SECONDS_PER, curve_work, estimate_cost, grid_cost, protocol_work,  # noqa: E402
                               sweep_cost, world_facts)
from recaudit.audits.language.scenario import Scenario, build, grid_points, load_scenario  # noqa: E402
from recaudit.mechanisms import MECHANISMS  # noqa: E402


#: extreme valid variants of shipped scenarios (``--extremes DIR``), each pushing one kind of work the estimate
#: counts: name -> (shipped scenario, {dotted field: value})
EXTREMES = {
    "qs-horizon1": ("quickstart", {"churn.horizon": 1.0, "churn.release_interval": 1.0}),  # the command alone
    "qs-arrivals1e5": ("quickstart", {"churn.arrival_rate": 1e5, "churn.horizon": 20.0}),  # a world's cells
    "qs-rounds4000": ("quickstart", {"churn.arrival_rate": 5.0, "churn.horizon": 1000.0}),  # rounds
    "qs-trials1e6": ("quickstart", {"audit.trials": 1_000_000, "audit.block_size": 1_000_000}),  # replayed trials
    "qs-block1-trials1e4": ("quickstart", {"audit.trials": 10_000, "audit.block_size": 1}),  # blocks
    "qs-items1e4-trials2e4": ("quickstart", {"population.n_items": 10_000, "churn.horizon": 2.0,
                                             "churn.release_interval": 1.0, "audit.trials": 20_000}),  # items
    "pfw-full100-items50": ("private-frank-wolfe", {"population.n_items": 50, "population.n_users": 60,
                                                    "audit.trials": 100, "audit.block_size": 100}),  # full runs
    "fw-items2000": ("frank-wolfe", {"population.n_items": 2000, "population.n_users": 2000}),  # a Gram's work
    "mc-items1500": ("matrix-completion-utility", {"population.n_items": 1500, "population.n_users": 5000}),
    "mc-items4000": ("matrix-completion-utility", {"population.n_items": 4000, "population.n_users": 5000,
                                                   "audit.trials": 100}),  # n^2 work per round
    "mc-items4000-canaries1e4": ("matrix-completion-utility", {"population.n_items": 4000, "population.n_users": 5000,
                                                               "audit.trials": 10_000}),  # canaries are users
    "mm-items400-full100": ("mcsherry-mironov", {"population.n_items": 400, "audit.trials": 100,
                                                 "audit.block_size": 100}),  # n^3 eigen-solves in full runs
    "xj-items200": ("xin-jaakkola", {"population.n_items": 200}),  # EM and PMD
    "pp-items1000": ("pairwise-preference", {"population.n_items": 1000, "churn.horizon": 20.0}),  # n^2 state
    "sp2-arrivals200-trials100": ("sp2", {"churn.arrival_rate": 200.0, "audit.trials": 100}),  # retraining
    "tpgd-items30-trials2e4": ("tight-private-projected-gradient", {"population.n_items": 30, "audit.trials": 20_000,
                                                                     "audit.block_size": 10_000}),  # batched runs
    "tpgd-items2-trials5e5": ("tight-private-projected-gradient", {  # a batched run's floor: tiny runs, one block
        "population.n_items": 2, "population.ratings_per_user": 1, "audit.trials": 500_000,
        "audit.block_size": 500_000}),
}


def write_extremes(folder: Path) -> list[Path]:
    """Write the ``EXTREMES`` scenarios into ``folder``; their paths."""
    import yaml
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (base, changes) in EXTREMES.items():
        data = yaml.safe_load((ROOT / "scenarios" / f"{base}.yaml").read_text())
        data["name"] = name
        for field, value in changes.items():
            section, key = field.split(".")
            data[section][key] = value
        paths.append(folder / f"{name}.yaml")
        paths[-1].write_text(yaml.safe_dump(data, sort_keys=False))
    return paths


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


def work(path: Path) -> dict[str, float]:
    """The work the time estimate counts for ``recaudit run|grid|sweep PATH``, by kind (``SECONDS_PER``)."""
    scenario = load_scenario(path)
    if scenario.sweep is not None:
        cost = sweep_cost(scenario, build(scenario.mechanism, MECHANISMS))
        curve = curve_work(scenario.sweep, int(cost["n_items"]), cost["checkpoints"])
        return {"commands": 1.0} | {kind: cost["curves"] * count for kind, count in curve.items()}
    points = ([Scenario.model_validate(p.data, context={"base_dir": path.parent}) for p in grid_points(scenario)]
              if scenario.grid is not None else [scenario])
    total = {kind: 0.0 for kind in SECONDS_PER} | {"commands": 1.0 - len(points)}  # a grid's command counts once
    for point in points:
        cost = estimate_cost(point, build(point.mechanism, MECHANISMS), base_dir=path.parent)
        world, _ = world_facts(point, path.parent)
        for part in ({"commands": 1.0}, *protocol_work(point, cost, world.n_items if world else 1)):
            for kind, count in part.items():
                total[kind] += count
    return total


def fit(works: list[dict[str, float]], measured: list[float], margin: float, bounds: list[bool]) -> dict[str, float]:
    """Prices of each kind of work: the smallest sum of estimated / measured, each estimate >= margin x measured.

    A row whose estimate is only an upper bound (``bounds``: a sweep's curves at their worst case) is a
    constraint only, left out of the sum."""
    from scipy.optimize import linprog
    kinds = list(SECONDS_PER)
    counts = np.array([[w.get(k, 0.0) for k in kinds] for w in works])
    seconds = np.array(measured)
    scale = counts.max(axis=0)
    scale[scale == 0] = 1.0  # a kind no row counts: priced 0
    unit = counts / scale  # well-conditioned columns
    typical = ~np.array(bounds)
    done = linprog((unit[typical] / seconds[typical, None]).sum(axis=0), A_ub=-unit, b_ub=-margin * seconds,
                   bounds=[(0, None)] * len(kinds), method="highs")
    if not done.success:
        raise SystemExit(f"no fit: {done.message}")
    return {k: float(x / s) for k, x, s in zip(kinds, done.x, scale)}


def tree_pss(root: int) -> int:
    """Proportional set size (bytes) of process ``root`` and its descendants, read from /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        try:
            parents[int(entry.name)] = int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError):  # not a process, or gone
            continue
    tree, frontier = set(), [root]
    while frontier:
        tree.update(frontier)
        frontier = [pid for pid, parent in parents.items() if parent in frontier and pid not in tree]
    total = 0
    for pid in tree:
        try:
            total += int(re.search(r"^Pss:\s+(\d+) kB", Path(f"/proc/{pid}/smaps_rollup").read_text(), re.M)[1]) * 1024
        except (OSError, TypeError):
            continue
    return total


def measure(command: str, path: Path, cpu: float) -> dict | None:
    """CPU seconds and peak memory of ``recaudit COMMAND PATH`` (None: over ``cpu`` CPU seconds).

    CPU: user + system of the command and its worker processes. Peak: the larger of the largest process's
    resident set and the process tree's summed proportional set size, sampled every 0.2 s (workers included).
    """
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryFile("w+") as err:
        argv = ["nice", "-n", "10", "/usr/bin/time", "-v", sys.executable, "-m", "recaudit", command, str(path),
                "--out", out, "--quiet"]
        child = subprocess.Popen(["prlimit", f"--cpu={cpu:.0f}"] + argv, stdout=subprocess.DEVNULL, stderr=err,
                                 cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})
        pss = 0
        while child.poll() is None:
            pss = max(pss, tree_pss(child.pid))
            time.sleep(0.2)
        err.seek(0)
        stderr = err.read()
    fields = dict(re.findall(r"^\s*(User time \(seconds\)|System time \(seconds\)|Maximum resident set size "
                             r"\(kbytes\)|Exit status): (\S+)$", stderr, re.M))
    if "Command terminated by signal" in stderr:
        return None
    return {"cpu": float(fields["User time (seconds)"]) + float(fields["System time (seconds)"]),
            "peak": max(float(fields["Maximum resident set size (kbytes)"]) * 1024, pss), "pss": pss,
            "exit": int(fields["Exit status"])}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    parser.add_argument("--measured", type=Path, help="a JSON file of measurements, reused and added to")
    parser.add_argument("--cpu", type=float, default=600.0)
    parser.add_argument("--table", action="store_true", help="table the --measured file only, running nothing")
    parser.add_argument("--extremes", type=Path, help="write the extreme variants (EXTREMES) here and measure them")
    parser.add_argument("--fit", action="store_true", help="fit SECONDS_PER to the measured rows, print it")
    parser.add_argument("--margin", type=float, default=1.25, help="with --fit: each estimate >= margin x measured")
    args = parser.parse_args(argv)
    paths = args.scenarios or ([] if args.extremes else sorted((ROOT / "scenarios").glob("*.yaml")))
    paths += write_extremes(args.extremes) if args.extremes else []
    measured = json.loads(args.measured.read_text()) if args.measured and args.measured.exists() else {}
    print("| scenario | command | estimated CPU s | measured CPU s | est / meas | estimated MB | peak MB "
          "| est / meas |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    rows = []  # (path, measured CPU s, whether its estimate is a worst case) of the runs that finished
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
        if not failed:
            rows.append((path, m["cpu"], command == "sweep"))
        print(f"| {path.stem} | {command} | {seconds:.3g} | {m['cpu']:.3g}{failed} | {seconds / m['cpu']:.3g} | "
              f"{memory / 2**20:.3g} | {m['peak'] / 2**20:.3g} | {memory / m['peak']:.3g} |", flush=True)
    if args.fit and rows:
        works = [work(path) for path, _, _ in rows]
        prices = fit(works, [cpu for _, cpu, _ in rows], args.margin, [bound for _, _, bound in rows])
        print("\nSECONDS_PER = {" + ", ".join(f'"{k}": {v:.3g}' for k, v in prices.items()) + "}")
        for (path, cpu, _), w in sorted(zip(rows, works), key=lambda r: r[0][0].stem):
            fitted = sum(prices[k] * c for k, c in w.items())
            print(f"{path.stem:40s} measured {cpu:8.3g} s, fitted estimate {fitted:8.3g} s ({fitted / cpu:.2f}), "
                  f"now {sum(SECONDS_PER[k] * c for k, c in w.items()) / cpu:.2f}")


if __name__ == "__main__":
    main()
