"""Benchmark: a 10^6-user MaxSense churn run against a bare SimPy arrive-wait-leave process.

Run with ``./dev bench`` (or ``python benchmarks/churn.py --users 1000000``).
Each case runs in its own subprocess so its peak memory (max RSS) is its own.
Prints a markdown table: seconds, users/s, peak RSS, and the ratio of
recaudit's users/s to bare SimPy's measured in the same run.
"""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def bare_simpy(users: int, rate: float, lifetime: float, seed: int) -> dict:
    """One SimPy process per user: arrive, wait out an exponential lifetime, leave."""
    import numpy as np
    import simpy

    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1 / rate, users)
    stays = rng.exponential(lifetime, users)
    env = simpy.Environment()
    present = [0]

    def user(stay):
        present[0] += 1
        yield env.timeout(stay)
        present[0] -= 1

    def arrivals():
        for gap, stay in zip(gaps, stays):
            yield env.timeout(gap)
            env.process(user(stay))

    start = time.perf_counter()
    env.process(arrivals())
    env.run()
    return {"seconds": time.perf_counter() - start, "users": users}


def maxsense_churn(users: int, rate: float, lifetime: float, seed: int) -> dict:
    """The full simulator: SBM users, churn, MaxSense queries and releases."""
    import numpy as np

    from recaudit.mechanisms import MaxSense
    from recaudit.simulator.churn import Churn, simulate
    from recaudit.simulator.population import SBMPopulation

    pop = SBMPopulation(n_items=200, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                        like_probability=[[0.9, 0.3], [0.6, 0.1]], ratings_per_user=10)
    catalogue = pop.catalogue(np.random.default_rng(seed))
    churn = Churn(arrival_rate=rate, mean_lifetime=lifetime, horizon=users / rate, query_interval=0.25,
                  release_interval=users / rate / 10)
    start = time.perf_counter()
    transcript = simulate(pop, catalogue, MaxSense(epsilon=1.0), churn, np.random.SeedSequence(seed))
    return {"seconds": time.perf_counter() - start, "users": int(transcript.n_users),
            "answered": int(transcript.n_answered_users)}


CASES = {"bare_simpy": bare_simpy, "maxsense_churn": maxsense_churn}


def _child(case: str, users: int, rate: float, lifetime: float, seed: int) -> None:
    result = CASES[case](users, rate, lifetime, seed)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=1_000_000)
    parser.add_argument("--rate", type=float, default=10_000.0)
    parser.add_argument("--lifetime", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--child", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.users, args.rate, args.lifetime, args.seed)
        return
    rows = {}
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--child", case, "--users", str(args.users),
                              "--rate", str(args.rate), "--lifetime", str(args.lifetime), "--seed", str(args.seed)],
                             check=True, capture_output=True, text=True, cwd=ROOT,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
        rows[case] = json.loads(out.stdout)
    base = rows["bare_simpy"]["users"] / rows["bare_simpy"]["seconds"]
    print("| case | users | seconds | users/s | peak RSS MB | users/s vs bare SimPy |")
    print("|---|---:|---:|---:|---:|---:|")
    for case, r in rows.items():
        speed = r["users"] / r["seconds"]
        print(f"| {case} | {r['users']:,} | {r['seconds']:.2f} | {speed:,.0f} | {r['peak_rss_mb']:.0f} | "
              f"{speed / base:.2f} |")


if __name__ == "__main__":
    main()
