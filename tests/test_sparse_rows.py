"""The project's own CSR helpers against scipy's constructors and row indexing (mechanisms/sparse_rows.py)."""
import numpy as np
import pytest
from scipy import sparse

from recaudit.mechanisms import UserBatch
from recaudit.mechanisms import sparse_rows
from recaudit.mechanisms.sparse_rows import csr, narrow, stack_rows, take_rows


def _same(fast: sparse.csr_array, slow) -> None:
    """The same matrix, arrays and dtypes as scipy's, and valid by scipy's full check."""
    slow = sparse.csr_array(slow)
    assert isinstance(fast, sparse.csr_array) and fast.shape == slow.shape
    for name in ("data", "indices", "indptr"):
        a, b = getattr(fast, name), getattr(slow, name)
        assert a.dtype == b.dtype and np.array_equal(a, b), name
    fast.check_format(full_check=True)


def _random(rng, n=40, m=30, density=0.2, dtype=float):
    return sparse.csr_array(sparse.random_array((n, m), density=density, rng=rng, format="csr", dtype=dtype))


def test_the_unchecked_constructor_is_in_use_and_builds_scipy_s_matrix():
    assert sparse_rows._FAST  # this scipy's CSR objects hold nothing else (else the checked path is taken)
    rng = np.random.default_rng(1)
    for n, m in [(40, 30), (0, 5), (3, 1)]:
        a = _random(rng, n, m)
        for index_dtype in (np.int32, np.int64):
            built = csr(a.data, a.indices.astype(index_dtype), a.indptr.astype(index_dtype), a.shape)
            _same(built, sparse.csr_array((a.data, a.indices.astype(index_dtype), a.indptr.astype(index_dtype)),
                                          shape=a.shape))
            assert np.array_equal((built @ built.T).toarray(), (a @ a.T).toarray())


@pytest.mark.parametrize("seed", range(5))
def test_take_rows_is_scipy_s_row_indexing(seed):
    rng = np.random.default_rng(seed)
    a = _random(rng)
    n = a.shape[0]
    for index in (slice(3, 17), slice(0, 0), slice(30, None), rng.random(n) < 0.4, np.zeros(n, bool),
                  rng.integers(0, n, 25), np.array([n - 1, 0, 0]), np.zeros(0, np.int64), np.array([-1, 2])):
        _same(take_rows(a, index), a[index])


def test_stack_rows_is_vstack():
    rng = np.random.default_rng(7)
    parts = [_random(rng, n) for n in (5, 0, 12)]
    _same(stack_rows(parts), narrow(sparse.vstack(parts, format="csr")))
    bools = [_random(rng, n, dtype=bool) for n in (3, 4)]
    _same(stack_rows(bools), narrow(sparse.vstack(bools, format="csr")))


def test_user_batches_from_entries_and_masks_are_scipy_s_with_32_bit_indices():
    rng = np.random.default_rng(5)
    rated = rng.random((30, 12)) < 0.3
    liked = rated & (rng.random(rated.shape) < 0.5)
    users, items = np.nonzero(rated)
    values = rng.integers(1, 6, users.size).astype(float)
    order = rng.permutation(users.size)  # from_coo takes entries in any order
    batch = UserBatch.from_coo(users[order], items[order], values[order], liked[users, items][order], rated.shape)
    _same(batch.ratings, narrow(sparse.csr_array((values, (users, items)), shape=rated.shape)))
    _same(batch.likes, narrow(sparse.csr_array(liked)))
    dense = np.zeros(rated.shape)
    dense[users, items] = values
    masks = UserBatch.from_masks(rated, liked, dense)
    _same(masks.ratings, narrow(sparse.csr_array(dense)))
    _same(masks.likes, narrow(sparse.csr_array(liked)))
    assert np.array_equal(masks.rated, rated)
