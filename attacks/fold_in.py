"""Fold-in (reconstruction-loss) membership attack on a trained model's released item factors.

The adversary holds a canary's ratings and the model's ``item_factors`` (the joint-DP "billboard"). It fits
the canary's user factor by ridge regression on its ratings against the released factors of the items it
rated, ``u = (V_Iᵀ V_I + λ n I)⁻¹ V_Iᵀ r`` (the fold-in a deployed system runs for a new user), and scores
the fit: a member's ratings shaped the factors, so they are fitted better (Hu et al. 2023 report AUC 0.857
on MovieLens against latent-factor models). The score is minus the residual, normalised by the canary's
ratings' energy (``normalise``): ``−‖r − V_I u‖² / ‖r‖²``, so canaries with many or large ratings compare
with the others. ``ridge`` is λ relative to the mean squared norm of an item factor (scale-free).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

import numpy as np
from annotated_types import Gt
from scipy import sparse

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.als import ridge_rows
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack


def trained_model(view: View) -> Any:
    """The trained model a trainer audit's view holds (its one release), or ValueError."""
    try:
        return view.releases[0][-1].published
    except (AttributeError, IndexError, TypeError):
        raise ValueError("the view holds no trained model: this attack scores a trainer's one release "
                         "(mechanism kind trainer, design one_run)") from None


def model_refusal(attack: Attack, mechanism: Mechanism | None) -> str | None:
    """Why a model-reading attack cannot score ``mechanism``'s runs: it reads releases that carry item factors,
    a trainer's model (``trains``) or a mechanism's that says it publishes them (``publishes_item_factors``)."""
    if mechanism is not None and not (getattr(mechanism, "trains", False)
                                      or getattr(mechanism, "publishes_item_factors", False)):
        return (f"{attack.kind} reads released item factors (a trainer's model, or a mechanism with "
                f"publishes_item_factors), not {mechanism.kind}'s releases")
    return None


def trainer_refusal(attack: Attack, mechanism: Mechanism | None, asks: str) -> str | None:
    """:func:`model_refusal`, and a refusal of any mechanism but a trainer (the attack ``asks`` its model more than
    the published item factors: recommendations, other users' predictions)."""
    reason = model_refusal(attack, mechanism)
    if reason is None and mechanism is not None and not getattr(mechanism, "trains", False):
        return f"{attack.kind} asks a trained model for {asks} (a trainer's), not {mechanism.kind}'s"
    return reason


def released_factors(model: Any) -> np.ndarray:
    """The ``item_factors`` of a released model: an attribute, or a key of a published mapping."""
    factors = model.get("item_factors") if isinstance(model, dict) else getattr(model, "item_factors", None)
    if factors is None:
        raise ValueError("the released model has no item_factors")
    return np.asarray(factors, dtype=float)


def canary_ratings(pair: TargetPair, n_items: int, world: int = 1) -> sparse.csr_array:
    """The audited users' ratings in ``world`` (users x items), checked against the model's items."""
    ratings = sparse.csr_array(pair.rows(world).ratings, dtype=float)
    if ratings.shape[1] != n_items:
        raise ValueError(f"the canaries rate {ratings.shape[1]} items, the model has {n_items} item factors")
    return ratings


@dataclass
class FoldInAttack(Attack, kind="fold_in"):
    """Fits each canary's user factor to its ratings against the released item factors: members fit better."""

    ridge: Annotated[float, Gt(0)] = 1e-3
    normalise: bool = True
    views = ("releases", "others")
    reads_model = True
    test_mechanism = "trainer"

    def refusal(self, mechanism, view):
        return super().refusal(mechanism, view) or model_refusal(self, mechanism)

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        """One score per canary of a one-run view (a trainer's, or the engine's one_run design), else one per run.

        A trainer's canaries hold one row (``rows0 is rows1``: world 0 leaves them out), scored by their fit;
        a replace pair's by the fit of their world-1 row minus that of their world-0 row.
        """
        self.check_view(view, mechanism)
        if view.audited is not None:
            return self._pair_fit(pair, released_factors(trained_model(view)))
        return np.array([self._pair_fit(pair, released_factors(run[-1].published))[0] for run in view.releases])

    def _pair_fit(self, pair: TargetPair, factors: np.ndarray) -> np.ndarray:
        fit = self._fit(canary_ratings(pair, factors.shape[0]), factors)
        if pair.rows0 is pair.rows1:
            return fit
        return fit - self._fit(canary_ratings(pair, factors.shape[0], 0), factors)

    def _fit(self, ratings: sparse.csr_array, factors: np.ndarray) -> np.ndarray:
        """``−‖r − V_I u‖²`` (over ``‖r‖²`` when normalised) per row, ``u`` the ridge fold-in; 0 for an empty row."""
        pattern = sparse.csr_array((np.ones_like(ratings.data), ratings.indices, ratings.indptr), ratings.shape)
        scale = float(np.mean(np.sum(factors ** 2, axis=1)))
        reg = self.ridge * scale if scale > 0 else 1.0
        users = ridge_rows(pattern, ratings, factors, reg)
        rows = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
        fitted = np.einsum("er,er->e", users[rows], factors[ratings.indices])
        residual = np.bincount(rows, (ratings.data - fitted) ** 2, minlength=ratings.shape[0])
        if self.normalise:
            energy = np.bincount(rows, ratings.data ** 2, minlength=ratings.shape[0])
            residual = residual / np.maximum(energy, 1e-300)
        return -residual
