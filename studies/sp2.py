"""SP2 study: accuracy (RMSE, NDCG@10) of every SP2 method and baseline, and the server view's leakage.

``python -m recaudit.studies.sp2 --out DIR`` writes ``sp2_study.md`` and
``sp2_study.json``: for two worlds — a star-rating blockmodel
(``recaudit.simulator.population.StarSBMPopulation``) and a MovieLens-format file it
writes from another one (read back by ``recaudit.simulator.ratings``; ``--ratings
PATH`` reads a real file, e.g. MovieLens-100K ``u.data``, instead) — and for
each privacy allocation (H1 per user, H2 per item; Beta (2,2), (0.5,0.5),
(5,1), (1,5)), the held-out RMSE and NDCG@10 of

* ``all_public`` (MF on every training rating: the best case),
* ``all_private`` (each user predicts its own mean rating),
* ``only_public`` (MF on the public ratings, private ones dropped),
* ``naive``, ``clustering``, ``joint`` (SP2: public MF, then on-device fine-tuning),
* ``joint_only_public`` (the joint server model with top-R weights, no fine-tuning: joint's own baseline),

and the ε lower bound of the audit of the server's view (scenario
``scenarios/sp2.yaml`` re-run with that allocation) for the full download
and for the leaky "fetch only my private items" client. It also records how
the naive gain depends on the device's fine-tuning epochs (the paper's 20
epochs overfit small private sets) and, with ``--surprise``, scikit-surprise's
SVD on the same all-public split next to ours.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import sparse

from recaudit.core.errors import ParameterError
from recaudit.mechanisms.sp2 import (DeviceModel, allocate_private, clustering_aux, fine_tune, fit_biased_mf,
                                     fit_joint_mf,
                            joint_aux, naive_aux)
from recaudit.simulator.metrics import ndcg_at_k, rmse
from recaudit.simulator.population import StarSBMPopulation
from recaudit.simulator import datasets
from recaudit.simulator.ratings import load_ratings, write_population_file

from recaudit.audits.language.studies import DataTooSmall, Study

from .sp2_report import markdown

BETAS = [(2.0, 2.0), (0.5, 0.5), (5.0, 1.0), (1.0, 5.0)]
SCHEMES = ["H1", "H2"]
METHODS = ["all_public", "all_private", "only_public", "naive", "clustering", "joint", "joint_only_public"]


@dataclass(frozen=True)
class Split:
    """Training ratings (sparse users x items) and held-out (user, item, rating) triples."""

    train: sparse.csr_array
    test_users: np.ndarray
    test_items: np.ndarray
    test_values: np.ndarray
    rating_range: tuple[float, float]


@dataclass(frozen=True)
class StudyConfig:
    factors: int = 100
    epochs: int = 20
    lr: float = 0.005
    reg: float = 0.02
    init_std: float = 0.1
    batch_size: int = 256
    fine_tune_epochs: int = 20
    clusters: int = 10
    top_r: int = 3

    @property
    def mf(self) -> dict:
        return dict(factors=self.factors, epochs=self.epochs, lr=self.lr, reg=self.reg, init_std=self.init_std,
                    batch_size=self.batch_size)


def star_world(n_users: int, n_items: int, per_user: int, seed: int) -> StarSBMPopulation:
    """A blockmodel with 4 user and 5 item clusters whose block means spread over the 1..5 star scale."""
    rng = np.random.default_rng(seed)
    means = rng.uniform(1.5, 4.8, (4, 5))
    stars = np.arange(1, 6)
    p = np.exp(-0.5 * ((stars[None, None, :] - means[:, :, None]) / 0.9) ** 2)
    p /= p.sum(axis=2, keepdims=True)
    return StarSBMPopulation(n_items=n_items, ratings_per_user=per_user, user_cluster_weights=[0.4, 0.3, 0.2, 0.1],
                             item_cluster_weights=[0.3, 0.25, 0.2, 0.15, 0.1], star_probability=p.tolist())


def split_rows(ratings: sparse.csr_array, test_fraction: float, rng: np.random.Generator) -> Split:
    coo = sparse.coo_array(ratings)
    test = rng.random(coo.nnz) < test_fraction
    train = sparse.csr_array((coo.data[~test], (coo.row[~test], coo.col[~test])), shape=ratings.shape)
    return Split(train, coo.row[test].astype(np.int64), coo.col[test].astype(np.int64), coo.data[test],
                 (float(coo.data.min()), float(coo.data.max())))


def sbm_split(seed: int, n_users: int = 943, n_items: int = 1000, per_user: int = 100) -> Split:
    population = star_world(n_users, n_items, per_user, seed)
    rng = np.random.default_rng(seed)
    _, rows = population.sample_users(n_users, population.catalogue(rng), rng)
    return split_rows(rows.ratings, 0.2, rng)


def file_split(path: Path, seed: int) -> Split:
    """20 % of each user's ratings held out (a per-user split, seeded)."""
    data = load_ratings(path, test_fraction=0.2, seed=seed, split="per_user")
    test = sparse.coo_array(data.test)
    values = np.r_[data.train.data, test.data]
    return Split(sparse.csr_array(data.train), test.row.astype(np.int64), test.col.astype(np.int64), test.data,
                 (float(values.min()), float(values.max())))


