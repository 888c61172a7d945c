"""Canary users of one training run: the one-run design for trainers (docs/guide/trainers.md).

The data set is the scenario's population (its users' rating rows, users x items). ``m`` canary users are
added, each included by a fair coin (Steinke, Nasr, Jagielski 2023): its membership is its secret world (1: in
the training matrix). Two kinds:

* ``isolated`` (the default, the worst case): each canary rates ``canary_ratings`` items of its own that no
  one else rates (columns appended after the population's), with values drawn from the population's ratings.
  Canaries then do not interfere: an included canary's items are fitted to it alone, a left-out canary's
  items are never seen.
* ``resampled`` (realistic): the canaries are ``m`` real users of the population; a left-out canary's row is
  removed from the training matrix, the rest of the population is always in.

The training matrix's rows are shuffled (a trainer sees no canary block), the trainer is fitted once, and
every attack scores every canary from what the model publishes: the ``releases`` view holds the model as the
run's one release; the pair's rows are the canaries' (world 0 leaves a canary out, world 1 keeps it in).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from scipy import sparse

from recaudit.core.errors import BadInput
from recaudit.mechanisms import UserBatch
from recaudit.simulator.seeds import stream
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import OthersView, Release

from ..utility import baseline_predictions
from .base import DesignError

CANARY_KINDS = ("isolated", "resampled")


@dataclass(frozen=True)
class Canaries:
    """One training run's data: the training matrix and the canaries (their rows and membership)."""

    training: sparse.csr_matrix  # users x items, float ratings, rows shuffled: what the trainer gets
    rows: sparse.csr_array  # canaries x items: every canary's ratings (members' and non-members')
    worlds: np.ndarray  # 1: the canary is in the training matrix
    kind: str
    population_users: int  # rows of the population (resampled canaries are among them)
    reserved_items: int  # items only isolated canaries rate (0 for resampled)
    held_out: sparse.csr_array | None = None  # held-out ratings of the training matrix's rows (same order)
    #: the training matrix without any canary (every one out): what reference runs train on
    without: sparse.csr_matrix | None = None
    without_held_out: sparse.csr_array | None = None  # held-out ratings of ``without``'s rows (same order)

    @property
    def members(self) -> int:
        return int(self.worlds.sum())

    def pair(self) -> TargetPair:
        """The canaries as a pair of rows: world 1 trains on them, world 0 leaves them out (add/remove)."""
        ratings = sparse.csr_array(self.rows)
        batch = UserBatch(ratings, sparse.csr_array(ratings > 0))
        return TargetPair(batch, batch)


def population_rows(population, catalogue, n_users: int, rng: np.random.Generator) -> tuple[sparse.csr_array,
                                                                                          sparse.csr_array | None]:
    """``n_users`` users' rating rows of the population (users x items) and their held-out ratings, if any."""
    run = population.for_run() if hasattr(population, "for_run") else population
    source, users = run.sample_users(n_users, catalogue, rng)
    held_out = users.held_out
    test = getattr(run, "test", None)
    if held_out is None and test is not None and np.min(source, initial=0) >= 0:
        held_out = sparse.csr_array(test)[np.asarray(source)]
    return sparse.csr_array(users.ratings, dtype=float), held_out


