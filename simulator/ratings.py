"""Ratings files: MovieLens-format loading, full validation, and the sparse train/test table.

Formats (``format``; ``auto`` tells them apart from the first line):

* ``udata``: MovieLens 100K ``u.data``: ``user<TAB>item<TAB>rating<TAB>timestamp``, no header;
* ``ratings_csv``: MovieLens ``ratings.csv`` (latest, 20M, 25M): header ``userId,movieId,rating[,timestamp]``;
* ``ratings_dat``: MovieLens 1M / 10M ``ratings.dat``: ``user::item::rating::timestamp``, no header
  (read through a stream that turns each ``::`` into a tab, block by block);
* ``inter``: RecBole's atomic ``.inter`` files: a typed tab-separated header (``user_id:token
  item_id:token rating:float ...``); ids are read as integers when they all are, else as text;
* ``csv``: the project's own: a header naming ``user``, ``item`` and ``rating`` (any order, other
  columns allowed); ids may be any text.

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

import contextlib
import contextvars
import functools
import io
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from scipy import sparse

from mechanisms import ParameterError, UserBatch

from .seeds import stream

FORMATS = ("auto", "udata", "ratings_csv", "ratings_dat", "inter", "csv")
#: the ``format`` field of the populations that read ratings files
RatingsFormat = Literal["auto", "udata", "ratings_csv", "ratings_dat", "inter", "csv"]
_CHUNK_ROWS = 1_000_000  # rows per chunk when locating a bad line (bounded memory on huge files)
_BLOCK_BYTES = 1 << 24


#: longest problem text of an error line; longer ones (a whole bad line echoed) are cut
MAX_PROBLEM_CHARS = 300
#: the largest ratings file read, in bytes, checked before reading (a scenario's ``limits.ratings_gb``)
max_bytes: contextvars.ContextVar[int] = contextvars.ContextVar("ratings_max_bytes", default=2 ** 30)


class RatingsFileError(ParameterError):
    """A bad ratings file: ``file:line: problem`` on one line (``field`` is ``path`` for scenarios)."""

    def __init__(self, path: Path | str, problem: str, line: int | None = None):
        self.file, self.line = str(path), line
        if len(problem) > MAX_PROBLEM_CHARS:
            problem = f"{problem[:MAX_PROBLEM_CHARS - 60]}... (cut: {len(problem):,} characters)"
        super().__init__("path", f"{path}:{line}: {problem}" if line else f"{path}: {problem}")


@contextlib.contextmanager
def ratings_limit(limit_bytes: float):
    """Ratings files larger than ``limit_bytes`` are refused, within the block."""
    token = max_bytes.set(int(limit_bytes))
    try:
        yield
    finally:
        max_bytes.reset(token)


def check_readable(path: Path) -> None:
    """Refuse, in one line naming the file, a path that is missing, not a file, unreadable, or larger than
    :data:`max_bytes` — before reading any of it."""
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ParameterError("path", f"ratings file not found: {path}") from None
    except OSError as exc:
        raise RatingsFileError(path, f"cannot read it ({exc.strerror or type(exc).__name__})") from None
    if stat.S_ISDIR(info.st_mode):
        raise RatingsFileError(path, "is a directory, not a ratings file")
    if not stat.S_ISREG(info.st_mode):
        raise RatingsFileError(path, "is not a regular file")
    limit = max_bytes.get()
    if info.st_size > limit:
        raise RatingsFileError(path, f"is {info.st_size / 2 ** 30:.3g} GiB, over limits.ratings_gb = "
                                     f"{limit / 2 ** 30:.3g} (checked before reading; raise it on purpose)")
    try:
        with open(path, "rb"):
            pass
    except PermissionError:
        raise RatingsFileError(path, "permission denied") from None
    except OSError as exc:
        raise RatingsFileError(path, f"cannot read it ({exc.strerror or type(exc).__name__})") from None


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


# ---------------------------------------------------------------- layouts


@dataclass(frozen=True)
class _Layout:
    """How one file is laid out: separator, header, every column's name, which are user/item/rating."""

    format: str
    sep: str
    header: bool
    names: tuple[str, ...]
    user: str
    item: str
    rating: str

    @property
    def int_ids(self) -> bool:
        return self.format not in ("csv", "inter")

    def dtypes(self) -> dict:
        """Explicit dtypes for the C parser: integer ids (MovieLens), float ratings, float extras."""
        types: dict = {name: np.float64 for name in self.names if name not in (self.user, self.item)}
        if self.int_ids:
            types |= {self.user: np.int64, self.item: np.int64}
        else:  # the project's own (and RecBole's) ids are text or numbers; inferred, then factorized
            types = {self.rating: np.float64}
        return types


