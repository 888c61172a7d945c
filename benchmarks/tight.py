"""Benchmark: CPU seconds of the batched white-box runs of the tight scenarios (issue 24), one process.

Run with ``./dev bench tight`` (or ``python benchmarks/tight.py --runs 20000``). For each scenario with
design ``batched_runs`` it times one block of ``--runs`` runs per world — the mechanism's ``panel_runs``
in both worlds and the attacks' scores and pair reach, as the design does — in CPU seconds of this
process (``time.process_time``; the machine may be shared), and extrapolates to the scenario's trials.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recaudit.audits.designs.batched_runs import batch_block  # noqa: E402
from recaudit.audits.language.scenario import load_scenario  # noqa: E402
from recaudit.audits.runner import audit_job  # noqa: E402
from recaudit.simulator.seeds import stream  # noqa: E402

SCENARIOS = ("scenarios/tight-private-frank-wolfe.yaml", "scenarios/tight-mcsherry-mironov.yaml")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20_000, help="runs per world in the timed block")
    args = parser.parse_args(argv)
    print("| scenario | runs per world timed | CPU s | µs per run (both worlds) | CPU s at the scenario's trials |")
    print("|---|---:|---:|---:|---:|")
    for path in SCENARIOS:
        scenario = load_scenario(path)
        job, policy, _ = audit_job(scenario)
        pair = policy.rows_for_runs(job.population, job.catalogue, 1, stream(job.root(), "target", 0))
        start = time.process_time()
        batch_block(job, pair, 0, 0, args.runs)
        cpu = time.process_time() - start
        print(f"| {scenario.name} | {args.runs:,} | {cpu:.2f} | {cpu / args.runs * 1e6:.0f} | "
              f"{cpu / args.runs * scenario.audit.trials:.0f} |")


if __name__ == "__main__":
    main()
