"""Private Frank–Wolfe matrix completion with joint DP (Jain, Thakkar, Thakurta 2018; seed 004,
docs/families/matrix-completion.md).

Each round ``t = 1..T`` every user ``i`` sends ``A_i = P_Ω(Y_i − Y*_i)``
(a sparse row); the server sums ``W = Σ A_iᵀA_i``, adds symmetric Gaussian
noise and publishes the top eigenpair ``(v̂_t, λ̂_t)`` of ``Ŵ`` (or runs
private Oja on ``A`` with matrix–vector products only). At the next round —
or, after the last, in its personal output — the user takes the Frank–Wolfe
step ``Y_i ← Π_{L,Ω}((1 − 1/T) Y_i − (k/T) û_i v̂_tᵀ)``, ``û_i = A_i v̂_t/λ̂'_t``.
A user's row is kept as coefficients over the published ``v̂``'s. With the
fixed step 1/T, T steps reach at most ``1 − (1 − 1/T)^T ≈ 0.63`` of the ball's
radius ``k``: choose ``k`` about 1.6 times the nuclear norm the truth needs.

Privacy: ``‖P_Ω(Y_i)‖ ≤ L`` (the projection) and ``‖P_Ω(Y*_i)‖ ≤ L`` (each
user's observed ratings are clipped to norm L before use, so the bound holds
for any data) give ``‖A_i‖ ≤ 2L``. Replacing one user changes ``W`` by the
difference of two PSD rank-one matrices of norm ≤ 4L², so by at most
``4√2·L²`` in Frobenius norm (the upper triangle, which is what the noise
covers, by no more). Each Oja step releases ``AᵀAv + g`` (unit ``v``), which
changes by at most ``4L²``, as does ``‖Av‖²``. The claim is (ε, δ)-joint DP
at user level over replace-one neighbours, from the accountant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse

from .base import ParameterError, UserBatch, WorldInfo
from . import frank_wolfe_runs as runs
from .matrix_completion import (GramCompletion, GramState, LowRankRows, observed, per_entry, row_norms,
                                symmetric_gaussian, top_eigenpair, upper_outer,
                                with_values)


@dataclass
class FrankWolfeState(GramState):
    """The server: this round's sum and the eigenpairs it has published."""

    eigenvalues: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (t,): λ̂_t
    shifted: np.ndarray = field(default_factory=lambda: np.zeros(0))  # (t,): λ̂'_t, the step's denominators
    unnoised: np.ndarray | None = None  # (t, n): every round's exact top eigenvector (leaky twin only)
    noisy: list = field(default_factory=list)  # every round's noisy Ŵ, upper triangle (the white-box statistic)
    oja: list = field(default_factory=list)  # private Oja's releases each round (``frank_wolfe_runs.oja``)


