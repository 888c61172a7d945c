"""Private projected gradient descent over many runs at once, and the replay of one user's residuals
(the white box; as ``recaudit.mechanisms.frank_wolfe_runs`` for private FW).

Arrays carry the runs on axis 0 and the panel's users on axis 1; one round is the engine's round for every
run: each user's gradient step ``(Y_i − η A_i) V_tᵀ V_t`` on the newest published eigenvectors ``V_t``, then
``Π_{L,Ω}``, its residual ``A_i``, the Gram sum, the server's symmetric noise (drawn as the engine draws it)
and the top-``rank`` eigenvectors.
"""
from __future__ import annotations

import numpy as np

from .base import UserBatch
from .frank_wolfe_runs import dense_targets
from .matrix_completion import upper


def _step(mechanism, coefficients, targets, mask, previous, basis) -> np.ndarray:
    """The gradient step at ``coefficients @ previous`` (R, N, k) @ (R, k, n), onto ``basis`` (R, rank, n)."""
    k = previous.shape[1]
    residual = (coefficients[..., :k] @ previous) * mask - targets
    new = coefficients[..., :k] @ (previous @ np.swapaxes(basis, 1, 2)) \
        - mechanism.step_size * (residual @ np.swapaxes(basis, 1, 2))
    if not mechanism.project:
        return new
    norms = np.linalg.norm((new @ basis) * mask, axis=-1)
    return new * np.minimum(1.0, mechanism.row_bound / np.maximum(norms, 1e-300))[..., None]


def _residuals(mechanism, targets, mask, history) -> list[np.ndarray]:
    """Every round's ``A_t`` (R, N, n) of users ``targets`` given the published ``history`` (R, T, rank, n):
    round t uses the eigenvectors of rounds t − 1 (basis) and t − 2 (previous)."""
    runs, rounds, _, n = history.shape
    empty = np.zeros((runs, 0, n))
    coefficients = np.zeros(targets.shape[:2] + (0,))
    out = []
    for t in range(rounds):
        basis = history[:, t - 1] if t >= 1 else empty
        if t >= 1:
            coefficients = _step(mechanism, coefficients, targets, mask, history[:, t - 2] if t >= 2 else empty,
                                 basis)
        out.append((coefficients[..., :basis.shape[1]] @ basis) * mask - targets)
    return out


def residuals(mechanism, rows: UserBatch, history: np.ndarray) -> np.ndarray:
    """``A_t`` of ``rows`` (one row per run, or one for all) in every round of runs with the published
    eigenvectors ``history`` (R, T, rank, n): (R, T, n)."""
    targets, mask = dense_targets(mechanism, rows)
    out = _residuals(mechanism, targets[:, None, :], mask[:, None, :], history)
    return np.stack(np.broadcast_arrays(*[a[:, 0] for a in out]), axis=1)


def panel_runs(mechanism, rows: UserBatch, runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``runs`` runs of private PGD on the panel ``rows``: ``gram`` (R, T, n(n+1)/2), every round's noisy
    Gram's upper triangle, and ``basis`` (R, T, rank, n), the eigenvectors published from it."""
    targets, mask = dense_targets(mechanism, rows)
    targets, mask = targets[None], mask[None]
    n, sigma, rank = targets.shape[-1], mechanism.noise.spent, mechanism.rank
    history = np.zeros((runs, 0, rank, n))
    grams = []
    coefficients = np.zeros((1, targets.shape[1], 0))
    for t in range(mechanism.iterations):
        basis = history[:, t - 1] if t >= 1 else np.zeros((runs, 0, n))
        if t >= 1:
            previous = history[:, t - 2] if t >= 2 else np.zeros((runs, 0, n))
            coefficients = _step(mechanism, coefficients, targets, mask, previous, basis)
        a = (coefficients[..., :basis.shape[1]] @ basis) * mask - targets
        noise = np.triu(rng.normal(0.0, sigma, (runs, n, n)))
        noisy = np.swapaxes(a, 1, 2) @ a + noise + np.swapaxes(np.triu(noise, 1), 1, 2)
        vectors = np.linalg.eigh(noisy)[1][..., ::-1][..., :rank]  # (R, n, rank): the top eigenvectors
        history = np.concatenate([history, np.swapaxes(vectors, 1, 2)[:, None]], axis=1)
        grams.append(upper(noisy))
    return {"gram": np.stack(grams, axis=1), "basis": history}
