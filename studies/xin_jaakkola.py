"""The Xin–Jaakkola study: utility and leakage of every response, on a blockmodel and on a ratings file.

    python -m recaudit.studies.xin_jaakkola --out DIR [--dataset movielens-100k | --ratings FILE] [--synthetic]
        [--private 400] [--trials 2000] [--replicates 3] [--items 150]

For each world (the star blockmodel of ``scenarios/xin-jaakkola.yaml``, larger;
and a MovieLens-format file: ``--ratings`` or, by default, one this command
writes with a different blockmodel and reads back through
``recaudit.simulator.ratings.load_ratings``) the users are split into 100 public users,
``--private`` private users arriving in cohorts of 20 (``recaudit.simulator.engine`` with a
``Cohorts`` schedule: each cohort answers the model the previous ones updated)
and 200 evaluation users, each with 10 ratings held out. For every mechanism:

* utility: RMSE and NDCG@10 (``recaudit.simulator.metrics``) of the evaluation users'
  held-out ratings, predicted on their devices from their other ratings and
  the final ``(μ, Σ)``; and RMSE after 0, ¼, ½, all private users;
* leakage, distinguishing: ``--trials`` messages per world of the
  ``star_pattern`` pair (same rated items and values, other order), scored by
  the mechanism's attacks; ε_LB by ``recaudit.audits.stats.bounds.split_epsilon_bound``
  (α = 0.05, threshold chosen on half the trials), with its ceiling;
* leakage, reconstruction: the private users' own messages against the
  public prior (``recaudit.audits.reconstruction``), with the sign test's p-value.

``λ'`` (``ridge``) is chosen per world and replicate the way the server
could: on the public users alone (20 % of each public user's ratings held
out, public-only EM for each value of ``RIDGE_GRID``, the lowest held-out
RMSE wins), then used by every mechanism (``--ridge`` fixes it instead).
The Laplace baseline's private weight is chosen the same way from
``LAPLACE_WEIGHTS`` (the paper: "determined by cross validation"); the
others use ½.
Utility is repeated over ``--replicates`` seeds (new blockmodel users; a new
split of the file's users) and reported as mean ± sd, with how often each
of the paper's orderings held; leakage comes from the first replicate.
Writes ``xj_study.json`` and ``xj_study.md`` to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recaudit.attacks import ATTACKS
from recaudit.attacks.laplace_posterior import level_prior
from recaudit.mechanisms import UserBatch, WorldInfo
from recaudit.mechanisms.xin_jaakkola import XinJaakkola, XinJaakkolaLaplace
from recaudit.simulator.metrics import ndcg_at_k, rmse
from recaudit.audits.designs.pairs import PAIR_POLICIES
from recaudit.simulator.engine import run_protocol
from recaudit.simulator.populations import MatrixPopulation
from recaudit.simulator import datasets
from recaudit.simulator.ratings import write_population_file
from recaudit.simulator.schedules import Cohorts
from recaudit.simulator.seeds import child_seed, stream
from recaudit.simulator.transcript import MessagesView, Recorder

from recaudit.audits import reconstruction
from recaudit.audits.language.studies import Study
from recaudit.audits.reports.report import finite, p_text
from recaudit.audits.stats.bounds import split_epsilon_bound

from .xin_jaakkola_worlds import (BATCH, EVALUATION, HELD_OUT, PUBLIC, World, _Rows, blockmodel_world,  # noqa: F401
                                  file_population, file_world, split_world)

RIDGE_GRID = (0.003, 0.01, 0.03, 0.1, 0.3)
LAPLACE_WEIGHTS = (0.5, 0.1, 0.02)  # private weights tried for the Laplace baseline

#: (label, mechanism factory, distinguishing attacks, reconstructions)
MECHANISMS = [
    ("public only", lambda m: XinJaakkola(response="none"), [], []),
    ("full EM", lambda m: XinJaakkola(response="full_em"), ["pmd_coordinate"], ["coordinate"]),
    ("exact 2nd order", lambda m: XinJaakkola(response="exact"), ["pmc_sign"], ["sign"]),
    ("PMD", lambda m: XinJaakkola(response="pmd"), ["pmd_pairwise", "pmd_coordinate"],
     ["pairwise", "pairwise_smoothed", "coordinate"]),
    ("PMC", lambda m: XinJaakkola(response="pmc"), ["pmc_sign"], ["sign"]),
    ("PMC rated-only", lambda m: XinJaakkola(response="pmc", pmc_support="rated"), ["pmc_sign"], ["sign"]),
    ("SSLP eps=5", lambda m: XinJaakkola(response="sslp", sslp_epsilon=5.0), ["pmc_sign"], ["sign"]),
    ("Laplace eps=5", lambda m: XinJaakkolaLaplace(epsilon=5.0, n_items=m), ["laplace_posterior"], ["posterior"]),
    ("Laplace eps=1", lambda m: XinJaakkolaLaplace(epsilon=1.0, n_items=m), ["laplace_posterior"], ["posterior"]),
]


# ---------------------------------------------------------------------- one mechanism on one world


def run_private_users(mech: XinJaakkola, world: World, seed: np.random.SeedSequence, checkpoints: list[int]):
    """Public EM, then the private users in cohorts of 20 through the engine (the server updates between
    cohorts): the final model, the model after 0 and each checkpoint's number of private users, every message."""
    rows = UserBatch.concat([world.public, world.private])
    population = MatrixPopulation(rows, ordered=True)  # the public users first, then the private ones in order
    mech.public_users = len(world.public)
    schedule = Cohorts.every(len(world.private), BATCH, (0, *checkpoints))
    transcript = run_protocol(mech, population, population.catalogue(None), schedule, seed,
                              recorder=Recorder(messages="all", answers=False))
    models = {r.users_seen: r.published for r in transcript.releases}
    return transcript.releases[-1].published, models, transcript.messages


