"""Pieces the matrix-completion protocols share (docs/families/matrix-completion.md): low-rank rows, projections, noisy
eigenvectors.

Users' rows are sparse (``UserBatch.ratings``: the observed entries Ω); a
user's completed row is kept as coefficients over a shared basis of item
vectors (:class:`LowRankRows`), never as a dense users x items table.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Annotated, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

from . import centring
from .accounting import Composition, GaussianRelease, gaussian_sigma_for
from .base import GaussianNoise, Mechanism, ParameterError, PrivacyClaim, UserBatch, WorldInfo
from .costs import RoundCost
from .gram_sums import DENSE_CHUNK, DENSE_FROM_ENTRIES, GramSum, gram  # noqa: F401 (gram re-exported)
from .sparse_rows import csr


def check_star_scale(min_rating: float | None, max_rating: float | None) -> None:
    """A mechanism's star scale: both ends with ``min_rating < max_rating``, or neither (one line otherwise)."""
    if (min_rating is None) != (max_rating is None) or (min_rating is not None and not max_rating > min_rating):
        raise ParameterError("max_rating", "give min_rating < max_rating (the star scale) or neither")


@dataclass(frozen=True, eq=False)
class LowRankRows:
    """Completed rows ``coefficients @ basis`` of a batch of users (users on axis 0).

    ``basis`` (rank x n_items) is shared by every user of a run: the item
    vectors the users combined (published eigenvectors, or whatever the
    protocol really used). Behaves as an array of rows for the recorder:
    ``len``, indexing on axis 0 and :meth:`concat`.
    """

    coefficients: np.ndarray  # (n_users, rank)
    basis: np.ndarray  # (rank, n_items)
    #: predictions clamped to this (low, high) rating range (a predictor that clamps, e.g. McSherry–Mironov's)
    clip: tuple[float, float] | None = None
    #: the leading basis rows that are the run's centring (``MAvg`` and the user offset's all-ones): the private bias
    #: model alone, which utility reports score beside the whole prediction (0: none)
    centring: int = 0

    def __len__(self) -> int:
        return self.coefficients.shape[0]

    def __getitem__(self, index) -> "LowRankRows":
        return LowRankRows(self.coefficients[index], self.basis, self.clip, self.centring)

    @classmethod
    def concat(cls, parts: "list[LowRankRows]") -> "LowRankRows":
        basis = parts[0].basis
        if any(p.basis is not basis and not np.array_equal(p.basis, basis) for p in parts):
            raise ValueError("rows over different bases cannot be stacked")
        return cls(np.concatenate([p.coefficients for p in parts]), basis, parts[0].clip, parts[0].centring)

    def _clipped(self, values: np.ndarray) -> np.ndarray:
        return values if self.clip is None else np.clip(values, *self.clip)

    def dense(self) -> np.ndarray:
        """The rows as a dense (n_users, n_items) array: for small batches only."""
        return self._clipped(self.coefficients @ self.basis)

    def at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted entries ``(users[e], items[e])``, computed entry by entry (no dense rows)."""
        return self._clipped(np.einsum("er,re->e", self.coefficients[users], self.basis[:, items], optimize=False))

    def centring_only(self) -> "LowRankRows | None":
        """The rows' centring alone (the private bias model ``MAvg + r̄_u``), or None without one."""
        if not self.centring:
            return None
        return LowRankRows(self.coefficients[:, :self.centring], self.basis[:self.centring], self.clip)


def with_values(rows: sparse.csr_array, values: np.ndarray) -> sparse.csr_array:
    """A CSR matrix with ``rows``' structure (Ω) and new stored ``values``."""
    return csr(values, rows.indices, rows.indptr, rows.shape)


def per_entry(rows: sparse.csr_array, per_row: np.ndarray) -> np.ndarray:
    """Each row's value in ``per_row`` repeated over its stored entries (``per_row[row of each entry]``)."""
    return np.repeat(per_row, np.diff(rows.indptr))


def row_norms(rows: sparse.csr_array, values: np.ndarray | None = None) -> np.ndarray:
    """Each row's L2 norm, of its stored values or of ``values`` on its entries: scipy's row sums (one
    ``reduceat`` over the rows holding entries), read straight off ``indptr`` without building a matrix."""
    squares = (rows.data if values is None else values) ** 2
    sums = np.zeros(rows.shape[0])
    filled = np.flatnonzero(np.diff(rows.indptr))
    if filled.size:
        sums[filled] = np.add.reduceat(squares, rows.indptr[filled])
    return np.sqrt(sums)


