"""DP-SGD matrix factorisation at user level: per-user clipped gradients of the item factors, Poisson-sampled
batches, Gaussian noise (docs/families/dp-als-dp-sgd.md).

The item factors ``V`` (n x r; ``V_0`` a public pseudo-random draw of ``init_seed``) are the model the server
publishes. Each step ``t = 1..T`` every user is in the batch independently with probability ``q``
(``sampling_rate``: Poisson sampling, the coins hidden). A user in the batch solves its own factor from all
its centred ratings against the published ``V_{t−1}`` (a ridge solve, as DP-ALS's users; the factor stays on
the device) and computes the gradient of its loss ``½ Σ_{j∈Ω_i} (u_iᵀ v_j − r_ij)²`` in the item factors,
``G_i = Σ_j (u_iᵀ v_j − r_ij) e_j u_iᵀ`` (its rows are its items), clipped to Frobenius norm ``C``
(``clip_norm``). The server sums the batch's clipped gradients, adds N(0, (zC)²) to every entry and steps

    ``V_t = (1 − η λ_V) V_{t−1} − η (Σ_i clip(G_i) + N) / (q N_users)``

(``N_users``, the cohort's size, is taken as public, as DP-SGD implementations normalise by the expected
batch). After the last step each user predicts ``offset + u_iᵀ v_j`` from ``V_T`` (its personal output).

Privacy (user level, add/remove one user): one user moves the summed gradient by at most ``C`` when it is in
the batch, so each step is the Poisson-subsampled Gaussian mechanism of noise multiplier ``z`` at rate ``q``;
``T`` steps compose. The claim is dp-accounting's PLD ε of that composition at δ (``PoissonSampled`` events,
add/remove), on the grid ``accounting_grid`` (2^-12: pessimistic, overstated by at most about T x 2^-12);
``z`` is the smallest (to 1e-4 relative) whose ε is at most the requested one. Joint DP: users' factors are
never released.

Broken twins: ``dp_sgd_mf_full_batch`` (every user in every step, while the claim is accounted at rate ``q``)
and ``dp_sgd_mf_no_clipping`` (noise ``zC`` but no clipping).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge, Gt, Le, Lt
from scipy import sparse

from .accounting import GaussianRelease, PoissonSampled, epsilon_for
from .base import GaussianNoise, Mechanism, ParameterError, PrivacyClaim, UserBatch, WorldInfo
from .costs import RoundCost
from .dp_als import SolvedUserFactors, initial_factors, ridge_solve
from .matrix_completion import check_star_scale
from .sparse_rows import csr

#: the accountant's grid for the sampled Gaussian's PLD (dp-accounting, pessimistic): 2^-12 costs ~0.2 s for 20
#: steps where the default 2^-17 costs 5-10 s, and overstates ε by at most about steps x 2^-12
ACCOUNTING_GRID = 2.0 ** -12


@functools.lru_cache(maxsize=256)
def noise_multiplier_for(epsilon: float, delta: float, rate: float, steps: int) -> float:
    """The smallest z (to 1e-4 relative) with ``steps`` Poisson(``rate``)-sampled Gaussian releases of noise
    multiplier z (ε, δ)-DP on the accountant's grid: bisection on a coarse grid (0.01, fast), then z raised
    until the claim's grid agrees."""
    def eps(z: float, grid: float) -> float:
        return epsilon_for(PoissonSampled(GaussianRelease(z), rate, count=steps), delta, grid)

    low, high = 1e-3, 1.0
    while eps(high, 1e-2) > epsilon:
        low, high = high, 2.0 * high
        if high > 1e4:
            raise ParameterError("epsilon", f"no noise multiplier below 1e4 gives epsilon {epsilon}")
    while high - low > 1e-4 * high:
        mid = 0.5 * (low + high)
        low, high = (low, mid) if eps(mid, 1e-2) <= epsilon else (mid, high)
    while eps(high, ACCOUNTING_GRID) > epsilon:
        high *= 1.0 + 1e-4
    return high


@dataclass
class SGDState:
    """The server: the round's summed clipped gradients, the published factors, the noisy sums."""

    world: WorldInfo
    sums: np.ndarray  # (n_items, r)
    factors: list  # V_0, V_1, ...
    gradients: list = field(default_factory=list)  # each step's noisy summed gradient (n_items x r)
    n_users: int = 0  # the cohort (users answering step 1), public
    batch: list = field(default_factory=list)  # each step's batch size (not published; diagnostics)