def utility(mech: XinJaakkola, model, world: World) -> dict:
    users, items, actual = world.test
    predicted = model.predict(world.train, mech.ridge, mech.level_array)[users, items]
    return {"rmse": rmse(predicted, actual), "ndcg10": ndcg_at_k(users, predicted, actual, 10)}


def distinguishing(mech, model, world: World, attacks: list[str], trials: int, rng) -> dict:
    """ε_LB of each attack on ``trials`` messages per world of the star-pattern pair (split threshold)."""
    if not attacks:
        return {}
    population = _Rows(world.pairs_from, len(world.levels))
    pair = PAIR_POLICIES["star_pattern"].rows_for_runs(population, None, trials, rng)
    if world.levels != [1.0, 2.0, 3.0, 4.0, 5.0]:  # the pair's 1 and 5 stars mapped onto this world's levels
        pair = type(pair)(*(_relevel(r, world.levels) for r in (pair.rows0, pair.rows1)))
    out = {}
    views = []
    for rows in (pair.rows0, pair.rows1):
        msg = mech.messages(rows, model, rng)
        views.append(MessagesView(messages=msg, queries=(np.broadcast_to(model.mu, msg.shape),)))
    for name in attacks:
        attack = ATTACKS[name]()
        s0, s1 = (attack.scores(mech, pair, v) for v in views)
        bound = split_epsilon_bound(s0, s1, alpha=0.05, rng=np.random.default_rng(0))
        out[name] = {"epsilon_lb": bound.epsilon_lb, "ceiling": bound.ceiling, "trials_per_world": trials}
    return out


def _relevel(rows: UserBatch, levels: list[float]) -> UserBatch:
    r = rows.ratings.tocoo()
    values = np.where(r.data >= 5.0, max(levels), min(levels))
    return UserBatch.from_coo(r.row, r.col, values, values >= max(levels), r.shape)


def reconstructions(kinds: list[str], mech, model, public_model, world: World, messages: np.ndarray) -> dict:
    ratings, mu, levels = world.private.ratings, model.mu, mech.level_array
    out = {}
    for kind in kinds:
        if kind == "sign":
            prior = reconstruction.public_sign_prior(world.public.ratings, mu)
            res = reconstruction.pmc_sign(messages, mu, ratings, prior, min_rated=20)
        elif kind.startswith("pairwise"):
            res = reconstruction.pmd_pairwise(messages, mu, ratings, public_model.sigma, kind.endswith("smoothed"))
        elif kind == "coordinate":
            res = reconstruction.pmd_coordinate(messages, ratings,
                                                reconstruction.public_level_mode(world.public.ratings, levels))
        elif kind == "posterior":
            res = reconstruction.laplace_posterior(messages, ratings, level_prior(world.public.ratings, levels),
                                                   levels, mech.scale)
        else:
            raise ValueError(kind)
        out[res.attack] = res.to_dict()
    return out


def public_validation(world: World, rng: np.random.Generator):
    """The public users' ratings with 20 % held out (users keep at least 3): (training rows, held-out triples)."""
    counts = np.diff(world.public.ratings.indptr)
    r = world.public.ratings.tocoo()
    held = (rng.random(r.nnz) < 0.2) & (counts[r.row] > 2)
    train = UserBatch.from_coo(r.row[~held], r.col[~held], r.data[~held], r.data[~held] >= max(world.levels),
                               r.shape)
    return train, (r.row[held], r.col[held], r.data[held])