def draw_canaries(ratings: sparse.csr_array, held_out: sparse.csr_array | None, m: int, kind: str,
                  per_canary: int, rng: np.random.Generator) -> Canaries:
    """The training matrix with ``m`` canaries of ``kind`` (each in with probability ½)."""
    n_users, n_items = ratings.shape
    worlds = rng.integers(0, 2, m)
    if kind == "isolated":
        if ratings.nnz == 0:
            raise DesignError("the population holds no rating: isolated canaries copy its rating values")
        values = rng.choice(ratings.data, size=m * per_canary)
        values[values == 0] = 1.0  # a stored zero would vanish
        reserved = m * per_canary
        columns = n_items + np.arange(reserved)
        indptr = np.arange(m + 1) * per_canary
        shape = (m, n_items + reserved)
        rows = sparse.csr_array((values, columns, indptr), shape=shape)
        background = sparse.csr_array((ratings.data, ratings.indices, ratings.indptr), shape=(n_users, shape[1]))
        stacked = sparse.vstack([background, rows[worlds == 1]], format="csr")
        without = background
        without_held = None if held_out is None else sparse.csr_array(
            (held_out.data, held_out.indices, held_out.indptr), shape=(n_users, shape[1]))
        held = None if held_out is None else sparse.vstack(
            [without_held, sparse.csr_array((worlds.sum(), shape[1]))], format="csr")
    elif kind == "resampled":
        if m >= n_users:
            raise DesignError(f"{m} resampled canaries asked for; the population has {n_users} users "
                              "(canaries are some of them)")
        chosen = rng.choice(n_users, m, replace=False)
        keep = np.ones(n_users, bool)
        keep[chosen[worlds == 0]] = False
        rows, stacked, reserved = ratings[chosen], ratings[keep], 0
        nobody = keep.copy()
        nobody[chosen] = False
        without = ratings[nobody]
        held = None if held_out is None else held_out[keep]
        without_held = None if held_out is None else held_out[nobody]
    else:
        raise DesignError(f"no canary kind {kind!r}; known: {', '.join(CANARY_KINDS)}")
    order = rng.permutation(stacked.shape[0])
    training = sparse.csr_matrix(stacked[order])
    training.sort_indices()
    return Canaries(training, sparse.csr_array(rows), worlds, kind, n_users, reserved,
                    None if held is None else sparse.csr_array(held[order]), sparse.csr_matrix(without), without_held)


@dataclass
class TrainerRun:
    """One audited training run: the canaries, the model, every attack's scores and what each step cost."""

    canaries: Canaries
    model: Any
    scores: np.ndarray  # (attacks, canaries)
    train_seconds: float
    build_seconds: float
    attack_seconds: float
    check_seconds: float
    #: the scores minus each canary's mean score under the reference runs (None: no reference run)
    calibrated: np.ndarray | None = None
    reference_seconds: float = 0.0
    #: when the model was (re)trained: one release at 0, or every release of a churn schedule
    release_times: tuple[float, ...] = (0.0,)
    #: retraining under churn: how many users each release trained on, and canaries present at no release
    training_users: tuple[int, ...] = ()
    unscored: int = 0


def score_model(job, model, users: int, pair: TargetPair, m: int, others: sparse.csr_matrix) -> np.ndarray:
    """Every attack's score of every canary on ``model`` (one release): (attacks, canaries). The view's ``others``
    are the rating rows of the users who are not canaries (what an others'-view attack probes the model with)."""
    view = OthersView(releases=((Release(0.0, users, model),),), rounds=((),), audited=np.arange(m), others=others)
    try:
        scores = np.stack([np.asarray(a.scores(job.mechanism, pair, view), dtype=float) for a in job.attacks])
    except BadInput:
        raise
    except ValueError as exc:
        raise DesignError(f"an attack cannot score the trained model: {exc}") from None
    if scores.shape != (len(job.attacks), m) or not np.all(np.isfinite(scores)):
        raise DesignError("an attack gave non-finite scores for the trained model (its fold-in or recommendations "
                          "broke)")
    return scores


def canaries_checked(job, population_users: int, m: int, kind: str, per_canary: int,
                     report: Callable[[str], None]) -> tuple[Canaries, float, float]:
    """The population's matrix with its canaries, and the trainer's seed use checked on it (two small fits);
    with the seconds each took."""
    mechanism, root = job.mechanism, job.root()
    begun = time.perf_counter()
    ratings, held_out = population_rows(job.population, job.catalogue, population_users,
                                        stream(root, "trainer", "population"))
    canaries = draw_canaries(ratings, held_out, m, kind, per_canary, stream(root, "trainer", "canaries"))
    built = time.perf_counter()
    if not getattr(mechanism, "check_seed", False):
        return canaries, built - begun, 0.0
    report("checking that the trainer's coins come from its rng (two small fits, one seed)")
    mechanism.check_reproducible(canaries.training, np.random.SeedSequence(root.entropy, spawn_key=(7,)))
    return canaries, built - begun, time.perf_counter() - built


