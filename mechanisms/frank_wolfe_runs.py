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

import functools
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


#: Runs computed together in the exact-eigenvector path: their temporaries stay a few MB (in cache, and reused by
#: the allocator instead of fresh pages the kernel must zero: at 50,000 runs at once that zeroing was a third of
#: the CPU time). Every run's arithmetic is its own, so any chunking gives the same bits.
CHUNK = 2048


def panel_runs(mechanism, rows: UserBatch, runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``runs`` runs of private FW on the panel ``rows`` (every user answers every round).

    Returns the white-box statistics of every run (as ``PrivateFrankWolfe.statistics``): ``gram`` (R, T,
    n(n+1)/2) the noisy Gram's upper triangle each round (exact eigenvector) or Oja's ``matvec``,
    ``iterate`` (R, T, Γ, n) and ``norm`` (R, T) (``eigen: oja``); ``basis`` (R, T, n), ``shifted`` (R, T)
    and the step's nuclear bound ``bound`` (R, 1).
    """
    targets, mask = dense_targets(mechanism, rows)
    bound = nuclear_bound(mechanism, *targets.shape)
    if mechanism.eigen != "exact":
        return _rounds(mechanism, targets, mask, bound, runs, rng)
    T, n = mechanism.iterations, targets.shape[1]
    # every round's noise in one call: the same numbers as one (runs, n, n) draw a round, in round order
    noises = rng.normal(0.0, mechanism.noise.spent, (T, runs, n, n))
    out = {"gram": np.empty((runs, T, n * (n + 1) // 2)), "basis": np.empty((runs, T, n)),
           "shifted": np.empty((runs, T))}
    for start in range(0, runs, CHUNK):
        part = slice(start, min(start + CHUNK, runs))
        for name, array in _rounds(mechanism, targets, mask, bound, part.stop - start, None, noises[:, part]).items():
            if name in out:
                out[name][part] = array
    return out | {"bound": np.full((runs, 1), bound)}


def _rounds(mechanism, targets, mask, bound, runs, rng, noises=None) -> dict[str, np.ndarray]:
    """``panel_runs`` of ``runs`` runs: Oja's draws from ``rng``, or the exact path's symmetric noise from the
    upper triangles of ``noises`` (T, runs, n, n)."""
    n_users, n = targets.shape
    T = mechanism.iterations
    shift = mechanism.eigen_shift(n)
    coefficients = np.zeros((1, n_users, T))
    basis, shifted = np.zeros((runs, 0, n)), np.zeros((runs, 0))
    statistics = {name: [] for name in (("gram",) if mechanism.eigen == "exact" else ("matvec", "iterate", "norm"))}
    for t in range(T):
        if t:
            coefficients = _step(mechanism, coefficients, targets, mask, basis, shifted, bound)
        a = _observed(coefficients[..., :t], basis, mask) - targets
        if mechanism.eigen == "exact":
            noisy = np.swapaxes(a, 1, 2) @ a + noises[t].reshape(runs, n * n)[:, _mirror(n)].reshape(runs, n, n)
            value, v = top_eigenpairs(noisy)
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


def top_eigenpairs(matrices: np.ndarray, squarings: int = 20,
                   tolerance: float = 4e-15) -> tuple[np.ndarray, np.ndarray]:
    """The largest eigenvalue (R,) and a unit eigenvector (R, n) of each of the symmetric ``matrices`` (R, n, n),
    as ``np.linalg.eigh(matrices)``'s last pair (to rounding, the eigenvector's sign aside), at half its cost
    for small n.

    Shifted by a Gershgorin lower bound (PSD, the largest eigenvalue dominant) and squared ``squarings`` times
    (batched products: a ratio r of the two largest shifted eigenvalues becomes r^(2^20), nothing for a relative
    gap above ~10⁻⁴), the column of largest norm, two power steps and the Rayleigh quotient. A pair whose
    residual ``‖Mx − λx‖`` exceeds ``tolerance`` times the Gershgorin scale (rounding is ~10⁻¹⁶ of it) is
    taken from ``eigh`` instead: 0 of 400,000 in the tight private FW scenario's blocks, where the vectors
    agree with ``eigh``'s within 2·10⁻¹³ and the eigenvalues within 2·10⁻¹⁵ of the largest."""
    runs, n, _ = matrices.shape
    diagonal = np.diagonal(matrices, axis1=1, axis2=2)
    radius = np.abs(matrices).sum(axis=2) - np.abs(diagonal)
    low, high = np.min(diagonal - radius, axis=1), np.max(diagonal + radius, axis=1)
    with np.errstate(all="ignore"):
        power = (matrices - low[:, None, None] * np.eye(n)) / (high - low)[:, None, None]
        for step in range(squarings):
            power = power @ power
            if step % 3 == 2:  # the top eigenvalue of a trace-1 PSD matrix is at least 1/n: no underflow
                power /= np.trace(power, axis1=1, axis2=2)[:, None, None]
        column = np.argmax(np.einsum("rij,rij->rj", power, power), axis=1)
        x = power[np.arange(runs), :, column]
        for _ in range(3):
            x /= np.linalg.norm(x, axis=1, keepdims=True)
            image = (matrices @ x[..., None])[..., 0]
            if _ < 2:
                x = image - low[:, None] * x
        value = np.einsum("ri,ri->r", x, image)
        residual = np.linalg.norm(image - value[:, None] * x, axis=1)
    bad = ~(residual <= tolerance * np.maximum(np.abs(low), np.abs(high)))
    if bad.any():
        values, vectors = np.linalg.eigh(matrices[bad])
        value[bad], x[bad] = values[:, -1], vectors[..., -1]
    return value, x


@functools.cache
def _mirror(n: int) -> np.ndarray:
    """Flat indices of ``(min(i, j), max(i, j))`` for every ``(i, j)``: the upper triangle mirrored below the
    diagonal (``triu(z) + triu(z, 1)ᵀ`` as one gather, the same numbers)."""
    i, j = np.indices((n, n))
    return (np.minimum(i, j) * n + np.maximum(i, j)).ravel()


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