@dataclass
class PrivateFrankWolfe(GramCompletion, kind="private_frank_wolfe"):
    """Algorithm 1 of Jain et al.: private FW, global/local split, (ε, δ)-joint DP per user."""

    #: k = nuclear_scale * sqrt(users * items): the nuclear-norm ball of ``‖Y‖_* ≤ k``
    nuclear_scale: Annotated[float, Gt(0)] = 1.0
    #: failure probability in the eigenvalue shift sqrt(σ log(n/β)) n^(1/4)
    beta: Annotated[float, Gt(0), Lt(1)] = 0.01
    #: multiplies that shift (1: the paper's; post-processing of λ̂, so any value keeps the claim)
    shift_scale: Annotated[float, Ge(0)] = 1.0
    eigen: Literal["exact", "oja"] = "exact"
    oja_steps: Annotated[int, Ge(1)] = 50
    #: σ from the accountant (exactly ε at δ) or the paper's formula L²·sqrt(64 T log(1/δ))/ε (exact only)
    calibration: Literal["accountant", "paper"] = "accountant"
    #: twin switch: the last step uses the un-noised top eigenvector (see the broken twins below)
    leak_unnoised: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.epsilon > 2 * math.log(1 / self.delta):
            raise ParameterError("epsilon", f"Algorithm 1 needs epsilon <= 2 log(1/delta) = "
                                            f"{2 * math.log(1 / self.delta):.3g}")
        if self.calibration == "paper" and self.centre == "private":
            raise ParameterError("calibration", "the paper's formula spends the whole budget; use calibration: "
                                                "accountant with centre: private")
        if self.calibration == "paper" and self.eigen == "oja":
            raise ParameterError("calibration", "the paper's formula is for the exact eigenvector; "
                                                "use calibration: accountant with eigen: oja")
        super().__post_init__()

    # ------------------------------------------------------------ the claim

    def _sensitivity(self) -> float:
        """Ŵ's sensitivity (module docstring); for Oja, that of one step's ``AᵀAv`` (and of ``‖Av‖²``)."""
        return super()._sensitivity() if self.eigen == "exact" else 4.0 * self.row_bound ** 2

    def _releases_per_round(self) -> int:
        return 1 if self.eigen == "exact" else self.oja_steps + 1

    def _sigma(self) -> float:
        if self.calibration == "paper":
            return self.row_bound ** 2 * math.sqrt(64 * self.iterations * math.log(1 / self.delta)) / self.epsilon
        return super()._sigma()

    # ------------------------------------------------------------ the server

    def init_state(self, world: WorldInfo) -> FrankWolfeState:
        n = world.n_items
        return FrankWolfeState(world, np.zeros((n, n)), [], np.zeros((0, n)), unnoised=np.zeros((0, n)))

    def _broadcast(self, state: FrankWolfeState) -> dict[str, Any]:
        return {"basis": state.basis, "shifted": state.shifted, "eigenvalues": state.eigenvalues,
                "nuclear_bound": self._nuclear_bound(state)}

    def _nuclear_bound(self, state: FrankWolfeState) -> float:
        return self.nuclear_scale * math.sqrt(max(state.n_users, 1) * state.world.n_items)

    def _aggregate(self, state: FrankWolfeState, messages: sparse.csr_array) -> FrankWolfeState:
        if self.eigen == "oja":
            state.blocks.append(messages)  # Oja needs the rows themselves, not their n x n sum
            if not self.leak_unnoised:  # the leaky twin also sums the exact W
                state.n_users += messages.shape[0] if state.basis.shape[0] == 0 else 0
                return state
        return super()._aggregate(state, messages)

    def _end_round(self, state: FrankWolfeState, rng: np.random.Generator) -> FrankWolfeState:
        n = state.world.n_items
        if self.eigen == "exact":
            noisy = state.gram + symmetric_gaussian(n, self.noise.spent, rng)
            state.noisy.append(runs.upper(noisy))
            value, v = top_eigenpair(noisy)
        else:
            value, v, released = self._oja(state.blocks, n, rng)
            state.oja.append(released)
        if self.leak_unnoised:
            state.unnoised = np.vstack([state.unnoised, top_eigenpair(state.gram)[1]])
        eigenvalue = math.sqrt(max(value, 0.0))
        shift = self.eigen_shift(n)
        state.basis = np.vstack([state.basis, v])
        state.eigenvalues = np.append(state.eigenvalues, eigenvalue)
        state.shifted = np.append(state.shifted, max(eigenvalue + shift, 1e-12))
        state.gram, state.blocks = np.zeros((n, n)), []
        return state

    def eigen_shift(self, n: int) -> float:
        """The eigenvalue shift ``sqrt(σ log(n/β)) n^{1/4}`` (times ``shift_scale``; 0 without noise)."""
        return self.shift_scale * math.sqrt(self.noise.sigma * math.log(n / self.beta)) * n ** 0.25 \
            if self.noise_on else 0.0

    def _oja(self, blocks: list, n: int, rng: np.random.Generator) -> tuple[float, np.ndarray, dict]:
        """Algorithm 2 (private Oja): Γ noisy power steps on ``AᵀA`` with matrix–vector products only; also what
        it released (``matvec``: the noisy ``AᵀAv_s + g_s``, ``iterate``: the ``v_s``, ``norm``: the noisy
        ``‖Av‖²``)."""
        a = sparse.vstack(blocks, format="csr") if blocks else sparse.csr_array((0, n))
        sigma, steps = self.noise.spent, self.oja_steps
        eta = 1.0 / (max(self.noise.sigma, 1e-12) * math.sqrt(n * steps))
        v = rng.normal(0.0, 1.0, n)  # the paper draws N(0, σ²I): only its direction matters
        v /= np.linalg.norm(v)
        iterates, matvecs = np.zeros((steps, n)), np.zeros((steps, n))
        for step in range(steps):
            iterates[step] = v
            matvecs[step] = a.T @ (a @ v) + rng.normal(0.0, sigma, n)
            v = v + eta * matvecs[step]
            v /= np.linalg.norm(v)
        v *= np.sign(v[np.argmax(np.abs(v))])
        norm = float(np.linalg.norm(a @ v) ** 2 + rng.normal(0.0, sigma))
        return norm, v, {"matvec": matvecs, "iterate": iterates, "norm": norm}

    # ------------------------------------------------------------ the white box

    def statistics(self, state: FrankWolfeState) -> dict[str, np.ndarray]:
        """What each round released from the sum — the noisy Gram (upper triangle, ``gram``; exact eigenvector)
        or private Oja's noisy products ``matvec`` at the iterates ``iterate`` and noisy ``norm`` — and the
        eigenpairs and nuclear bound published from it."""
        if self.eigen == "exact":
            released = {"gram": np.array(state.noisy)}
        else:
            released = {name: np.array([r[name] for r in state.oja]) for name in ("matvec", "iterate", "norm")}
        return released | {"basis": state.basis.copy(), "shifted": state.shifted.copy(),
                           "bound": np.array([self._nuclear_bound(state)])}

    def statistic_noise(self) -> dict[str, tuple[str, float]]:
        names = ("gram",) if self.eigen == "exact" else ("matvec", "norm")
        return {name: ("gaussian", self.noise.sigma) for name in names}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds=None) -> dict[str, np.ndarray]:
        """What ``rows`` (one per run, or one for all) add to each round's released statistics, replayed from
        each run's published eigenpairs and nuclear bound (public: the cohort's size): ``upper(A_tᵀA_t)``, or
        Oja's ``A_tᵀA_t v_s`` and ``(A_t·v̂_t)²``."""
        a = runs.residuals(self, rows, np.asarray(statistics["basis"]), np.asarray(statistics["shifted"]),
                           np.asarray(statistics["bound"])[:, 0])
        if self.eigen == "exact":
            return {"gram": upper_outer(a)}
        along = np.sum(np.asarray(statistics["iterate"]) * a[:, :, None, :], axis=-1)  # (R, T, Γ): A_t·v_s
        return {"matvec": a[:, :, None, :] * along[..., None],
                "norm": np.square(np.sum(a * np.asarray(statistics["basis"]), axis=-1))}

    def panel_runs(self, rows: UserBatch, n_runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n_runs`` runs on the panel ``rows`` at once (``recaudit.mechanisms.frank_wolfe_runs``): their
        statistics."""
        return runs.panel_runs(self, rows, n_runs, rng)

    def publish(self, state: FrankWolfeState) -> dict[str, np.ndarray]:
        """The published eigenpairs: ``basis`` (v̂_t as rows) and ``eigenvalues`` (λ̂_t)."""
        return {"basis": state.basis.copy(), "eigenvalues": state.eigenvalues.copy()}

    # ------------------------------------------------------------ the users

    def init_carried(self, n_users: int) -> np.ndarray:
        return np.zeros((n_users, self.iterations))

    def _step(self, targets, coefficients: np.ndarray, basis: np.ndarray, shifted: np.ndarray,
              nuclear_bound: float) -> tuple[np.ndarray, np.ndarray]:
        """The FW step with the newest published v̂ (row t of ``basis``): new coefficients and ``P_Ω`` of the new
        rows (their values on ``targets``' entries), updated from the old rows' without another product."""
        t = basis.shape[0]
        seen = observed(targets, coefficients[:, :t - 1], basis[:t - 1]).data
        u = (with_values(targets, seen - targets.data) @ basis[t - 1]) / shifted[t - 1]
        shrink = 1.0 - 1.0 / self.iterations
        new = coefficients.copy()
        new[:, :t - 1] *= shrink
        new[:, t - 1] = -(nuclear_bound / self.iterations) * u
        # seen <- shrink * seen + new_t * v̂_t on Ω, in place (the same numbers as written out, fewer temporaries)
        step = per_entry(targets, new[:, t - 1])
        step *= basis[t - 1].take(targets.indices)
        seen *= shrink
        seen += step
        if self.project:  # Π_{L,Ω}: rows scaled down to ‖P_Ω(Y_i)‖ ≤ L
            factor = np.minimum(1.0, self.row_bound / np.maximum(row_norms(targets, seen), 1e-300))
            new *= factor[:, None]
            seen *= per_entry(targets, factor)
        return new, seen

    def _respond(self, users: UserBatch, targets: sparse.csr_array, published: dict, carried: np.ndarray,
                 rng: np.random.Generator) -> tuple[sparse.csr_array, np.ndarray]:
        basis = published["basis"]
        if not basis.shape[0]:
            return self._residual(targets, carried[:, :0], basis), carried
        carried, seen = self._step(targets, carried, basis, published["shifted"], published["nuclear_bound"])
        return with_values(targets, seen - targets.data), carried

    def personal_output(self, users: UserBatch, carried: np.ndarray, state: FrankWolfeState) -> LowRankRows:
        """Y_i^(T): the last step with v̂_T, as coefficients over v̂_1..v̂_T."""
        targets, bound = self._targets(users, self._effects(state)), self._nuclear_bound(state)
        if self.leak_unnoised:  # replays every step with the exact eigenvectors the server kept
            coefficients = np.zeros_like(carried)
            for t in range(1, state.unnoised.shape[0] + 1):
                coefficients = self._step(targets, coefficients, state.unnoised[:t], state.shifted, bound)[0]
            return self._output(users, coefficients[:, :state.unnoised.shape[0]], state.unnoised, state)
        coefficients = self._step(targets, carried, state.basis, state.shifted, bound)[0]
        return self._output(users, coefficients[:, :state.basis.shape[0]], state.basis, state)


@dataclass
class FrankWolfe(PrivateFrankWolfe, kind="frank_wolfe"):
    """Non-private Frank–Wolfe (the utility baseline): the same protocol with no noise and no shift.

    It claims nothing (ε = ∞); ``epsilon`` and ``delta`` are ignored.
    """

    epsilon: Annotated[float, Gt(0)] = 1.0
    noise_on: bool = field(default=False, init=False, repr=False)


@dataclass
class PrivateFrankWolfeNoNoise(PrivateFrankWolfe, kind="private_frank_wolfe_no_noise"):
    """Broken twin: claims the private mechanism's (ε, δ) but adds no noise (keeps the eigenvalue shift)."""
    negative_control = True

    spend_noise: bool = field(default=False, init=False, repr=False)


@dataclass
class PrivateFrankWolfeNoProjection(PrivateFrankWolfe, kind="private_frank_wolfe_no_projection"):
    """Broken twin: skips Π_{L,Ω} and the clipping of ratings, so ‖A_i‖ ≤ 2L no longer holds."""
    negative_control = True

    project: bool = field(default=False, init=False, repr=False)


@dataclass
class PrivateFrankWolfeLeakyOutputs(PrivateFrankWolfe, kind="private_frank_wolfe_leaky_outputs"):
    """Broken twin: publishes the noisy v̂'s, but users' outputs replay every step with the un-noised ones.

    Users' messages follow the published v̂'s, so the releases are exactly as
    private as the correct mechanism's; only the other users' outputs carry
    the un-noised global quantity.
    """
    negative_control = True

    leak_unnoised: bool = field(default=True, init=False, repr=False)


__all__ = ["PrivateFrankWolfe", "FrankWolfe", "PrivateFrankWolfeNoNoise", "PrivateFrankWolfeNoProjection",
           "PrivateFrankWolfeLeakyOutputs", "FrankWolfeState"]
