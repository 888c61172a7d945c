"""Benchmark: the scenario cost estimate's time and memory terms against a measured run.

Run with ``./dev bench estimate`` (or ``python benchmarks/estimate.py scenarios/a.yaml ...``; default:
every shipped scenario that is not a sweep). Each scenario runs in a fresh process with the serial
executor and no output folder; the table gives the estimated and measured seconds and peak memory
(the process's maximum resident set, interpreter included) and their ratios. The estimate is meant
to err high: every time ratio should be at least 1 on a 2-core machine (a faster machine gives
larger ratios); the memory estimate counts the run's arrays, not the ~100 MB interpreter.
"""
from __future__ import annotations

import argparse
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audits.io.limits import estimate_cost  # noqa: E402
from audits.io.scenario import build, load_scenario  # noqa: E402
from audits.runner import run_scenario  # noqa: E402
from mechanisms import MECHANISMS  # noqa: E402


def measure(path: Path) -> tuple[float, float, float, float]:
    """(estimated s, measured s, estimated bytes, peak resident bytes) of one scenario, run here."""
    scenario = load_scenario(path)
    cost = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))
    started = time.perf_counter()
    run_scenario(scenario, executor_kind="serial")
    measured = time.perf_counter() - started
    return cost["seconds"], measured, cost["memory"], resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.scenarios or sorted(p for p in (ROOT / "scenarios").glob("*.yaml")
                                     if load_scenario(p).sweep is None)
    print("| scenario | estimated s | measured s | estimated / measured | estimated MB | peak MB |")
    print("|---|---:|---:|---:|---:|---:|")
    ratios = []
    for path in paths:
        with ProcessPoolExecutor(max_workers=1) as pool:  # a fresh process: its own peak memory
            est, measured, est_bytes, peak = pool.submit(measure, path).result()
        ratios.append(est / measured)
        print(f"| {path.stem} | {est:.3g} | {measured:.3g} | {ratios[-1]:.3g} | {est_bytes / 2**20:.3g} | "
              f"{peak / 2**20:.3g} |", flush=True)
    print(f"\nsmallest time ratio {min(ratios):.3g}, largest {max(ratios):.3g} (the estimate errs high when "
          "it is at least 1)")


if __name__ == "__main__":
    main()
