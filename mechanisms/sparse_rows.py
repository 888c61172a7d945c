"""Users' sparse rows (CSR) kept cheap: slices that share arrays, and 32-bit index arrays wherever they fit.

scipy keeps 64-bit index arrays once any operand has them, and recasts them (a copy) each time a matrix
is rebuilt from its arrays with values that fit 32 bits: a population of 40M ratings held with 64-bit
indices costs 16 bytes a rating instead of 12, and every slice of it a copy of its indices.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

_INT32_LIMIT = 2 ** 31


def narrow(matrix: sparse.csr_array) -> sparse.csr_array:
    """The same CSR matrix (its values shared) with 32-bit index arrays when they fit."""
    if matrix.indices.dtype == np.int32 and matrix.indptr.dtype == np.int32:
        return matrix
    if max(matrix.nnz, *matrix.shape) >= _INT32_LIMIT:
        return matrix
    return sparse.csr_array((matrix.data, matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32)),
                            shape=matrix.shape)


def stack_rows(matrices: list) -> sparse.csr_array:
    """``sparse.vstack`` of CSR matrices, with 32-bit indices when the result fits."""
    return narrow(sparse.vstack([narrow(sparse.csr_array(m)) for m in matrices], format="csr"))


def take_rows(matrix: sparse.csr_array, index: np.ndarray | slice) -> sparse.csr_array:
    """Rows of a CSR matrix: a contiguous slice by slicing ``indptr`` (10x faster than scipy's slicing; scipy
    still copies the slice's values and indices when they are a small part of the matrix's), anything else
    by scipy's row indexing."""
    if isinstance(index, slice) and index.step in (None, 1):
        start, stop, _ = index.indices(matrix.shape[0])
        stop = max(start, stop)
        indptr = matrix.indptr
        lo, hi = indptr[start], indptr[stop]
        return sparse.csr_array((matrix.data[lo:hi], matrix.indices[lo:hi], indptr[start:stop + 1] - lo),
                                shape=(stop - start, matrix.shape[1]))
    return matrix[index]


def gather_rows(parts: list, chunk: int = 2 ** 16) -> sparse.csr_array:
    """``stack_rows([take_rows(m, index) for m, index in parts])`` in arrays allocated once and filled ``chunk``
    rows at a time: no taken part is ever held beside the stack (a panel of a whole population and the
    canaries joining it cost one copy, not two)."""
    picks = [(sparse.csr_array(m), np.arange(m.shape[0])[index]) for m, index in parts]
    counts = np.concatenate([np.diff(m.indptr)[index] for m, index in picks])
    nnz, n_cols = int(counts.sum()), picks[0][0].shape[1]
    index_dtype = np.int32 if max(nnz, counts.size, n_cols) < _INT32_LIMIT else np.int64
    indptr = np.zeros(counts.size + 1, index_dtype)
    np.cumsum(counts, out=indptr[1:])
    data = np.empty(nnz, np.result_type(*(m.dtype for m, _ in picks)))
    indices = np.empty(nnz, index_dtype)
    at = 0
    for matrix, index in picks:
        for start in range(0, index.size, chunk):
            block = matrix[index[start:start + chunk]]
            data[at:at + block.nnz], indices[at:at + block.nnz] = block.data, block.indices
            at += block.nnz
    return sparse.csr_array((data, indices, indptr), shape=(counts.size, n_cols))
