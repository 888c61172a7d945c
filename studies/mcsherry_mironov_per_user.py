"""McSherry–Mironov audited per *user*: ε lower bounds against the target's rating count (issue 9's open question).

McSherry and Mironov prove per-rating privacy; what a whole user's row costs is
left open. For each count ``c`` the target rates ``c`` items: ``+1`` each in
world 1, ``−1`` each on ``c`` other items in world 0 (a user-level
replacement: ``2c`` ratings removed or added). Every trial re-runs the whole
protocol on a fixed small rank-one world with fresh noise (full runs, as
``recaudit``'s ``full_runs`` design); the ``covariance_projection`` attack reads
the release; the split Clopper–Pearson estimator gives ε_LB at confidence
``1 − α`` (each count its own test, Bonferroni over counts).

Next to each ε_LB the table gives:

* the per-rating claim ε (what the paper proves for one rating);
* the group-privacy bound ``2c·ε`` (the accountant composing ``2c`` per-rating
  changes: pure-DP Laplace ε adds up);
* the pair's exact privacy loss bound ``Σ_k ‖d_k‖₁ / b_k`` (Laplace: the
  contribution differences ``d_k`` of the two rows to every measurement, with
  ``MAvg`` fixed at the noise-free item means) — what the ``2c`` composition
  pays for this particular pair;
* ``μ_pair = sqrt(Σ_k ‖d_k‖₂² / b_k²)``: the small-shift (Gaussian) approximation
  of how far apart the two worlds' releases are — many small Laplace shifts
  compose like a Gaussian test, not like their worst case;
* the measured separation ``d'`` of the attack's scores (difference of means
  over the pooled standard deviation).

``python -m recaudit.studies.mcsherry_mironov_per_user --out DIR`` writes ``mm_user_study.md`` and
``mm_user_study.json`` (a few minutes at the defaults).
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse

from recaudit.core.errors import ParameterError
from recaudit.attacks.covariance_projection import CovarianceProjectionAttack
from recaudit.mechanisms import McSherryMironov, McSherryMironovPerUserClaim, UserBatch
from recaudit.mechanisms.mcsherry_mironov import MEASUREMENTS, _weighted_gram, user_level_rating_epsilon
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.populations import RankOneMatrix
from recaudit.simulator.schedules import Panel
from recaudit.simulator.seeds import child_seed, stream

from recaudit.audits.designs.base import AuditJob
from recaudit.audits.designs.full_runs import runs_block
from recaudit.audits.language.studies import DataTooSmall, Study
from recaudit.audits.stats.estimators import ESTIMATORS

COUNTS = (1, 2, 5, 10, 20, 50)


@dataclass(frozen=True)
class StudyWorld:
    """The fixed background: a rank-one panel of ``users`` x ``items``, ``background_ratings`` each."""

    users: int = 100
    items: int = 100
    background_ratings: int = 20
    seed: int = 2009


def target_pair(count: int, n_items: int, rng: np.random.Generator) -> TargetPair:
    """World 1: ``count`` items rated +1; world 0: ``count`` other items (disjoint) rated −1."""
    if 2 * count > n_items:
        raise ParameterError("count", f"count {count}: the world has {n_items} items, fewer than 2 x count")
    order = rng.permutation(n_items)
    rows = []
    for items, value in ((order[count:2 * count], -1.0), (order[:count], 1.0)):
        values = np.full(count, value)
        rows.append(UserBatch.from_coo(np.zeros(count, np.int64), np.sort(items), values, values > 0, (1, n_items)))
    return TargetPair(rows[0], rows[1])


def contributions(mech: McSherryMironov, row: sparse.csr_array, mavg: np.ndarray) -> dict[str, np.ndarray]:
    """A row's contribution to each measurement for a fixed ``MAvg`` (upper triangles for Cov, Wgt)."""
    row = mech._clipped(sparse.csr_array(row, dtype=float))
    pattern = sparse.csr_array((np.ones(row.nnz), row.indices, row.indptr), shape=row.shape)
    w = mech.weights(row)
    upper = np.triu_indices(row.shape[1])
    return {"GSum": np.array([row.sum()]), "GCount": np.array([float(row.nnz)]),
            "MSum": row.toarray()[0], "MCount": pattern.toarray()[0],
            "Cov": _weighted_gram(mech.centred(row, mavg), w)[upper], "Wgt": _weighted_gram(pattern, w)[upper]}


