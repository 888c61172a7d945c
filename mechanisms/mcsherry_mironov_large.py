"""McSherry–Mironov's release at a catalogue the size of Netflix's (17,770 items), within a few GB.

The same six measurements, noise and post-processing as ``McSherryMironov.release`` (seed 002), computed so that
no ``n x n`` temporary beyond the cleaned matrix is ever held:

* the weighted Grams ``Cov = Σ_u w_u r̂_u r̂_uᵀ`` and ``Wgt = Σ_u w_u e_u e_uᵀ`` by sparse–sparse products in blocks
  of ``BLOCK`` item columns (cost ``Σ_u c_u²`` pairs of ratings, not ``users · n²`` as dense blocks would be:
  at 480,189 users x 17,770 items the dense route is ~7·10¹³ operations), each block written straight into the
  published upper triangle (``np.triu_indices`` order, the small path's), accumulated in float64;
* the noise drawn on the triangle in chunks, the same law and scale as the small path (not the same draws);
* the cleaned matrix ``C̄`` filled row by row from the two triangles and mirrored, and only its top ``rank``
  eigenpairs computed (Lanczos, ``scipy.sparse.linalg.eigsh``) instead of a full ``eigh`` (n³: half an hour at
  17,770 items on one core).

The published triangles and ``C̄`` are stored as float32 (``DTYPE``): rounding a noisy value is post-processing,
and at 17,770 items it halves what the release holds (two triangles of 158 M entries and ``C̄`` of 316 M: 2.5 GB
instead of 5). The small path (``LARGE_FROM_ITEMS`` items or fewer) is unchanged.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.sparse import linalg as sparse_linalg

#: catalogues larger than this take the large path
LARGE_FROM_ITEMS = 4096
#: item columns per sparse product block (a block's dense n x BLOCK result: 146 MB at 17,770 items)
BLOCK = 1024
#: noise drawn per chunk of the triangle
NOISE_CHUNK = 2 ** 22
#: how the large path stores the triangles and the cleaned matrix
DTYPE = np.float32


def row_offsets(n: int) -> np.ndarray:
    """Where row ``i`` of the upper triangle (``np.triu_indices(n)`` order) starts: ``i·n − i(i−1)/2``."""
    i = np.arange(n + 1, dtype=np.int64)
    return i * n - i * (i - 1) // 2


def scaled_columns(centred: sparse.csr_array, weight: np.ndarray) -> tuple[sparse.csr_array, sparse.csr_array]:
    """``sqrt(w)·r̂`` and ``sqrt(w)·e`` transposed (items x users, CSR: the rows' CSC arrays), sharing one index
    array. Explicit zeros of ``r̂`` stay entries (a rated item whose centred value is 0 still counts in ``Wgt``)."""
    users, n = centred.shape
    order = np.argsort(centred.indices, kind="stable")  # the CSR entries in CSC order (by item, then by user)
    user = np.repeat(np.arange(users, dtype=np.int32), np.diff(centred.indptr))[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(centred.indices, minlength=n))])
    root = np.sqrt(weight)[user]
    cov = sparse.csr_array((centred.data[order] * root, user, indptr), shape=(n, users))
    return cov, sparse.csr_array((root, user, indptr), shape=(n, users))


def gram_triangle(columns: sparse.csr_array) -> np.ndarray:
    """The upper triangle of ``columns · columnsᵀ`` (items x items; rows of ``columns`` are items), as ``DTYPE``."""
    n = columns.shape[0]
    offsets = row_offsets(n)
    out = np.empty(int(offsets[-1]), DTYPE)
    rows_t = sparse.csc_array((columns.data, columns.indices, columns.indptr), shape=columns.shape[::-1])
    for start in range(0, n, BLOCK):
        stop = min(n, start + BLOCK)
        head = sparse.csr_array((columns.data[:columns.indptr[stop]], columns.indices[:columns.indptr[stop]],
                                 columns.indptr[:stop + 1]), shape=(stop, columns.shape[1]))  # views, no copy
        block = (head @ rows_t[:, start:stop]).toarray()  # rows 0..stop-1 of columns start..stop-1
        for i in range(stop):  # row i's entries j in [max(i, start), stop)
            first = max(i, start)
            where = offsets[i] + first - i
            out[where:where + stop - first] = block[i, first - start:]
    return out


def add_noise(triangle: np.ndarray, draw) -> None:
    """``triangle += draw(size)`` in chunks (``draw``: the mechanism's noise at the measurement's scale)."""
    for start in range(0, triangle.size, NOISE_CHUNK):
        part = triangle[start:start + NOISE_CHUNK]
        part += draw(part.size).astype(DTYPE)


def triangle_mean(triangle: np.ndarray, n: int) -> float:
    """The mean of the symmetric ``n x n`` matrix whose upper triangle is ``triangle``."""
    diagonal = triangle[row_offsets(n)[:-1]].astype(np.float64).sum()
    return float((2.0 * triangle.sum(dtype=np.float64) - diagonal) / (n * n))


def clean_triangles(cov: np.ndarray, wgt: np.ndarray, n: int, beta: float) -> np.ndarray:
    """``C̄`` (``recaudit.mechanisms.mcsherry_mironov.clean``) from the two noisy triangles, ``n x n`` in ``DTYPE``."""
    cov_shift, wgt_mean = beta * triangle_mean(cov, n), triangle_mean(wgt, n)
    wgt_shift = beta * wgt_mean
    floor = max(1e-3 * abs(wgt_mean) * max(beta, 1.0), 1e-9)
    offsets = row_offsets(n)
    out = np.empty((n, n), DTYPE)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        out[i, i:] = (cov[a:b] + cov_shift) / np.maximum(wgt[a:b] + wgt_shift, floor)
    for start in range(0, n, BLOCK):  # mirror: the lower part of rows start.. from the upper part of columns start..
        stop = min(n, start + BLOCK)
        out[stop:, start:stop] = out[start:stop, stop:].T
        square = out[start:stop, start:stop]
        square[np.tril_indices(stop - start, -1)] = square.T[np.tril_indices(stop - start, -1)]
    return out


def top_factors_lanczos(cleaned: np.ndarray, rank: int) -> np.ndarray:
    """``V sqrt(Λ)`` of the ``rank`` largest eigenvalues of the symmetric ``cleaned`` (positive part), by Lanczos."""
    n = cleaned.shape[0]
    operator = sparse_linalg.LinearOperator(
        (n, n), matvec=lambda v: (cleaned @ v.astype(DTYPE).ravel()).astype(np.float64), dtype=np.float64)
    values, vectors = sparse_linalg.eigsh(operator, k=rank, which="LA", v0=np.full(n, n ** -0.5), tol=1e-6)
    order = np.argsort(values)[::-1]
    return vectors[:, order] * np.sqrt(np.maximum(values[order], 0.0))


def large_release(mech, ratings: sparse.csr_array, rng: np.random.Generator) -> tuple:
    """``McSherryMironov.release``'s parts (measurements, ``G``, ``MAvg``, ``C̄``, factors) of a large catalogue."""
    ratings = mech._clipped(ratings)
    scales = mech.noise_scales(mech.spent_theta)
    n = ratings.shape[1]
    m: dict[str, np.ndarray] = {}
    m["GSum"] = np.array([ratings.sum()]) + mech._noise(1, scales["GSum"], rng)
    m["GCount"] = np.array([float(ratings.nnz)]) + mech._noise(1, scales["GCount"], rng)
    m["MSum"] = np.asarray(ratings.sum(axis=0)).ravel() + mech._noise(n, scales["MSum"], rng)
    m["MCount"] = np.bincount(ratings.indices, minlength=n).astype(float) + mech._noise(n, scales["MCount"], rng)
    G, mavg = mech.global_effects(m)
    cov_columns, wgt_columns = scaled_columns(mech.centred(ratings, mavg), mech.weights(ratings))
    del ratings
    m["Cov"] = gram_triangle(cov_columns)
    del cov_columns
    m["Wgt"] = gram_triangle(wgt_columns)
    del wgt_columns
    for key in ("Cov", "Wgt"):  # the small path's order: Cov's noise, then Wgt's
        add_noise(m[key], lambda size: mech._noise(size, scales[key], rng))
    cleaned = clean_triangles(m["Cov"], m["Wgt"], n, mech.clean_beta)
    return m, G, mavg, cleaned, top_factors_lanczos(cleaned, mech.rank)


#: E[c²]/E[c]² of the users' activity c, which the sparse products' cost Σ_u c_u² depends on (MovieLens-100K: 1.9)
ACTIVITY_SPREAD = 2.0
#: operations (``SECONDS_PER["operations"]`` each) per pair of one user's ratings, per round the estimate counts (a
#: panel run of McSherry–Mironov counts two): one sparse-product block measured 4.6 per pair (48,000 users x 17,770
#: items, 2·10⁹ pairs in 15.6 s of CPU)
PAIR_OPERATIONS = 2.5
#: Lanczos matrix-vector products for the top factors, per round counted (a noisy 48,000-user release took 866)
LANCZOS_PRODUCTS = 50


def large_round_cost(world, users: float, rank: int) -> dict:
    """``McSherryMironov.round_cost``'s terms on the large path: two sparse Grams (``Σ c²`` pairs each), Lanczos on
    ``C̄``, the users' ridge solves; held at once: two float32 triangles and ``C̄`` (8n² bytes; the rows' copies
    are within the estimate's table and outputs terms). Checked at 480,189 users x 17,770 items (about 50 million
    ratings): see docs/findings/fitted-scale.md."""
    n, rows = world.n_items, users * world.ratings_per_user
    pairs = users * world.ratings_per_user ** 2 * ACTIVITY_SPREAD
    return dict(operations=2 * PAIR_OPERATIONS * pairs + 2 * LANCZOS_PRODUCTS * n * n + rows * (rank * rank + 10)
                + users * rank ** 3, state_bytes=8.0 * n * n, user_bytes=24.0 * world.ratings_per_user,
                run_bytes=8.0 * n * n, release_bytes=8.0 * n * n)