def _validation_rmse(mech, model, train: UserBatch, held) -> float:
    users, items, actual = held
    return rmse(model.predict(train.ratings, mech.ridge, mech.level_array)[users, items], actual)


def choose_ridge(world: World, rng: np.random.Generator) -> float:
    """λ' with the lowest RMSE on held-out public ratings, public-only EM (public data only)."""
    train, held = public_validation(world, rng)
    errors = []
    for ridge in RIDGE_GRID:
        mech = XinJaakkola(response="none", ridge=ridge)
        mech.levels = sorted(world.levels)
        state = mech.init_public(mech.init_state(WorldInfo(train.n_items, 0, 1)), train)
        errors.append(_validation_rmse(mech, state.model, train, held))
    return float(RIDGE_GRID[int(np.argmin(errors))])


def choose_weight(mech, world: World, rng: np.random.Generator) -> float:
    """The private weight with the lowest RMSE on held-out public ratings after every private user.

    The paper's Laplace baseline: "a smaller weight ... determined by cross validation".
    """
    train, held = public_validation(world, rng)
    validation = World(world.name, train, world.private, world.train, world.test, world.levels, world.pairs_from)
    errors = []
    for weight in LAPLACE_WEIGHTS:
        mech.private_weight = weight
        model, _, _ = run_private_users(mech, validation, np.random.SeedSequence(rng.integers(2 ** 32)), [])
        errors.append(_validation_rmse(mech, model, train, held))
    return float(LAPLACE_WEIGHTS[int(np.argmin(errors))])