def pair_loss(mech: McSherryMironov, pair: TargetPair, mavg: np.ndarray) -> tuple[float, float]:
    """The pair's pure privacy loss ``Σ ‖d_k‖₁/b_k`` and small-shift ``μ = sqrt(Σ ‖d_k‖₂²/b_k²)`` (Laplace)."""
    c0, c1 = contributions(mech, pair.rows0.ratings, mavg), contributions(mech, pair.rows1.ratings, mavg)
    scales = mech.noise_scales()
    diffs = {k: c1[k] - c0[k] for k in MEASUREMENTS}
    pure = sum(np.abs(d).sum() / scales[k] for k, d in diffs.items())
    mu = math.sqrt(sum(float(d @ d) / scales[k] ** 2 for k, d in diffs.items()))
    return float(pure), mu


def accountant_user_epsilon(mech: McSherryMironov, count: int) -> float:
    """The per-user pure ε of ``mech`` (Laplace) for users of at most ``count`` ratings."""
    return mech.claim.epsilon * mech.epsilon / user_level_rating_epsilon(mech, count)


def study(counts=COUNTS, epsilon: float = 2.0, trials: int = 2000, alpha: float = 0.05,
          world: StudyWorld = StudyWorld(), report=print, done: list[dict] = (), save=lambda rows: None) -> list[dict]:
    """One row per rating count: ε_LB (confidence 1 − α/len(counts)), its ceiling, and the reference bounds.
    Rows in ``done`` (an earlier run with the same settings) are kept; ``save(rows)`` follows every new row."""
    mech = McSherryMironovPerUserClaim(epsilon=epsilon, min_rating=-1.0, max_rating=1.0, rank=2)
    root = np.random.SeedSequence(world.seed)
    population = RankOneMatrix(n_users=world.users, n_items=world.items, ratings_per_user=world.background_ratings,
                               test_fraction=0.0)
    catalogue = population.catalogue(stream(root, "catalogue"))
    background = population.matrix.rows.ratings
    exact = McSherryMironov(epsilon=1e12, min_rating=-1.0, max_rating=1.0)  # noise-free item means
    mavg = exact.release(background, np.random.default_rng(0)).MAvg
    def entropy(*parts):
        return int.from_bytes(child_seed(root, *parts).generate_state(4).tobytes(), "little")

    job = AuditJob(mech, population, catalogue, Panel(world.users, 1), (CovarianceProjectionAttack(),),
                   mech.claim, "releases", 1, entropy("audit"), entropy("world"))
    estimator = ESTIMATORS["split"]()
    alpha_each = alpha / len(counts)
    rows = [r for r in done if r["ratings"] in counts]
    for count in counts:
        if any(r["ratings"] == count for r in rows):
            continue
        started = time.perf_counter()
        pair = target_pair(count, world.items, stream(root, "target", count))
        scores = runs_block(job, pair, 0, count, trials)["scores"][0]
        estimate = estimator.estimate(scores, None, mech.claim, alpha_each)
        pure, mu = pair_loss(mech, pair, mavg)
        spread = math.sqrt((scores[0].var(ddof=1) + scores[1].var(ddof=1)) / 2)
        rows.append({"ratings": count, "epsilon_lb": estimate.epsilon_lb, "ceiling": estimate.ceiling,
                     "confidence": 1 - alpha_each, "p_value_vs_claim": estimate.p_value,
                     "per_rating_epsilon": mech.claim.epsilon, "group_bound": 2 * count * mech.claim.epsilon,
                     "accountant_user_epsilon": accountant_user_epsilon(mech, count),
                     "pair_pure_epsilon": pure, "pair_mu": mu,
                     "d_prime": float((scores[1].mean() - scores[0].mean()) / spread),
                     "trials_per_world": trials, "seconds": round(time.perf_counter() - started, 2)})
        row = rows[-1]
        report(f"{row['ratings']} ratings replaced: ε_LB {row['epsilon_lb']:.4g} (ceiling {row['ceiling']:.4g}, "
               f"p = {row['p_value_vs_claim']:.3g} against ε = {row['per_rating_epsilon']:g} a rating), "
               f"{trials:,} runs a world, {row['seconds']} s ({len(rows)} of {len(counts)} counts)")
        save(rows)
    return sorted(rows, key=lambda r: counts.index(r["ratings"]))


def markdown(rows: list[dict], epsilon: float, world: StudyWorld, alpha: float) -> str:
    lines = [f"McSherry–Mironov (Laplace, ε = {epsilon:g} per rating) audited at user level: the target's "
             f"{'/'.join(str(r['ratings']) for r in rows)} ratings replaced (world 1: +1 on c items; world 0: −1 on "
             f"c other items); background {world.users} users x {world.items} items, {world.background_ratings} "
             f"ratings each; {rows[0]['trials_per_world']:,} full runs per world and count; covariance_projection "
             f"attack on the release; split Clopper–Pearson, family-wise confidence {1 - alpha:g} "
             f"(each row {rows[0]['confidence']:.4g}).", "",
             "| ratings c | ε_LB | ceiling | per-rating ε | group bound 2cε | accountant's per-user ε | "
             "pair's pure ε (Σ‖d‖₁/b) | μ_pair | measured d' |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['ratings']} | {r['epsilon_lb']:.3f} | {r['ceiling']:.3f} | {r['per_rating_epsilon']:.3g} "
                     f"| {r['group_bound']:.3g} | {r['accountant_user_epsilon']:.3g} | {r['pair_pure_epsilon']:.3g} "
                     f"| {r['pair_mu']:.3f} | "
                     f"{r['d_prime']:.3f} |")
    return "\n".join(lines) + "\n"


