"""What privacy costs: how well the server's published clustering matches the truth."""
from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from simulator.transcript import Transcript


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
