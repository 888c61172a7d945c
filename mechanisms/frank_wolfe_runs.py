"""Private Frank–Wolfe over many runs at once: numpy over a runs axis, on a small panel
(docs/families/matrix-completion.md).

The engine runs one protocol run at a time; a white-box audit needs 10⁵–10⁶ runs of a small world. Here
arrays carry the runs on axis 0 and the panel's users on axis 1 (rows dense: a small world), and one
round is the engine's round for every run at once: each user's Frank–Wolfe step with the newest
published eigenpair, its residual ``A_i``, the Gram sum, the server's symmetric noise and top eigenpair.
Noise is drawn as ``rng.normal(0, σ, (runs, n, n))`` per round, so one run (runs = 1) uses exactly the
engine's draws and the two agree (``tests/test_tight_audits.py``).

The same step replays one user's residuals given a run's published history (:func:`residuals`): the
target's contribution ``A_tᵀA_t`` to each round's noisy Gram, which the white-box attack needs.
"""
from __future__ import annotations

import math

import numpy as np

from .base import ParameterError, UserBatch
from .matrix_completion import upper


def dense_targets(mechanism, rows: UserBatch) -> tuple[np.ndarray, np.ndarray]:
    """``Y*`` on Ω (clipped to L unless a twin skips it) as dense (users, n) values, and Ω as a mask."""
    if mechanism.centre != "none":
        raise ParameterError("centre", "the white-box replay and batched runs of private FW take raw ratings "
                                       "(centre: none)")
    return mechanism._targets(rows, None).toarray(), rows.rated


