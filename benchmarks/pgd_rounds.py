"""Diagnosis of issue 9: why private PGD's held-out RMSE rises with ε (README, "Private matrix completion").

``python benchmarks/pgd_rounds.py --users 50000 --epsilons 0.5 1 2 5 20 100 1000 --seeds 0 1``
runs ``PrivateProjectedGradient`` through the engine on the synthetic rank-one world (400 items,
≤ 80 ratings, 1 % held out, L = ``--row-bound``) and prints, per run, the held-out RMSE and, per
round t, |⟨V_t, v⟩| (the published eigenvector against the truth's item vector) and |⟨V_t, V_{t−1}⟩|
(how much of the iterate, which lives in span V_{t−1}, the next projection keeps). ``--noiseless``
adds runs with the noise switched off (σ spent = 0) at each ``--iterations``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_run(users: int, epsilon: float, row_bound: float, iterations: int, seed: int, noiseless: bool) -> dict:
    import numpy as np

    from recaudit.audits.utility import completion_rmse
    from recaudit.mechanisms import PrivateProjectedGradient
    from recaudit.simulator.engine import run_protocol
    from recaudit.simulator.population import rank_one_world
    from recaudit.simulator.populations import MatrixPopulation
    from recaudit.simulator.schedules import Panel
    from recaudit.simulator.transcript import Recorder

    world = rank_one_world(users, 400, 80, np.random.default_rng(seed))
    population = MatrixPopulation.from_ratings(world.data, 0.0, 1.0)
    truth = world.item_factors.ravel() / np.linalg.norm(world.item_factors)
    pgd = PrivateProjectedGradient(epsilon=epsilon, delta=1e-6, iterations=iterations, row_bound=row_bound)
    if noiseless:
        pgd.noise = dataclasses.replace(pgd.noise, spent_sigma=0.0)
    catalogue = population.catalogue(np.random.default_rng(seed))
    transcript = run_protocol(pgd, population, catalogue, Panel(users, iterations), np.random.SeedSequence(seed),
                              recorder=Recorder(answers=False, outputs="all"))
    bases = [r.published["basis"][0] for r in transcript.rounds[1:]] + [transcript.outputs.basis[0]]
    return {"users": users, "seed": seed, "epsilon": None if noiseless else epsilon, "row_bound": row_bound,
            "iterations": iterations, "sigma": pgd.noise.spent,
            "rmse": completion_rmse(transcript, population.test)["rmse"],
            "align_truth": [round(float(abs(b @ truth)), 4) for b in bases],
            "keep_iterate": [round(float(abs(b @ a)), 4) for a, b in zip(bases, bases[1:])]}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50000)
    parser.add_argument("--epsilons", type=float, nargs="*", default=[0.5, 1, 2, 5, 20, 100, 1000])
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1])
    parser.add_argument("--row-bound", type=float, default=3.0)
    parser.add_argument("--iterations", type=int, nargs="*", default=[10])
    parser.add_argument("--noiseless", action="store_true")
    args = parser.parse_args(argv)
    for seed in args.seeds:
        for iterations in args.iterations:
            runs = [(eps, False) for eps in args.epsilons] + ([(1.0, True)] if args.noiseless else [])
            for eps, noiseless in runs:
                print(json.dumps(one_run(args.users, eps, args.row_bound, iterations, seed, noiseless)), flush=True)


if __name__ == "__main__":
    main()
