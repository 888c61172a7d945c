"""Benchmark: what an audit design costs, in protocol runs and seconds, measured in one process.

Run with ``./dev bench designs`` (or ``python benchmarks/designs.py --canaries 10000``).
On one MaxSense world it times

* the world's protocol run alone (the baseline: what one run of the protocol costs);
* the one-run design: the same run with ``--canaries`` canaries inside it, then their scores and bound;
* the full-runs design: ``--full-runs`` whole protocol runs of the same world with a target inserted,

and prints a markdown table with each time, the one-run audit's cost in
baseline runs, and the time ``canaries`` separate full runs would take
(extrapolated from the measured per-run time) against the one-run audit's.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recaudit.audits.designs import AuditJob  # noqa: E402
from recaudit.audits.designs.full_runs import whole_run  # noqa: E402
from recaudit.audits.designs.one_run import OneRunCanaries  # noqa: E402
from recaudit.audits.stats.estimators import OneRun  # noqa: E402
from recaudit.attacks import LikelihoodRatioAttack  # noqa: E402
from recaudit.mechanisms import MaxSense  # noqa: E402
from recaudit.simulator.churn import Churn  # noqa: E402
from recaudit.simulator.engine import run_protocol  # noqa: E402
from recaudit.audits.designs.pairs import UserReplace  # noqa: E402
from recaudit.simulator.population import SBMPopulation  # noqa: E402
from recaudit.simulator.seeds import child_seed  # noqa: E402
from recaudit.simulator.transcript import Recorder  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=10_000)
    parser.add_argument("--full-runs", type=int, default=200, help="full runs timed (per-run cost)")
    parser.add_argument("--arrival-rate", type=float, default=2_000.0)
    parser.add_argument("--horizon", type=float, default=25.0)
    args = parser.parse_args(argv)

    population = SBMPopulation(n_items=100, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                               like_probability=[[0.9, 0.3], [0.6, 0.1]], ratings_per_user=10)
    root = np.random.SeedSequence(20261122)
    catalogue = population.catalogue(np.random.default_rng(child_seed(root, "catalogue")))
    churn = Churn(arrival_rate=args.arrival_rate, mean_lifetime=1.0, horizon=args.horizon, query_interval=0.25,
                  release_interval=5.0)
    mechanism = MaxSense(epsilon=1.0)
    world = child_seed(root, "world")
    job = AuditJob(mechanism, population, catalogue, churn, (LikelihoodRatioAttack(),), mechanism.claim,
                   "messages", 1, 1, 2)

    start = time.perf_counter()
    base = run_protocol(mechanism, population, catalogue, churn, world, recorder=Recorder())
    baseline = time.perf_counter() - start

    start = time.perf_counter()
    design = OneRunCanaries()
    inserted = design.inserts(job, UserReplace(), args.canaries)
    transcript = run_protocol(mechanism, population, catalogue, churn, world, recorder=Recorder(),
                              inserted=inserted)
    output = design.scores(job, UserReplace(), 1, args.canaries, args.canaries, transcript, None, None,
                           lambda _: None)
    estimate = OneRun().estimate(output.runs[0].scores[0], output.runs[0].worlds, mechanism.claim, 0.05)
    one_run = time.perf_counter() - start

    pair = UserReplace().rows_for_runs(population, catalogue, 1, np.random.default_rng(3))
    start = time.perf_counter()
    for i in range(args.full_runs):
        whole_run(job, pair, i % 2, child_seed(root, "full", i))
    per_full_run = (time.perf_counter() - start) / args.full_runs

    print(f"MaxSense world: {base.n_users:,} users over {len(base.rounds)} rounds; "
          f"{args.canaries:,} canaries; one-run ε_LB = {estimate.epsilon_lb:.3f} (claim 1, 95%)\n")
    print("| what | seconds | in baseline runs |")
    print("|---|---:|---:|")
    print(f"| baseline: one protocol run of the world | {baseline:.3f} | 1.00 |")
    print(f"| one-run audit: the run with {args.canaries:,} canaries, scores, bound | {one_run:.3f} | "
          f"{one_run / baseline:.2f} |")
    print(f"| one full run (mean of {args.full_runs}) | {per_full_run:.4f} | {per_full_run / baseline:.2f} |")
    print(f"| {args.canaries:,} full runs (extrapolated) | {per_full_run * args.canaries:.1f} | "
          f"{per_full_run * args.canaries / baseline:.0f} |")
    print(f"\n{args.canaries:,} canaries in one run cost {one_run / baseline:.2f} protocol runs; as separate "
          f"runs they would cost {per_full_run * args.canaries / one_run:.0f}x as long.")


if __name__ == "__main__":
    main()
