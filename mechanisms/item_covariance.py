"""Xin and Jaakkola's item–item model: item means, the item covariance Σ fitted by EM on partly observed rows,
and each row's completion from its observed ratings."""
from __future__ import annotations

import numpy as np
from scipy import sparse


def item_means(ratings: sparse.csr_array, n_items: int) -> np.ndarray:
    """Mean rating of every item over the rows of ``ratings``; items nobody rated get the global mean."""
    ratings = sparse.csr_array(ratings)
    sums = np.bincount(ratings.indices, ratings.data, minlength=n_items)
    counts = np.bincount(ratings.indices, minlength=n_items)
    overall = float(ratings.data.mean()) if ratings.nnz else 0.0
    return np.where(counts > 0, sums / np.maximum(counts, 1), overall)


def centred(ratings: sparse.csr_array, mu: np.ndarray) -> sparse.csr_array:
    """Ratings minus their item's mean, same sparsity (a centred 0 stays an entry)."""
    ratings = sparse.csr_array(ratings)
    return sparse.csr_array((ratings.data - mu[ratings.indices], ratings.indices, ratings.indptr),
                            shape=ratings.shape)


def complete(sigma: np.ndarray, observed: sparse.csr_array, ridge: float, chunk: int = 256) -> np.ndarray:
    """Eq. 4 for every row of ``observed`` (centred, CSR): dense (rows x items) completed vectors.

    Observed entries keep their value; missing ones get ``Σ_{φᶜ,φ}(λ'I + Σ_{φ,φ})⁻¹ Y_φ``.
    Rows are solved in chunks as one batched ``solve`` over systems padded to
    the chunk's largest ``|φ|`` (padding rows are ``(λ'+1)·e_k``, right-hand side 0,
    so their coefficients are 0).
    """
    observed = sparse.csr_array(observed)
    n, m = observed.shape
    out = np.zeros((n, m))
    counts = np.diff(observed.indptr)
    order = np.argsort(counts, kind="stable")  # similar |φ| together: less padding
    for start in range(0, n, chunk):
        rows = order[start:start + chunk]
        part = observed[rows]
        k = np.diff(part.indptr)
        width = int(k.max(initial=0))
        if width == 0:
            continue
        slot = np.arange(part.nnz) - np.repeat(part.indptr[:-1], k)
        row_of = np.repeat(np.arange(rows.size), k)
        idx = np.zeros((rows.size, width), np.int64)
        mask = np.zeros((rows.size, width), bool)
        rhs = np.zeros((rows.size, width))
        idx[row_of, slot], mask[row_of, slot], rhs[row_of, slot] = part.indices, True, part.data
        both = mask[:, :, None] & mask[:, None, :]
        system = np.where(both, sigma[idx[:, :, None], idx[:, None, :]], 0.0)
        system += (ridge * np.eye(width))[None] + np.eye(width)[None] * (~mask)[:, :, None]
        coef = np.linalg.solve(system, rhs[:, :, None])[:, :, 0]
        weights = sparse.csr_array((coef[mask], part.indices, part.indptr), shape=part.shape)
        full = np.asarray(weights @ sigma)  # Σ_{:,φ} α for every item
        full[row_of, part.indices] = part.data  # observed entries stay
        out[rows] = full
    return out


def psd_sqrt(matrix: np.ndarray, rank: int | None = None) -> np.ndarray:
    """Symmetric PSD square root (negative eigenvalues clipped to 0), keeping the top ``rank`` if given."""
    values, vectors = np.linalg.eigh((matrix + matrix.T) / 2)
    values = np.maximum(values, 0.0)
    if rank is not None and rank < values.size:
        values[np.argsort(values)[:-rank]] = 0.0
    return (vectors * np.sqrt(values)) @ vectors.T


def m_step(second_moment: np.ndarray, n_users: float, rank: int | None = None) -> np.ndarray:
    """``Σ = (n m)^{-1/2} S^{1/2}`` for ``S = Σ_i x_i x_iᵀ`` over ``n`` (weighted) users."""
    m = second_moment.shape[0]
    return psd_sqrt(second_moment, rank) / np.sqrt(max(n_users, 1e-12) * m)


def initial_sigma(observed: sparse.csr_array, rank: int | None = None) -> np.ndarray:
    """The M-step on zero-filled centred rows: EM's starting point."""
    gram = (observed.T @ observed)
    gram = gram.toarray() if sparse.issparse(gram) else np.asarray(gram)
    return m_step(gram, observed.shape[0], rank)


def fit_em(observed: sparse.csr_array, ridge: float, iterations: int, rank: int | None = None,
           sigma: np.ndarray | None = None, extra_moment: np.ndarray | None = None,
           extra_users: float = 0.0) -> np.ndarray:
    """EM for ``Σ`` from centred public rows, plus fixed extra second moments (private responses, weighted)."""
    observed = sparse.csr_array(observed)
    m = observed.shape[1]
    sigma = initial_sigma(observed, rank) if sigma is None else sigma
    extra = np.zeros((m, m)) if extra_moment is None else extra_moment
    for _ in range(iterations):
        x = complete(sigma, observed, ridge)
        sigma = m_step(x.T @ x + extra, observed.shape[0] + extra_users, rank)
    return sigma
