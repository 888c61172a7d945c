"""Benchmark: private matrix completion at the scale of Jain et al. (2018), and RMSE against ε.

``./dev bench completion`` (or ``python benchmarks/completion.py``) runs, each case in its own
subprocess so its peak memory (max RSS) is its own:

* ``product``: one sparse ``Aᵀ(A v)`` on the training matrix — the baseline every other time is
  divided by;
* ``private_fw_audit``: the whole private Frank–Wolfe protocol on the synthetic rank-one world
  (m users, n items, ≤ ξ ratings each, 1 % held out) with ``--canaries`` canary users inside the
  same run, then the one-run audit of the others view (``scenarios/matrix-completion-utility.yaml``
  at full size, through ``recaudit run``).

``--rmse`` adds (``--rmse-only`` runs only) the utility study: held-out RMSE of non-private FW,
private FW, private PGD and McSherry–Mironov (per-rating ε; ε/ξ per rating, per user by group
privacy; and calibrated to (ε, δ) per user from its per-user sensitivities) for ε in ``--epsilons`` at δ = 1e-6 over
``--repeats`` seeds, and with
``--movielens-users N`` on a generated MovieLens-format file; writes rmse.md, rmse.json, rmse.png
and rows.jsonl (rows as they finish) to ``--out``. Prints markdown tables. ``--row-bounds L…``
runs only the row-bound study: non-private FW with rows clipped to each L (the bias of the
projection) and private FW at each ε (the noise, σ ∝ L²), ``--rmse-users`` users.
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

    from recaudit.simulator.population import rank_one_world

    world = rank_one_world(users, items, per_user, np.random.default_rng(seed))
    a, v = world.data.train, np.ones(items)
    start = time.perf_counter()
    for _ in range(5):
        a.T @ (a @ v)
    return {"seconds": (time.perf_counter() - start) / 5}


def private_fw_audit(users: int, items: int, per_user: int, seed: int, canaries: int, iterations: int) -> dict:
    import yaml

    from recaudit.audits.cli import main

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


def _mechanisms(eps: float, iterations: int, row_bound: float, nuclear_scale: float, per_user: int,
                rating_range: tuple[float, float]) -> list[tuple[str, object]]:
    """The private mechanisms compared at ``eps`` (δ = 1e-6).

    ``mcsherry_mironov`` is calibrated per *rating* (its paper's claim, Gaussian
    noise); ``mcsherry_mironov_group`` gets ε / ξ per rating (per user by group
    privacy over a user's at most ξ ratings, with δ inflated to about ξ e^ε δ);
    ``mcsherry_mironov_user`` is calibrated so each user (≤ ξ ratings) gets exactly
    (ε, δ) — the unit FW and PGD claim — from the per-user sensitivities
    (``user_level_rating_epsilon``, checked against the accountant in the tests).
    """
    from recaudit.mechanisms import McSherryMironov, PrivateFrankWolfe, PrivateProjectedGradient
    from recaudit.mechanisms.mcsherry_mironov import user_level_rating_epsilon

    low, high = rating_range
    mm = {"noise": "gaussian", "delta": 1e-6, "min_rating": low, "max_rating": high, "rank": 2}
    return [("private_frank_wolfe", PrivateFrankWolfe(epsilon=eps, delta=1e-6, iterations=iterations,
                                                      row_bound=row_bound, nuclear_scale=nuclear_scale)),
            ("private_projected_gradient", PrivateProjectedGradient(epsilon=eps, delta=1e-6, iterations=iterations,
                                                                    row_bound=row_bound)),
            ("mcsherry_mironov", McSherryMironov(epsilon=eps, **mm)),
            ("mcsherry_mironov_group", McSherryMironov(epsilon=eps / per_user, **mm)),
            ("mcsherry_mironov_user", McSherryMironov(
                epsilon=user_level_rating_epsilon(McSherryMironov(epsilon=eps, **mm), per_user), **mm))]


def _rmse_of(mechanism, population, seed: int) -> dict:
    """Held-out RMSE of every user's output after one whole run of ``mechanism`` through the engine."""
    import numpy as np

    from recaudit.audits.utility import completion_rmse
    from recaudit.simulator.engine import run_protocol
    from recaudit.simulator.schedules import Panel
    from recaudit.simulator.transcript import Recorder

    catalogue = population.catalogue(np.random.default_rng(seed))
    users = population.rows.ratings.shape[0]
    transcript = run_protocol(mechanism, population, catalogue, Panel(users, getattr(mechanism, "iterations", 1)),
                              np.random.SeedSequence(seed), recorder=Recorder(answers=False, outputs="all"))
    return completion_rmse(transcript, population.test)


def rmse_table(users: int, items: int, per_user: int, epsilons: list[float], repeats: int,
               iterations: int, row_bound: float, report=print, only: list[str] | None = None,
               first_seed: int = 0) -> list[dict]:
    """Held-out RMSE of each mechanism per ε (non-private FW once per seed) on the synthetic rank-one world."""
    import numpy as np

    from recaudit.mechanisms import FrankWolfe
    from recaudit.simulator.population import rank_one_world
    from recaudit.simulator.populations import MatrixPopulation

    rows = []
    for seed in range(first_seed, first_seed + repeats):
        world = rank_one_world(users, items, per_user, np.random.default_rng(seed))
        population = MatrixPopulation.from_ratings(world.data, 0.0, 1.0)
        truth_scale = float(np.linalg.norm(world.user_factors) * np.linalg.norm(world.item_factors)
                            / np.sqrt(users * items))
        reach = 1 - (1 - 1 / iterations) ** iterations  # FW with step 1/T reaches this share of the ball
        nuclear = truth_scale / reach
        start = time.perf_counter()
        if not only or "frank_wolfe" in only:
            base = _rmse_of(FrankWolfe(iterations=iterations, row_bound=1e9, nuclear_scale=nuclear), population,
                            seed)
            rows.append({"seed": seed, "mechanism": "frank_wolfe", "epsilon": None, "rmse": base["rmse"],
                         "zero_rmse": base["zero_rmse"], "seconds": time.perf_counter() - start})
            report(json.dumps(rows[-1]))
        for eps in epsilons:
            for name, mechanism in _mechanisms(eps, iterations, row_bound, nuclear, per_user, (-1.0, 1.0)):
                if only and name not in only:
                    continue
                start = time.perf_counter()
                rmse = _rmse_of(mechanism, population, seed)["rmse"]
                rows.append({"seed": seed, "mechanism": name, "epsilon": eps, "rmse": rmse,
                             "seconds": time.perf_counter() - start})
                report(json.dumps(rows[-1]))
    return rows


def movielens_rmse(users: int, epsilons: list[float], iterations: int, seed: int = 0, report=print,
                   only: list[str] | None = None) -> list[dict]:
    """Held-out RMSE of every mechanism on a MovieLens-format (``u.data``) file the project generates.

    Users of a two-cluster star blockmodel (1..5 stars) are written with
    ``recaudit.simulator.ratings.write_population_file`` and read back with the
    MovieLens loader (top 400 items, ≤ 80 ratings per user, 5 % held out).
    FW and PGD complete the raw star ratings (no centring) with ``L = 5·sqrt(80)``
    (no row is clipped) and a nuclear ball from the RMS rating; McSherry–Mironov
    centres them with its own noisy global effects.
    """
    import tempfile

    import numpy as np

    from recaudit.mechanisms import FrankWolfe
    from recaudit.simulator.population import StarSBMPopulation
    from recaudit.simulator.populations import MatrixPopulation
    from recaudit.simulator.ratings import load_ratings, write_population_file

    stars = [[[0.05, 0.1, 0.25, 0.35, 0.25], [0.3, 0.35, 0.2, 0.1, 0.05]],
             [[0.3, 0.35, 0.2, 0.1, 0.05], [0.05, 0.1, 0.25, 0.35, 0.25]]]
    source = StarSBMPopulation(n_items=400, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                               star_probability=stars, ratings_per_user=80)
    with tempfile.TemporaryDirectory() as folder:
        path = write_population_file(Path(folder) / "u.data", source, users, seed=seed, format="udata")
        data = load_ratings(path, format="udata", top_items=400, max_ratings_per_user=80, test_fraction=0.05,
                            seed=seed)
    population = MatrixPopulation.from_ratings(data, 4.0, 5.0)
    rms = float(np.sqrt(np.mean(data.train.data ** 2)))
    row_bound = 5.0 * np.sqrt(80)
    reach = 1 - (1 - 1 / iterations) ** iterations
    rows = []
    if not only or "frank_wolfe" in only:
        base = _rmse_of(FrankWolfe(iterations=iterations, row_bound=1e9, nuclear_scale=rms / reach), population,
                        seed)
        rows.append({"data": "movielens-format", "mechanism": "frank_wolfe", "epsilon": None, "rmse": base["rmse"],
                     "zero_rmse": base["zero_rmse"]})
        report(json.dumps(rows[-1]))
    for eps in epsilons:
        for name, mechanism in _mechanisms(eps, iterations, row_bound, rms / reach, 80, (1.0, 5.0)):
            if only and name not in only:
                continue
            rows.append({"data": "movielens-format", "mechanism": name, "epsilon": eps,
                         "rmse": _rmse_of(mechanism, population, seed)["rmse"]})
            report(json.dumps(rows[-1]))
    return rows


def row_bound_study(users: int, bounds: list[float], epsilons: list[float], iterations: int = 10, seed: int = 0,
                    report=print, shift_scales: tuple[float, ...] = (1.0,)) -> list[dict]:
    """Private FW's error split into the clipping bias of ``L`` (non-private FW with rows clipped to L)
    and the noise σ ∝ L² (private FW), for each row bound L, on the rank-one world (400 items, ξ = 80).

    ``shift_scales`` multiplies the paper's eigenvalue shift ``sqrt(σ log(n/β)) n^(1/4)`` added to λ̂
    (post-processing: the claim is unchanged); 1 is the paper's."""
    import numpy as np

    from recaudit.mechanisms import FrankWolfe, PrivateFrankWolfe
    from recaudit.simulator.population import rank_one_world
    from recaudit.simulator.populations import MatrixPopulation

    world = rank_one_world(users, 400, 80, np.random.default_rng(seed))
    population = MatrixPopulation.from_ratings(world.data, 0.0, 1.0)
    reach = 1 - (1 - 1 / iterations) ** iterations
    nuclear = float(np.linalg.norm(world.user_factors) * np.linalg.norm(world.item_factors)
                    / np.sqrt(users * 400)) / reach
    norms = np.sqrt(np.asarray(world.data.train.multiply(world.data.train).sum(axis=1)).ravel())
    rows = [{"row_norm_quantiles": dict(zip(("10%", "50%", "90%", "max"),
                                            np.quantile(norms, [0.1, 0.5, 0.9, 1.0]).round(3).tolist()))}]
    report(json.dumps(rows[-1]))
    for bound in bounds:
        clipped = _rmse_of(FrankWolfe(iterations=iterations, row_bound=bound, nuclear_scale=nuclear), population, seed)
        rows.append({"mechanism": "frank_wolfe, rows clipped to L", "L": bound, "rmse": clipped["rmse"]})
        report(json.dumps(rows[-1]))
        for eps in epsilons:
            for shift in shift_scales:
                mech = PrivateFrankWolfe(epsilon=eps, delta=1e-6, iterations=iterations, row_bound=bound,
                                         nuclear_scale=nuclear, shift_scale=shift)
                rows.append({"mechanism": "private_frank_wolfe", "L": bound, "epsilon": eps, "shift_scale": shift,
                             "sigma": mech.noise.sigma, "rmse": _rmse_of(mech, population, seed)["rmse"]})
                report(json.dumps(rows[-1]))
    return rows


def eigen_trace(users: int, row_bound: float, epsilon: float, iterations: int = 10, seed: int = 0,
                report=print) -> list[dict]:
    """Per round: the top eigenvalue of W (λ̂²), the step's shrink λ̂/λ̂' from the eigenvalue shift and
    the alignment |⟨v̂_t, v⟩| with the true item factor, for non-private and private FW."""
    import numpy as np

    from recaudit.mechanisms import FrankWolfe, PrivateFrankWolfe
    from recaudit.simulator.engine import run_protocol
    from recaudit.simulator.population import rank_one_world
    from recaudit.simulator.populations import MatrixPopulation
    from recaudit.simulator.schedules import Panel
    from recaudit.simulator.transcript import Recorder

    world = rank_one_world(users, 400, 80, np.random.default_rng(seed))
    population = MatrixPopulation.from_ratings(world.data, 0.0, 1.0)
    catalogue = population.catalogue(np.random.default_rng(seed))
    reach = 1 - (1 - 1 / iterations) ** iterations
    nuclear = float(np.linalg.norm(world.user_factors) * np.linalg.norm(world.item_factors)
                    / np.sqrt(users * 400)) / reach
    truth = world.item_factors / np.linalg.norm(world.item_factors)
    rows = []
    for mech in (FrankWolfe(iterations=iterations, row_bound=row_bound, nuclear_scale=nuclear),
                 PrivateFrankWolfe(epsilon=epsilon, delta=1e-6, iterations=iterations, row_bound=row_bound,
                                   nuclear_scale=nuclear)):
        transcript = run_protocol(mech, population, catalogue, Panel(users, iterations), np.random.SeedSequence(seed),
                                  recorder=Recorder(answers=False))
        published = transcript.releases[-1].published
        roots = [float(v) for v in published["eigenvalues"]]  # λ̂_t, the square roots
        rows.append({"mechanism": mech.kind, "L": row_bound, "epsilon": epsilon if mech.noise_on else None,
                     "top_eigenvalue": [round(v * v, 1) for v in roots],
                     "alignment": np.abs(published["basis"] @ truth).round(4).tolist(),
                     "noise_spectral_norm": 2 * mech.noise.sigma * np.sqrt(400) if mech.noise_on else 0.0})
        report(json.dumps(rows[-1]))
    return rows


def rmse_markdown(rows: list[dict], title: str) -> str:
    """The RMSE-vs-ε table: mean (min–max) over seeds per mechanism and ε, non-private FW as reference."""
    import pandas as pd

    table = pd.DataFrame(rows)
    private = table[table["mechanism"] != "frank_wolfe"]
    names = list(dict.fromkeys(private["mechanism"]))
    base = table[table["mechanism"] == "frank_wolfe"]["rmse"]
    zero = table["zero_rmse"].dropna() if "zero_rmse" in table else table["rmse"].iloc[:0]
    reference = (f"non-private Frank-Wolfe: {base.mean():.4f} (over {base.size} seed(s)); predicting 0: "
                 f"{zero.mean():.4f}" if base.size else "(no non-private run in these rows)")
    lines = [title, "", reference, "",
             "| ε | " + " | ".join(names) + " |", "|---:|" + "---:|" * len(names)]
    for eps, group in private.groupby("epsilon"):
        cells = []
        for name in names:
            r = group[group["mechanism"] == name]["rmse"]
            cells.append(f"{r.mean():.4f}" + (f" ({r.min():.4f}–{r.max():.4f})" if r.size > 1 else ""))
        lines.append(f"| {eps:g} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


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
    parser.add_argument("--rmse-only", action="store_true", help="only the RMSE study (no timing cases)")
    parser.add_argument("--movielens-users", type=int, default=0,
                        help="also the RMSE on a generated MovieLens-format file of this many users")
    parser.add_argument("--out", default="benchmarks/results/completion-rmse", help="folder of the RMSE study")
    parser.add_argument("--first-seed", type=int, default=0, help="RMSE study: seeds first_seed, first_seed + 1, …")
    parser.add_argument("--only", nargs="+", help="run only these mechanisms (names as in the table)")
    parser.add_argument("--row-bounds", type=float, nargs="+",
                        help="only the row-bound study of private FW (clipping bias against noise) for these L")
    parser.add_argument("--eigen-trace", action="store_true",
                        help="only the per-round eigenvalues and alignment of FW, private FW (L, last ε)")
    parser.add_argument("--shift-scales", type=float, nargs="+", default=[1.0],
                        help="row-bound study: multiples of the paper's eigenvalue shift (1: the paper's)")
    parser.add_argument("--summarise", action="store_true",
                        help="with --rmse-only: tables and plot from the rows --out/rows.jsonl holds (no runs)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--kwargs", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, json.loads(args.kwargs))
        return
    if args.rmse_only:
        rmse_outputs(args)
        return
    if args.eigen_trace:
        eigen_trace(args.rmse_users, args.row_bound, args.epsilons[-1], args.iterations, args.seed - 1)
        return
    if args.row_bounds:
        row_bound_study(args.rmse_users, args.row_bounds, args.epsilons, args.iterations, args.seed - 1,
                        shift_scales=tuple(args.shift_scales))
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
        rmse_outputs(args)


def rmse_outputs(args) -> None:
    """The RMSE-vs-ε study: rows as they finish (rows.jsonl), then rmse.json, rmse.md and rmse.png in ``--out``."""
    from recaudit.audits.reports import plots

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "rows.jsonl").open("r" if args.summarise else "a")

    def report(line: str) -> None:
        print(line, flush=True)
        log.write(line + "\n")
        log.flush()

    if args.summarise:  # the rows a (possibly unfinished) study logged so far
        logged = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines() if line.strip()]
        rows = [r for r in logged if "data" not in r]
        args.repeats = len({r["seed"] for r in rows})
    else:
        rows = rmse_table(args.rmse_users, args.items, args.per_user, args.epsilons, args.repeats,
                          args.iterations, args.row_bound, report, args.only, args.first_seed)
    title = (f"held-out RMSE, synthetic rank-one world: {args.rmse_users:,} users x {args.items} items, <= "
             f"{args.per_user} ratings each, δ = 1e-6, L = {args.row_bound:g}, {args.iterations} iterations; "
             f"mean (min–max) over {args.repeats} seed(s)")
    text = rmse_markdown(rows, title)
    result = {"synthetic": rows}
    movielens = [r for r in logged if "data" in r] if args.summarise else None
    if args.movielens_users and not args.summarise:
        movielens = movielens_rmse(args.movielens_users, args.epsilons, args.iterations, report=report,
                                   only=args.only)
    if movielens:
        result["movielens_format"] = movielens
        users = f"{args.movielens_users:,} users, " if args.movielens_users else ""
        text += "\n" + rmse_markdown(movielens, f"held-out RMSE, generated MovieLens-format file (u.data, "
                                                 f"{users}1-5 stars, top 400 items, <= 80 "
                                                 f"ratings each, 5 % held out), one seed")
    (out / "rmse.json").write_text(json.dumps(result, indent=1))
    (out / "rmse.md").write_text(text)
    (out / "rmse.png").write_bytes(plots.rmse_figure(
        rows, f"synthetic rank-one, {args.rmse_users:,} users x {args.items} items, "
                                                          f"{args.repeats} seed(s)"))
    print(text)


if __name__ == "__main__":
    main()
