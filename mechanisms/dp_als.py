"""Private alternating least squares with joint DP (Chien, Jain, Krichene, Rendle, Song, Thakurta, Zhang, ICML
2021; docs/families/dp-als-dp-sgd.md).

Each iteration ``t = 1..T`` the server publishes the item factors ``V_{t−1}`` (n x r; ``V_0`` a public
pseudo-random draw of ``init_seed``). Every user solves its own factor from all its (centred) ratings,

    ``u_i = (Σ_{j∈Ω_i} v_j v_jᵀ + λI)⁻¹ Σ_{j∈Ω_i} r_ij v_j``, then clipped to ``‖u_i‖ ≤ Γ_u`` (``factor_bound``),

and sends, for at most ``c`` (``max_items``) of its ratings drawn uniformly, its contribution to each item's
sufficient statistics: ``u_i u_iᵀ`` and ``clip(r_ij, ±Γ_r) u_i``. The server sums them per item and adds
Gaussian noise: to the Gram stack a full r x r matrix of N(0, σ_G²) entries per item, of which it keeps the
symmetric part (``σ_G`` on the diagonal, ``σ_G/√2`` off it), and N(0, σ_b²) to every right-hand side. The new
item factor is ``v_j = (Π_PSD(Ĝ_j) + λI)⁻¹ b̂_j`` (batched solves). Users' factors are never released; after
the last iteration each user predicts ``offset + u_iᵀ v_j`` from ``V_T`` (its personal output).

Privacy (user level, add/remove one user, as the paper's code accounts): a user adds to at most ``c`` items,
each by ``u uᵀ`` (Frobenius norm ≤ Γ_u²) and ``r u`` (norm ≤ Γ_r Γ_u), so the stacked Gram moves by at most
``Δ_G = √c Γ_u²`` and the stacked right-hand sides by ``Δ_b = √c Γ_r Γ_u``. With ``σ_G = s Δ_G`` and
``σ_b = s Δ_b`` every iteration is two Gaussian releases of noise multiplier ``s``; T iterations are
``sqrt(2T)/s``-GDP and the claim is the accountant's ε at δ (σ: the smallest ``s`` giving ε). What users
compute from the releases (their factors, their predictions) is post-processing for everyone else: joint DP.

``als`` is the non-private baseline (same code, no noise, no clipping; claims nothing). Broken twins:
``dp_als_no_gram_noise`` (the Gram's noise dropped, the claim kept) and ``dp_als_no_clipping`` (noise
calibrated to Γ_u, Γ_r but neither factors nor ratings clipped).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse

from .accounting import Composition, gaussian_sigma_for
from .base import GaussianNoise, Mechanism, PrivacyClaim, UserBatch, WorldInfo
from .costs import RoundCost
from .matrix_completion import LowRankRows, check_star_scale
from .sparse_rows import csr


# ---------------------------------------------------------------- the arithmetic (runs axes broadcast)


@functools.lru_cache(maxsize=16)
def triangle(r: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(r)``: the upper triangle (with the diagonal) that the Gram statistics keep."""
    i, j = np.triu_indices(r)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def upper_of(matrices: np.ndarray) -> np.ndarray:
    """The upper triangles of the last two axes, flattened."""
    i, j = triangle(matrices.shape[-1])
    return matrices[..., i, j]


def outer_upper(vectors: np.ndarray) -> np.ndarray:
    """``upper_of(v vᵀ)`` for every vector on the last axis."""
    i, j = triangle(vectors.shape[-1])
    return vectors[..., i] * vectors[..., j]


def full_of(upper: np.ndarray, r: int) -> np.ndarray:
    """Symmetric r x r matrices from their flattened upper triangles."""
    i, j = triangle(r)
    out = np.zeros(upper.shape[:-1] + (r, r))
    out[..., i, j] = upper
    out[..., j, i] = upper
    return out


def clip_norms(vectors: np.ndarray, bound: float | None) -> np.ndarray:
    """Each vector (last axis) scaled down to L2 norm at most ``bound`` (None: unchanged)."""
    if bound is None:
        return vectors
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors * np.minimum(1.0, bound / np.maximum(norms, 1e-300))


