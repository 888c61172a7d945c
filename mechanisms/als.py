"""Trainers shipped with recaudit: a non-private explicit ALS in numpy, and a trainer that ignores its data.

Both follow the trainer contract (``recaudit.mechanisms.trainer``, docs/guide/trainers.md): ``fit(ratings, rng)``
takes a ``scipy.sparse.csr_matrix`` (users x items, float ratings) and a ``numpy.random.Generator`` and returns
a model exposing ``item_factors`` (items x r), ``recommend(histories, k)`` and ``predict(histories, items)``.
They are the audit's positive and negative controls: ALS claims nothing (its shipped scenario types in a claim
of ε = 1, which the audit must find violated); ``fit_ignoring_data`` publishes factors that depend on the seed
alone, so any claim holds for it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse


def gram_rows(pattern: sparse.csr_array, factors: np.ndarray) -> np.ndarray:
    """``Σ_{j in row i} f_j f_jᵀ`` for every row ``i`` of the 0/1 ``pattern``: (rows, r, r).

    One sparse-dense product with the rows' outer products flattened (items x r²): no loop over ratings.
    """
    r = factors.shape[1]
    used = np.unique(pattern.indices)
    if used.size < 0.5 * len(factors):  # outer products of the rated columns only (a fold-in of a few users)
        local = np.searchsorted(used, pattern.indices)
        pattern = sparse.csr_array((pattern.data, local, pattern.indptr), shape=(pattern.shape[0], used.size))
        factors = factors[used]
    outer = (factors[:, :, None] * factors[:, None, :]).reshape(len(factors), r * r)
    return np.asarray(pattern @ outer).reshape(pattern.shape[0], r, r)


def ridge_rows(pattern: sparse.csr_array, ratings: sparse.csr_array, factors: np.ndarray,
               reg: float) -> np.ndarray:
    """Per row, the ridge solution ``x = (Σ f fᵀ + reg·n·I)⁻¹ Σ r f`` over the row's rated columns (ALS-WR:
    the penalty scales with the row's count ``n``, as Zhou et al. 2008); rows with no rating get 0."""
    r = factors.shape[1]
    counts = np.diff(pattern.indptr).astype(float)
    gram = gram_rows(pattern, factors)
    gram += (reg * np.maximum(counts, 1.0))[:, None, None] * np.eye(r)
    rhs = np.asarray(ratings @ factors)
    return np.linalg.solve(gram, rhs[..., None])[..., 0]


@dataclass
class FactorModel:
    """A matrix-factorisation model: what a trainer publishes (``item_factors``) and its fold-in for new users."""

    item_factors: np.ndarray
    reg: float = 0.05

    def fold_in(self, histories) -> np.ndarray:
        """User factors fitted to rating rows ``histories`` (users x items) against the item factors."""
        ratings = sparse.csr_array(histories, dtype=float)
        pattern = sparse.csr_array((np.ones_like(ratings.data), ratings.indices, ratings.indptr), ratings.shape)
        return ridge_rows(pattern, ratings, self.item_factors, self.reg)

    def predict(self, histories, items) -> np.ndarray:
        """Predicted ratings of ``items`` (users x k indices) for users with rating rows ``histories``."""
        users = self.fold_in(histories)
        items = np.asarray(items)
        return np.einsum("ur,ukr->uk", users, self.item_factors[items])

    def recommend(self, histories, k: int) -> np.ndarray:
        """Top-``k`` items (users x k indices) for users with rating rows ``histories``, their rated items excluded."""
        ratings = sparse.csr_array(histories, dtype=float)
        scores = self.fold_in(ratings) @ self.item_factors.T
        rows, cols = ratings.nonzero()
        scores[rows, cols] = -np.inf
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, top, axis=1), axis=1, kind="stable")
        return np.take_along_axis(top, order, axis=1)


def fit(ratings, rng: np.random.Generator, factors: int = 32, iterations: int = 10, reg: float = 0.02,
        scale: float = 0.1) -> FactorModel:
    """Non-private explicit ALS with weighted regularisation (ALS-WR, Zhou et al. 2008) on centred ratings.

    ``ratings``: users x items, one entry per rating. Item factors start ``N(0, scale²)`` from ``rng``; each
    iteration solves every user's ridge problem, then every item's (two sparse products and a batched solve
    each). A small ``reg`` lets the model fit (and memorise) its users: the audit's positive control.
    Items no one rates keep factor 0.
    """
    ratings = sparse.csr_array(ratings, dtype=float)
    ratings.sum_duplicates()
    n_users, n_items = ratings.shape
    pattern = sparse.csr_array((np.ones_like(ratings.data), ratings.indices, ratings.indptr), ratings.shape)
    by_item, pattern_t = ratings.T.tocsr(), pattern.T.tocsr()
    items = rng.normal(0.0, scale, (n_items, factors))
    items[np.diff(pattern_t.indptr) == 0] = 0.0
    for _ in range(iterations):
        users = ridge_rows(pattern, ratings, items, reg)
        items = ridge_rows(pattern_t, by_item, users, reg)
    return FactorModel(items, reg)


def fit_ignoring_data(ratings, rng: np.random.Generator, factors: int = 32) -> FactorModel:
    """A trainer whose published ``item_factors`` depend on the seed alone (never on ``ratings``' values or
    who is in them): N(0, 1) draws of the matrix's shape. Any privacy claim holds for it (a negative control)."""
    n_items = ratings.shape[1]
    return FactorModel(rng.normal(size=(n_items, factors)), 0.05)