def train_once(job, population_users: int, m: int, kind: str, per_canary: int,
               report: Callable[[str], None] = lambda _: None, references: int = 0) -> TrainerRun:
    """Build the population's matrix and the canaries, check the trainer's seed use, train once, score.

    ``references`` > 0: that many more training runs without any canary (each its own seed) score every
    canary as a non-member; the calibrated scores are each canary's score minus its mean reference score
    (offline LiRA with a fixed variance, Carlini et al. 2022: a canary hard to fit whoever trains is no longer
    taken for a non-member).
    """
    mechanism, root = job.mechanism, job.root()
    canaries, build_seconds, check_seconds = canaries_checked(job, population_users, m, kind, per_canary, report)
    report(f"training once on {canaries.training.shape[0]:,} users x {canaries.training.shape[1]:,} items "
           f"({canaries.training.nnz:,} ratings; {canaries.members} of {m} {kind} canaries in)")
    started = time.perf_counter()
    model = mechanism.train(canaries.training, stream(root, "trainer", "fit"))
    trained = time.perf_counter()
    pair = canaries.pair()
    scores = score_model(job, model, canaries.training.shape[0], pair, m, canaries.without)
    scored = time.perf_counter()
    calibrated = None
    if references:
        report(f"{references} reference training run(s) without the canaries, to calibrate their scores")
        out = [score_model(job, mechanism.train(canaries.without, stream(root, "trainer", "reference", k)),
                       canaries.without.shape[0], pair, m, canaries.without) for k in range(references)]
        calibrated = scores - np.mean(out, axis=0)
    return TrainerRun(canaries, model, scores, trained - started, build_seconds, scored - trained, check_seconds,
                      calibrated, time.perf_counter() - scored)



# ---------------------------------------------------------------- what a trainer's report states


def roc_points(scores: np.ndarray, worlds: np.ndarray, fprs: tuple[float, ...] = (0.01, 0.001)) -> dict:
    """AUC and the TPR at each false-positive rate of ``fprs`` (point estimates, as MIA papers report them: not
    bounds; the ε_LB beside them is the bound)."""
    from sklearn.metrics import roc_auc_score, roc_curve

    worlds = np.asarray(worlds).astype(int)
    if worlds.min(initial=0) == worlds.max(initial=0):
        return {"auc": None} | {f"tpr_at_fpr_{f:g}": None for f in fprs}
    fpr, tpr, _ = roc_curve(worlds, scores)
    out = {"auc": float(roc_auc_score(worlds, scores))}
    for f in fprs:
        out[f"tpr_at_fpr_{f:g}"] = float(tpr[fpr <= f].max(initial=0.0))
    return out


def trainer_summary(run: TrainerRun, labels: list[str], claim, alpha: float, tests: int, kind: str,
                    per_canary: int, audit_seconds: float) -> dict:
    """The trainer section of a report: the canaries' design, AUC and TPR at low FPR per attack, ε_LB of every
    one-run estimator that can judge the claim (each with what it assumes), the training time and overhead."""
    import dataclasses

    from ..stats.estimators import ESTIMATORS, ANY_MECHANISM

    canaries, worlds = run.canaries, run.canaries.worlds
    measured = claim if claim.promises else dataclasses.replace(claim, epsilon=0.0)
    estimators = []
    for name, cls in ESTIMATORS.items():
        if cls.input != "canaries":
            continue
        estimator = cls()
        if not estimator.supports(measured):
            continue
        bounds = [estimator.estimate(run.scores[a], worlds, measured, alpha / tests) for a in range(len(labels))]
        # epsilon_lb is always a bound (the unconditional fallback when the model is not guaranteed: no trained
        # model's scores are Gaussian by construction); the model's own figure is epsilon_estimate
        estimators.append({"estimator": name, "method": cls.method, "assumes": cls.valid_for,
                           "bound": cls.valid_for == ANY_MECHANISM, "bound_method": bounds[0].bound_method,
                           "epsilon_lb": {label: b.epsilon_lb for label, b in zip(labels, bounds)},
                           "epsilon_estimate": {label: b.epsilon_estimate for label, b in zip(labels, bounds)},
                           "uninformative": {label: b.uninformative for label, b in zip(labels, bounds)}})
    train = run.train_seconds
    return {
        "canaries": {"kind": kind, "m": int(worlds.size), "members": canaries.members,
                     "ratings_per_canary": per_canary if kind == "isolated" else None,
                     "reserved_items": canaries.reserved_items, "population_users": canaries.population_users,
                     "training_users": int(canaries.training.shape[0]),
                     "training_ratings": int(canaries.training.nnz)},
        "attacks": {label: roc_points(run.scores[a], worlds) for a, label in enumerate(labels)},
        "estimators": estimators,
        "alpha_per_test": alpha / tests,
        "train_seconds": round(train, 4),
        "seed_check_seconds": round(run.check_seconds, 4),
        "data_seconds": round(run.build_seconds, 4),
        "attack_seconds": round(run.attack_seconds, 4),
        "reference_seconds": round(run.reference_seconds, 4),
        "audit_seconds": round(audit_seconds, 4),
        "overhead": round(audit_seconds / train, 3) if train > 0 else None,
    } | ({} if not run.training_users else {"continual": {
        "releases": len(run.release_times), "release_times": list(run.release_times),
        "training_users": list(run.training_users), "unscored_canaries": run.unscored,
        "score": "each canary's mean over the releases it was present at"}})


