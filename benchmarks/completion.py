"""Benchmark: private matrix completion at the scale of Jain et al. (2018), and RMSE against ε.

``./dev bench completion`` (or ``python benchmarks/completion.py``) runs, each case in its own
subprocess so its peak memory (max RSS) is its own:

* ``product``: one sparse ``Aᵀ(A v)`` on the training matrix — the baseline every other time is
  divided by;
* ``private_fw_audit``: the whole private Frank–Wolfe protocol on the synthetic rank-one world
  (m users, n items, ≤ ξ ratings each, 1 % held out) with ``--canaries`` canary users inside the
  same run, then the one-run audit of the others view (``scenarios/matrix-completion-utility.yaml``
  at full size, through ``recaudit run``).

``--rmse`` adds the utility table: held-out RMSE of non-private FW, private FW and private PGD for
ε in ``--epsilons`` at δ = 1e-6 (mean over ``--repeats`` seeds). Prints markdown tables.
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


def product(users: int, items: int, per_user: int, seed: int) -> dict:
    import numpy as np

    from simulator.population import rank_one_world

    world = rank_one_world(users, items, per_user, np.random.default_rng(seed))
    a, v = world.data.train, np.ones(items)
    start = time.perf_counter()
    for _ in range(5):
        a.T @ (a @ v)
    return {"seconds": (time.perf_counter() - start) / 5}


def private_fw_audit(users: int, items: int, per_user: int, seed: int, canaries: int, iterations: int) -> dict:
    import yaml

    from audits.cli import main

    scenario = yaml.safe_load((ROOT / "scenarios" / "matrix-completion-utility.yaml").read_text())
    scenario["seed"] = seed
    scenario["population"].update(n_users=users, n_items=items, ratings_per_user=per_user)
    scenario["mechanism"]["iterations"] = iterations
    scenario["audit"]["trials"] = canaries
    out = Path(f"/tmp/recaudit-bench-completion-{seed}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    start = time.perf_counter()
    code = main(["run", str(out / "scenario.yaml"), "--out", str(out / "run"), "--quiet"])
    seconds = time.perf_counter() - start
    report = json.loads((out / "run" / "report.json").read_text())
    return {"seconds": seconds, "exit": code, "rmse": report["utility"]["rmse"],
            "zero_rmse": report["utility"]["zero_rmse"], "epsilon_lb": report["audit"]["epsilon_lb"],
            "verdict": report["verdict"]}


def rmse_table(users: int, items: int, per_user: int, epsilons: list[float], repeats: int,
               iterations: int, row_bound: float) -> list[dict]:
    """Held-out RMSE of each mechanism per ε (non-private FW once per seed), through the engine."""
    import numpy as np

    from audits.utility import completion_rmse
    from mechanisms import FrankWolfe, PrivateFrankWolfe, PrivateProjectedGradient
    from simulator.engine import run_protocol
    from simulator.population import MatrixPopulation, rank_one_world
    from simulator.schedules import Panel
    from simulator.transcript import Recorder

    rows = []
    for seed in range(repeats):
        world = rank_one_world(users, items, per_user, np.random.default_rng(seed))
        population = MatrixPopulation.from_ratings(world.data, 0.0, 1.0)
        catalogue = population.catalogue(np.random.default_rng(seed))
        truth_scale = float(np.linalg.norm(world.user_factors) * np.linalg.norm(world.item_factors)
                            / np.sqrt(users * items))
        reach = 1 - (1 - 1 / iterations) ** iterations  # FW with step 1/T reaches this share of the ball

        def rmse(mechanism):
            transcript = run_protocol(mechanism, population, catalogue, Panel(users, mechanism.iterations),
                                      np.random.SeedSequence(seed), recorder=Recorder(answers=False, outputs="all"))
            return completion_rmse(transcript, population.test)

        base = rmse(FrankWolfe(iterations=iterations, row_bound=1e9, nuclear_scale=truth_scale / reach))
        rows.append({"seed": seed, "mechanism": "frank_wolfe", "epsilon": None, "rmse": base["rmse"],
                     "zero_rmse": base["zero_rmse"]})
        for eps in epsilons:
            for name, mechanism in (
                    ("private_frank_wolfe", PrivateFrankWolfe(epsilon=eps, delta=1e-6, iterations=iterations,
                                                              row_bound=row_bound,
                                                              nuclear_scale=truth_scale / reach)),
                    ("private_projected_gradient", PrivateProjectedGradient(epsilon=eps, delta=1e-6,
                                                                            iterations=iterations,
                                                                            row_bound=row_bound))):
                rows.append({"seed": seed, "mechanism": name, "epsilon": eps, "rmse": rmse(mechanism)["rmse"]})
    return rows


def _child(case: str, kwargs: dict) -> None:
    result = {"product": product, "private_fw_audit": private_fw_audit}[case](**kwargs)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=500_000)
    parser.add_argument("--items", type=int, default=400)
    parser.add_argument("--per-user", type=int, default=80)
    parser.add_argument("--canaries", type=int, default=10_000)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--rmse", action="store_true", help="also the RMSE-vs-epsilon table")
    parser.add_argument("--rmse-users", type=int, default=100_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 5.0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--row-bound", type=float, default=1.0, help="L of the private mechanisms")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--kwargs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, json.loads(args.kwargs))
        return
    data = {"users": args.users, "items": args.items, "per_user": args.per_user, "seed": args.seed}
    cases = {"product": data,
             "private_fw_audit": data | {"canaries": args.canaries, "iterations": args.iterations}}
    results = {}
    for case, kwargs in cases.items():
        out = subprocess.run([sys.executable, __file__, "--child", case, "--kwargs", json.dumps(kwargs)],
                             capture_output=True, text=True, cwd=ROOT, check=True)
        results[case] = json.loads(out.stdout.strip().splitlines()[-1])
    unit = results["product"]["seconds"]
    print(f"rank-one world: {args.users:,} users x {args.items} items, <= {args.per_user} ratings each; "
          f"{args.iterations} FW iterations; {args.canaries:,} canaries\n")
    print("| case | seconds | x one AᵀAv | peak RSS MB | notes |\n|---|---:|---:|---:|---|")
    for case, r in results.items():
        notes = "" if case == "product" else (f"RMSE {r['rmse']:.4f} (predicting 0: {r['zero_rmse']:.4f}); "
                                              f"ε_LB {r['epsilon_lb']:.3f}, {r['verdict']}")
        print(f"| {case} | {r['seconds']:.3g} | {r['seconds'] / unit:,.0f} | {r['peak_rss_mb']:,.0f} | {notes} |")
    if args.rmse:
        import pandas as pd

        table = pd.DataFrame(rmse_table(args.rmse_users, args.items, args.per_user, args.epsilons, args.repeats,
                                        args.iterations, args.row_bound))
        print(f"\nheld-out RMSE, {args.rmse_users:,} users, δ = 1e-6, L = {args.row_bound:g}, "
              f"mean over {args.repeats} seeds\n")
        means = table.groupby(["mechanism", "epsilon"], dropna=False)["rmse"].mean()
        baseline = means["frank_wolfe"].iloc[0]
        print(f"non-private Frank-Wolfe: {baseline:.4f}; predicting 0: {table['zero_rmse'].dropna().mean():.4f}\n")
        print("| ε | private FW | private PGD |\n|---:|---:|---:|")
        for eps in args.epsilons:
            print(f"| {eps:g} | {means['private_frank_wolfe'][eps]:.4f} | "
                  f"{means['private_projected_gradient'][eps]:.4f} |")


if __name__ == "__main__":
    main()