def ridge_solve(gram: np.ndarray, rhs: np.ndarray, regularization: float) -> np.ndarray:
    """``(gram + λI)⁻¹ rhs`` for stacks of r x r systems (``np.linalg.solve`` over the stack)."""
    r = gram.shape[-1]
    return np.linalg.solve(gram + regularization * np.eye(r), rhs[..., None])[..., 0]


def psd_part(matrices: np.ndarray) -> np.ndarray:
    """The nearest positive semidefinite matrices (eigenvalues clamped at 0) of symmetric stacks."""
    values, vectors = np.linalg.eigh(matrices)
    return (vectors * np.maximum(values, 0.0)[..., None, :]) @ np.swapaxes(vectors, -1, -2)


def item_solve(gram: np.ndarray, rhs: np.ndarray, regularization: float) -> np.ndarray:
    """New item factors from (noisy) statistics: ``(Π_PSD(Ĝ_j) + λI)⁻¹ b̂_j`` per item."""
    return ridge_solve(psd_part(gram), rhs, regularization)


def symmetric_noise(shape: tuple, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """N(0, σ²) on every entry of r x r matrices, symmetrised ((N + Nᵀ)/2): the full matrix's noise, of which the
    server keeps the symmetric part (σ on the diagonal, σ/√2 off it)."""
    noise = rng.normal(0.0, sigma, shape)
    return 0.5 * (noise + np.swapaxes(noise, -1, -2))


def gram_noise_scales(r: int, sigma: float) -> np.ndarray:
    """Per upper-triangle entry, the standard deviation of :func:`symmetric_noise`: σ on the diagonal, σ/√2 off."""
    i, j = triangle(r)
    return np.where(i == j, sigma, sigma / math.sqrt(2.0))


def initial_factors(n_items: int, rank: int, scale: float, seed: int) -> np.ndarray:
    """``V_0``: N(0, scale²) entries from the public ``seed`` (independent of any user)."""
    return np.random.default_rng(seed).normal(0.0, scale, (n_items, rank))


def subsample(rows: sparse.csr_array, keep: int, rng: np.random.Generator) -> sparse.csr_array:
    """At most ``keep`` stored entries per row, drawn uniformly without replacement (explicit zeros kept)."""
    counts = np.diff(rows.indptr)
    if counts.max(initial=0) <= keep:
        return rows
    owner = np.repeat(np.arange(rows.shape[0]), counts)
    order = np.lexsort((rng.random(rows.nnz), owner))  # by row, random within a row
    rank = np.arange(rows.nnz) - rows.indptr[owner[order]]
    kept = np.sort(order[rank < keep])
    indptr = np.zeros(rows.shape[0] + 1, rows.indptr.dtype)
    np.cumsum(np.minimum(counts, keep), out=indptr[1:])
    return csr(rows.data[kept], rows.indices[kept], indptr, rows.shape)


# ---------------------------------------------------------------- the mechanism


@dataclass
class ALSState:
    """The server: this round's summed statistics, the factors published so far and the noisy statistics."""

    world: WorldInfo
    sums: np.ndarray  # (n_items, p + r): this round's Σ upper(u uᵀ) and Σ r u per item
    factors: list  # V_0, V_1, ...: every published item-factor matrix (n_items x r)
    grams: list = field(default_factory=list)  # each round's noisy Gram, upper triangles (n_items x p)
    rhs: list = field(default_factory=list)  # each round's noisy right-hand sides (n_items x r)


class SolvedUserFactors:
    """What DP-ALS and DP-SGD MF share: ratings centred by a public offset, the item factors ``V_{t−1}`` broadcast
    every round (no queries), users' factors solved against them on the device, the published ``V_T`` and each
    user's predictions from it. Needs ``offset``, ``min_rating``, ``max_rating``, ``regularization`` and a state
    with ``factors`` (every published item-factor matrix)."""

    @property
    def centre(self) -> float:
        if self.offset is not None:
            return float(self.offset)
        return 0.0 if self.min_rating is None else 0.5 * (self.min_rating + self.max_rating)

    def centred(self, ratings: sparse.csr_array) -> sparse.csr_array:
        """Ratings minus the public offset, on the same entries (explicit zeros kept)."""
        ratings = sparse.csr_array(ratings)
        return csr(ratings.data.astype(float) - self.centre, ratings.indices, ratings.indptr, ratings.shape)

    def solve_users(self, ratings: sparse.csr_array, factors: np.ndarray) -> np.ndarray:
        """Every user's ridge solution against ``factors`` from all its centred ratings (users x r), unclipped."""
        n, r = factors.shape
        mask = csr(np.ones(ratings.nnz), ratings.indices, ratings.indptr, ratings.shape)
        grams = np.asarray(mask @ (factors[:, :, None] * factors[:, None, :]).reshape(n, r * r))
        return ridge_solve(grams.reshape(-1, r, r), np.asarray(ratings @ factors), self.regularization)

    def broadcast(self, state) -> np.ndarray:
        return state.factors[-1]

    def make_queries(self, n_users, rng, state, rated=None) -> np.ndarray:
        return np.zeros((n_users, 0))

    def publish(self, state) -> dict[str, np.ndarray]:
        """The published item factors ``V_T`` (n_items x r)."""
        return {"item_factors": state.factors[-1].copy()}

    def personal_output(self, users: UserBatch, carried, state) -> LowRankRows:
        """Each user's predictions ``offset + u_iᵀ v_j`` from ``V_T`` (its own factor unclipped: it is its own)."""
        factors = state.factors[-1]
        u = self.solve_users(self.centred(users.ratings), factors)
        basis = np.vstack([factors.T, np.full((1, factors.shape[0]), self.centre)])
        scale = None if self.min_rating is None else (self.min_rating, self.max_rating)
        return LowRankRows(np.hstack([u, np.ones((u.shape[0], 1))]), basis, scale)


@dataclass
class DPALS(SolvedUserFactors, Mechanism, kind="dp_als"):
    """Private ALS (Chien et al. 2021): noisy per-item Gram and right-hand side, users solve their own factors."""

    test_scenario: ClassVar[dict] = {
        "population": {"kind": "rank_one_matrix", "n_users": 12, "n_items": 10, "ratings_per_user": 4,
                       "test_fraction": 0.1, "canary_items": 100},
        "panel": {},
        "mechanism": {"epsilon": 1.0, "delta": 1e-5, "rank": 2, "iterations": 3, "max_items": 4,
                      "factor_bound": 0.05, "rating_bound": 0.1, "regularization": 0.1, "init_scale": 1.0},
        "attack": [{"kind": "known_noise"}],
        "audit": {"design": "one_run", "view": "statistics", "method": "one-run", "trials": 100},
    }

    epsilon: Annotated[float, Gt(0)]
    delta: Annotated[float, Gt(0), Lt(1)] = 1e-5
    rank: Annotated[int, Ge(1)] = 10
    iterations: Annotated[int, Ge(1)] = 5
    #: λ of both least-squares solves (users' and items')
    regularization: Annotated[float, Gt(0)] = 1.0
    #: Γ_u: every user factor is clipped to this L2 norm before it enters the item statistics
    factor_bound: Annotated[float, Gt(0)] = 1.0
    #: Γ_r: centred ratings are clipped to [−Γ_r, Γ_r] in the right-hand sides
    rating_bound: Annotated[float, Gt(0)] = 1.0
    #: c: ratings per user entering each item step (drawn uniformly when a user has more)
    max_items: Annotated[int, Ge(1)] = 50
    #: public centring constant subtracted from every rating (None: the star scale's midpoint, or 0)
    offset: float | None = None
    min_rating: float | None = None
    max_rating: float | None = None
    #: V_0 ~ N(0, init_scale²) from the public ``init_seed``
    init_scale: Annotated[float, Gt(0)] = 0.1
    init_seed: Annotated[int, Ge(0)] = 0
    claim_model = "joint"
    claim_unit = "user"
    claim_neighbouring = "add_remove"
    #: one rated item (world 1) against no rating at all (world 0): a user at the clipping bounds on one item
    audit_pair = "single_item_add_remove"
    reads_likes = False
    #: twin switches (baseline: no noise at all)
    noise_on: bool = field(default=True, init=False, repr=False)
    gram_noise_on: bool = field(default=True, init=False, repr=False)
    clip: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        check_star_scale(self.min_rating, self.max_rating)
        self.claim_delta = self.delta
        multiplier = gaussian_sigma_for(self.epsilon, self.delta, 1.0, 2 * self.iterations)
        spent = self.noise_on
        self.gram_noise = GaussianNoise(multiplier * self.gram_sensitivity, self.gram_sensitivity,
                                        spent_sigma=None if spent and self.gram_noise_on else 0.0)
        self.rhs_noise = GaussianNoise(multiplier * self.rhs_sensitivity, self.rhs_sensitivity,
                                       spent_sigma=None if spent else 0.0)
        self.noise = self.rhs_noise  # (the conformance suite checks that a correct mechanism spends what it claims)

    # ------------------------------------------------------------ the claim

    @property
    def gram_sensitivity(self) -> float:
        """Δ_G = √c Γ_u²: one user's u uᵀ in at most c items' Grams."""
        return math.sqrt(self.max_items) * self.factor_bound ** 2

    @property
    def rhs_sensitivity(self) -> float:
        """Δ_b = √c Γ_r Γ_u: one user's r u in at most c items' right-hand sides."""
        return math.sqrt(self.max_items) * self.rating_bound * self.factor_bound

    @property
    def noise_multiplier(self) -> float:
        """s = σ_G/Δ_G = σ_b/Δ_b."""
        return self.rhs_noise.sigma / self.rhs_sensitivity

    def privacy_event(self, answers: int = 1):
        """Each answer (iteration) is two Gaussian releases: the Gram stack and the right-hand-side stack."""
        return Composition((self.gram_noise.event(answers), self.rhs_noise.event(answers)))

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        if not self.noise_on:  # the baseline: nothing promised; its pair still adds or removes one user
            return dataclasses.replace(PrivacyClaim.none(), unit=self.claim_unit, neighbouring=self.claim_neighbouring)
        return super().claim_for(answers)

    @property
    def claim(self) -> PrivacyClaim:
        """The promise for a user taking part in all ``iterations``."""
        return self.claim_for(self.iterations)

    # ------------------------------------------------------------ ratings

    def clipped_values(self, values: np.ndarray) -> np.ndarray:
        return np.clip(values, -self.rating_bound, self.rating_bound) if self.clip else values

    def user_factors(self, ratings: sparse.csr_array, factors: np.ndarray) -> np.ndarray:
        """The factors users put into the item statistics: solved, then clipped to Γ_u."""
        return clip_norms(self.solve_users(ratings, factors), self.factor_bound if self.clip else None)

    # ------------------------------------------------------------ the server

    def init_state(self, world: WorldInfo) -> ALSState:
        n, r = world.n_items, self.rank
        return ALSState(world, np.zeros((n, r * (r + 3) // 2)),
                        [initial_factors(n, r, self.init_scale, self.init_seed)])

    def respond(self, users: UserBatch, queries, published: np.ndarray, carried, rng: np.random.Generator):
        """Each user's contribution to the item statistics, as one sparse row: for each of its (at most c) sampled
        items ``j``, the block ``[upper(u uᵀ), clip(r_j) u]`` at columns ``j (p + r) …``."""
        ratings = self.centred(users.ratings)
        u = self.user_factors(ratings, published)
        sampled = subsample(ratings, self.max_items, rng)
        r = self.rank
        width = r * (r + 3) // 2
        owner = np.repeat(np.arange(sampled.shape[0]), np.diff(sampled.indptr))
        blocks = np.concatenate([outer_upper(u)[owner], self.clipped_values(sampled.data)[:, None] * u[owner]],
                                axis=1)
        columns = (sampled.indices.astype(np.int64)[:, None] * width + np.arange(width)).ravel()
        indptr = np.asarray(sampled.indptr, np.int64) * width
        n = published.shape[0]
        return csr(blocks.ravel(), columns, indptr, (sampled.shape[0], n * width)), carried

    def aggregate(self, state: ALSState, queries, messages: sparse.csr_array) -> ALSState:
        state.sums += np.asarray(messages.sum(axis=0)).reshape(state.sums.shape)
        return state

    def end_round(self, state: ALSState, rng: np.random.Generator) -> ALSState:
        r, p = self.rank, self.rank * (self.rank + 1) // 2
        n = state.world.n_items
        gram = full_of(state.sums[:, :p], r) + symmetric_noise((n, r, r), self.gram_noise.spent, rng)
        rhs = state.sums[:, p:] + rng.normal(0.0, self.rhs_noise.spent, (n, r))
        state.grams.append(upper_of(gram))
        state.rhs.append(rhs)
        state.factors.append(item_solve(gram, rhs, self.regularization))
        state.sums = np.zeros_like(state.sums)
        return state

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """Users' solves (ratings x r² products, users x r³ solves), the item step (n x r³, eigen and solve),
        the per-item statistics and every round's noisy copies kept for the white box."""
        n, r = world.n_items, self.rank
        q = r * (r + 3) // 2
        ratings = users * min(world.ratings_per_user, self.max_items)
        return RoundCost(operations=users * world.ratings_per_user * r * r + users * r ** 3 + ratings * q
                         + 30.0 * n * r ** 3,
                         state_bytes=8.0 * n * (q + r * r) * (3 + self.iterations),
                         user_bytes=8.0 * (2 * self.iterations + 3),
                         run_bytes=8.0 * self.iterations * (n * (q + 3 * r * r) + users * (world.ratings_per_user
                                                                                         + r * r)))

    # ------------------------------------------------------------ the white box

    def statistics(self, state: ALSState) -> dict[str, np.ndarray]:
        """Every round's noisy Gram (``gram``: n_items x r(r+1)/2, upper triangles) and right-hand sides
        (``rhs``: n_items x r), and the item factors published before each round and after the last
        (``item_factors``: V_0 … V_t)."""
        n, r = state.world.n_items, self.rank
        return {"gram": np.array(state.grams).reshape(-1, n, r * (r + 1) // 2),
                "rhs": np.array(state.rhs).reshape(-1, n, r), "item_factors": np.array(state.factors)}

    def statistic_noise(self) -> dict[str, tuple[str, Any]]:
        return {"gram": ("gaussian", gram_noise_scales(self.rank, self.gram_noise.sigma)),
                "rhs": ("gaussian", self.rhs_noise.sigma)}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds=None) -> dict[str, np.ndarray]:
        """What ``rows`` (one per run, or one for all runs) add to each round's noisy statistics, replayed from each
        run's published ``V_{t−1}``: ``upper(u uᵀ)`` and ``clip(r) u`` on the items it rates. A row with more
        than c ratings enters c of them at random: its expected contribution (times c/|Ω|) is returned."""
        factors = np.asarray(statistics["item_factors"], float)  # (R, T + 1, n, r)
        rounds_done = np.asarray(statistics["rhs"]).shape[1]
        ratings = self.centred(rows.ratings)
        values = ratings.toarray()
        mask = rows.rated.astype(float)
        counts = mask.sum(axis=1)
        share = np.where(counts > self.max_items, self.max_items / np.maximum(counts, 1), 1.0)[:, None, None]
        n, r = factors.shape[-2:]
        grams, rhs = [], []
        for t in range(rounds_done):
            v = factors[:, t]  # (R or 1, n, r)
            outer = (v[..., :, None] * v[..., None, :]).reshape(v.shape[0], n, r * r)
            a = (mask[:, None, :] @ outer)[:, 0].reshape(-1, r, r)
            b = (values[:, None, :] @ v)[:, 0]
            u = clip_norms(ridge_solve(a, b, self.regularization), self.factor_bound if self.clip else None)
            grams.append(share * mask[..., None] * outer_upper(u)[:, None, :])
            rhs.append(share * (mask * self.clipped_values(values))[..., None] * u[:, None, :])
        return {"gram": np.stack(grams, axis=1), "rhs": np.stack(rhs, axis=1)}

    def panel_runs(self, rows: UserBatch, n_runs: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``n_runs`` runs on the panel ``rows`` at once (numpy over a runs axis, dense rows: a small world); the
        noise is drawn as the engine draws it (Gram, then right-hand sides, per round), so one run with the
        engine's round stream gives the engine's statistics when no user has more than c ratings."""
        ratings = self.centred(rows.ratings)
        values, mask = ratings.toarray(), rows.rated.astype(float)
        n, r = values.shape[1], self.rank
        factors = [np.broadcast_to(initial_factors(n, r, self.init_scale, self.init_seed), (n_runs, n, r))]
        grams, rhss = [], []
        sampling = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0]) \
            if mask.sum(axis=1).max(initial=0) > self.max_items else None
        for _ in range(self.iterations):
            v = factors[-1]
            outer = (v[..., :, None] * v[..., None, :]).reshape(n_runs, n, r * r)
            u = clip_norms(ridge_solve((mask @ outer).reshape(n_runs, -1, r, r), values @ v, self.regularization),
                           self.factor_bound if self.clip else None)  # (R, users, r)
            sampled = np.broadcast_to(mask, (n_runs,) + mask.shape)
            if sampling is not None:  # at most c items per user and run, uniformly
                keys = np.where(mask > 0, sampling.random((n_runs,) + mask.shape), np.inf)
                sampled = mask * (np.argsort(np.argsort(keys, axis=-1), axis=-1) < self.max_items)
            sums_gram = np.swapaxes(sampled, 1, 2) @ outer_upper(u)
            sums_rhs = np.swapaxes(sampled * self.clipped_values(values), 1, 2) @ u
            gram = full_of(sums_gram, r) + symmetric_noise((n_runs, n, r, r), self.gram_noise.spent, rng)
            rhs = sums_rhs + rng.normal(0.0, self.rhs_noise.spent, (n_runs, n, r))
            grams.append(upper_of(gram))
            rhss.append(rhs)
            factors.append(item_solve(gram, rhs, self.regularization))
        return {"gram": np.stack(grams, axis=1), "rhs": np.stack(rhss, axis=1),
                "item_factors": np.stack(factors, axis=1)}


@dataclass
class ALS(DPALS, kind="als"):
    """Non-private ALS (the utility baseline): the same protocol with no noise and no clipping; claims nothing."""

    epsilon: Annotated[float, Gt(0)] = 1.0
    noise_on: bool = field(default=False, init=False, repr=False)
    clip: bool = field(default=False, init=False, repr=False)


@dataclass
class DPALSNoGramNoise(DPALS, kind="dp_als_no_gram_noise"):
    """Broken twin: claims DP-ALS's (ε, δ) but adds no noise to the per-item Grams (right-hand sides noised)."""

    negative_control = True
    #: the Gram term alone: the known-noise test on the statistic whose noise is missing
    test_scenario: ClassVar[dict] = DPALS.test_scenario | {"attack": [{"kind": "known_noise", "statistics": ["gram"]}]}
    gram_noise_on: bool = field(default=False, init=False, repr=False)


@dataclass
class DPALSNoClipping(DPALS, kind="dp_als_no_clipping"):
    """Broken twin: noise calibrated to Γ_u and Γ_r, but neither the user factors nor the ratings are clipped."""

    negative_control = True
    clip: bool = field(default=False, init=False, repr=False)


__all__ = ["DPALS", "ALS", "DPALSNoGramNoise", "DPALSNoClipping", "ALSState"]
