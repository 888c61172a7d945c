"""``rowsᵀ rows`` of sparse user rows (the Gram sums of matrix completion and covariance releases), at BLAS's pace.

Measured on one core (CPU seconds, ``benchmarks/gram.py``): for 400 items the dense symmetric rank-k update
(``dsyrk`` on dense blocks of rows) beats blocked sparse–dense products from about 25 to 40 ratings per
row on (2.3x at 80: 100k users, 0.48 s against 1.26 s; one sparse ``rows.T @ rows`` takes 4.2 s), and the
break-even falls as the number of items grows; below it the sparse–dense products win (3x at 4 ratings).
"""
from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.linalg import blas

from .sparse_rows import take_rows

#: elements of a dense block of rows built at a time (16 MB)
DENSE_CHUNK = 2 ** 21
#: mean stored entries per row from which dense blocks through BLAS beat sparse–dense products
DENSE_FROM_ENTRIES = 32


def gram(rows: sparse.csr_array) -> np.ndarray:
    """``rowsᵀ rows`` (n_items x n_items, exactly symmetric) in blocks of rows: dense blocks through ``dsyrk``
    when rows hold ``DENSE_FROM_ENTRIES`` entries or more on average, else sparse–dense products
    ``blockᵀ · dense(block)``. A run keeps BLAS on one thread (``recaudit.audits.executors.one_blas_thread``): on two,
    the 100k x 400 Gram costs 1.7 s of CPU instead of 0.48 s on a loaded machine."""
    rows = rows if isinstance(rows, sparse.csr_array) else sparse.csr_array(rows)
    if _sparse_path(rows):
        n = rows.shape[1]
        out = np.zeros((n, n))
        for start in range(0, rows.shape[0], _chunk(n)):
            block = take_rows(rows, slice(start, start + _chunk(n)))
            out += block.T @ block.toarray()
        return out
    return _mirrored(_upper(rows, np.zeros((rows.shape[1], rows.shape[1]), order="F")))


def _chunk(n: int) -> int:
    return max(1, DENSE_CHUNK // max(n, 1))


def _sparse_path(rows: sparse.csr_array) -> bool:
    return rows.nnz < DENSE_FROM_ENTRIES * rows.shape[0]


def _upper(rows: sparse.csr_array, upper: np.ndarray) -> np.ndarray:
    """``upper`` (n x n, Fortran order) plus the upper triangle of ``rowsᵀ rows`` (dense blocks through ``dsyrk``,
    which leaves the strict lower triangle as it was)."""
    for start in range(0, rows.shape[0], _chunk(rows.shape[1])):
        block = take_rows(rows, slice(start, start + _chunk(rows.shape[1]))).toarray()
        # block.T is (n, chunk) in Fortran order: dsyrk reads it in place and adds its A·Aᵀ to the upper triangle
        upper = blas.dsyrk(1.0, np.asarray(block, float).T, beta=1.0, c=upper, trans=0, lower=0, overwrite_c=1)
    return upper


def _mirrored(upper: np.ndarray) -> np.ndarray:
    """The symmetric matrix of an upper triangle whose strict lower triangle is zero."""
    return upper + np.triu(upper, 1).T


class GramSum:
    """``Σ gram(batch)`` over a round's batches, the same numbers as adding each batch's ``gram`` in turn, for
    less: a batch through ``dsyrk`` adds its upper triangle alone (computed in a buffer reused from batch to batch),
    and the sum is mirrored once, when read (an entry and its mirror are the same sums in the same order). Once a
    batch takes the sparse path (whose products are not exactly symmetric) the mirrored sum so far is kept and every
    later batch's ``gram`` added to it, as before. 500k x 400 in 4,000-row batches: 1250 mirrorings (0.4 s a run of
    ten rounds) become ten."""

    def __init__(self, n: int):
        self.upper = np.zeros((n, n), order="F")  # the dense-path batches' upper triangles (strict lower stays 0)
        self.full: np.ndarray | None = None
        self._block = np.zeros((n, n), order="F")

    def add(self, rows: sparse.csr_array) -> None:
        rows = rows if isinstance(rows, sparse.csr_array) else sparse.csr_array(rows)
        if _sparse_path(rows):
            if self.full is None:
                self.full = _mirrored(self.upper)
            self.full += gram(rows)
            return
        self._block.fill(0.0)
        block = _upper(rows, self._block)
        if self.full is None:
            self.upper += block
        else:
            self.full += _mirrored(block)

    def total(self) -> np.ndarray:
        """The sum so far (n x n, exactly symmetric on the dense path)."""
        return self.full.copy() if self.full is not None else _mirrored(self.upper)
