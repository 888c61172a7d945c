"""Pieces the matrix-completion protocols share (ALGORITHMS.md B): low-rank rows, projections, noisy eigenvectors.

Users' rows are sparse (``UserBatch.ratings``: the observed entries Ω); a
user's completed row is kept as coefficients over a shared basis of item
vectors (:class:`LowRankRows`), never as a dense users x items table.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Annotated

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

from .accounting import GaussianRelease, gaussian_sigma_for
from .base import GaussianNoise, PrivacyClaim, Mechanism, UserBatch, WorldInfo

#: elements of the dense block of predicted rows built at a time
_DENSE_CHUNK = 2 ** 21


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

    def __len__(self) -> int:
        return self.coefficients.shape[0]

    def __getitem__(self, index) -> "LowRankRows":
        return LowRankRows(self.coefficients[index], self.basis, self.clip)

    @classmethod
    def concat(cls, parts: "list[LowRankRows]") -> "LowRankRows":
        basis = parts[0].basis
        if any(p.basis is not basis and not np.array_equal(p.basis, basis) for p in parts):
            raise ValueError("rows over different bases cannot be stacked")
        return cls(np.concatenate([p.coefficients for p in parts]), basis, parts[0].clip)

    def _clipped(self, values: np.ndarray) -> np.ndarray:
        return values if self.clip is None else np.clip(values, *self.clip)

    def dense(self) -> np.ndarray:
        """The rows as a dense (n_users, n_items) array: for small batches only."""
        return self._clipped(self.coefficients @ self.basis)

    def at(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """Predicted entries ``(users[e], items[e])``, computed entry by entry (no dense rows)."""
        return self._clipped(np.einsum("er,re->e", self.coefficients[users], self.basis[:, items], optimize=False))


def entry_rows(rows: sparse.csr_array) -> np.ndarray:
    """The row index of every stored entry of a CSR matrix."""
    return np.repeat(np.arange(rows.shape[0]), np.diff(rows.indptr))


def with_values(rows: sparse.csr_array, values: np.ndarray) -> sparse.csr_array:
    """A CSR matrix with ``rows``' structure (Ω) and new stored ``values``."""
    return sparse.csr_array((values, rows.indices, rows.indptr), shape=rows.shape)


def row_norms(rows: sparse.csr_array) -> np.ndarray:
    return np.sqrt(np.asarray(with_values(rows, rows.data ** 2).sum(axis=1)).ravel())


def clip_rows(rows: sparse.csr_array, bound: float) -> sparse.csr_array:
    """Scale each row down to L2 norm at most ``bound`` (Π_{L,Ω} applied to observed entries)."""
    factor = np.minimum(1.0, bound / np.maximum(row_norms(rows), 1e-300))
    return with_values(rows, rows.data * factor[entry_rows(rows)])


