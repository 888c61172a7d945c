"""Accuracy of predicted ratings: RMSE and NDCG@k, vectorised over users (shared by every study)."""
from __future__ import annotations

import numpy as np

from recaudit.core.errors import ParameterError


def rmse(predicted: np.ndarray, actual: np.ndarray) -> float:
    """Root mean squared error of ``predicted`` against ``actual`` (same shape, at least one entry)."""
    predicted, actual = np.asarray(predicted, float), np.asarray(actual, float)
    if predicted.shape != actual.shape:
        raise ParameterError("predicted", f"rmse: shapes differ, {predicted.shape} vs {actual.shape}")
    if predicted.size == 0:
        raise ParameterError("predicted", "rmse: no ratings to score")
    return float(np.sqrt(np.mean((predicted - actual) ** 2)))


def ndcg_at_k(users: np.ndarray, predicted: np.ndarray, actual: np.ndarray, k: int = 10) -> float:
    """Mean NDCG@k over users of a held-out set of (user, predicted, actual) triples.

    Each user's held-out items are ranked by ``predicted``; the gain of an item is its ``actual``
    rating (linear gain, log2 discount), normalised by the ideal ranking of the same items. Users
    whose held-out ratings are all zero (no ideal gain) are left out; ties in ``predicted`` keep the
    order of the input, so the result is deterministic.
    """
    users, predicted, actual = np.asarray(users), np.asarray(predicted, float), np.asarray(actual, float)
    if not (users.shape == predicted.shape == actual.shape) or users.ndim != 1:
        raise ParameterError("k", "ndcg_at_k: users, predicted and actual must be 1-D arrays of one length")
    if k < 1:
        raise ParameterError("k", f"ndcg_at_k: k must be at least 1, got {k}")
    if users.size == 0:
        raise ParameterError("k", "ndcg_at_k: no ratings to score")
    _, user_index = np.unique(users, return_inverse=True)

    def dcg(order_key: np.ndarray) -> np.ndarray:
        # sort by user, then by descending key (stable: input order breaks ties)
        order = np.lexsort((-order_key, user_index))
        sorted_users = user_index[order]
        starts = np.r_[0, np.flatnonzero(np.diff(sorted_users)) + 1]
        rank = np.arange(users.size) - np.repeat(starts, np.diff(np.r_[starts, users.size]))
        gains = np.where(rank < k, actual[order] / np.log2(rank + 2), 0.0)
        return np.bincount(sorted_users, weights=gains)

    achieved, ideal = dcg(predicted), dcg(actual)
    scored = ideal > 0
    if not scored.any():
        raise ParameterError("k", "ndcg_at_k: every user's held-out ratings are zero")
    return float(np.mean(achieved[scored] / ideal[scored]))