def write(out: Path, rows: list[dict], settings: dict, world: StudyWorld, epsilon: float, alpha: float) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "mm_user_study.md").write_text(markdown(rows, epsilon, world, alpha))
    (out / "mm_user_study.json").write_text(json.dumps({"settings": settings, "epsilon": epsilon,
                                                        "world": world.__dict__, "alpha": alpha, "rows": rows},
                                                       indent=1))


def run(out: Path, counts, epsilon: float, trials: int, alpha: float, world: StudyWorld, report=print) -> list[dict]:
    """The study into ``out``, each count saved as it finishes; counts saved by a run with the same settings
    are kept."""
    settings = {"counts": list(counts), "epsilon": epsilon, "trials": trials, "alpha": alpha, "world": world.__dict__}
    saved = out / "mm_user_study.json"
    previous = json.loads(saved.read_text()) if saved.exists() else {}
    done = previous.get("rows", []) if previous.get("settings") == settings else []
    rows = study(tuple(counts), epsilon, trials, alpha, world, report, done,
                 save=lambda rows: write(out, rows, settings, world, epsilon, alpha))
    write(out, rows, settings, world, epsilon, alpha)
    return rows


#: measured (2 shared cores, user CPU): one full run of the 100 x 100 world, peak memory. counts [1], 100 trials
#: (200 runs): 22.5 s user CPU, 196 MB peak RSS (estimated 20 s, 250 MB); the shipped study (6 counts, 2,000
#: trials: 24,000 runs): 549 s CPU, peak RSS 912 MiB (2026-11-28; estimated 40 min and, before RELEASE_BYTES, 250 MB)
SECONDS_PER_RUN, MEMORY, RELEASE_BYTES = 0.1, 250 * 2 ** 20, 24


@dataclass
class McSherryMironovPerUserStudy(Study, kind="mcsherry_mironov_per_user"):
    """McSherry–Mironov (Laplace, per-rating ε) audited at user level on its own rank-one world (``users`` x
    ``items``, the scenario's seed): ε_LB against the target's rating count, beside the group bound, the
    accountant's per-user ε and the pair's exact loss."""

    counts: list[int] = field(default_factory=lambda: list(COUNTS))
    epsilon: float = 2.0
    trials: int = 2000
    alpha: float = 0.05
    users: int = 100
    items: int = 100

    def check(self) -> None:
        if 2 * max(self.counts) > self.items:
            raise DataTooSmall(f"counts: {max(self.counts)} ratings replaced need {2 * max(self.counts)} items; "
                               f"the world has {self.items}")

    def estimate(self, seed: int, limits) -> dict:
        """CPU from measured runs (``SECONDS_PER_RUN`` a full run of the 100 x 100 world, two worlds x ``trials``
        per count, scaled by users x items); memory as measured: ``MEMORY`` and, for each of a count's runs (its
        release is held until the count's runs are scored), ``RELEASE_BYTES`` per item pair."""
        runs = 2 * self.trials * len(self.counts)
        memory = MEMORY + 2 * self.trials * self.items ** 2 * RELEASE_BYTES
        return {"seconds": runs * SECONDS_PER_RUN * self.users * self.items / 10_000, "memory": memory,
                "basis": f"{runs} full runs of a {self.users} x {self.items} world, from measured runs"}

    def run(self, out: Path, seed: int, log) -> list[Path]:
        run(out, self.counts, self.epsilon, self.trials, self.alpha, StudyWorld(self.users, self.items, 20, seed), log)
        return [out / "mm_user_study.md", out / "mm_user_study.json"]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="folder for mm_user_study.md and .json")
    parser.add_argument("--counts", type=int, nargs="+", default=list(COUNTS))
    parser.add_argument("--epsilon", type=float, default=2.0, help="the per-rating ε (Laplace)")
    parser.add_argument("--trials", type=int, default=2000, help="full runs per world and count")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--seed", type=int, default=2009)
    args = parser.parse_args(argv)
    world = StudyWorld(args.users, args.items, 20, args.seed)
    out = Path(args.out)
    run(out, args.counts, args.epsilon, args.trials, args.alpha, world)
    print((out / "mm_user_study.md").read_text())


if __name__ == "__main__":
    main()