@dataclass
class DPSGDMF(SolvedUserFactors, Mechanism, kind="dp_sgd_mf"):
    """DP-SGD matrix factorisation, user level: per-user clipped item-factor gradients, Poisson batches."""

    test_scenario: ClassVar[dict] = {
        "population": {"kind": "rank_one_matrix", "n_users": 12, "n_items": 10, "ratings_per_user": 4,
                       "test_fraction": 0.1, "canary_items": 100},
        "panel": {},
        "mechanism": {"epsilon": 1.0, "delta": 1e-5, "rank": 2, "iterations": 10, "sampling_rate": 0.05,
                      "clip_norm": 0.002, "regularization": 1.0, "learning_rate": 1.0, "init_scale": 1.0},
        "attack": [{"kind": "known_noise"}],
        "audit": {"design": "one_run", "view": "statistics", "method": "one-run", "trials": 100},
    }
    accounting_grid: ClassVar[float] = ACCOUNTING_GRID

    epsilon: Annotated[float, Gt(0)]
    delta: Annotated[float, Gt(0), Lt(1)] = 1e-5
    rank: Annotated[int, Ge(1)] = 10
    #: T: gradient steps (one round of the panel each)
    iterations: Annotated[int, Ge(1)] = 20
    #: q: each user's probability of being in a step's batch
    sampling_rate: Annotated[float, Gt(0), Le(1)] = 0.1
    #: C: every user's gradient is clipped to this Frobenius norm
    clip_norm: Annotated[float, Gt(0)] = 1.0
    learning_rate: Annotated[float, Gt(0)] = 1.0
    #: λ of the users' ridge solves
    regularization: Annotated[float, Gt(0)] = 1.0
    #: λ_V: weight decay of the item factors at every step
    weight_decay: Annotated[float, Ge(0)] = 0.0
    offset: float | None = None
    min_rating: float | None = None
    max_rating: float | None = None
    init_scale: Annotated[float, Gt(0)] = 0.1
    init_seed: Annotated[int, Ge(0)] = 0
    claim_model = "joint"
    claim_unit = "user"
    claim_neighbouring = "add_remove"
    audit_pair = "single_item_add_remove"
    reads_likes = False
    #: twin switches
    poisson: bool = field(default=True, init=False, repr=False)
    clip: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        check_star_scale(self.min_rating, self.max_rating)
        self.claim_delta = self.delta
        z = noise_multiplier_for(float(self.epsilon), float(self.delta), float(self.sampling_rate),
                                 int(self.iterations))
        self.noise = GaussianNoise(z * self.clip_norm, self.clip_norm)

    @property
    def noise_multiplier(self) -> float:
        return self.noise.sigma / self.clip_norm

    def privacy_event(self, answers: int = 1):
        """Each answer (step) is one Poisson-sampled Gaussian release of the summed clipped gradients."""
        return PoissonSampled(GaussianRelease(self.noise.sigma, self.clip_norm), self.sampling_rate, count=answers)

    @property
    def claim(self) -> PrivacyClaim:
        """The promise for a user of the cohort over all ``iterations`` steps."""
        return self.claim_for(self.iterations)

    # ------------------------------------------------------------ users

    def gradients(self, ratings: sparse.csr_array, factors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per rating, the residual ``u_iᵀ v_j − r_ij`` times the user's clipping factor, and the users' factors:
        user i's clipped gradient has rows ``residual · u_i`` at its items."""
        u = self.solve_users(ratings, factors)
        owner = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))
        residual = np.einsum("er,er->e", u[owner], factors[ratings.indices]) - ratings.data
        if self.clip:
            sums = np.bincount(owner, weights=residual ** 2, minlength=ratings.shape[0])
            norms = np.sqrt(sums) * np.linalg.norm(u, axis=1)
            residual = residual * np.minimum(1.0, self.clip_norm / np.maximum(norms, 1e-300))[owner]
        return residual, u

    # ------------------------------------------------------------ the server

    def init_state(self, world: WorldInfo) -> SGDState:
        n, r = world.n_items, self.rank
        return SGDState(world, np.zeros((n, r)), [initial_factors(n, r, self.init_scale, self.init_seed)])

    def respond(self, users: UserBatch, queries, published: np.ndarray, carried, rng: np.random.Generator):
        """Users in this step's Poisson batch send their clipped gradient (rows at their items, as one sparse row
        of n x r columns); the others send an empty row."""
        n, r = published.shape
        ratings = self.centred(users.ratings)
        coins = rng.random(ratings.shape[0]) < self.sampling_rate
        if not self.poisson:  # the twin: every user in every batch
            coins[:] = True
        residual, u = self.gradients(ratings, published)
        counts = np.diff(ratings.indptr) * coins
        keep = np.repeat(coins, np.diff(ratings.indptr))
        owner = np.repeat(np.arange(ratings.shape[0]), np.diff(ratings.indptr))[keep]
        blocks = residual[keep, None] * u[owner]
        columns = (ratings.indices[keep].astype(np.int64)[:, None] * r + np.arange(r)).ravel()
        indptr = np.zeros(ratings.shape[0] + 1, np.int64)
        np.cumsum(counts * r, out=indptr[1:])
        return csr(blocks.ravel(), columns, indptr, (ratings.shape[0], n * r)), carried

    def aggregate(self, state: SGDState, queries, messages: sparse.csr_array) -> SGDState:
        if len(state.factors) == 1:
            state.n_users += messages.shape[0]
        state.sums += np.asarray(messages.sum(axis=0)).reshape(state.sums.shape)
        return state

    def end_round(self, state: SGDState, rng: np.random.Generator) -> SGDState:
        noisy = state.sums + rng.normal(0.0, self.noise.spent, state.sums.shape)
        state.gradients.append(noisy)
        state.factors.append(self.step(state.factors[-1], noisy, state.n_users))
        state.sums = np.zeros_like(state.sums)
        return state

    def step(self, factors: np.ndarray, noisy: np.ndarray, n_users) -> np.ndarray:
        """One SGD step from the noisy summed gradient, normalised by the expected batch ``q N``."""
        expected = self.sampling_rate * np.maximum(np.asarray(n_users, float), 1.0)
        return (1.0 - self.learning_rate * self.weight_decay) * factors \
            - self.learning_rate * noisy / np.reshape(expected, np.shape(expected) + (1,) * 2)

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        n, r = world.n_items, self.rank
        return RoundCost(operations=users * world.ratings_per_user * r * r + users * r ** 3 + 10.0 * n * r,
                         state_bytes=8.0 * n * r * (3 + 2 * self.iterations),
                         user_bytes=8.0 * (2 * self.iterations + 3))

    # ------------------------------------------------------------ the white box

    def statistics(self, state: SGDState) -> dict[str, np.ndarray]:
        """Every step's noisy summed gradient (``gradient``: n_items x r) and the item factors published before
        each step and after the last (``item_factors``)."""
        n, r = state.world.n_items, self.rank
        return {"gradient": np.array(state.gradients).reshape(-1, n, r), "item_factors": np.array(state.factors)}

    def statistic_noise(self) -> dict[str, tuple[str, Any]]:
        return {"gradient": ("gaussian", self.noise.sigma)}

    def statistic_sampling(self) -> dict[str, float]:
        """Each step's gradient holds a user's contribution with probability q (the published rate): the
        known-noise attack scores the mixture's likelihood ratio step by step."""
        return {"gradient": self.sampling_rate}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds=None) -> dict[str, np.ndarray]:
        """The clipped gradient ``rows`` (one per run, or one for all) send when in the batch, replayed from each
        run's published ``V_{t−1}`` (whether it is in a step's batch is the server's hidden coin:
        ``statistic_sampling``)."""
        factors = np.asarray(statistics["item_factors"], float)  # (R, T + 1, n, r)
        steps = np.asarray(statistics["gradient"]).shape[1]
        ratings = self.centred(rows.ratings)
        values, mask = ratings.toarray(), rows.rated.astype(float)
        n, r = factors.shape[-2:]
        out = []
        for t in range(steps):
            v = factors[:, t]
            outer = (v[..., :, None] * v[..., None, :]).reshape(v.shape[0], n, r * r)
            u = ridge_solve((mask[:, None, :] @ outer)[:, 0].reshape(-1, r, r), (values[:, None, :] @ v)[:, 0],
                            self.regularization)  # (R, r)
            residual = mask * (np.einsum("Rr,Rjr->Rj", u, np.broadcast_to(v, (u.shape[0], n, r))) - values)
            if self.clip:
                norms = np.linalg.norm(residual, axis=1) * np.linalg.norm(u, axis=1)
                residual = residual * np.minimum(1.0, self.clip_norm / np.maximum(norms, 1e-300))[:, None]
            out.append(residual[..., None] * u[:, None, :])
        return {"gradient": np.stack(out, axis=1)}


@dataclass
class DPSGDMFFullBatch(DPSGDMF, kind="dp_sgd_mf_full_batch"):
    """Broken twin: accounts every step as Poisson-sampled at ``sampling_rate``, but every user is in every batch."""

    negative_control = True
    poisson: bool = field(default=False, init=False, repr=False)


@dataclass
class DPSGDMFNoClipping(DPSGDMF, kind="dp_sgd_mf_no_clipping"):
    """Broken twin: noise ``z C`` as the claim says, but users' gradients are not clipped to ``C``."""

    negative_control = True
    #: a rate at which most canaries are in some batch (at 0.05 a fifth of them are, in 10 steps)
    test_scenario: ClassVar[dict] = DPSGDMF.test_scenario | {
        "mechanism": DPSGDMF.test_scenario["mechanism"] | {"sampling_rate": 0.3}}
    clip: bool = field(default=False, init=False, repr=False)


__all__ = ["DPSGDMF", "DPSGDMFFullBatch", "DPSGDMFNoClipping", "SGDState", "noise_multiplier_for"]