_UDATA_NAMES = ("user", "item", "rating", "timestamp")


def _layout(path: Path, fmt: str) -> _Layout:
    """Read the first line and decide the layout; refuses empty files and unknown headers."""
    with open(path, "rb") as f:
        first = f.readline()
    if not first.strip():
        if not first:
            raise RatingsFileError(path, "empty file (no ratings)")
        raise RatingsFileError(path, "blank first line (expected a header or a rating)", 1)
    try:
        text = first.decode("utf-8").lstrip("\ufeff").rstrip("\r\n")
    except UnicodeDecodeError:
        raise RatingsFileError(path, "not UTF-8 text", 1) from None
    if fmt == "auto":
        fmt = ("ratings_dat" if "::" in text else "inter" if _TYPED.match(text) else "udata" if "\t" in text
               else _csv_kind(path, text))
    if fmt in ("udata", "ratings_dat"):
        return _Layout(fmt, "\t" if fmt == "udata" else "::", False, _UDATA_NAMES, "user", "item", "rating")
    if fmt == "inter":
        names = tuple(name.split(":")[0].strip() for name in text.split("\t"))
        return _named_layout(path, fmt, "\t", names, ("user_id", "item_id", "rating"), text)
    names = tuple(name.strip().strip('"') for name in text.split(","))
    need = ("userId", "movieId", "rating") if fmt == "ratings_csv" else ("user", "item", "rating")
    return _named_layout(path, fmt, ",", names, need, text)


#: RecBole's typed header: ``name:type`` fields, tab-separated
_TYPED = re.compile(r"^[^\t:]+:(token|float|token_seq|float_seq)(\t|$)")


def _named_layout(path: Path, fmt: str, sep: str, names: tuple[str, ...], need: tuple[str, str, str],
                  text: str) -> _Layout:
    """A layout whose header names its columns; refuses repeated names and missing user/item/rating."""
    if len(set(names)) != len(names):
        raise RatingsFileError(path, f"header repeats a column name: {text}", 1)
    missing = sorted(set(need) - set(names))
    if missing:
        raise RatingsFileError(path, f"missing columns {missing} (need {','.join(need)}){_separator_hint(text, sep)}",
                               1)
    return _Layout(fmt, sep, True, names, *need)


def _separator_hint(text: str, sep: str) -> str:
    """Which separator the line seems to use, when it is not ``sep``."""
    for other, name in ((",", "commas"), ("\t", "tabs"), ("::", "'::'"), (";", "semicolons"), ("|", "'|'"),
                        (" ", "spaces")):
        if other != sep and len(text.split(other)) >= 3:
            wanted = {",": "commas", "\t": "tabs", "::": "'::'"}.get(sep, repr(sep))
            return f"; the line's fields are separated by {name}, this format's by {wanted}"
    return ""


def _csv_kind(path: Path, header: str) -> str:
    names = {name.strip().strip('"') for name in header.split(",")}
    if {"userId", "movieId", "rating"} <= names:
        return "ratings_csv"
    if {"user", "item", "rating"} <= names or not names & {"userId", "movieId"}:
        return "csv"
    missing = sorted({"userId", "movieId", "rating"} - names)
    raise RatingsFileError(path, f"missing columns {missing} (need userId,movieId,rating)"
                                 f"{_separator_hint(header, ',')}", 1)


