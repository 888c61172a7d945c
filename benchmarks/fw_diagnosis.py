"""Why private Frank–Wolfe's low-rank step adds nothing on MovieLens-100K: the signal against the noise, measured.

    python benchmarks/fw_diagnosis.py spectrum [--split 0]        # eigenvalues of the clipped centred Gram vs noise
    python benchmarks/fw_diagnosis.py mm --epsilons 1 5 20 --ranks 10 1 [--clean-betas 0.1 20]
    python benchmarks/fw_diagnosis.py rmse --epsilons 8 27 --row-bounds 1 3 --nuclear-scales 0.5 2 \
        --shift-scales 1 0 --iterations 10 [--split 0] [--out FILE.jsonl]

``spectrum``: for each ε, σ of the Gram release (the mechanism's own calibration, centring share 0.5), the noise's
spectral norm (2σ√n, and one measured draw), the top eigenvalues of the round-1 Gram ``W = Σ Y*_iᵀY*_i`` of the
clipped centred rows (at each L), the eigenvalue shift ``sqrt(σ log(n/β)) n^{1/4}``, and the cosine between the noisy
and exact top eigenvectors. ``rmse``: held-out RMSE of the engine's run (``measure_world``: the world alone) at each
combination of the knobs, beside the same run's private centring alone (the release's own statistics).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time

import numpy as np

from recaudit.audits.language.scenario import Scenario
from recaudit.audits.runner import measure_world
from recaudit.mechanisms import MECHANISMS, centring
from recaudit.mechanisms.matrix_completion import clip_rows, gram, symmetric_gaussian, top_eigenpair
from recaudit.simulator import datasets
from recaudit.simulator.ratings import load_ratings_cached

SCALE = (1.0, 5.0)


def data(split: int, top_items: int | None = None):
    return load_ratings_cached(datasets.find("movielens-100k"), test_fraction=0.2, seed=split, split="per_user",
                               top_items=top_items)


def mechanism(epsilon: float, **knobs):
    params = dict(epsilon=epsilon, delta=1e-6, iterations=10, row_bound=3.0, nuclear_scale=0.5, centre="private",
                  centre_share=0.5, min_rating=1, max_rating=5) | knobs
    return MECHANISMS["private_frank_wolfe"](**params)


def spectrum(args) -> None:
    train = data(args.split, args.top_items).train.astype(float)
    n = train.shape[1]
    effects = centring.exact(train, SCALE, 15.0)
    offsets = centring.offsets(train, effects.MAvg, 20.0)
    cent = centring.centred(train, effects.MAvg, offsets)
    norms = np.sqrt(np.asarray(cent.multiply(cent).sum(axis=1)).ravel())
    print(f"users {train.shape[0]}, items {n}, centred row norms: median {np.median(norms):.2f}, "
          f"p90 {np.quantile(norms, 0.9):.2f}, max {norms.max():.2f}")
    rng = np.random.default_rng(0)
    for L in args.row_bounds:
        W = gram(clip_rows(cent, L))
        top = np.linalg.eigvalsh(W)[::-1][:5]
        _, v = top_eigenpair(W)
        print(f"\nL = {L}: top eigenvalues of W = {np.array2string(top, precision=1)}; trace {np.trace(W):.1f}")
        print("| ε | σ | noise ‖N‖₂ (2σ√n) | measured ‖N‖₂ | λ₁(W) | λ₁/‖N‖₂ | shift | √λ₁(Ŵ) | cos(v̂, v) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for eps in args.epsilons:
            mech = mechanism(eps, row_bound=L)
            sigma = mech.noise.sigma
            noise = symmetric_gaussian(n, sigma, rng)
            measured = abs(np.linalg.eigvalsh(noise)[[0, -1]]).max()
            value, vh = top_eigenpair(W + noise)
            print(f"| {eps:g} | {sigma:.3g} | {2 * sigma * math.sqrt(n):.3g} | {measured:.3g} | {top[0]:.3g} | "
                  f"{top[0] / measured:.3f} | {mech.eigen_shift(n):.3g} | {math.sqrt(max(value, 0)):.3g} | "
                  f"{abs(vh @ v):.3f} |")


def rmse(args) -> None:
    out = open(args.out, "a") if args.out else None
    for eps, L, k, shift, iters in itertools.product(args.epsilons, args.row_bounds, args.nuclear_scales,
                                                     args.shift_scales, args.iterations):
        block = dict(kind=args.kind, delta=1e-6, iterations=iters, row_bound=L, nuclear_scale=k, centre="private",
                     centre_share=args.centre_share, min_rating=1, max_rating=5)
        if args.kind != "frank_wolfe":
            block |= {"epsilon": eps, "shift_scale": shift}
        scenario = Scenario.model_validate({
            "name": "fw-diagnosis", "seed": 2018, "panel": {}, "mechanism": block,
            "population": {"kind": "ratings_matrix", "dataset": "movielens-100k", "test_fraction": 0.2,
                           "split": "per_user", "split_seed": args.split, "max_rating": 5.0}
            | ({"top_items": args.top_items} if args.top_items else {}),
            "audit": {"design": "one_run", "method": "one-run", "trials": 100},
            "attack": {"kind": "subspace_alignment"}}, context={"world_only": True})
        started = time.process_time()
        u = measure_world(scenario)
        row = {"top_items": args.top_items, "epsilon": eps, "row_bound": L, "nuclear_scale": k, "shift_scale": shift,
               "iterations": iters,
               "kind": args.kind, "split": args.split, "rmse": u["rmse"], "centring_rmse": u.get("centring_rmse"),
               "bias_rmse": u.get("bias_rmse"), "mean_rmse": u.get("mean_rmse"),
               "cpu_seconds": round(time.process_time() - started, 1)}
        print(json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()


def mm(args) -> None:
    """McSherry–Mironov (Gaussian, per-rating ε) at each ε and rank: its RMSE beside its own global effects alone."""
    out = open(args.out, "a") if args.out else None
    for eps, rank, beta in itertools.product(args.epsilons, args.ranks, args.clean_betas):
        scenario = Scenario.model_validate({
            "name": "mm-diagnosis", "seed": 2018, "panel": {},
            "mechanism": {"kind": "mcsherry_mironov", "noise": "gaussian", "delta": 1e-6, "epsilon": eps,
                          "min_rating": 1.0, "max_rating": 5.0, "rank": rank, "clean_beta": beta},
            "population": {"kind": "ratings_matrix", "dataset": "movielens-100k", "test_fraction": 0.2,
                           "split": "per_user", "split_seed": args.split, "max_rating": 5.0},
            "audit": {"design": "one_run", "method": "one-run", "trials": 100},
            "attack": {"kind": "covariance_projection"}}, context={"world_only": True})
        u = measure_world(scenario)
        row = {"kind": "mcsherry_mironov", "epsilon": eps, "rank": rank, "clean_beta": beta, "split": args.split,
               "rmse": u["rmse"], "centring_rmse": u.get("centring_rmse"), "bias_rmse": u.get("bias_rmse"),
               "mean_rmse": u.get("mean_rmse")}
        print(json.dumps(row), flush=True)
        if out:
            out.write(json.dumps(row) + "\n")
            out.flush()


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("spectrum", "rmse", "mm"))
    p.add_argument("--ranks", type=int, nargs="+", default=[10])
    p.add_argument("--clean-betas", type=float, nargs="+", default=[0.1])
    p.add_argument("--split", type=int, default=0)
    p.add_argument("--epsilons", type=float, nargs="+", default=[1, 2, 5, 8, 20, 27])
    p.add_argument("--row-bounds", type=float, nargs="+", default=[3.0])
    p.add_argument("--nuclear-scales", type=float, nargs="+", default=[0.5])
    p.add_argument("--shift-scales", type=float, nargs="+", default=[1.0])
    p.add_argument("--iterations", type=int, nargs="+", default=[10])
    p.add_argument("--centre-share", type=float, default=0.5)
    p.add_argument("--kind", default="private_frank_wolfe")
    p.add_argument("--top-items", type=int, default=None, help="keep only the most rated items")
    p.add_argument("--out")
    args = p.parse_args(argv)
    {"spectrum": spectrum, "rmse": rmse, "mm": mm}[args.what](args)


if __name__ == "__main__":
    sys.exit(main())