def study_world(world: World, trials: int, seed: int, report=print, leakage: bool = True,
                ridge: float | None = None, mechanisms=MECHANISMS) -> list[dict]:
    n_private = len(world.private)
    if ridge is None:
        ridge = choose_ridge(world, stream(np.random.SeedSequence(seed), "ridge"))
    checkpoints = sorted({n_private // 4, n_private // 2, n_private})
    rows = []
    for label, factory, attacks, kinds in mechanisms:
        started = time.time()
        mech = factory(world.public.n_items)
        mech.levels, mech.ridge = sorted(world.levels), ridge
        if mech.response == "laplace":
            mech.private_weight = choose_weight(mech, world, stream(np.random.SeedSequence(seed), "weight", label))
        coins = child_seed(np.random.SeedSequence(seed), "study", label)
        model, models, messages = run_private_users(mech, world, coins, checkpoints)
        row = {"mechanism": label, "kind": mech.kind, "response": mech.response, "ridge": ridge,
               "private_weight": mech.private_weight,
               "claim_epsilon": mech.claim.epsilon if mech.claim.promises else None,
               **utility(mech, model, world),
               "rmse_curve": {str(k): utility(mech, m, world)["rmse"] for k, m in sorted(models.items())},
               "distinguishing": distinguishing(mech, model, world, attacks, trials, stream(coins, "distinguish"))
               if leakage else {},
               "reconstruction": reconstructions(kinds, mech, model, models[0], world, messages)
               if leakage and messages.shape[1] else {}}
        row["seconds"] = round(time.time() - started, 2)
        report(f"  {world.name}: {label}: RMSE {row['rmse']:.4f} ({row['seconds']} s)")
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- tables


def _eps(d: dict) -> str:
    return "; ".join(f"{k} {v['epsilon_lb']:.2f} (ceil {v['ceiling']:.2f})" for k, v in d.items()) or "—"


def _rec(d: dict) -> str:
    return "; ".join(f"{k} {v['attack_accuracy']:.3f} vs {v['prior_accuracy']:.3f} (p {p_text(v['p_value'])})"
                     for k, v in d.items()) or "—"


def markdown(result: dict) -> str:
    lines = ["# Xin–Jaakkola study", "",
             f"{result['private_users']} private users in batches of {BATCH}, {PUBLIC} public, {EVALUATION} "
             f"evaluation users ({HELD_OUT} held-out ratings each); distinguishing: {result['trials']} trials per "
             "world of the star-pattern pair, ε_LB at 95 % (split threshold) with its ceiling; reconstruction: "
             "attack accuracy vs the public prior's, exact one-sided sign test over users.", ""]
    for world in result["worlds"]:
        lines += [f"## {world['name']}", "",
                  "| mechanism | claim ε | weight | RMSE | NDCG@10 | RMSE vs private users | ε_LB per attack | "
                  "reconstruction: attack vs prior (p) |",
                  "|---|---:|---:|---:|---:|---|---|---|"]
        for r in world["rows"]:
            curve = ", ".join(f"{k}: {v:.4f}" for k, v in r["rmse_curve"].items())
            claim = "none" if r["claim_epsilon"] is None else f"{r['claim_epsilon']:.3g}"
            lines.append(f"| {r['mechanism']} | {claim} | {r['private_weight']:g} | {r['rmse']:.4f} | "
                         f"{r['ndcg10']:.4f} | {curve} | "
                         f"{_eps(r['distinguishing'])} | {_rec(r['reconstruction'])} |")
        reps = world["replicates"]
        ridges = sorted({rep[0]["ridge"] for rep in reps})
        lines += ["", f"Over {len(reps)} replicates (RMSE mean ± sd; λ' = {', '.join(map(str, ridges))}):", "",
                  "| mechanism | RMSE | NDCG@10 |", "|---|---:|---:|"]
        summary = world["summary"]
        for name, s in sorted(summary.items(), key=lambda kv: kv[1]["rmse_mean"]):
            lines.append(f"| {name} | {s['rmse_mean']:.4f} ± {s['rmse_sd']:.4f} | "
                         f"{s['ndcg10_mean']:.4f} ± {s['ndcg10_sd']:.4f} |")
        lines += ["", "Orderings (replicates in which each holds):", ""]
        lines += [f"- {o['ordering']}: {o['held']}/{o['replicates']}" for o in world["orderings"]]
        lines.append("")
    return "\n".join(lines) + "\n"


#: the paper's claims about RMSE, as (better, worse) pairs checked per replicate
ORDERINGS = [("full EM", "exact 2nd order"), ("exact 2nd order", "PMD"), ("exact 2nd order", "PMC"),
             ("PMD", "Laplace eps=1"), ("PMC", "Laplace eps=1"), ("PMD", "Laplace eps=5"),
             ("PMC", "Laplace eps=5"), ("PMD", "public only"), ("PMC", "public only"),
             ("Laplace eps=5", "Laplace eps=1"), ("PMD", "SSLP eps=5")]


def summarise(replicates: list[list[dict]]) -> tuple[dict, list[dict]]:
    """Mean ± sd of RMSE and NDCG@10 per mechanism, and how often each ordering held."""
    names = [r["mechanism"] for r in replicates[0]]
    table = {}
    for name in names:
        rmses = np.array([next(r["rmse"] for r in rep if r["mechanism"] == name) for rep in replicates])
        ndcgs = np.array([next(r["ndcg10"] for r in rep if r["mechanism"] == name) for rep in replicates])
        table[name] = {"rmse_mean": float(rmses.mean()), "rmse_sd": float(rmses.std(ddof=1)) if rmses.size > 1
                       else 0.0, "ndcg10_mean": float(ndcgs.mean()),
                       "ndcg10_sd": float(ndcgs.std(ddof=1)) if ndcgs.size > 1 else 0.0, "rmse": rmses.tolist()}
    orderings = []
    for better, worse in ORDERINGS:
        held = sum(table[better]["rmse"][i] < table[worse]["rmse"][i] for i in range(len(replicates)))
        orderings.append({"ordering": f"{better} < {worse}", "held": int(held), "replicates": len(replicates)})
    return table, orderings


def run(out: Path, ratings: Path | None, n_private: int, trials: int, seed: int, n_items: int = 150,
        replicates: int = 3, ridge: float | None = None, report=print, synthetic: bool | None = None) -> dict:
    """The study. A ratings file alone unless ``synthetic`` (default: only when no file is given: the
    blockmodel and a generated file). The file's size is checked before any work; every finished
    replicate is saved at once, and replicates already in ``out/xj_study.json`` (same settings) are reused."""
    out.mkdir(parents=True, exist_ok=True)
    synthetic = ratings is None if synthetic is None else synthetic
    builders = []
    if synthetic:
        generated = write_population_file(out / "u.data", file_population(n_items, seed + 1),
                                          PUBLIC + n_private + EVALUATION + 100, seed=seed + 1, format="udata")
        builders += [lambda s: blockmodel_world(n_items, n_private, s),
                     lambda s: file_world(generated, n_private, s, n_items)]
    if ratings is not None:
        builders.append(lambda s: file_world(Path(ratings), n_private, s, n_items))
        file_world(Path(ratings), n_private, seed, n_items)  # too few users: refused now, before any work
    settings = {"private_users": n_private, "trials": trials, "seed": seed, "items": n_items,
                "replicates_asked": replicates, "ratings": None if ratings is None else str(ratings),
                "synthetic": synthetic}
    saved = out / "xj_study.json"
    done = json.loads(saved.read_text()) if saved.exists() else {}
    result = done if done.get("settings") == settings else {"settings": settings, **settings, "worlds": []}
    for w, build in enumerate(builders):
        if w == len(result["worlds"]):
            result["worlds"].append({"replicates": []})
        entry = result["worlds"][w]
        for r in range(len(entry["replicates"]), replicates):
            world = build(seed + 1000 * r)
            entry["replicates"].append(study_world(world, trials, seed + 1000 * r, report, leakage=r == 0,
                                                   ridge=ridge))
            summary, orderings = summarise(entry["replicates"])
            entry |= {"name": world.name, "rows": entry["replicates"][0], "summary": summary, "orderings": orderings}
            saved.write_text(json.dumps(finite(result), indent=1))  # finite() copies: ``result`` stays the one
            (out / "xj_study.md").write_text(markdown(finite(result)))
    return finite(result)


#: measured on MovieLens-100K (2 shared cores, user CPU): a replicate, a leakage trial, peak memory. 1 replicate and
#: 300 trials: 113.7 s user CPU, 503 MB peak RSS (estimated 150 s, 500 MB); 5 replicates: 648 s (estimated 630 s)
SECONDS_PER_REPLICATE, SECONDS_PER_TRIAL, MEMORY = 120.0, 0.1, 500 * 2 ** 20


@dataclass
class XinJaakkolaStudy(Study, kind="xin_jaakkola"):
    """Xin–Jaakkola's table on a ratings file (``dataset`` fetched by ``recaudit data``, or ``ratings``): every
    response's RMSE and NDCG@10 over ``replicates`` splits, the RMSE as private users are added, the orderings
    the paper reports, and the first replicate's leakage; the synthetic worlds only with ``synthetic`` (always
    when no file is named)."""

    dataset: str | None = None
    ratings: str | None = None
    private: int = 400
    trials: int = 2000
    items: int = 150  # the most rated items kept (0: all)
    replicates: int = 3
    ridge: float | None = None  # λ' fixed (default: chosen on the public users)
    synthetic: bool = False

    def _file(self) -> Path | None:
        return datasets.find(self.dataset) if self.dataset else Path(self.ratings) if self.ratings else None

    def check(self) -> None:
        ratings = self._file()
        if ratings is not None:
            file_world(ratings, self.private, 0, self.items)

    def estimate(self, seed: int, limits) -> dict:
        """CPU from measured runs on MovieLens-100K (``SECONDS_PER_REPLICATE`` at 600 private users, 100 items,
        scaled by the private users and the items; the first replicate's leakage audit ``SECONDS_PER_TRIAL``
        a trial); memory as measured (``MEMORY``)."""
        scale = self.private / 600 * max(self.items or 1682, 1) / 100
        seconds = self.replicates * SECONDS_PER_REPLICATE * scale + SECONDS_PER_TRIAL * self.trials
        return {"seconds": seconds, "memory": MEMORY,
                "basis": f"{self.replicates} replicates of {self.private} private users, from measured runs"}

    def run(self, out: Path, seed: int, log) -> list[Path]:
        ratings = self._file()
        run(out, ratings, self.private, self.trials, seed, self.items, self.replicates, self.ridge, report=log,
            synthetic=self.synthetic or ratings is None)
        return [out / "xj_study.md", out / "xj_study.json"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recaudit.studies.xin_jaakkola",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ratings", type=Path, default=None, help="a MovieLens-format file (u.data, ratings.csv)")
    parser.add_argument("--private", type=int, default=400)
    parser.add_argument("--trials", type=int, default=2000)
    parser.add_argument("--items", type=int, default=150, help="the most rated items kept (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--ridge", type=float, default=None, help="fix λ' (default: chosen on public users)")
    parser.add_argument("--dataset", help="a data set fetched by `recaudit data fetch` (e.g. movielens-100k)")
    parser.add_argument("--synthetic", action="store_true",
                        help="also the synthetic worlds (always when no --ratings / --dataset is given)")
    args = parser.parse_args(argv)
    try:
        ratings = datasets.find(args.dataset) if args.dataset else args.ratings
        run(args.out, ratings, args.private, args.trials, args.seed, args.items, args.replicates, args.ridge,
            synthetic=args.synthetic or ratings is None)
    except (ValueError, datasets.DataError) as exc:  # a file too small or missing, a data set not fetched
        print(f"python -m recaudit.studies.xin_jaakkola: {exc}", file=sys.stderr)
        return 2
    print(f"wrote {args.out / 'xj_study.md'} and {args.out / 'xj_study.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