def write_movielens_file(path: Path, seed: int, n_users: int = 943, n_items: int = 1200, per_user: int = 80) -> Path:
    """A MovieLens ``u.data``-format file sampled from a blockmodel (another seed and shape than the SBM world)."""
    return write_population_file(path, star_world(n_users, n_items, per_user, seed + 1), n_users, seed=seed,
                                 format="udata")


def _coo(m: sparse.csr_array):
    c = sparse.coo_array(m)
    return c.row.astype(np.int64), c.col.astype(np.int64), c.data


def _scores(split: Split, predicted: np.ndarray) -> dict:
    lo, hi = split.rating_range
    clipped = np.clip(predicted, lo, hi)
    return {"rmse": rmse(clipped, split.test_values),
            "ndcg10": ndcg_at_k(split.test_users, clipped, split.test_values, 10)}


def device_predictions(device: DeviceModel, mu: float, item_bias: np.ndarray, item_factors: np.ndarray,
                       users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """The device's fine-tuned user terms with the scored items' factors (the paper's top-N' re-ranking)."""
    return (mu + device.user_bias[users] + item_bias[items]
            + np.einsum("ij,ij->i", device.user_factors[users], item_factors[items]))


def evaluate_allocation(split: Split, private: sparse.csr_array, config: StudyConfig, seed: int,
                        ablation_epochs: tuple[int, ...] = ()) -> dict:
    """RMSE and NDCG@10 of every method for one private/public split of the training ratings."""
    shape = split.train.shape
    rng = np.random.default_rng(seed)
    private_values = split.train.multiply(private.astype(float))
    public_values = sparse.csr_array(split.train - private_values)
    public_values.eliminate_zeros()
    u_pub, i_pub, r_pub = _coo(public_values)
    u_prv, i_prv, r_prv = _coo(sparse.csr_array(private_values))
    tu, ti = split.test_users, split.test_items
    out = {}
    model = fit_biased_mf(u_pub, i_pub, r_pub, shape, rng, **config.mf)
    out["only_public"] = _scores(split, model.predict(tu, ti))
    tune = dict(epochs=config.fine_tune_epochs, lr=config.lr, reg=config.reg)
    naive = fine_tune(naive_aux(model), model.user_factors, model.user_bias, u_prv, i_prv, r_prv, rng, **tune)
    out["naive"] = _scores(split, naive.predict(naive_aux(model), tu, ti))
    clustered = clustering_aux(model, config.clusters, rng)
    device = fine_tune(clustered, model.user_factors, model.user_bias, u_prv, i_prv, r_prv, rng, **tune)
    out["clustering"] = _scores(split, device_predictions(device, model.mu, model.item_bias, model.item_factors,
                                                          tu, ti))
    joint = fit_joint_mf(u_pub, i_pub, r_pub, shape, rng, clusters=config.clusters, **config.mf)
    aux = joint_aux(joint, config.top_r)
    out["joint_only_public"] = _scores(split, joint.mu + joint.user_bias[tu] + aux.slot_bias[ti]
                                       + np.einsum("ij,ij->i", joint.user_factors[tu], aux.slot_factors[ti]))
    device = fine_tune(aux, joint.user_factors, joint.user_bias, u_prv, i_prv, r_prv, rng, **tune)
    out["joint"] = _scores(split, device.predict(aux, tu, ti))
    out["private_fraction"] = private.nnz / max(split.train.nnz, 1)
    if ablation_epochs:
        out["naive_by_fine_tune_epochs"] = {
            str(e): _scores(split, fine_tune(naive_aux(model), model.user_factors, model.user_bias, u_prv, i_prv,
                                             r_prv, np.random.default_rng(seed), epochs=e, lr=config.lr,
                                             reg=config.reg).predict(naive_aux(model), tu, ti))["rmse"]
            for e in ablation_epochs}
    return out


def baselines(split: Split, config: StudyConfig, seed: int) -> dict:
    """The allocation-free baselines: everything public (MF) and everything private (per-user mean)."""
    u, i, r = _coo(split.train)
    model = fit_biased_mf(u, i, r, split.train.shape, np.random.default_rng(seed), **config.mf)
    counts = np.bincount(u, minlength=split.train.shape[0])
    means = np.where(counts > 0, np.bincount(u, weights=r, minlength=counts.size) / np.maximum(counts, 1), r.mean())
    return {"all_public": _scores(split, model.predict(split.test_users, split.test_items)),
            "all_private": _scores(split, means[split.test_users])}


def surprise_rmse(split: Split, config: StudyConfig, seed: int) -> float | None:
    """scikit-surprise's SVD (same hyper-parameters) on the all-public split; None when it is not installed."""
    try:
        import pandas as pd
        from surprise import SVD, Dataset, Reader
    except ImportError:
        return None
    u, i, r = _coo(split.train)
    frame = pd.DataFrame({"u": u, "i": i, "r": r})
    data = Dataset.load_from_df(frame, Reader(rating_scale=split.rating_range))
    algo = SVD(n_factors=config.factors, n_epochs=config.epochs, lr_all=config.lr, reg_all=config.reg,
               init_std_dev=config.init_std, random_state=seed)
    algo.fit(data.build_full_trainset())
    predicted = np.array([algo.predict(int(a), int(b)).est for a, b in zip(split.test_users, split.test_items)])
    return rmse(predicted, split.test_values)


def ours_rmse(split: Split, config: StudyConfig, seed: int) -> float:
    return baselines(split, config, seed)["all_public"]["rmse"]


def audit_leakage(scheme: str, beta: tuple[float, float], trials: int) -> dict:
    """ε_LB of the server's view (scenarios/sp2*.yaml with this allocation): full download vs leaky client."""
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    here = Path(__file__).resolve().parent.parent / "scenarios"
    out = {}
    for label, name in (("full", "sp2.yaml"), ("leaky", "sp2-leaky.yaml")):
        scenario = load_scenario(here / name)
        population = scenario.population.model_copy(update={"allocation": scheme, "privacy_beta": list(beta)})
        audit = scenario.audit.model_copy(update={"trials": trials, "block_size": trials})
        result = run_scenario(scenario.model_copy(update={"population": population, "audit": audit}),
                              executor_type="serial")
        test = result.strongest
        out[label] = {"epsilon_lb": test.bound.epsilon_lb, "ceiling": test.bound.ceiling, "verdict": result.verdict}
    return out


def run_study(out: Path, seed: int = 2021, ratings: Path | None = None, audit_trials: int = 100,
              config: StudyConfig = StudyConfig(), surprise: bool = True, sbm_users: int = 943,
              ablation_epochs: tuple[int, ...] = (0, 1, 3, 5, 10, 20), log=print, synthetic: bool | None = None,
              splits: int = 1, allocations: list[tuple[str, tuple[float, float]]] | None = None) -> dict:
    """The study; each finished part (a world's baselines, one allocation) is saved at once, and parts already
    in ``out/sp2_study.json`` (same configuration) are reused. ``ratings``: a ratings file, studied over
    ``splits`` per-user splits (seeds ``seed``, ``seed + 1``, ...); the synthetic worlds (the star blockmodel
    and a generated file) only when ``synthetic`` (default: when no file is given)."""
    out.mkdir(parents=True, exist_ok=True)
    synthetic = ratings is None if synthetic is None else synthetic
    allocations = allocations or [(scheme, beta) for scheme in SCHEMES for beta in BETAS]
    worlds: dict = {}
    if synthetic:
        generated = write_movielens_file(out / "generated_u.data", seed)
        worlds = {"sbm_stars": lambda: sbm_split(seed, n_users=sbm_users),
                  "generated_file": lambda: file_split(generated, seed)}
    if ratings is not None:
        worlds |= {(f"ratings_file split {k}" if splits > 1 else "ratings_file"):
                   (lambda k=k: file_split(ratings, seed + k)) for k in range(splits)}
    saved = out / "sp2_study.json"
    result = {"seed": seed, "config": config.__dict__, "ratings_file": None if ratings is None else str(ratings),
              "splits": splits, "worlds": {}, "leakage": {}}
    if saved.exists():
        previous = json.loads(saved.read_text())
        if {k: previous.get(k) for k in ("seed", "config", "ratings_file", "splits")} == \
                {k: result[k] for k in ("seed", "config", "ratings_file", "splits")}:
            result = previous
            log(f"resuming from {saved}")

    def save() -> None:
        saved.write_text(json.dumps(result, indent=2, default=float))
        (out / "sp2_study.md").write_text(markdown(result))

    if audit_trials:
        for scheme, beta in allocations:
            if f"{scheme} {beta}" not in result["leakage"]:
                result["leakage"][f"{scheme} {beta}"] = audit_leakage(scheme, beta, audit_trials)
                log(f"audit {scheme} Beta{beta}: {result['leakage'][f'{scheme} {beta}']}")
                save()
    for wname, build in worlds.items():
        world = result["worlds"].get(wname)
        split = build()
        if world is None:
            started = time.perf_counter()
            world = {"n_users": split.train.shape[0], "n_items": split.train.shape[1], "train": split.train.nnz,
                     "test": split.test_values.size, "baselines": baselines(split, config, seed), "allocations": {}}
            if surprise:
                world["surprise_svd_rmse"] = surprise_rmse(split, config, seed)
                world["ours_svd_rmse"] = world["baselines"]["all_public"]["rmse"]
            world["seconds"] = time.perf_counter() - started
            result["worlds"][wname] = world
            save()
        for scheme, beta in allocations:
            key = f"{scheme} {beta}"
            if key in world["allocations"]:
                continue
            s, b = SCHEMES.index(scheme), BETAS.index(beta) if beta in BETAS else len(BETAS)
            rng = np.random.default_rng([seed, s, b])
            private = allocate_private(split.train, scheme, beta, rng)
            world["allocations"][key] = evaluate_allocation(split, private, config, seed + 10 * s + b,
                                                            ablation_epochs)
            log(f"{wname} {scheme} Beta{beta}: " + ", ".join(
                f"{m} {world['allocations'][key][m]['rmse']:.4f}"
                for m in ("only_public", "naive", "clustering", "joint")))
            save()
    save()
    return result


def parse_allocation(text: str) -> tuple[str, tuple[float, float]]:
    """``"H1:2,2"`` → ``("H1", (2.0, 2.0))``."""
    scheme, beta = text.split(":")
    a, b = (float(x) for x in beta.split(","))
    if scheme not in SCHEMES:
        raise ParameterError("allocation", f"allocation {text!r}: the scheme is one of {', '.join(SCHEMES)}")
    return scheme, (a, b)


#: measured on MovieLens-100K (2 shared cores, user CPU): a split's fixed fits, an allocation's methods, peak memory.
#: 1 split x 1 allocation: 11.4 s user CPU, 383 MB peak RSS (estimated 14.5 s, 400 MB); 5 x 8: 464 s (estimated 475 s)
SECONDS_PER_SPLIT, SECONDS_PER_ALLOCATION, AUDIT_SECONDS, MEMORY = 3.0, 11.5, 60.0, 400 * 2 ** 20


@dataclass
class SP2Study(Study, kind="sp2"):
    """SP2's Table 2 on a ratings file (``dataset`` fetched by ``recaudit data``, or ``ratings``): all public,
    only public, naive, clustering, joint and all private for each allocation (``"H1:2,2"``: scheme and
    Beta), over ``splits`` per-user splits, beside scikit-surprise's SVD on the same splits; the server
    view's leakage audit when ``audit_trials`` > 0; the synthetic worlds only with ``synthetic``."""

    dataset: str | None = None
    ratings: str | None = None
    splits: int = 1
    allocations: list[str] = field(default_factory=lambda: [f"{s}:{a:g},{b:g}" for s in SCHEMES for a, b in BETAS])
    audit_trials: int = 0
    fine_tune_epochs: int = 20
    factors: int = 100
    clusters: int = 10
    surprise: bool = True
    synthetic: bool = False

    def __post_init__(self) -> None:
        self._allocations = [parse_allocation(a) for a in self.allocations]

    def _file(self) -> Path | None:
        return datasets.find(self.dataset) if self.dataset else Path(self.ratings) if self.ratings else None

    def check(self) -> None:
        ratings = self._file()
        if ratings is None:
            return
        data = load_ratings(ratings)
        rich = int(np.count_nonzero(np.diff(data.train.indptr) >= 5))
        if rich < 2 * self.clusters or data.n_items < 2 * self.clusters:
            raise DataTooSmall(f"{ratings}: {data.n_users} users ({rich} with 5 ratings or more) and {data.n_items} "
                               f"items are too few for {self.clusters} clusters (at least {2 * self.clusters} of each)")

    def estimate(self, seed: int, limits) -> dict:
        """CPU from measured runs on MovieLens-100K (80,000 training ratings; ``SECONDS_PER_SPLIT`` for a split's
        all-public, all-private and Surprise fits, ``SECONDS_PER_ALLOCATION`` for an allocation's four methods),
        scaled by the file's ratings and the factors; memory as measured (``MEMORY``)."""
        ratings = self._file()
        scale = (1.0 if ratings is None else load_ratings(ratings).train.nnz / 80_000) * self.factors / 100
        seconds = self.splits * (SECONDS_PER_SPLIT + SECONDS_PER_ALLOCATION * len(self._allocations)) * scale
        return {"seconds": seconds + (AUDIT_SECONDS if self.audit_trials else 0.0), "memory": MEMORY,
                "basis": f"{self.splits} splits x {len(self._allocations)} allocations, from measured runs"}

    def run(self, out: Path, seed: int, log) -> list[Path]:
        ratings = self._file()
        config = StudyConfig(factors=self.factors, fine_tune_epochs=self.fine_tune_epochs, clusters=self.clusters)
        run_study(out, seed, ratings, self.audit_trials, config, self.surprise, log=log,
                  synthetic=self.synthetic or ratings is None, splits=self.splits, allocations=self._allocations)
        return [out / "sp2_study.md", out / "sp2_study.json"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recaudit.studies.sp2", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for sp2_study.md / .json")
    parser.add_argument("--seed", type=int, default=2021)
    parser.add_argument("--ratings", type=Path, default=None,
                        help="a ratings file (e.g. MovieLens u.data) instead of the generated one")
    parser.add_argument("--audit-trials", type=int, default=100,
                        help="runs per world of each leakage audit (0: skip the audits)")
    parser.add_argument("--fine-tune-epochs", type=int, default=20)
    parser.add_argument("--factors", type=int, default=100, help="MF factors (Surprise's default 100)")
    parser.add_argument("--clusters", type=int, default=10, help="k-means clusters / joint centres")
    parser.add_argument("--sbm-users", type=int, default=943)
    parser.add_argument("--no-surprise", action="store_true", help="skip the scikit-surprise comparison")
    parser.add_argument("--dataset", help="a data set fetched by `recaudit data fetch` (e.g. movielens-100k)")
    parser.add_argument("--splits", type=int, default=1, help="per-user splits of the ratings file (mean ± sd)")
    parser.add_argument("--synthetic", action="store_true",
                        help="also the synthetic worlds (always when no --ratings / --dataset is given)")
    parser.add_argument("--allocations", nargs="+", metavar="H:a,b", help="e.g. H1:2,2 H2:2,2 (default: all 8)")
    args = parser.parse_args(argv)
    config = StudyConfig(factors=args.factors, fine_tune_epochs=args.fine_tune_epochs, clusters=args.clusters)
    ratings = datasets.find(args.dataset) if args.dataset else args.ratings
    allocations = [parse_allocation(a) for a in args.allocations] if args.allocations else None
    result = run_study(args.out, args.seed, ratings, args.audit_trials, config, not args.no_surprise,
                       args.sbm_users, log=lambda m: print(m, file=sys.stderr),
                       synthetic=args.synthetic or ratings is None, splits=args.splits, allocations=allocations)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
