"""What privacy costs: how well the server's published clustering matches the truth (or, on real data,
the clustering the same data gives without privacy); held-out RMSE of completed rows; the error of a
released covariance."""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.optimize import linear_sum_assignment

from recaudit.mechanisms.baselines import fit_als, fit_bias_model
from recaudit.mechanisms.clustering import kmeans_1d
from recaudit.mechanisms.matrix_completion import gram
from recaudit.simulator.metrics import ndcg_at_k, rmse
from recaudit.simulator.transcript import Transcript

TRUTH_METRIC = "item clustering accuracy"
AGREEMENT_METRIC = "agreement with the non-private clustering"
AGREEMENT_REFERENCE = ("exact 1-D k-means of every item's like rate over all users of the ratings file "
                       "(the statistic MaxSense estimates, computed without privacy)")


def clustering_accuracy(labels: np.ndarray, truth: np.ndarray) -> float:
    """Fraction of items in the right cluster under the best matching of cluster names."""
    labels, truth = np.asarray(labels), np.asarray(truth)
    size = int(max(labels.max(initial=0), truth.max(initial=0))) + 1
    confusion = np.zeros((size, size), dtype=np.int64)
    np.add.at(confusion, (labels, truth), 1)
    rows, cols = linear_sum_assignment(-confusion)
    return float(confusion[rows, cols].sum() / truth.size)


def accuracy_curve(transcript: Transcript, truth: np.ndarray | None) -> list[dict]:
    """Accuracy of every release against time and users seen.

    None without ground truth, and for releases that are not an item clustering (a matrix-completion
    or public/private-users mechanism publishes factors, not labels).
    """
    def is_clustering(release) -> bool:
        labels = release.published
        return (isinstance(labels, np.ndarray) and labels.dtype.kind in "iu"
                and truth is not None and labels.shape == np.shape(truth))

    return [
        {"time": float(r.time), "users_seen": int(r.users_seen),
         "accuracy": clustering_accuracy(r.published, truth) if is_clustering(r) else None}
        for r in transcript.releases
    ]