# ---------------------------------------------------------------- parsing


class _DoubleColons(io.RawIOBase):
    """A binary file read with every ``::`` turned into a tab (line breaks kept, so line numbers hold):
    lets pandas' C parser, which takes one-character separators only, read ``ratings.dat``."""

    def __init__(self, path: Path):
        self._file, self._pending = open(path, "rb"), b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while not self._pending:
            block = self._file.read(_BLOCK_BYTES)
            if not block:
                return 0
            while block.endswith(b":"):  # a "::" may be cut between blocks
                more = self._file.read(1)
                if not more:
                    break
                block += more
            self._pending = block.replace(b"::", b"\t")
        size = min(len(buffer), len(self._pending))
        buffer[:size], self._pending = self._pending[:size], self._pending[size:]
        return size

    def close(self) -> None:
        self._file.close()
        super().close()


def _read(path: Path, layout: _Layout, skiprows: int | None = None, **kw):
    import pandas as pd

    source, sep = (io.BufferedReader(_DoubleColons(path)), "\t") if layout.sep == "::" else (path, layout.sep)
    try:
        return pd.read_csv(source, sep=sep, header=None, skiprows=(1 if layout.header else 0) if skiprows is None
                           else skiprows, names=list(layout.names), engine="c", encoding="utf-8",
                           skip_blank_lines=True, **kw)
    finally:
        if source is not path and not kw.get("chunksize"):
            source.close()


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
    try:
        frame = _read(path, layout, dtype=layout.dtypes(), low_memory=layout.int_ids)  # csv: infer id types over whole columns
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
    users, user_ids = pd.factorize(frame[layout.user].to_numpy(), sort=True)
    items, item_ids = pd.factorize(frame[layout.item].to_numpy(), sort=True)
    del frame
    # one sort by (user, item) gives both the CSR order and the duplicate check
    key = users.astype(np.int64) * max(1, len(item_ids)) + items
    order = np.argsort(key)
    key = key[order]
    if (key[1:] == key[:-1]).any():
        _refuse_duplicates(path, layout, users, items, user_ids, item_ids)
    del key
    indptr = np.concatenate(([0], np.cumsum(np.bincount(users, minlength=len(user_ids)))))
    index_type = np.int32 if max(len(item_ids), len(values)) < 2**31 else np.int64
    table = sparse.csr_array((values[order], items[order].astype(index_type), indptr.astype(index_type)),
                             shape=(len(user_ids), len(item_ids)))
    return _Parsed(table, np.asarray(user_ids), np.asarray(item_ids))


def _refuse_rows(path: Path, layout: _Layout, bad: np.ndarray, problem) -> None:
    rows = np.flatnonzero(bad)
    if rows.size:
        more = f" (and {rows.size - 1} more such lines)" if rows.size > 1 else ""
        raise RatingsFileError(path, problem(rows[0]) + more, int(_line_numbers(path, layout, rows[:1])[0]))


def _refuse_duplicates(path, layout, users, items, user_ids, item_ids) -> None:
    key = users.astype(np.int64) * max(1, len(item_ids)) + items
    order = np.argsort(key, kind="stable")
    ordered = key[order]
    repeats = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1  # positions (sorted) of later copies
    later = order[repeats]
    pick = np.argmin(later)
    first = order[np.searchsorted(ordered, ordered[repeats[pick]])]
    lines = _line_numbers(path, layout, np.array([first, later[pick]]))
    more = f" (and {repeats.size - 1} more duplicates)" if repeats.size > 1 else ""
    raise RatingsFileError(path, f"duplicate rating of {layout.item} {item_ids[items[first]]} by {layout.user} "
                                 f"{user_ids[users[first]]} (first at line {lines[0]}); each (user, item) pair "
                                 f"may appear once{more}", int(lines[1]))


_INTEGER = r"^\s*[+-]?\d+\s*$"
_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _checked(layout: _Layout) -> list[str]:
    """The columns every row must have valid (the project's csv ignores its other columns)."""
    return list(layout.names) if layout.int_ids else [layout.user, layout.item, layout.rating]


