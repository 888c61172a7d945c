"""The Netflix-prize ratings format (``format: netflix``), for users who hold the data.

A file is blocks, one per movie: a line ``MOVIE:`` then one line per rating, ``CUSTOMER,RATING,DATE``
(the prize's per-movie ``mv_*.txt`` files, and its ``combined_data_*.txt`` files, which are those
blocks one after another; ``cat training_set/mv_*.txt > netflix.txt`` makes one file of the folder).
Read by pandas' C parser in chunks of bounded size; every rating line takes the movie of the header
above it. The prize data are not public any more: recaudit cannot fetch them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .rating_formats import RatingsFileError

_CHUNK_ROWS = 5_000_000


def read_netflix(path: Path):
    """(users, items, ratings) arrays of a Netflix-format file; a bad line raises one ``RatingsFileError``."""
    import pandas as pd

    users, items, ratings = [], [], []
    movie, offset = None, 0
    chunks = pd.read_csv(path, sep=",", header=None, names=["user", "rating", "date"], usecols=[0, 1],
                         dtype={"user": str, "rating": np.float64}, chunksize=_CHUNK_ROWS, engine="c",
                         skip_blank_lines=False, encoding="utf-8")
    try:
        for chunk in chunks:
            first = chunk["user"].to_numpy(str)
            header = np.char.endswith(first, ":") & chunk["rating"].isna().to_numpy()
            movie_at = np.where(header, np.char.rstrip(first, ":"), "")
            ids = pd.Series(np.where(header, movie_at, None)).ffill().to_numpy()
            if ids.size and ids[0] is None:
                if movie is None:
                    raise RatingsFileError(path, "a rating before the first 'MOVIE:' line", offset + 1)
                ids = pd.Series(ids).fillna(movie).to_numpy()
            rows = ~header
            customer = pd.to_numeric(pd.Series(first[rows]), errors="coerce").to_numpy()
            value = chunk["rating"].to_numpy()[rows]
            bad = ~np.isfinite(customer) | ~np.isfinite(value) | (customer != np.round(customer)) | (value == 0)
            if bad.any():
                line = offset + int(np.flatnonzero(rows)[np.argmax(bad)]) + 1
                raise RatingsFileError(path, "expected 'CUSTOMER,RATING,DATE' with an integer customer and a "
                                             "nonzero numeric rating, or a 'MOVIE:' line", line)
            users.append(customer.astype(np.int64))
            items.append(ids[rows].astype(np.int64))
            ratings.append(value)
            movie = ids[-1] if ids.size else movie
            offset += len(chunk)
    except ValueError as exc:  # the C parser's own refusals (a field it cannot read as a number)
        with open(path, "rb") as f:
            if b"," not in f.read(1 << 20):
                raise RatingsFileError(path, "no ratings (only 'MOVIE:' lines)") from None
        raise RatingsFileError(path, f"not in the Netflix format: {' '.join(str(exc).split())}") from None
    if not users or not sum(map(len, users)):
        raise RatingsFileError(path, "no ratings")
    return np.concatenate(users), np.concatenate(items), np.concatenate(ratings)