def clip_rows(rows: sparse.csr_array, bound: float) -> sparse.csr_array:
    """Scale each row down to L2 norm at most ``bound`` (Π_{L,Ω} applied to observed entries)."""
    factor = np.minimum(1.0, bound / np.maximum(row_norms(rows), 1e-300))
    return with_values(rows, rows.data * per_entry(rows, factor))


#: elements of the dense block of predicted rows ``observed`` builds at a time (1 MB: it stays in a core's cache
#: while its entries are read off): 0.12-0.15 s CPU a round of 500k users x 400 items over 2-9 vectors, against
#: 0.15-0.17 s with 16 MB blocks (``DENSE_CHUNK``, used before)
OBSERVED_CHUNK = 2 ** 17


def observed(rows: sparse.csr_array, coefficients: np.ndarray, basis: np.ndarray) -> sparse.csr_array:
    """P_Ω(coefficients @ basis) on ``rows``' structure, entry by entry."""
    if basis.shape[0] == 0:
        return with_values(rows, np.zeros(rows.nnz))
    values = np.empty(rows.nnz)  # (every entry is written below)
    # dense rows of a few users at a time (the blocks' size is part of the result: BLAS's tiling of the product
    # changes its last bits)
    n = rows.shape[1]
    chunk = max(1, OBSERVED_CHUNK // n)
    for start in range(0, rows.shape[0], chunk):
        stop = min(start + chunk, rows.shape[0])
        lo, hi = rows.indptr[start], rows.indptr[stop]
        dense = coefficients[start:stop] @ basis
        # flat positions in the dense block (a third faster than indexing it by (row, column) pairs)
        flat = np.repeat(np.arange(0, dense.size, n), np.diff(rows.indptr[start:stop + 1]))
        flat += rows.indices[lo:hi]
        np.take(dense.ravel(), flat, out=values[lo:hi])
    return with_values(rows, values)


@functools.lru_cache(maxsize=64)
def _triangle(n: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.triu_indices(n)``, built once per size (it costs ~20 µs, more than the small matrices it indexes)."""
    i, j = np.triu_indices(n)
    i.flags.writeable = j.flags.writeable = False
    return i, j


def symmetric_gaussian(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """An n x n symmetric matrix with i.i.d. N(0, σ²) entries on and above the diagonal."""
    noise = rng.normal(0.0, sigma, (n, n))
    i, j = _triangle(n)
    out = np.zeros((n, n))
    out[i, j] = out[j, i] = noise[i, j]
    return out


def upper(matrices: np.ndarray) -> np.ndarray:
    """The upper triangle (with the diagonal) of the last two axes, flattened: the entries symmetric noise draws."""
    i, j = _triangle(matrices.shape[-1])
    return matrices[..., i, j]


def upper_outer(rows: np.ndarray) -> np.ndarray:
    """``upper(rows[..., :, None] * rows[..., None, :])`` without the full outer products."""
    i, j = _triangle(rows.shape[-1])
    out = rows[..., i]
    out *= rows[..., j]
    return out


def top_eigenpair(matrix: np.ndarray) -> tuple[float, np.ndarray]:
    """Largest eigenvalue of a symmetric matrix and its unit eigenvector (sign fixed: largest entry > 0).

    ARPACK (Lanczos, matrix–vector products) from a fixed start vector: deterministic, and far cheaper
    than a full eigendecomposition for the one pair needed.
    """
    n = matrix.shape[0]
    if n <= 2:
        values, vectors = np.linalg.eigh(matrix)
        value, v = values[-1], vectors[:, -1]
    else:
        start = 1.0 + np.arange(n) / n
        values, vectors = sparse_linalg.eigsh(_Product(matrix), k=1, which="LA", v0=start, tol=1e-12)
        value, v = values[0], vectors[:, 0]
    return float(value), v * np.sign(v[np.argmax(np.abs(v))])


class _Product(sparse_linalg.LinearOperator):
    """A dense matrix as ARPACK's operator: the product scipy's own wrapper computes (``matrix.dot`` of the
    vector as a column, the same bits) without its checks and reshapes on each of Lanczos' ~10 products."""

    def __init__(self, matrix: np.ndarray):
        super().__init__(matrix.dtype, matrix.shape)
        self.matrix = matrix

    def _matmat(self, x: np.ndarray) -> np.ndarray:
        return self.matrix.dot(x)

    def matvec(self, x: np.ndarray) -> np.ndarray:
        return self.matrix.dot(x.reshape(-1, 1)).reshape(-1)


def top_eigenvectors(matrix: np.ndarray, rank: int) -> np.ndarray:
    """The ``rank`` leading eigenvectors of a symmetric matrix, as rows (rank x n)."""
    values, vectors = np.linalg.eigh(matrix)
    return vectors[:, ::-1][:, :rank].T.copy()


@dataclass
class GramState:
    """A server that sums ``AᵀA`` over each round's messages and publishes item vectors."""

    world: WorldInfo
    gram: np.ndarray  # this round's Σ A_iᵀA_i
    blocks: list  # this round's message rows (matrix–vector variants)
    basis: np.ndarray  # item vectors published so far, as rows
    n_users: int = 0  # the cohort (users answering round 1): public under replace-one
    effects: centring.GlobalEffects | None = None  # the published centring (``centre``), once known
    phase: int = 0  # centring rounds done
    centre_sums: list = field(default_factory=list)  # the centring rounds' noisy sums
    sums: GramSum | None = None  # this round's Σ A_iᵀA_i while its batches come in (``gram`` once the round ends)


@dataclass
class GramCompletion(Mechanism):
    """Matrix completion with the global/local split of Jain et al.: users send ``A_i = P_Ω(Y_i − Y*_i)``,
    the server publishes noisy functions of ``W = Σ A_iᵀA_i``, users keep their rows.

    Shared by private Frank–Wolfe and private projected gradient descent. Each
    user's observed ratings are clipped to norm ``row_bound`` (L) and its row
    is projected back to ``‖P_Ω(Y_i)‖ ≤ L`` after every step, so ``‖A_i‖ ≤ 2L``
    whatever the data; replacing one user moves ``W`` by the difference of two
    PSD rank-one matrices of norm ≤ 4L², at most ``4√2·L²`` in Frobenius norm
    (the upper triangle the noise covers, by no more). The claim — (ε, δ)-joint
    DP per user, replace-one — comes from the accountant for ``iterations``
    Gaussian releases; σ is the smallest that makes it ε at δ.

    Star ratings (``min_rating``..``max_rating``) can be centred first
    (``centre``, ``recaudit.mechanisms.centring``): the protocol completes
    ``r − MAvg − r̄_u`` and users predict ``MAvg + r̄_u + row``, clamped to the
    scale (each user also undoes its own row's clipping factor: its output is
    not private with respect to itself). ``private`` centring spends
    ``centre_share`` of the Gaussian budget (μ²) in two leading rounds, so the
    claim covers ``iterations + 2`` rounds; ``public`` centring takes
    ``public_users`` users whose rows are public (outside the claim).
    """
    test_scenario: ClassVar[dict] = {
        "population": {"kind": "rank_one_matrix", "n_users": 12, "n_items": 10, "ratings_per_user": 4,
                       "test_fraction": 0.0},
        "panel": {},
        "mechanism": {"epsilon": 1.0, "delta": 1e-5, "iterations": 4, "row_bound": 0.1},
        "attack": [{"kind": "subspace_alignment"}, {"kind": "unpublished_direction", "view": "others"}],
        "audit": {"design": "full_runs", "trials": 1000, "block_size": 250, "alpha": 0.05},
    }

    epsilon: Annotated[float, Gt(0)]
    delta: Annotated[float, Gt(0), Lt(1)] = 1e-6
    iterations: Annotated[int, Ge(1)] = 10
    row_bound: Annotated[float, Gt(0)] = 1.0
    centre: Literal["none", "user", "public", "private"] = "none"
    min_rating: float | None = None
    max_rating: float | None = None
    #: private centring: its share of the budget (of μ², Gaussian composition) and each message's L2 bound C
    centre_share: Annotated[float, Gt(0), Lt(1)] = 0.1
    centre_bound: Annotated[float, Gt(0)] = 1.0
    public_users: Annotated[int, Ge(0)] = 0
    beta_m: Annotated[float, Ge(0)] = 15.0
    beta_p: Annotated[float, Ge(0)] = 20.0
    claim_model = "joint"
    claim_unit = "user"
    claim_neighbouring = "replace"
    #: the audit pair that moves a second-moment statistic most: disjoint rated sets
    audit_pair = "disjoint_support"
    reads_likes = False  # users' ratings only
    #: False: a non-private baseline (no noise, claims nothing); twins switch the two below off
    noise_on: bool = field(default=True, init=False, repr=False)
    spend_noise: bool = field(default=True, init=False, repr=False)
    project: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        check_star_scale(self.min_rating, self.max_rating)
        if self.centre != "none" and self.min_rating is None:
            raise ParameterError("centre", f"centre: {self.centre} needs the star scale (min_rating, max_rating)")
        if (self.centre == "public") != (self.public_users > 0):
            raise ParameterError("public_users", "centre: public takes public_users >= 1 (and only it does)")
        self.claim_delta = self.delta
        self.noise = GaussianNoise(self._sigma(), self._sensitivity(),
                                   spent_sigma=None if self.noise_on and self.spend_noise else 0.0)

    @property
    def centring_rounds(self) -> int:
        return 2 if self.centre == "private" else 0

    @property
    def rounds(self) -> int:
        """Rounds a panel answers: the centring rounds, then ``iterations``."""
        return self.iterations + self.centring_rounds

    @property
    def scale(self) -> tuple[float, float] | None:
        return None if self.min_rating is None else (self.min_rating, self.max_rating)

    def _full_sigma(self) -> float:
        return gaussian_sigma_for(self.epsilon, self.delta, self._sensitivity(),
                                  self.iterations * self._releases_per_round())

    @property
    def centre_sigma(self) -> float:
        """σ of the two centring releases (sensitivity 2C each): their μ² is ``centre_share`` of the total."""
        mu2 = self.iterations * self._releases_per_round() * (self._sensitivity() / self._full_sigma()) ** 2
        return 2.0 * self.centre_bound * math.sqrt(2.0 / (self.centre_share * mu2))

    def _sensitivity(self) -> float:
        return 4.0 * math.sqrt(2.0) * self.row_bound ** 2

    def _releases_per_round(self) -> int:
        return 1

    def _sigma(self) -> float:
        share = self.centre_share if self.centre == "private" else 0.0
        return self._full_sigma() / math.sqrt(1.0 - share)

    def privacy_event(self, answers: int = 1):
        """Each answer is one round's Gaussian release(s) at the published σ (centring rounds first)."""
        centring_answers = min(answers, self.centring_rounds)
        events = []
        if centring_answers:
            events.append(GaussianRelease(self.centre_sigma, 2.0 * self.centre_bound, count=centring_answers))
        if answers > centring_answers:
            events.append(GaussianRelease(self.noise.sigma, self._sensitivity(),
                                          count=(answers - centring_answers) * self._releases_per_round()))
        return events[0] if len(events) == 1 else Composition(tuple(events))

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        if not self.noise_on:  # a non-private baseline: audits measure its leakage (verdict no_claim)
            return PrivacyClaim.none()
        return super().claim_for(answers)

    @property
    def claim(self) -> PrivacyClaim:
        """The promise for a user taking part in all rounds (centring, then ``iterations``)."""
        return self.claim_for(self.rounds)

    def make_queries(self, n_users, rng, state, rated=None) -> np.ndarray:
        return np.zeros((n_users, 0))

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """A dense n x n Gram summed from the messages (``gram_sums``: dense blocks through dsyrk, users x n^2 / 2
        multiply-adds at ~25 an operation's time, from DENSE_FROM_ENTRIES ratings a row; else ratings x n products,
        ~4 an operation's time), the users' rows over the published vectors (users x n x iterations), an
        eigen-solve, its noise and the kept triangles (~120 n^2; measured at 400-4,000 items, ./dev bench estimate);
        the Gram, its noise and every round's noisy upper triangle (kept for the white box); per user its carried
        step and output; per batched
        run (``panel_runs``; measured at 2, 10 and 30 items by peak memory over blocks of 2,000 to 500,000 runs)."""
        n, rows = world.n_items, users * world.ratings_per_user
        if getattr(self, "eigen", "exact") == "exact":  # a batched run per round: ~6 n x n arrays, the users' rows
            run_bytes = self.iterations * (300.0 + 45.0 * n * n + 16.0 * users * n)
        else:  # Oja's products and iterates, kept for the attack
            run_bytes = 14000.0 + self.iterations * (96.0 * self.oja_steps * n + 24.0 * users * n)
        gram_ops = users * n * n / 50 if world.ratings_per_user >= DENSE_FROM_ENTRIES else rows * n / 4
        return RoundCost(operations=gram_ops + users * n * (self.iterations + 1) + 120.0 * n * n,
                         state_bytes=8.0 * n * n * (4 + self.rounds / 2),
                         user_bytes=8.0 * (2 * self.rounds + 3), run_bytes=run_bytes)

    # ------------------------------------------------------------ centring (recaudit.mechanisms.centring), then the
    # protocol

    def public_panel(self) -> int:
        return self.public_users

    def init_public(self, state: GramState, rows: UserBatch) -> GramState:
        state.effects = centring.exact(rows.ratings, self.scale, self.beta_m)
        return state

    def _effects(self, state: GramState) -> centring.GlobalEffects | None:
        if self.centre == "user":
            return centring.midpoint(state.world.n_items, self.scale)
        return state.effects

    def broadcast(self, state: GramState) -> dict:
        phase = state.phase if state.phase < self.centring_rounds else None
        return self._broadcast(state) | {"centring": phase, "effects": self._effects(state)}

    def respond(self, users: UserBatch, queries, published: dict, carried, rng: np.random.Generator):
        if published["centring"] is not None:
            return centring.message(users.ratings, published["centring"], self.scale, self.centre_bound), carried
        return self._respond(users, self._targets(users, published["effects"]), published, carried, rng)

    def aggregate(self, state: GramState, queries, messages: sparse.csr_array) -> GramState:
        if state.phase < self.centring_rounds:
            if len(state.centre_sums) == state.phase:
                state.centre_sums.append(np.zeros(state.world.n_items))
            state.centre_sums[state.phase] += np.asarray(messages.sum(axis=0)).ravel()
            return state
        return self._aggregate(state, messages)

    def end_round(self, state: GramState, rng: np.random.Generator) -> GramState:
        if state.phase >= self.centring_rounds:
            if state.sums is not None:  # (a zero matrix plus the sum: the same bits as summing into it)
                state.gram, state.sums = state.gram + state.sums.total(), None
            return self._end_round(state, rng)
        sigma = self.centre_sigma if self.noise.spent > 0 else 0.0
        if len(state.centre_sums) == state.phase:
            state.centre_sums.append(np.zeros(state.world.n_items))
        state.centre_sums[state.phase] = state.centre_sums[state.phase] + rng.normal(0.0, sigma, state.world.n_items)
        state.phase += 1
        if state.phase == self.centring_rounds:
            typical = float(centring.weights(np.array([state.world.ratings_per_user]), self.centre_bound)[0])
            state.effects = centring.effects(*state.centre_sums, self.scale, self.beta_m, sigma, typical)
        return state

    def _aggregate(self, state: GramState, messages: sparse.csr_array) -> GramState:
        if state.basis.shape[0] == 0:
            state.n_users += messages.shape[0]
        if state.sums is None:
            state.sums = GramSum(state.world.n_items)
        state.sums.add(messages)
        return state

    def _targets(self, users: UserBatch, effects: centring.GlobalEffects | None) -> sparse.csr_array:
        """Y*_i on Ω (centred when ``centre`` says so), clipped to norm L (unless a twin skips the projections)."""
        ratings = users.ratings.astype(float, copy=False)  # (clipping, centring and the messages make new values)
        if self.centre != "none":
            ratings = with_values(ratings, np.clip(ratings.data, *self.scale))
            ratings = centring.centred(ratings, effects.MAvg, centring.offsets(ratings, effects.MAvg, self.beta_p))
        return clip_rows(ratings, self.row_bound) if self.project else ratings

    def _output(self, users: UserBatch, coefficients: np.ndarray, basis: np.ndarray, state: GramState) -> LowRankRows:
        """Users' predicted rows: the completed rows, plus (centred) ``MAvg + r̄_u`` with the row's own clipping
        undone, clamped to the star scale."""
        if self.centre == "none":
            return LowRankRows(coefficients, basis, self.scale)
        effects = self._effects(state)
        ratings = users.ratings.astype(float)
        ratings = with_values(ratings, np.clip(ratings.data, *self.scale))
        offset = centring.offsets(ratings, effects.MAvg, self.beta_p)
        norms = row_norms(centring.centred(ratings, effects.MAvg, offset))
        factor = np.minimum(1.0, self.row_bound / np.maximum(norms, 1e-300)) if self.project else np.ones(len(users))
        n = basis.shape[1]
        return LowRankRows(np.column_stack([np.ones(len(users)), offset, coefficients / factor[:, None]]),
                           np.vstack([effects.MAvg, np.ones(n), basis]), self.scale, centring=2)

    def _residual(self, targets, coefficients, basis) -> sparse.csr_array:
        """A_i = P_Ω(Y_i − Y*_i) for rows ``coefficients @ basis``."""
        return with_values(targets, observed(targets, coefficients, basis).data - targets.data)

    def _projected(self, targets, coefficients: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """Π_{L,Ω}: rows scaled down to ``‖P_Ω(Y_i)‖ ≤ L``."""
        if not self.project:
            return coefficients
        norms = row_norms(observed(targets, coefficients[:, :basis.shape[0]], basis))
        return coefficients * np.minimum(1.0, self.row_bound / np.maximum(norms, 1e-300))[:, None]

