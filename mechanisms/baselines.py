"""Non-private reference predictors for utility reports: the global mean, a regularised user+item bias
model, and alternating least squares (ALS) on the bias model's residuals.

They fit a training table (users x items CSR, ratings as values) and predict entries ``(rows, items)``;
every private method's held-out RMSE is read next to them (``recaudit.audits.utility``). The bias
model is Koren's baseline predictor ``μ + b_u + b_i`` fitted by alternating ridge steps (as Surprise's
``BaselineOnly`` with ``method: als``; the test compares them); ALS adds ``p_uᵀ q_i`` fitted to the
residuals with weighted-λ regularisation (Zhou et al. 2008: ``λ·n_u`` for a user with ``n_u``
ratings, ``λ·n_i`` for an item). All updates are batched solves over users or items.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from .sparse_rows import csr


@dataclass(frozen=True)
class BiasModel:
    """``μ + b_u + b_i``."""

    mean: float
    user_bias: np.ndarray
    item_bias: np.ndarray

    def predict(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.mean + self.user_bias[rows] + self.item_bias[items]


@dataclass(frozen=True)
class ALSModel:
    """``μ + b_u + b_i + p_uᵀ q_i``."""

    bias: BiasModel
    user_factors: np.ndarray
    item_factors: np.ndarray

    def predict(self, rows: np.ndarray, items: np.ndarray) -> np.ndarray:
        return self.bias.predict(rows, items) + np.einsum("ij,ij->i", self.user_factors[rows],
                                                          self.item_factors[items])


def fit_bias_model(ratings: sparse.csr_array, reg_user: float = 15.0, reg_item: float = 10.0,
                   iterations: int = 10, chunk: int = 1 << 22) -> BiasModel:
    """Alternating ridge steps, items first: ``b_i = Σ_u (r − μ − b_u)/(λ_i + n_i)``, then the users'.

    The sums of ratings are taken once; each step is two sparse products with the table's pattern (ones on its
    entries), ``chunk`` ratings at a time (whole rows): ``patternᵀ b_u`` for the items, ``pattern b_i`` for the
    users. scipy adds a row's entries in turn where ``reduceat`` (used before) adds them pairwise: the user biases
    move by about 10⁻¹⁶; the items' sums are ``bincount``'s, the same bits. 500k users x 80 ratings: 0.66 s CPU
    (2.4 s when each step gathered the other side's biases per rating), one ones array of ``chunk`` floats."""
    table = sparse.csr_array(ratings)
    indptr, cols = table.indptr, table.indices
    values = table.data.astype(np.float64, copy=False)
    n_users, n_items = table.shape
    mean = float(values.mean()) if values.size else 0.0
    per_user = np.diff(indptr)
    cuts = np.searchsorted(indptr, np.arange(chunk, indptr[-1], chunk), side="right") - 1
    bounds = np.unique(np.concatenate([[0], cuts, [n_users]]))
    ones = np.ones(max([int(indptr[b] - indptr[a]) for a, b in zip(bounds[:-1], bounds[1:])] + [0]))
    # each span of rows as a CSR matrix of its own entries (values: the ratings, or ones for the pattern)
    spans = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        i, j, starts = indptr[a], indptr[b], indptr[a:b + 1] - indptr[a]
        spans.append((a, b, csr(values[i:j], cols[i:j], starts, (b - a, n_items)),
                      csr(ones[:j - i], cols[i:j], starts, (b - a, n_items))))

    def by_row(vector, pattern=True):  # per-row sums of the entries' ``vector[item]`` (or of the ratings)
        out = np.zeros(n_users)
        for a, b, rated, ones_on in spans:
            out[a:b] = (ones_on if pattern else rated) @ vector
        return out

    user_sums = by_row(np.ones(n_items), pattern=False) - mean * per_user
    per_item = sum((np.bincount(m.indices, minlength=n_items) for _, _, m, _ in spans), np.zeros(n_items, int))
    item_sums = sum((np.bincount(m.indices, m.data, n_items) for _, _, m, _ in spans), np.zeros(n_items))
    item_sums -= mean * per_item
    user_bias, item_bias = np.zeros(n_users), np.zeros(n_items)
    for _ in range(iterations):
        others = sum((ones_on.T @ user_bias[a:b] for a, b, _, ones_on in spans), np.zeros(n_items))
        item_bias = (item_sums - others) / (reg_item + per_item)
        user_bias = (user_sums - by_row(item_bias)) / (reg_user + per_user)
    return BiasModel(mean, user_bias, item_bias)


def _solve_rows(table: sparse.csr_array, fixed: np.ndarray, reg: float, max_floats: int = 4_000_000) -> np.ndarray:
    """For each row ``u`` of ``table`` (values: residuals ``e``): ``argmin_x Σ_i (e_ui − x·f_i)² + reg·n_u·|x|²``
    (0 for empty rows). Every row's Gram ``Σ_i f_i f_iᵀ`` is the sparse pattern times the table of the fixed
    side's outer products ``f_i f_iᵀ`` (flattened), built a block of at most ``max_floats`` floats at a time."""
    n, rank = table.shape[0], fixed.shape[1]
    counts = np.diff(table.indptr)
    pattern = sparse.csr_array((np.ones(table.nnz), table.indices, table.indptr), shape=table.shape)
    grams = np.empty((n, rank * rank))
    step = max(1, max_floats // max(1, fixed.shape[0]))
    for start in range(0, rank * rank, step):
        cells = np.arange(start, min(start + step, rank * rank))
        grams[:, cells] = pattern @ (fixed[:, cells // rank] * fixed[:, cells % rank])
    grams = grams.reshape(n, rank, rank)
    grams += (reg * counts)[:, None, None] * np.eye(rank)
    rhs = table @ fixed
    out = np.zeros((n, rank))
    rated = counts > 0
    out[rated] = np.linalg.solve(grams[rated], rhs[rated][..., None])[..., 0]
    return out


def fit_als(ratings: sparse.csr_array, rank: int, rng: np.random.Generator, reg: float = 0.1,
            iterations: int = 20) -> ALSModel:
    """Biased MF by ALS with weighted-λ: ``Σ (r − μ − b_u − b_i − p_uᵀq_i)² + λ Σ_u n_u(|p_u|² + b_u²)
    + λ Σ_i n_i(|q_i|² + b_i²)``, the objective SGD minimises with per-rating regularisation λ (Surprise's
    ``SVD``); each sweep solves every item's ``(q_i, b_i)`` exactly, then every user's ``(p_u, b_u)``,
    starting from the bias model and small random user factors."""
    start = fit_bias_model(ratings)
    coo = sparse.coo_array(ratings)
    centred = coo.data - start.mean
    by_user = sparse.csr_array((centred, (coo.row, coo.col)), shape=ratings.shape)
    by_item = sparse.csr_array((centred, (coo.col, coo.row)), shape=ratings.shape[::-1])
    base_user, base_item = by_user.data.copy(), by_item.data.copy()
    user_bias, item_bias = start.user_bias, start.item_bias
    user_factors = rng.normal(0.0, 0.1, (ratings.shape[0], rank))
    ones_u, ones_i = np.ones((ratings.shape[0], 1)), np.ones((ratings.shape[1], 1))
    for _ in range(iterations):
        by_item.data = base_item - user_bias[by_item.indices]
        solved = _solve_rows(by_item, np.hstack([user_factors, ones_u]), reg)
        item_factors, item_bias = solved[:, :rank], solved[:, rank]
        by_user.data = base_user - item_bias[by_user.indices]
        solved = _solve_rows(by_user, np.hstack([item_factors, ones_i]), reg)
        user_factors, user_bias = solved[:, :rank], solved[:, rank]
    return ALSModel(BiasModel(start.mean, user_bias, item_bias), user_factors, item_factors)