def predicted_at(outputs, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Entries ``(rows[e], items[e])`` of personal outputs: a predictor's ``at`` (``LowRankRows``,
    SP2's ``DeviceRows``) or, for dense predicted rows (Xin–Jaakkola), plain indexing."""
    return outputs.at(rows, items) if hasattr(outputs, "at") else np.asarray(outputs)[rows, items]


#: the non-private ALS every held-out RMSE is read next to (its rank and weighted-λ; checked against Surprise)
ALS_RANK, ALS_REG, ALS_SWEEPS = 20, 0.1, 10
#: ALS is fitted only up to this many training ratings (about 0.25 s of CPU per 10^4 ratings at rank 20)
ALS_MAX_RATINGS = 1_000_000
_BASELINES: dict = {}


def baseline_predictions(train: sparse.csr_array, rows: np.ndarray, items: np.ndarray) -> dict[str, np.ndarray]:
    """Predictions at ``(rows, items)`` of the non-private references fitted on ``train``: the global mean, the
    bias model and ALS (rank ``ALS_RANK``, up to ``ALS_MAX_RATINGS`` training ratings); remembered for the last
    training table, so the points of a grid
    over one data set fit them once."""
    key = (train.shape, train.nnz, hash(train.indptr.tobytes()), hash(train.indices.tobytes()),
           hash(train.data.tobytes()))
    if key not in _BASELINES:
        _BASELINES.clear()
        _BASELINES[key] = (fit_bias_model(train), fit_als(train, ALS_RANK, np.random.default_rng(0), ALS_REG,
                                                          ALS_SWEEPS) if train.nnz <= ALS_MAX_RATINGS else None)
    bias, als = _BASELINES[key]
    return {"mean_rmse": np.full(rows.size, bias.mean), "bias_rmse": bias.predict(rows, items)} | (
        {"als_rmse": als.predict(rows, items)} if als is not None else {})


def completion_rmse(transcript: Transcript, test, source: np.ndarray | None = None,
                    train_mean: float | None = None, train: sparse.csr_array | None = None) -> dict:
    """Held-out RMSE (and NDCG@10) of users' predictions (personal outputs) against ``test`` ratings.

    ``test`` has one row per source row; ``source`` maps user ids to them (default: the
    transcript's ``user_cluster``, a ``MatrixPopulation``'s source rows; a population that
    withholds ratings passes the identity over ``transcript.held_out``). Canaries are left
    out. Also reports the RMSE of predicting 0 (the scale of the ratings) and, given ``train_mean``,
    of predicting the mean training rating (what any predictor must beat) for reference; given the
    training table ``train`` (rows as ``test``'s), the non-private bias model's and ALS's RMSE on the
    same held-out entries (:func:`baseline_predictions`);
    NDCG@10 (``recaudit.simulator.metrics``) only when every held-out rating is positive (star levels).
    """
    users = transcript.output_user
    background = ~np.isin(users, transcript.inserted)
    outputs = transcript.outputs[np.flatnonzero(background)]
    source = transcript.user_cluster if source is None else source
    rows_of = source[users[background]]  # each output's row of ``test`` (and of ``train``)
    held = sparse.coo_array(test[rows_of])  # rows follow ``outputs``
    result = {"metric": "held-out RMSE", "reference": "the held-out ratings of the panel's users",
              "final_accuracy": None, "curve": [], "rmse": None, "zero_rmse": None, "held_out": int(held.nnz),
              "ndcg10": None}
    if held.nnz:
        predictions = predicted_at(outputs, held.row, held.col)
        result["rmse"] = rmse(predictions, held.data)
        result["zero_rmse"] = rmse(np.zeros(held.nnz), held.data)
        alone = outputs.centring_only() if hasattr(outputs, "centring_only") else None
        if alone is not None:  # the run's own private bias model: its released centring and users' offsets
            result["centring_rmse"] = rmse(alone.at(held.row, held.col), held.data)
        result["mean_rmse"] = None if train_mean is None else rmse(np.full(held.nnz, train_mean), held.data)
        if train is not None:
            for name, predicted in baseline_predictions(train, rows_of[held.row], held.col).items():
                result[name] = rmse(predicted, held.data)
        if held.data.min() > 0:
            result["ndcg10"] = ndcg_at_k(held.row, predictions, held.data, 10)
    return result


COVARIANCE_METRIC = "relative Frobenius error of the released covariance"


def covariance_error(transcript: Transcript) -> dict:
    """‖R_t − S_t‖_F / ‖S_t‖_F of every release ``R_t`` of a covariance server
    (``recaudit.mechanisms.continual_covariance``).

    ``S_t`` is the exact ``AᵀA`` of the messages (clipped rows) answered by the
    release's time: the transcript must keep every message and answer time.
    """
    messages, times = transcript.messages, transcript.answer_time
    curve = []
    for release in transcript.releases:
        truth = gram(messages[np.flatnonzero(times <= release.time)])
        scale = float(np.linalg.norm(truth))
        error = float(np.linalg.norm(release.published["covariance"] - truth)) / scale if scale > 0 else None
        curve.append({"time": float(release.time), "users_seen": int(release.users_seen), "accuracy": None,
                      "covariance_error": error})
    return {"metric": COVARIANCE_METRIC, "final_accuracy": None, "curve": curve,
            "reference": "the exact AᵀA of the clipped rows of every user answered by the release",
            "covariance_error": curve[-1]["covariance_error"] if curve else None}


def utility_summary(utility: dict) -> str:
    """One phrase for the utility a run measured (clustering accuracy, held-out RMSE, covariance error), or why
    it measured none; an RMSE worse than predicting 0 says so."""
    if utility.get("metric") == "held-out RMSE":
        if utility["rmse"] is None:
            return "utility not measured: the population holds out no ratings to score predictions on"
        ndcg = utility.get("ndcg10")
        worse = utility["zero_rmse"] is not None and utility["rmse"] > utility["zero_rmse"]
        bias, als = utility.get("bias_rmse"), utility.get("als_rmse")
        return (f"held-out RMSE {utility['rmse']:.4g}" + (f" (NDCG@10 {ndcg:.4g})" if ndcg is not None else "")
                + f" (predicting 0: {utility['zero_rmse']:.4g}"
                + (f"; the mean: {utility['mean_rmse']:.4g}" if utility.get("mean_rmse") is not None else "")
                + (f"; non-private bias model {bias:.4g}" + (f", ALS rank {ALS_RANK} {als:.4g}" if als is not None
                                                              else "")
                   + f": {utility['rmse'] - bias:+.4g} against the bias model"
                   + ("; worse than the non-private bias model" if utility["rmse"] > bias else "")
                   if bias is not None else "")
                + (f"; its own private bias model (the centring alone) {utility['centring_rmse']:.4g}"
                   + ("; worse than its private bias model: the private low-rank part adds nothing, or harms"
                      if utility["rmse"] > utility["centring_rmse"] else "")
                   if utility.get("centring_rmse") is not None else "")
                + ("; worse than predicting 0: too few users for what the mechanism estimates, its noise and "
                   "sampling error outweigh the signal)" if worse else ")"))
    if utility.get("metric") == COVARIANCE_METRIC:
        error = utility.get("covariance_error")
        return f"relative covariance error {'n/a' if error is None else f'{error:.4g}'} at the last release"
    value = utility.get("final_accuracy")
    metric = utility.get("metric", "item clustering accuracy")
    label = "clustering accuracy" if metric == "item clustering accuracy" else metric
    if value is None:
        return "utility not measured: no release is an item clustering to score"
    return f"{label} {value:.4g}"


def utility_reference(population, catalogue) -> tuple[np.ndarray | None, str, str | None]:
    """The labels releases are scored against, the metric's name and how the reference was made.

    Simulated worlds have true item clusters; a ratings file has none, so its
    releases are compared with the non-private clustering of the same data.
    """
    if catalogue.item_labels is not None:
        return catalogue.item_labels, TRUTH_METRIC, "the true item clusters of the simulated world"
    rates = getattr(population, "item_like_rates", None)
    if rates is None:
        return None, TRUTH_METRIC, None
    return kmeans_1d(rates(), catalogue.n_item_clusters), AGREEMENT_METRIC, AGREEMENT_REFERENCE


def recording_needs(mechanism, population, view: str) -> dict:
    """What the recorder must keep for the utility (and the ``others`` view): outputs and messages."""
    matrix = getattr(population, "matrix", None)
    held_out = (matrix is not None and matrix.test is not None) or getattr(population, "held_out", 0) > 0
    return {"outputs": "all" if held_out or view == "others" else "watched",
            "messages": "all" if getattr(mechanism, "publishes", None) == "covariance" else "watched"}


def measure_utility(mechanism, population, catalogue, transcript: Transcript) -> dict:
    """The run's utility, chosen by what it publishes: a covariance server's relative error, a panel's
    held-out RMSE, the held-out RMSE and NDCG@10 of users' predictions when the population withholds
    ratings (``held_out``), or else the item clustering's accuracy against the truth (or agreement on a file)."""
    if getattr(mechanism, "publishes", None) == "covariance":
        return covariance_error(transcript)
    matrix = getattr(population, "matrix", None)
    if matrix is not None and matrix.test is not None and transcript.outputs is not None:
        return completion_rmse(transcript, matrix.test, train_mean=float(matrix.rows.ratings.data.mean()),
                               train=sparse.csr_array(matrix.rows.ratings))
    if transcript.held_out is not None and transcript.outputs is not None:
        result = completion_rmse(transcript, transcript.held_out, np.arange(transcript.n_users))
        return result | {"reference": "the ratings each user's row withheld (population held_out)"}
    reference, metric, reference_note = utility_reference(population, catalogue)
    curve = accuracy_curve(transcript, reference)
    return {"metric": metric, "reference": reference_note,
            "final_accuracy": curve[-1]["accuracy"] if curve else None, "curve": curve}


def presence_timeline(transcript: Transcript, horizon: float, points: int = 101) -> dict:
    """Users present (arrived, not yet left) at ``points`` evenly spaced times over ``[0, horizon]``."""
    times = np.linspace(0.0, horizon, points)
    arrived = np.searchsorted(np.sort(transcript.arrival), times, side="right")
    left = np.searchsorted(np.sort(transcript.departure), times, side="right")
    return {"time": [float(t) for t in times], "users_present": [int(n) for n in arrived - left]}
