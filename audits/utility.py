"""What privacy costs: how well the server's published clustering matches the truth (or, on real data,
the clustering the same data gives without privacy)."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from mechanisms.clustering import kmeans_1d
from simulator.transcript import Transcript

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
    """Accuracy of every release against time and users seen (None without ground truth)."""
    return [
        {"time": float(r.time), "users_seen": int(r.users_seen),
         "accuracy": None if truth is None else clustering_accuracy(r.item_labels, truth)}
        for r in transcript.releases
    ]


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


def presence_timeline(transcript: Transcript, horizon: float, points: int = 101) -> dict:
    """Users present (arrived, not yet left) at ``points`` evenly spaced times over ``[0, horizon]``."""
    times = np.linspace(0.0, horizon, points)
    arrived = np.searchsorted(np.sort(transcript.arrival), times, side="right")
    left = np.searchsorted(np.sort(transcript.departure), times, side="right")
    return {"time": [float(t) for t in times], "users_present": [int(n) for n in arrived - left]}
