"""Ratings files: MovieLens-format loading, full validation, and the sparse train/test table.

Formats (``format``; ``auto`` tells them apart from the first line):

* ``udata``: MovieLens 100K ``u.data``: ``user<TAB>item<TAB>rating<TAB>timestamp``, no header;
* ``ratings_csv``: MovieLens ``ratings.csv`` (latest, 20M, 25M): header ``userId,movieId,rating[,timestamp]``;
* ``ratings_dat``: MovieLens 1M / 10M ``ratings.dat``: ``user::item::rating::timestamp``, no header
  (read through a stream that turns each ``::`` into a tab, block by block);
* ``inter``: RecBole's atomic ``.inter`` files: a typed tab-separated header (``user_id:token
  item_id:token rating:float ...``); ids are read as integers when they all are, else as text;
* ``csv``: the project's own: a header naming ``user``, ``item`` and ``rating`` (any order, other
  columns allowed); ids may be any text;
* ``netflix``: the Netflix prize's per-movie blocks, ``MOVIE:`` then ``CUSTOMER,RATING,DATE`` lines
  (``netflix_format``).

The file is parsed once by pandas' C parser with explicit dtypes; when that fails, or a check
on the parsed table fails, the offending line is located and named (``file:line: column:
problem``), one line per error. Refused: an empty file or one with no ratings, a wrong number of
fields, a rating that is not a number or not finite, a rating of 0 (a stored rating is never 0:
it would vanish from the sparse matrix — shift the rating scale), a duplicate (user, item) pair,
an empty or (MovieLens formats) non-integer id, bytes that are not UTF-8. Blank lines are
skipped; line numbers assume one record per line (no quoted line breaks).

The table is never dense: ``RatingsData`` holds CSR users x items matrices of the training and
held-out ratings and the original ids of every row and column.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from recaudit.mechanisms import ParameterError, UserBatch

from .rating_formats import (FORMATS, MAX_PROBLEM_CHARS, RatingsFileError, RatingsFormat,  # noqa: F401
                             _checked, _layout, _locate, _read, _refuse_duplicates, _refuse_rows, check_readable,
                             max_bytes, ratings_limit)
from .netflix_format import read_netflix
from .rating_tables import (UDATA_NAMES, _entries, capped, held_out, hold_out_per_user,  # noqa: F401
                            split_ratings, withhold, write_population_file, write_ratings)


@dataclass(frozen=True, eq=False)
class RatingsData:
    """Ratings as sparse users x items tables: ``train`` and the held-out ``test`` (disjoint entries).

    Row ``r`` is the user with original id ``user_ids[r]``, column ``c`` the item
    ``item_ids[c]``. Values are the ratings (never 0).
    """

    train: sparse.csr_array
    test: sparse.csr_array
    user_ids: np.ndarray
    item_ids: np.ndarray

    @property
    def n_users(self) -> int:
        return self.train.shape[0]

    @property
    def n_items(self) -> int:
        return self.train.shape[1]

    def ratings_per_user(self) -> np.ndarray:
        """Training ratings of each user."""
        return np.diff(self.train.indptr)

    def batch(self, like_threshold: float, rows: np.ndarray | slice = slice(None)) -> UserBatch:
        """Training rows as a ``UserBatch``: a rating is a like when it is ``>= like_threshold``."""
        ratings = self.train[rows]
        likes = _entries(ratings, ratings.data >= like_threshold)
        likes.data = np.ones(likes.nnz, bool)
        return UserBatch(ratings, likes)


@dataclass(frozen=True)
class _Parsed:
    """Validated ratings: one canonical CSR table (users x items, sorted ids) and the ids."""

    table: sparse.csr_array
    user_ids: np.ndarray
    item_ids: np.ndarray


def read_ratings(path: Path | str, format: str = "auto") -> _Parsed:
    """Parse and fully validate a ratings file; any problem raises one ``RatingsFileError`` line."""
    import pandas as pd

    path = Path(path)
    if format not in FORMATS:
        raise ParameterError("format", f"must be one of {', '.join(FORMATS)}")
    check_readable(path)
    layout = _layout(path, format)
    if layout.format == "netflix":
        frame = pd.DataFrame(dict(zip(("user", "item", "rating"), read_netflix(path))))
    else:
        try:
            frame = _read(path, layout, dtype=layout.dtypes(), low_memory=layout.int_ids)  # csv: infer id types
        except Exception:  # noqa: BLE001 -- any parser failure is located and named by the slow pass
            raise _locate(path, layout) from None
    if frame.empty:
        raise RatingsFileError(path, "no ratings" + (" after the header" if layout.header else ""))
    if frame[_checked(layout)].isna().to_numpy().any():
        raise _locate(path, layout)  # missing fields, empty ids, 'nan': the slow pass says which
    values = frame[layout.rating].to_numpy(np.float64)
    _refuse_rows(path, layout, ~np.isfinite(values), lambda r: f"{layout.rating}: {values[r]} is not a finite number")
    _refuse_rows(path, layout, values == 0, lambda r: f"{layout.rating}: 0 is not allowed (a stored rating is "
                                                      "never 0: shift the rating scale)")
    for column in (layout.user, layout.item):  # a negative id is a shifted column or a sentinel, never a user
        ids = frame[column].to_numpy()
        if ids.dtype.kind in "if" and (ids < 0).any():  # (text ids are names: no sign to check)
            if layout.format == "netflix":  # no line numbers kept for the prize's 100M ratings
                name = {layout.user: "customer", layout.item: "movie"}[column]
                raise RatingsFileError(path, f"{name} {ids[ids < 0][0]} is negative (ids are >= 0)")
            _refuse_rows(path, layout, ids < 0,
                         lambda r, c=column, v=ids: f"{c}: {v[r]} is negative (user and item ids are >= 0)")
    users, user_ids = pd.factorize(frame[layout.user].to_numpy(), sort=True)
    items, item_ids = pd.factorize(frame[layout.item].to_numpy(), sort=True)
    del frame
    # one sort by (user, item) gives both the CSR order and the duplicate check
    key = users.astype(np.int64) * max(1, len(item_ids)) + items
    order = np.argsort(key)
    key = key[order]
    if (key[1:] == key[:-1]).any():
        if layout.format == "netflix":  # no line numbers kept for the prize's 100M ratings
            at = order[np.flatnonzero(key[1:] == key[:-1])[0]]
            raise RatingsFileError(path, f"duplicate rating of movie {item_ids[items[at]]} by customer "
                                         f"{user_ids[users[at]]}; each (customer, movie) pair may appear once")
        _refuse_duplicates(path, layout, users, items, user_ids, item_ids)
    del key
    indptr = np.concatenate(([0], np.cumsum(np.bincount(users, minlength=len(user_ids)))))
    index_type = np.int32 if max(len(item_ids), len(values)) < 2**31 else np.int64
    table = sparse.csr_array((values[order], items[order].astype(index_type), indptr.astype(index_type)),
                             shape=(len(user_ids), len(item_ids)))
    return _Parsed(table, np.asarray(user_ids), np.asarray(item_ids))


# ---------------------------------------------------------------- preparing the table


def keep_top_items(parsed: _Parsed, top: int) -> _Parsed:
    """Only the ``top`` most rated items (ties: smaller id first); users left without ratings go."""
    counts = np.bincount(parsed.table.indices, minlength=parsed.item_ids.size)
    if top >= counts.size:
        return parsed
    keep = np.sort(np.lexsort((np.arange(counts.size), -counts))[:top])
    table = parsed.table[:, keep]
    present = np.flatnonzero(np.diff(table.indptr))
    table = table[present]
    table.sort_indices()
    return _Parsed(table, parsed.user_ids[present], parsed.item_ids[keep])


def load_ratings(path: Path | str, format: str = "auto", top_items: int | None = None,
                 max_ratings_per_user: int | None = None, test_fraction: float = 0.0,
                 seed: int | np.random.SeedSequence = 0, dtype=np.float64, split: str = "uniform") -> RatingsData:
    """Read, validate and prepare a ratings file: top items, held-out split, per-user cap (seeded)."""
    parsed = read_ratings(path, format)
    if top_items is not None:
        parsed = keep_top_items(parsed, top_items)
    seed = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    table = parsed.table if parsed.table.dtype == dtype else parsed.table.astype(dtype)
    train, test = split_ratings(table, test_fraction, max_ratings_per_user, seed, split)
    return RatingsData(train, test, parsed.user_ids, parsed.item_ids)


@functools.lru_cache(maxsize=2)
def _cached(path: str, size: int, mtime_ns: int, options: tuple) -> RatingsData:
    return load_ratings(path, **dict(options))


def load_ratings_cached(path: Path | str, **options) -> RatingsData:
    """``load_ratings``, remembered for the last two (file, size, mtime, options): validating a
    scenario and then running it parse the file once."""
    check_readable(Path(path))  # before resolve(): a symlink loop is one line here, not resolve()'s RuntimeError
    path = Path(path).resolve()
    info = path.stat()
    return _cached(str(path), info.st_size, info.st_mtime_ns, tuple(sorted(options.items())))