def observed(rows: sparse.csr_array, coefficients: np.ndarray, basis: np.ndarray) -> sparse.csr_array:
    """P_Ω(coefficients @ basis) on ``rows``' structure, entry by entry."""
    values = np.zeros(rows.nnz)
    if basis.shape[0] == 0:
        return with_values(rows, values)
    chunk = max(1, _DENSE_CHUNK // rows.shape[1])  # dense rows of a few users at a time
    for start in range(0, rows.shape[0], chunk):
        stop = min(start + chunk, rows.shape[0])
        lo, hi = rows.indptr[start], rows.indptr[stop]
        dense = coefficients[start:stop] @ basis
        local = np.repeat(np.arange(stop - start), np.diff(rows.indptr[start:stop + 1]))
        values[lo:hi] = dense[local, rows.indices[lo:hi]]
    return with_values(rows, values)


def gram(rows: sparse.csr_array) -> np.ndarray:
    """``rowsᵀ rows`` (n_items x n_items), through dense blocks of a few users (BLAS beats sparse x sparse here)."""
    n = rows.shape[1]
    out = np.zeros((n, n))
    chunk = max(1, _DENSE_CHUNK // n)
    for start in range(0, rows.shape[0], chunk):
        block = rows[start:start + chunk].toarray()
        out += block.T @ block
    return out


def symmetric_gaussian(n: int, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """An n x n symmetric matrix with i.i.d. N(0, σ²) entries on and above the diagonal."""
    upper = np.triu(rng.normal(0.0, sigma, (n, n)))
    return upper + np.triu(upper, 1).T


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
        values, vectors = sparse_linalg.eigsh(matrix, k=1, which="LA", v0=start, tol=1e-12)
        value, v = values[0], vectors[:, 0]
    return float(value), v * np.sign(v[np.argmax(np.abs(v))])


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
    """

    epsilon: Annotated[float, Gt(0)]
    delta: Annotated[float, Gt(0), Lt(1)] = 1e-6
    iterations: Annotated[int, Ge(1)] = 10
    row_bound: Annotated[float, Gt(0)] = 1.0
    claim_model = "joint"
    claim_unit = "user"
    claim_neighbouring = "replace"
    #: the audit pair that moves a second-moment statistic most: disjoint rated sets
    audit_pair = "disjoint_support"
    #: False: a non-private baseline (no noise, claims nothing); twins switch the two below off
    noise_on: bool = field(default=True, init=False, repr=False)
    spend_noise: bool = field(default=True, init=False, repr=False)
    project: bool = field(default=True, init=False, repr=False)

    def __post_init__(self) -> None:
        self.claim_delta = self.delta
        self.noise = GaussianNoise(self._sigma(), self._sensitivity(),
                                   spent_sigma=None if self.noise_on and self.spend_noise else 0.0)

    def _sensitivity(self) -> float:
        return 4.0 * math.sqrt(2.0) * self.row_bound ** 2

    def _releases_per_round(self) -> int:
        return 1

    def _sigma(self) -> float:
        return gaussian_sigma_for(self.epsilon, self.delta, self._sensitivity(),
                                  self.iterations * self._releases_per_round())

    def privacy_event(self, answers: int = 1):
        """Each answer is one round's Gaussian release(s) at the published σ."""
        return GaussianRelease(self.noise.sigma, self._sensitivity(), count=answers * self._releases_per_round())

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        if not self.noise_on:  # a non-private baseline: audits measure its leakage (verdict no_claim)
            return PrivacyClaim.none()
        return super().claim_for(answers)

    @property
    def claim(self) -> PrivacyClaim:
        """The promise for a user taking part in all ``iterations`` rounds."""
        return self.claim_for(self.iterations)

    def make_queries(self, n_users, rng, state, rated=None) -> np.ndarray:
        return np.zeros((n_users, 0))

    def aggregate(self, state: GramState, queries, messages: sparse.csr_array) -> GramState:
        if state.basis.shape[0] == 0:
            state.n_users += messages.shape[0]
        state.gram += gram(messages)
        return state

    def _targets(self, users: UserBatch) -> sparse.csr_array:
        """Y*_i on Ω, clipped to norm L (unless a twin skips the projections)."""
        ratings = users.ratings.astype(float)
        return clip_rows(ratings, self.row_bound) if self.project else ratings

    def _residual(self, targets, coefficients, basis) -> sparse.csr_array:
        """A_i = P_Ω(Y_i − Y*_i) for rows ``coefficients @ basis``."""
        return with_values(targets, observed(targets, coefficients, basis).data - targets.data)

    def _projected(self, targets, coefficients: np.ndarray, basis: np.ndarray) -> np.ndarray:
        """Π_{L,Ω}: rows scaled down to ``‖P_Ω(Y_i)‖ ≤ L``."""
        if not self.project:
            return coefficients
        norms = row_norms(observed(targets, coefficients[:, :basis.shape[0]], basis))
        return coefficients * np.minimum(1.0, self.row_bound / np.maximum(norms, 1e-300))[:, None]

