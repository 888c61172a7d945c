"""Others' view membership attack on a trained model: how other users' recommendations move with a canary.

Under a joint-DP claim the adversary is everyone but the canary: each other user sees only what the model
gives *it* (its own predictions and recommendations), never the canary's output. The attack takes ``probes``
such users (the population's users who are not canaries: the trainer view's ``others``), asks the model for
their predicted ratings of every canary's items (``predict(histories, items)``) and scores a canary by how much
those predictions differ from probe to probe, averaged over its items: an item the model trained on (a
member's) has a factor shaped by ratings, so users' predictions of it spread; an item it never saw keeps what
the trainer gives an unrated item (for ALS a zero factor: every user the same prediction). The direction
(more spread: member) is fixed before any score is seen. A model without ``predict`` is scored by exposure
instead: how many probes' top-``k`` lists (``recommend``) hold one of the canary's items.
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


def probe_histories(view: View, n_items: int, probes: int) -> sparse.csr_matrix:
    """The first ``probes`` other users' rating rows of a trainer's view (``others``), checked against the model."""
    others = getattr(view, "others", None)
    if others is None or not sparse.issparse(others) or others.shape[0] == 0:
        raise ValueError("the view holds no other users' histories (the trainer design's others view gives them)")
    if others.shape[1] != n_items:
        raise ValueError(f"the other users rate {others.shape[1]} items, the model has {n_items} item factors")
    return sparse.csr_matrix(others[:probes], dtype=float)


@dataclass
class OthersViewAttack(Attack, kind="others_view"):
    """Spread of other users' predictions of a canary's items (or their exposure in others' top-``k`` lists)."""

    probes: Annotated[int, Ge(2)] = 200
    k: Annotated[int, Ge(1)] = 10
    views = ("releases", "others")
    reads_model = True
    test_mechanism = "trainer"

    def refusal(self, mechanism, view):
        return super().refusal(mechanism, view) or trainer_refusal(self, mechanism, "other users' predictions")

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        model = trained_model(view)
        n_items = released_factors(model).shape[0]
        canaries = canary_ratings(pair, n_items)
        pattern = sparse.csr_array((np.ones(canaries.nnz), canaries.indices, canaries.indptr), canaries.shape)
        histories = probe_histories(view, n_items, self.probes)
        if callable(getattr(model, "predict", None)):
            per_item = self._spread(model, histories, np.unique(canaries.indices), n_items)
        elif callable(getattr(model, "recommend", None)):
            per_item = self._exposure(model, histories, n_items)
        else:
            raise ValueError("the trained model has neither predict(histories, items) nor recommend(histories, k): "
                             "attack others_view needs one (use fold_in)")
        counts = np.maximum(np.diff(pattern.indptr), 1)
        return np.asarray(pattern @ per_item) / counts

    @staticmethod
    def _spread(model, histories, items: np.ndarray, n_items: int) -> np.ndarray:
        """Per item, the standard deviation over the probes of their predicted ratings (0 for items not asked)."""
        asked = np.broadcast_to(items, (histories.shape[0], items.size))
        predicted = np.asarray(model.predict(histories, asked), dtype=float)
        if predicted.shape != asked.shape:
            raise ValueError(f"the model's predict(histories, items) gave shape {predicted.shape}; expected "
                             f"{asked.shape} (users x items asked)")
        spread = np.zeros(n_items)
        spread[items] = predicted.std(axis=0)
        return spread

    def _exposure(self, model, histories, n_items: int) -> np.ndarray:
        """Per item, how many probes' top-``k`` lists hold it."""
        k = min(self.k, n_items)
        top = np.asarray(model.recommend(histories, k))
        if top.shape != (histories.shape[0], k) or not np.issubdtype(top.dtype, np.integer):
            raise ValueError(f"the model's recommend(histories, {k}) gave {top.dtype} of shape {top.shape}; "
                             f"expected integer item indices ({histories.shape[0]}, {k})")
        return np.bincount(top.ravel(), minlength=n_items).astype(float)
