"""Rating tables once read: held-out splits, per-user caps, withholding a user's ratings, and writing a
table (or a population's users) as a ratings file (tests, benchmarks).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from scipy import sparse

from recaudit.mechanisms import UserBatch

from .seeds import stream

#: MovieLens' u.data / ratings.dat columns
UDATA_NAMES = ("user", "item", "rating", "timestamp")


def held_out(n_ratings: int, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask of exactly ``round(test_fraction * n_ratings)`` ratings drawn uniformly."""
    test = np.zeros(n_ratings, bool)
    test[rng.choice(n_ratings, int(round(test_fraction * n_ratings)), replace=False)] = True
    return test


def capped(users: np.ndarray, cap: int, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask keeping at most ``cap`` ratings of each user, a uniform random subset of theirs."""
    keep = np.ones(users.size, bool)
    over = np.flatnonzero(np.bincount(users)[users] > cap)
    if over.size:
        # a random order within each user: sort by user, ties by a uniform key
        order = over[np.lexsort((rng.random(over.size), users[over]))]
        starts = np.flatnonzero(np.r_[True, users[order][1:] != users[order][:-1]])
        rank = np.arange(order.size) - np.repeat(starts, np.diff(np.r_[starts, order.size]))
        keep[order[rank >= cap]] = False
    return keep


def hold_out_per_user(ratings: sparse.csr_array, k: int, rng: np.random.Generator):
    """Each row's ratings split: ``k`` random ones held out (at most all but one), the rest kept.

    Returns the kept ratings (CSR, same shape) and the held-out ones as ``(row, item, rating)`` triples.
    """
    r = sparse.coo_array(ratings)
    order = np.lexsort((rng.random(r.nnz), r.row))
    row, col, val = r.row[order], r.col[order], r.data[order]
    rank = np.arange(row.size) - np.searchsorted(row, row)
    count = np.bincount(row, minlength=r.shape[0])[row]
    test = rank < np.minimum(k, count - 1)
    train = sparse.csr_array((val[~test], (row[~test], col[~test])), shape=r.shape)
    return train, (row[test], col[test], val[test])


def withhold(rows: UserBatch, k: int, rng: np.random.Generator) -> UserBatch:
    """``rows`` with ``k`` random ratings of each user (at most all but one) moved to ``held_out``."""
    train, (row, col, val) = hold_out_per_user(rows.ratings, k, rng)
    kept = (train != 0).astype(bool)
    private = None if rows.private is None else sparse.csr_array(rows.private_mask.multiply(kept), dtype=bool)
    return UserBatch(train, sparse.csr_array(rows.likes.multiply(kept), dtype=bool), private,
                     sparse.csr_array((val, (row, col)), shape=train.shape))


def _entry_rows(indptr: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """The row of each stored entry at ``positions`` of a CSR table with ``indptr``."""
    return np.searchsorted(indptr, positions, side="right") - 1


def _kept_per_row(table: sparse.csr_array, mask: np.ndarray) -> np.ndarray:
    """How many of each row's entries ``mask`` keeps, from the positions of the smaller of kept and dropped
    (no row index per entry: that is 8 bytes a rating)."""
    n = table.shape[0]
    if 2 * np.count_nonzero(mask) <= mask.size:
        return np.bincount(_entry_rows(table.indptr, np.flatnonzero(mask)), minlength=n)
    return np.diff(table.indptr) - np.bincount(_entry_rows(table.indptr, np.flatnonzero(~mask)), minlength=n)


def _compress_in_place(array: np.ndarray, mask: np.ndarray, chunk: int = 2 ** 20) -> np.ndarray:
    """``array[mask]`` written over ``array``'s own start, a chunk at a time: a view of its first entries."""
    kept = 0
    for start in range(0, array.size, chunk):
        part = array[start:start + chunk][mask[start:start + chunk]]
        array[kept:kept + part.size] = part
        kept += part.size
    return array[:kept]


def _entries(table: sparse.csr_array, mask: np.ndarray, in_place: bool = False) -> sparse.csr_array:
    """The stored entries of a canonical CSR table where ``mask`` (over its entries) is true; ``in_place``: in
    ``table``'s own arrays (which it overwrites), so a table and its copy are never held side by side."""
    indptr = np.zeros(table.shape[0] + 1, table.indptr.dtype)
    np.cumsum(_kept_per_row(table, mask), out=indptr[1:])
    if in_place:
        data, indices = _compress_in_place(table.data, mask), _compress_in_place(table.indices, mask)
    else:
        data, indices = table.data[mask], table.indices[mask]
    return sparse.csr_array((data, indices, indptr), shape=table.shape)


def held_out_per_user(table: sparse.csr_array, test_fraction: float, rng: np.random.Generator) -> np.ndarray:
    """Boolean mask over a CSR table's entries: ``round(test_fraction * c_u)`` random ratings of each user
    (at most all but one), so every user is scored and keeps ratings to predict from."""
    counts = np.diff(table.indptr)
    rows = np.repeat(np.arange(table.shape[0]), counts)
    order = np.lexsort((rng.random(table.nnz), rows))  # each row's entries in a random order
    rank = np.empty(table.nnz, np.int64)
    rank[order] = np.arange(table.nnz) - np.repeat(table.indptr[:-1], counts)
    quota = np.minimum(np.round(test_fraction * counts), np.maximum(counts - 1, 0))
    return rank < quota[rows]


def split_ratings(table: sparse.csr_array, test_fraction: float, max_ratings_per_user: int | None,
                  seed: np.random.SeedSequence, split: str = "uniform",
                  in_place: bool = False) -> tuple[sparse.csr_array, sparse.csr_array]:
    """Train and test tables: ``test_fraction`` of the ratings held out (``uniform``: exactly, over all
    ratings; ``per_user``: that fraction of each user's), then the training ratings capped at
    ``max_ratings_per_user`` per user (the order of Jain et al.'s experiments). Draws depend only on
    the table (its canonical order), not on a file's row order. ``in_place``: the training table reuses (and
    overwrites) ``table``'s arrays."""
    table = sparse.csr_array(table)
    table.sort_indices()
    test = held_out_per_user(table, test_fraction, stream(seed, "test")) if split == "per_user" else \
        held_out(table.nnz, test_fraction, stream(seed, "test"))
    train = ~test
    if max_ratings_per_user is not None:
        rows = np.repeat(np.arange(table.shape[0]), np.diff(table.indptr))
        train[train] = capped(rows[train], max_ratings_per_user, stream(seed, "cap"))
    test_table = _entries(table, test)
    return _entries(table, train, in_place), test_table


# ---------------------------------------------------------------- writing (tests, benchmarks)


def write_ratings(path: Path | str, ratings: sparse.sparray | UserBatch, format: str = "ratings_csv",
                  user_ids: np.ndarray | None = None, item_ids: np.ndarray | None = None) -> Path:
    """Write a users x items table of ratings as a ratings file (ids 1-based unless given).

    ``udata``, ``ratings_csv`` and ``ratings_dat`` are MovieLens' layouts, ``inter`` RecBole's
    (timestamps are made up: one second per rating); ``csv`` is ``user,item,rating``. Integral
    ratings are written as integers, others with full precision (they read back exactly).
    """
    import pandas as pd

    table = ratings.ratings if isinstance(ratings, UserBatch) else sparse.csr_array(ratings)
    coo = table.tocoo()
    user_ids = np.arange(1, table.shape[0] + 1) if user_ids is None else np.asarray(user_ids)
    item_ids = np.arange(1, table.shape[1] + 1) if item_ids is None else np.asarray(item_ids)
    values = coo.data
    if np.all(values == np.round(values)):
        values = values.astype(np.int64)
    columns = {"udata": UDATA_NAMES, "ratings_dat": UDATA_NAMES,
               "ratings_csv": ("userId", "movieId", "rating", "timestamp"),
               "inter": ("user_id:token", "item_id:token", "rating:float", "timestamp:float"),
               "csv": ("user", "item", "rating")}[format]
    data = dict(zip(columns, (user_ids[coo.row], item_ids[coo.col], values)))
    if len(columns) == 4:
        data[columns[3]] = 1_000_000_000 + np.arange(values.size)
    path = Path(path)
    frame = pd.DataFrame(data)
    if format == "ratings_dat":  # pandas writes one-character separators only
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, len(frame), 1_000_000):
                block = frame.iloc[start:start + 1_000_000].astype(str)
                f.write("".join(block[columns[0]] + "::" + block[columns[1]] + "::" + block[columns[2]] + "::"
                                + block[columns[3]] + "\n"))
        return path
    frame.to_csv(path, sep="\t" if format in ("udata", "inter") else ",", header=format not in ("udata",),
                 index=False, chunksize=1_000_000)
    return path


def write_population_file(path: Path | str, population, n_users: int, seed: int = 0,
                          format: str = "ratings_csv", batch: int = 100_000) -> Path:
    """Sample ``n_users`` users of any population (``catalogue``/``sample_users``) into a ratings file."""
    root = np.random.SeedSequence(seed)
    catalogue = population.catalogue(stream(root, "catalogue"))
    rng = stream(root, "users")
    batches = [population.sample_users(min(batch, n_users - start), catalogue, rng)[1]
               for start in range(0, n_users, batch)]
    return write_ratings(path, UserBatch.concat(batches), format)