def _locate(path: Path, layout: _Layout) -> RatingsFileError:
    """The first bad line, after the fast parse failed: the file is parsed again in chunks with the
    same dtypes to find the first bad chunk, which alone is re-read as text and checked row by row."""
    import pandas as pd

    start = 0
    try:
        for chunk in _read(path, layout, dtype=layout.dtypes(), chunksize=_CHUNK_ROWS, low_memory=True):
            if chunk[_checked(layout)].isna().to_numpy().any():
                break
            start += len(chunk)
        else:
            return RatingsFileError(path, "not a readable ratings file")
    except UnicodeDecodeError:
        return RatingsFileError(path, "not UTF-8 text", _first_undecodable_line(path))
    except pd.errors.ParserError as exc:
        match = _FIELDS.search(str(exc))
        if match:
            expected, line, saw = map(int, match.groups())
            return RatingsFileError(path, f"expected {expected} fields, saw {saw}", line)
        return RatingsFileError(path, f"not a readable ratings file ({' '.join(str(exc).split())})")
    except (ValueError, OverflowError):
        pass  # a value of the chunk starting at data row `start` did not convert
    first_line = int(_line_numbers(path, layout, np.array([start]))[0])
    if first_line == 0:
        return RatingsFileError(path, "not a readable ratings file")
    chunk = _read(path, layout, skiprows=first_line - 1, nrows=_CHUNK_ROWS, dtype=str, keep_default_na=False)
    found = _first_problem(chunk, layout)
    if found is None:
        return RatingsFileError(path, "not a readable ratings file")
    row, column, problem = found
    line = int(_line_numbers(path, layout, np.array([start + row]))[0])
    if column is not None and chunk.iloc[row][column] == "":
        saw = _field_count(path, line, layout.sep)
        if saw != len(layout.names):
            problem = f"expected {len(layout.names)} fields, saw {saw}"
    return RatingsFileError(path, problem, line)


def _first_problem(chunk, layout: _Layout) -> tuple[int, str | None, str] | None:
    """(row, column, problem) of the chunk's first bad row, checking columns left to right."""
    import pandas as pd

    found: list[tuple[int, int, str, str]] = []
    for position, name in enumerate(_checked(layout)):
        text = chunk[name].astype(str)
        empty = (text.str.len() == 0).to_numpy()
        if name in (layout.user, layout.item):
            bad = empty
            if layout.int_ids:
                digits = text.str.strip().str.lstrip("+-").str.len()
                bad = bad | ~text.str.match(_INTEGER).to_numpy() | (digits > 18).to_numpy()
            describe = (lambda v, n=name: f"{n}: empty" if v == "" else f"{n}: {v!r} is not a 64-bit integer")
        else:
            number = pd.to_numeric(text, errors="coerce").to_numpy(np.float64)
            bad = ~np.isfinite(number)
            if name == layout.rating:
                bad |= number == 0
            describe = functools.partial(_describe_number, name, name == layout.rating)
        rows = np.flatnonzero(bad)
        if rows.size:
            found.append((int(rows[0]), position, name, describe(text.iloc[rows[0]])))
    if not found:
        return None
    row, _, name, problem = min(found)
    return row, name, problem


def _describe_number(name: str, is_rating: bool, value: str) -> str:
    if value == "":
        return f"{name}: empty"
    try:
        number = float(value)
    except ValueError:
        return f"{name}: {value!r} is not a number"
    if not np.isfinite(number):
        return f"{name}: {value.strip()} is not a finite number"
    return f"{name}: 0 is not allowed (a stored rating is never 0: shift the rating scale)" if is_rating \
        else f"{name}: {value!r} is not a number"


