"""Private projected gradient descent for matrix completion (the baseline of Jain et al. 2018;
docs/families/matrix-completion.md).

The same global/local split as private Frank–Wolfe (``GramCompletion``):
each round users send ``A_i = P_Ω(Y_i − Y*_i)``, the server publishes the
top-``rank`` eigenvectors ``V_t`` of the noisy ``Ŵ = Σ A_iᵀA_i + N``, and
each user takes the gradient step and projects it onto their span:
``Y_i ← Π_{L,Ω}((Y_i − η A_i) V_tᵀ V_t)``. Rows stay in the span of the last
published ``V_t`` (coefficients of length ``rank``), so a completed row is
``rank`` numbers. The nuclear-norm projection of the paper's PGD is replaced
by this rank-``rank`` projection (its projection uses the same eigenvectors).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
from annotated_types import Ge, Gt
from scipy import sparse

from .base import UserBatch, WorldInfo
from . import projected_gradient_runs as runs
from .matrix_completion import (GramCompletion, GramState, LowRankRows, symmetric_gaussian, top_eigenvectors, upper,
                                upper_outer)


@dataclass
class GradientState(GramState):
    """The server, with every round's published eigenvectors (``history``; ``basis`` is the last)."""

    history: list = field(default_factory=list)
    noisy: list = field(default_factory=list)  # every round's noisy Ŵ, upper triangle (the white-box statistic)

    def published(self, back: int) -> np.ndarray:
        """The eigenvectors published ``back`` rounds ago (1: the last); empty before any."""
        return self.history[-back] if len(self.history) >= back else np.zeros((0, self.world.n_items))


@dataclass
class PrivateProjectedGradient(GramCompletion, kind="private_projected_gradient"):
    """Private PGD with a rank-``rank`` projection from noisy eigenvectors; (ε, δ)-joint DP per user."""

    rank: Annotated[int, Ge(1)] = 1
    step_size: Annotated[float, Gt(0)] = 1.0

    def init_state(self, world: WorldInfo) -> GradientState:
        n = world.n_items
        return GradientState(world, np.zeros((n, n)), [], np.zeros((0, n)))

    def _broadcast(self, state: GradientState) -> dict[str, Any]:
        return {"basis": state.published(1), "previous": state.published(2)}

    def _end_round(self, state: GradientState, rng: np.random.Generator) -> GradientState:
        n = state.world.n_items
        noisy = state.gram + symmetric_gaussian(n, self.noise.spent, rng)
        state.noisy.append(upper(noisy))
        state.basis = top_eigenvectors(noisy, self.rank)
        state.history.append(state.basis)
        state.gram = np.zeros((n, n))
        return state

    def publish(self, state: GradientState) -> dict[str, np.ndarray]:
        """Every round's published eigenvectors, stacked: (rounds x rank, n_items)."""
        return {"basis": np.vstack(state.history) if state.history else state.basis.copy()}

    # ------------------------------------------------------------ the white box

    def statistics(self, state: GradientState) -> dict[str, np.ndarray]:
        """Every round's noisy Gram (upper triangle, ``gram``) and the eigenvectors published from it (``basis``:
        rounds x rank x n)."""
        n = state.world.n_items
        return {"gram": np.array(state.noisy).reshape(-1, n * (n + 1) // 2),
                "basis": np.array(state.history).reshape(-1, self.rank, n)}

    def statistic_noise(self) -> dict[str, tuple[str, float]]:
        return {"gram": ("gaussian", self.noise.sigma)}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds=None) -> dict[str, np.ndarray]:
        """``upper(A_tᵀA_t)`` of ``rows`` (one per run, or one for all) in every round, replayed from each run's
        published eigenvectors."""
        return {"gram": upper_outer(runs.residuals(self, rows, np.asarray(statistics["basis"])))}

    def panel_runs(self, rows: UserBatch, n_runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n_runs`` runs on the panel ``rows`` at once (``recaudit.mechanisms.projected_gradient_runs``): their
        statistics."""
        return runs.panel_runs(self, rows, n_runs, rng)

    def init_carried(self, n_users: int) -> np.ndarray:
        return np.zeros((n_users, self.rank))  # coefficients over the last published eigenvectors

    def _step(self, targets, coefficients: np.ndarray, previous: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """Gradient step at ``coefficients @ previous``, projected on ``basis``' span and on ‖P_Ω(Y_i)‖ ≤ L."""
        residual = self._residual(targets, coefficients[:, :previous.shape[0]], previous)
        new = coefficients[:, :previous.shape[0]] @ (previous @ basis.T) - self.step_size * (residual @ basis.T)
        return self._projected(targets, new, basis)

    def _respond(self, users: UserBatch, targets: sparse.csr_array, published: dict, carried: np.ndarray,
                 rng: np.random.Generator) -> tuple[sparse.csr_array, np.ndarray]:
        basis = published["basis"]
        previous = published["previous"]
        if basis.shape[0]:
            carried = self._step(targets, carried, previous, basis)
        return self._residual(targets, carried[:, :basis.shape[0]], basis), carried

    def personal_output(self, users: UserBatch, carried: np.ndarray, state: GradientState) -> LowRankRows:
        """The last step, onto the last published eigenvectors."""
        targets = self._targets(users, self._effects(state))
        return self._output(users, self._step(targets, carried, state.published(2), state.basis), state.basis, state)

