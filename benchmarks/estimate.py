"""Benchmark: the scenario cost estimate's time term against measured run time.

Run with ``./dev bench estimate`` (or ``python benchmarks/estimate.py scenarios/a.yaml ...``; default:
every shipped scenario that is not a sweep). Each scenario is run in-process with the serial executor
and no output folder; the table gives the estimated seconds (``audits/io/limits.py``), the measured
seconds and their ratio. The estimate is meant to err high: every ratio should be at least 1 on a
2-core machine (a faster machine gives larger ratios).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from audits.io.limits import estimate_cost  # noqa: E402
from audits.io.scenario import build, load_scenario  # noqa: E402
from audits.runner import run_scenario  # noqa: E402
from mechanisms import MECHANISMS  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="*", type=Path)
    args = parser.parse_args(argv)
    paths = args.scenarios or sorted(p for p in (ROOT / "scenarios").glob("*.yaml")
                                     if load_scenario(p).sweep is None)
    print("| scenario | design | estimated s | measured s | estimated / measured |")
    print("|---|---|---:|---:|---:|")
    ratios = []
    for path in paths:
        scenario = load_scenario(path)
        cost = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))
        started = time.perf_counter()
        run_scenario(scenario, executor_kind="serial")
        measured = time.perf_counter() - started
        ratios.append(cost["seconds"] / measured)
        print(f"| {path.stem} | {scenario.audit.design_name} | {cost['seconds']:.3g} | {measured:.3g} | "
              f"{ratios[-1]:.3g} |", flush=True)
    print(f"\nsmallest ratio {min(ratios):.3g} (the estimate errs high when it is at least 1)")


if __name__ == "__main__":
    main()