def _lines(path: Path):
    """(1-based line number, is blank) of every line, block by block: arrays per block."""
    line_no, pending, last = 0, 0, b""
    with open(path, "rb") as f:
        while block := f.read(_BLOCK_BYTES):
            data = np.frombuffer(block, np.uint8)
            ends = np.flatnonzero(data == 10)
            if ends.size:
                lengths = np.diff(np.concatenate(([-1], ends))) - 1
                lengths[0] += pending
                before = np.where(ends > 0, data[np.maximum(ends - 1, 0)], last[-1] if last else 0)
                blank = (lengths == 0) | ((lengths == 1) & (before == 13))
                yield line_no + 1 + np.arange(ends.size), blank
                line_no += ends.size
                pending = data.size - 1 - ends[-1]
            else:
                pending += data.size
            last = block[-1:]
    if pending:
        yield np.array([line_no + 1]), np.array([pending == 1 and last == b"\r"])


def _line_numbers(path: Path, layout: _Layout, rows: np.ndarray) -> np.ndarray:
    """File line numbers of data rows (pandas' row numbering skips the header and blank lines)."""
    rows = np.asarray(rows, np.int64)
    need, seen, out = int(rows.max()) + 1, 0, np.zeros(rows.size, np.int64)
    for numbers, blank in _lines(path):
        data_lines = numbers[~blank & ((numbers > 1) if layout.header else True)]
        hit = (rows >= seen) & (rows < seen + data_lines.size)
        out[hit] = data_lines[rows[hit] - seen]
        seen += data_lines.size
        if seen >= need:
            break
    return out


def _field_count(path: Path, line: int, sep: str) -> int:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if number == line:
                return raw.decode("utf-8", "replace").rstrip("\r\n").count(sep) + 1
    return 0


def _first_undecodable_line(path: Path) -> int | None:
    """Blocks cut at line ends (UTF-8 never puts a newline byte inside a character), decoded strictly."""
    lines_before, carry = 0, b""
    with open(path, "rb") as f:
        while True:
            block = f.read(_BLOCK_BYTES)
            data = carry + block
            cut = len(data) if not block else data.rfind(b"\n") + 1
            whole, carry = data[:cut], data[cut:]
            try:
                whole.decode("utf-8")
            except UnicodeDecodeError as exc:
                return lines_before + whole.count(b"\n", 0, exc.start) + 1
            lines_before += whole.count(b"\n")
            if not block:
                return None


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


def _entries(table: sparse.csr_array, mask: np.ndarray) -> sparse.csr_array:
    """The stored entries of a canonical CSR table where ``mask`` (over its entries) is true."""
    rows = np.repeat(np.arange(table.shape[0]), np.diff(table.indptr))
    indptr = np.concatenate(([0], np.cumsum(np.bincount(rows[mask], minlength=table.shape[0]))))
    return sparse.csr_array((table.data[mask], table.indices[mask], indptr.astype(table.indptr.dtype)),
                            shape=table.shape)


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
                  seed: np.random.SeedSequence, split: str = "uniform") -> tuple[sparse.csr_array, sparse.csr_array]:
    """Train and test tables: ``test_fraction`` of the ratings held out (``uniform``: exactly, over all
    ratings; ``per_user``: that fraction of each user's), then the training ratings capped at
    ``max_ratings_per_user`` per user (the order of Jain et al.'s experiments). Draws depend only on
    the table (its canonical order), not on a file's row order."""
    table = sparse.csr_array(table)
    table.sort_indices()
    test = held_out_per_user(table, test_fraction, stream(seed, "test")) if split == "per_user" else \
        held_out(table.nnz, test_fraction, stream(seed, "test"))
    train = ~test
    if max_ratings_per_user is not None:
        rows = np.repeat(np.arange(table.shape[0]), np.diff(table.indptr))
        train[train] = capped(rows[train], max_ratings_per_user, stream(seed, "cap"))
    return _entries(table, train), _entries(table, test)


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
    path = Path(path).resolve()
    check_readable(path)
    info = path.stat()
    return _cached(str(path), info.st_size, info.st_mtime_ns, tuple(sorted(options.items())))


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
    columns = {"udata": _UDATA_NAMES, "ratings_dat": _UDATA_NAMES,
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
