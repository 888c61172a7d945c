"""Ratings file formats: detecting a file's layout, reading its raw columns, and turning a bad line into one
``file:line: problem`` error (located by a chunked strict parse, re-reading only the bad chunk as text).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import io
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from recaudit.mechanisms import ParameterError

from .rating_tables import UDATA_NAMES

#: every format a ratings file may be read as (``auto``: told apart from its first line)
FORMATS = ("auto", "udata", "ratings_csv", "ratings_dat", "inter", "csv", "netflix")
#: the ``format`` field of the populations that read ratings files
RatingsFormat = Literal["auto", "udata", "ratings_csv", "ratings_dat", "inter", "csv", "netflix"]
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
        if path.is_symlink():
            raise RatingsFileError(path, f"is a link to {os.readlink(path)}, which does not exist") from None
        raise ParameterError("path", f"ratings file not found: {path}") from None
    except OSError as exc:  # ELOOP: a symlink loop; ENOTDIR, EACCES on a folder above it, ...
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
        fmt = ("netflix" if NETFLIX_HEADER.match(text) else "ratings_dat" if "::" in text
               else "inter" if _TYPED.match(text) else "udata" if "\t" in text
               else _csv_kind(path, text))
    if fmt == "netflix":  # read by netflix_format.read_netflix
        return _Layout(fmt, ",", False, ("user", "item", "rating"), "user", "item", "rating")
    if fmt in ("udata", "ratings_dat"):
        return _Layout(fmt, "\t" if fmt == "udata" else "::", False, UDATA_NAMES, "user", "item", "rating")
    if fmt == "inter":
        names = tuple(name.split(":")[0].strip() for name in text.split("\t"))
        return _named_layout(path, fmt, "\t", names, ("user_id", "item_id", "rating"), text)
    names = tuple(name.strip().strip('"') for name in text.split(","))
    need = ("userId", "movieId", "rating") if fmt == "ratings_csv" else ("user", "item", "rating")
    return _named_layout(path, fmt, ",", names, need, text)


#: the first line of a Netflix-prize file: a movie's header, ``MOVIE:``
NETFLIX_HEADER = re.compile(r"^\d+:\s*$")
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
            def describe(v, n=name):
                return f"{n}: empty" if v == "" else f"{n}: {v!r} is not a 64-bit integer"
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
