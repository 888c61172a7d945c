"""Users' sparse rows (CSR) kept cheap: slices that share arrays, and 32-bit index arrays wherever they fit.

scipy keeps 64-bit index arrays once any operand has them, and recasts them (a copy) each time a matrix
is rebuilt from its arrays with values that fit 32 bits: a population of 40M ratings held with 64-bit
indices costs 16 bytes a rating instead of 12, and every slice of it a copy of its indices.

scipy's constructor also checks its arrays on every call (about 25 µs of Python): a small churn world builds
a few CSR matrices per user batch and tick, which made the constructor the largest cost of a small run.
``csr`` builds one from arrays known to be valid without it.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

_INT32_LIMIT = 2 ** 31
#: most rows ``take_rows`` gathers in numpy (above, scipy's row indexing is faster)
_GATHER_ROWS = 512


def _unchecked(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sparse.csr_array:
    matrix = sparse.csr_array.__new__(sparse.csr_array)
    matrix.__dict__.update(_TEMPLATE)
    matrix.data, matrix.indices, matrix.indptr, matrix._shape = data, indices, indptr, shape
    return matrix


def _checked(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sparse.csr_array:
    return sparse.csr_array((data, indices, indptr), shape=shape)


def _fast_path_agrees() -> bool:
    """Whether this scipy's CSR objects are fully set by the attributes ``_unchecked`` sets (checked on import,
    so a scipy that keeps more state falls back to its own constructor)."""
    data, indices, indptr = np.array([1.5, -2.0]), np.array([0, 2], np.int32), np.array([0, 1, 2], np.int32)
    fast, slow = _unchecked(data, indices, indptr, (2, 3)), _checked(data, indices, indptr, (2, 3))
    same = vars(fast).keys() == vars(slow).keys() and all(
        getattr(fast, k) is getattr(slow, k) or np.array_equal(getattr(fast, k), getattr(slow, k)) for k in vars(slow))
    return same and np.array_equal((fast @ fast.T).toarray(), (slow @ slow.T).toarray())


_TEMPLATE = {k: v for k, v in vars(sparse.csr_array((1, 1))).items()
             if k not in ("data", "indices", "indptr", "_shape")}
_FAST = _fast_path_agrees()


def csr(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sparse.csr_array:
    """``sparse.csr_array((data, indices, indptr), shape=shape)`` without scipy's checks, for arrays valid by
    construction (``indptr`` from 0, non-decreasing, to ``len(indices) == len(data)``; indices below
    ``shape[1]``): the arrays are shared, as scipy's constructor shares them when both index arrays have one
    dtype (else it decides)."""
    if not _FAST or indices.dtype != indptr.dtype:
        return _checked(data, indices, indptr, shape)
    return _unchecked(data, indices, indptr, (int(shape[0]), int(shape[1])))


def index_dtype(entries: int, shape: tuple[int, int]) -> type:
    """32-bit indices when a matrix of ``entries`` stored entries and this ``shape`` fits them, else 64."""
    return np.int32 if max(entries, *shape) < _INT32_LIMIT else np.int64


def from_entries(users: np.ndarray, items: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> sparse.csr_array:
    """CSR rows from one entry per stored value, in row order (each row's entries in their column order)."""
    index = index_dtype(users.size, shape)
    indptr = np.zeros(shape[0] + 1, index)
    np.cumsum(np.bincount(users, minlength=shape[0]), out=indptr[1:])
    return csr(values, items.astype(index, copy=False), indptr, shape)


def from_mask(mask: np.ndarray, values: np.ndarray | None = None) -> sparse.csr_array:
    """CSR rows holding ``values`` (same shape as ``mask``; None: True) where the dense 2-d ``mask`` is set."""
    n, width = mask.shape
    flat = np.flatnonzero(mask)  # (row-major, as np.nonzero; one pass and no 2-d gather)
    index = index_dtype(flat.size, mask.shape)
    indptr = np.zeros(n + 1, index)
    np.cumsum(np.count_nonzero(mask, axis=1), out=indptr[1:])
    data = np.ones(flat.size, bool) if values is None else values.ravel()[flat]
    return csr(data, (flat % max(width, 1)).astype(index, copy=False), indptr, mask.shape)


def narrow(matrix: sparse.csr_array) -> sparse.csr_array:
    """The same CSR matrix (its values shared) with 32-bit index arrays when they fit."""
    if matrix.indices.dtype == np.int32 and matrix.indptr.dtype == np.int32:
        return matrix
    if index_dtype(matrix.nnz, matrix.shape) is np.int64:
        return matrix
    return csr(matrix.data, matrix.indices.astype(np.int32), matrix.indptr.astype(np.int32), matrix.shape)


def stack_rows(matrices: list) -> sparse.csr_array:
    """``sparse.vstack`` of CSR matrices of one width, with 32-bit indices when the result fits."""
    matrices = [m if isinstance(m, sparse.csr_array) else sparse.csr_array(m) for m in matrices]
    if len({m.shape[1] for m in matrices}) != 1:
        return narrow(sparse.vstack(matrices, format="csr"))
    nnz = np.cumsum([0] + [int(m.indptr[-1]) for m in matrices])
    shape = (sum(m.shape[0] for m in matrices), matrices[0].shape[1])
    index = index_dtype(int(nnz[-1]), shape)
    indptr = np.concatenate([np.zeros(1, index)] + [m.indptr[1:] + offset for m, offset in zip(matrices, nnz[:-1])])
    sizes = nnz[1:] - nnz[:-1]
    indices = np.concatenate([m.indices[:size] for m, size in zip(matrices, sizes)])
    return csr(np.concatenate([m.data[:size] for m, size in zip(matrices, sizes)]), indices.astype(index, copy=False),
               indptr.astype(index, copy=False), shape)


def take_rows(matrix: sparse.csr_array, index: np.ndarray | slice) -> sparse.csr_array:
    """Rows of a CSR matrix: a contiguous slice by slicing ``indptr`` (shares the arrays); up to
    ``_GATHER_ROWS`` rows (a boolean mask or non-negative row numbers) by gathering their entries in numpy
    (scipy's row indexing without its fixed cost: 3x faster for tens of rows); anything else by scipy's
    row indexing (its C loop wins from about 500 rows)."""
    n, indptr = matrix.shape[0], matrix.indptr
    if isinstance(index, slice) and index.step in (None, 1):
        start, stop, _ = index.indices(n)
        stop = max(start, stop)
        lo, hi = indptr[start], indptr[stop]
        return csr(matrix.data[lo:hi], matrix.indices[lo:hi], indptr[start:stop + 1] - lo,
                   (stop - start, matrix.shape[1]))
    rows = np.asarray(index)
    if rows.dtype == bool and rows.shape == (n,):
        rows = np.flatnonzero(rows)
    if (rows.ndim != 1 or rows.dtype.kind not in "iu" or rows.size > _GATHER_ROWS
            or (rows.size and (rows.min() < 0 or rows.max() >= n))):
        return matrix[index]
    starts, counts = indptr[rows], indptr[rows + 1] - indptr[rows]
    new_indptr = np.zeros(rows.size + 1, indptr.dtype)
    np.cumsum(counts, out=new_indptr[1:])
    # entry e of the result is entry e + (start of its row) - (where its row begins in the result)
    positions = np.arange(new_indptr[-1], dtype=indptr.dtype) + np.repeat(starts - new_indptr[:-1], counts)
    return csr(matrix.data[positions], matrix.indices[positions], new_indptr, (rows.size, matrix.shape[1]))


def gather_rows(parts: list, chunk: int = 2 ** 16) -> sparse.csr_array:
    """``stack_rows([take_rows(m, index) for m, index in parts])`` in arrays allocated once and filled ``chunk``
    rows at a time: no taken part is ever held beside the stack (a panel of a whole population and the
    canaries joining it cost one copy, not two)."""
    picks = [(sparse.csr_array(m), np.arange(m.shape[0])[index]) for m, index in parts]
    counts = np.concatenate([np.diff(m.indptr)[index] for m, index in picks])
    nnz, n_cols = int(counts.sum()), picks[0][0].shape[1]
    dtype = index_dtype(nnz, (counts.size, n_cols))
    indptr = np.zeros(counts.size + 1, dtype)
    np.cumsum(counts, out=indptr[1:])
    data = np.empty(nnz, np.result_type(*(m.dtype for m, _ in picks)))
    indices = np.empty(nnz, dtype)
    at = 0
    for matrix, index in picks:
        for start in range(0, index.size, chunk):
            block = take_rows(matrix, index[start:start + chunk])
            data[at:at + block.nnz], indices[at:at + block.nnz] = block.data, block.indices
            at += block.nnz
    return csr(data, indices, indptr, (counts.size, n_cols))
