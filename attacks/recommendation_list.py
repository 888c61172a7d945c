"""Recommendation-list membership attack (after Zhang et al., CCS 2021): members' recommendations sit closer to
their own history.

The adversary asks the deployed model for each canary's top-``k`` list (``model.recommend(histories, k)``, the
model folding in the canary from its ratings) and embeds items with the released ``item_factors``. Zhang et
al. train a classifier (on shadow models) on the difference between the centroid of a user's history items
and the centroid of its recommended items; without shadow data this attack scores that difference directly:
the cosine between the two centroids (0 when either is the zero vector, e.g. items no one trained). A
member's history shaped both the factors and its recommendations, so its cosine is higher.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np
from annotated_types import Ge
from scipy import sparse

from recaudit.mechanisms import Mechanism
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack
from .fold_in import canary_ratings, released_factors, trainer_refusal, trained_model


def _centroids(pattern: sparse.csr_array, factors: np.ndarray) -> np.ndarray:
    counts = np.maximum(np.diff(pattern.indptr), 1).astype(float)
    return np.asarray(pattern @ factors) / counts[:, None]


@dataclass
class RecommendationListAttack(Attack, kind="recommendation_list"):
    """Cosine between the centroid of a canary's history and that of its top-``k`` recommendations."""

    k: Annotated[int, Ge(1)] = 10
    views = ("releases", "others")
    reads_model = True
    test_mechanism = "trainer"

    def refusal(self, mechanism, view):
        return super().refusal(mechanism, view) or trainer_refusal(self, mechanism, "recommendations")

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        model = trained_model(view)
        if not callable(getattr(model, "recommend", None)):
            raise ValueError("the trained model has no recommend(histories, k): attack recommendation_list needs "
                             "one (use fold_in)")
        factors = released_factors(model)
        ratings = canary_ratings(pair, factors.shape[0])
        k = min(self.k, factors.shape[0])
        top = np.asarray(model.recommend(sparse.csr_matrix(ratings), k))
        if top.shape != (ratings.shape[0], k) or not np.issubdtype(top.dtype, np.integer):
            raise ValueError(f"the model's recommend(histories, {k}) gave {top.dtype} of shape {top.shape}; "
                             f"expected integer item indices ({ratings.shape[0]}, {k})")
        history = _centroids(sparse.csr_array((np.ones_like(ratings.data), ratings.indices, ratings.indptr),
                                              ratings.shape), factors)
        recommended = factors[top].mean(axis=1)
        norms = np.linalg.norm(history, axis=1) * np.linalg.norm(recommended, axis=1)
        dots = np.einsum("ur,ur->u", history, recommended)
        return np.where(norms > 0, dots / np.where(norms > 0, norms, 1.0), 0.0)