def _observed(coefficients: np.ndarray, basis: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """P_Ω(coefficients @ basis): (R, N, s) @ (R, s, n), masked; runs axes broadcast."""
    return (coefficients @ basis) * mask


def _step(mechanism, coefficients, targets, mask, basis, shifted, bound) -> np.ndarray:
    """Every user's FW step with the newest published v̂ (``basis[:, -1]``), then Π_{L,Ω}: new coefficients."""
    t, T = basis.shape[1], mechanism.iterations
    residual = _observed(coefficients[..., :t - 1], basis[:, :t - 1], mask) - targets
    u = (residual @ basis[:, t - 1, :, None])[..., 0] / shifted[:, t - 1, None]
    new = np.array(np.broadcast_to(coefficients, np.broadcast_shapes(coefficients.shape, u.shape + (T,))))
    new[..., :t - 1] *= 1.0 - 1.0 / T
    new[..., t - 1] = -(np.reshape(bound, (-1, 1)) / T) * u
    if not mechanism.project:
        return new
    norms = np.linalg.norm(_observed(new[..., :t], basis, mask), axis=-1)
    return new * np.minimum(1.0, mechanism.row_bound / np.maximum(norms, 1e-300))[..., None]


def residuals(mechanism, rows: UserBatch, basis: np.ndarray, shifted: np.ndarray, bound) -> np.ndarray:
    """``A_t`` of ``rows`` (one row per run, or one for all) in every round of runs with the published
    ``basis`` (R, T, n), ``shifted`` (R, T) and nuclear bound (R,): (R, T, n)."""
    targets, mask = dense_targets(mechanism, rows)
    targets, mask = targets[:, None, :], mask[:, None, :]  # (rows, 1 user, n)
    coefficients = np.zeros((targets.shape[0], 1, mechanism.iterations))
    out = []
    for t in range(basis.shape[1]):
        if t:
            coefficients = _step(mechanism, coefficients, targets, mask, basis[:, :t], shifted[:, :t], bound)
        out.append((_observed(coefficients[..., :t], basis[:, :t], mask) - targets)[:, 0])
    return np.stack(np.broadcast_arrays(*out), axis=1)


def nuclear_bound(mechanism, n_users: int, n_items: int) -> float:
    return mechanism.nuclear_scale * math.sqrt(max(n_users, 1) * n_items)


def panel_runs(mechanism, rows: UserBatch, runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``runs`` runs of private FW on the panel ``rows`` (every user answers every round).

    Returns the white-box statistics of every run (as ``PrivateFrankWolfe.statistics``): ``gram`` (R, T,
    n(n+1)/2) the noisy Gram's upper triangle each round (exact eigenvector) or Oja's ``matvec``,
    ``iterate`` (R, T, Γ, n) and ``norm`` (R, T) (``eigen: oja``); ``basis`` (R, T, n), ``shifted`` (R, T)
    and the step's nuclear bound ``bound`` (R, 1).
    """
    targets, mask = dense_targets(mechanism, rows)
    n_users, n = targets.shape
    T, sigma = mechanism.iterations, mechanism.noise.spent
    bound = nuclear_bound(mechanism, n_users, n)
    shift = mechanism.eigen_shift(n)
    coefficients = np.zeros((1, n_users, T))
    basis, shifted = np.zeros((runs, 0, n)), np.zeros((runs, 0))
    statistics = {name: [] for name in (("gram",) if mechanism.eigen == "exact" else ("matvec", "iterate", "norm"))}
    for t in range(T):
        if t:
            coefficients = _step(mechanism, coefficients, targets, mask, basis, shifted, bound)
        a = _observed(coefficients[..., :t], basis, mask) - targets
        if mechanism.eigen == "exact":
            noise = np.triu(rng.normal(0.0, sigma, (runs, n, n)))
            noisy = np.swapaxes(a, 1, 2) @ a + noise + np.swapaxes(np.triu(noise, 1), 1, 2)
            values, vectors = np.linalg.eigh(noisy)
            v, value = vectors[..., -1], values[:, -1]
            statistics["gram"].append(upper(noisy))
        else:
            value, v, released = oja(mechanism, np.broadcast_to(a, (runs,) + a.shape[1:]), rng)
            for name, array in released.items():
                statistics[name].append(array)
        v *= np.sign(v[np.arange(runs), np.argmax(np.abs(v), axis=1)])[:, None]
        eigenvalue = np.sqrt(np.maximum(value, 0.0))
        basis = np.concatenate([basis, v[:, None, :]], axis=1)
        shifted = np.concatenate([shifted, np.maximum(eigenvalue + shift, 1e-12)[:, None]], axis=1)
    return {name: np.stack(arrays, axis=1) for name, arrays in statistics.items()} | {
        "basis": basis, "shifted": shifted, "bound": np.full((runs, 1), bound)}


def oja(mechanism, a: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict]:
    """Private Oja (``PrivateFrankWolfe._oja``) on every run's rows ``a`` (R, N, n) at once, the engine's draws
    in the engine's order: the noisy ``‖Av‖² + g`` (R,), the unit ``v`` (R, n), and what it released —
    ``matvec`` (R, Γ, n) the noisy ``AᵀAv_s + g_s``, ``iterate`` (R, Γ, n) the ``v_s`` they were taken at,
    ``norm`` (R,) the noisy ``‖Av‖²``."""
    runs, n = a.shape[0], a.shape[-1]
    sigma, steps = mechanism.noise.spent, mechanism.oja_steps
    eta = 1.0 / (max(mechanism.noise.sigma, 1e-12) * math.sqrt(n * steps))
    v = rng.normal(0.0, 1.0, (runs, n))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    iterates, matvecs = [], []
    for _ in range(steps):
        iterates.append(v)
        matvecs.append(_gram_times(a, v) + rng.normal(0.0, sigma, (runs, n)))
        v = v + eta * matvecs[-1]
        v /= np.linalg.norm(v, axis=1, keepdims=True)
    norm = np.sum(np.square((a @ v[..., None])[..., 0]), axis=1) + rng.normal(0.0, sigma, runs)
    return norm, v, {"matvec": np.stack(matvecs, axis=1), "iterate": np.stack(iterates, axis=1), "norm": norm}


def _gram_times(a: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``AᵀA v`` per run: (R, N, n), (R, n) -> (R, n)."""
    return (np.swapaxes(a, 1, 2) @ (a @ v[..., None]))[..., 0]