def trainer_world(run: TrainerRun, catalogue, horizon: float) -> dict:
    """The report's ``world`` of a trainer's audit: its (last) training matrix, canaries and releases."""
    training = run.canaries.training
    return {"users_arrived": int(training.shape[0]), "users_answered": int(training.shape[0]),
            "answers": int(training.nnz), "canaries": int(run.canaries.worlds.size),
            "releases": len(run.release_times), "n_items": int(training.shape[1]),
            "n_item_clusters": catalogue.n_item_clusters, "horizon": horizon,
            "release_times": list(run.release_times), "training_runs": len(run.release_times)}


def trainer_utility(run: TrainerRun) -> dict:
    """Held-out RMSE of the model (``predict``, else a fold-in against ``item_factors``) on the training users'
    held-out ratings, beside predicting 0, the training mean and the non-private bias model and ALS fitted on the
    same training matrix (``recaudit.audits.utility.baseline_predictions``); not measured without held-out
    ratings."""
    held = run.canaries.held_out
    base = {"metric": "held-out RMSE", "final_accuracy": None, "curve": [], "rmse": None, "zero_rmse": None,
            "mean_rmse": None}
    if held is None or held.nnz == 0:
        return base
    held = sparse.csr_array(held)
    counts = np.diff(held.indptr)
    users = np.flatnonzero(counts)  # each user's held-out items in one row, padded with its first
    width = int(counts.max())
    slot = np.arange(held.nnz) - np.repeat(held.indptr[users], counts[users])
    items = np.repeat(held.indices[held.indptr[users]][:, None], width, axis=1)
    items[np.repeat(np.arange(users.size), counts[users]), slot] = held.indices
    histories = sparse.csr_matrix(run.canaries.training[users])
    model = run.model
    if not callable(getattr(model, "predict", None)):
        from recaudit.mechanisms.als import FactorModel

        model = FactorModel(np.asarray(model.item_factors, dtype=float))
    predicted = np.asarray(model.predict(histories, items), dtype=float)
    predicted = predicted[np.repeat(np.arange(users.size), counts[users]), slot]
    truth = held.data
    mean = float(run.canaries.training.data.mean())
    baselines = baseline_predictions(sparse.csr_array(run.canaries.training), np.repeat(users, counts[users]),
                                     held.indices)
    return base | {"rmse": float(np.sqrt(np.mean((predicted - truth) ** 2))),
                   "zero_rmse": float(np.sqrt(np.mean(truth ** 2))),
                   "mean_rmse": float(np.sqrt(np.mean((mean - truth) ** 2))), "held_out": int(truth.size),
                   "reference": "the ratings each user's row withheld (population held_out)"} | {
        name: float(np.sqrt(np.mean((values - truth) ** 2))) for name, values in baselines.items()
        if name != "mean_rmse"}
