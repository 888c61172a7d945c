"""Scores of a few distinct values, kept as what they are: counts per value, or one byte a run and a table.

An attack on messages of at most 8 bits gives at most 256 distinct scores. :class:`CodedScores` keeps them as
uint8 codes into the ascending table of those values, through the score store, the join of trial blocks, the
estimators' counts (:class:`Tally`) and the ROC curves; the float scores exist only when asked for
(``np.asarray``: the CSV export, estimators without a counting path). Every count taken from codes equals the
count taken from the floats they stand for.
"""
from __future__ import annotations

import functools

import numpy as np

#: codes are bytes
CODE_VALUES = 256
#: up to this many values, counting by one comparison pass per value beats widening bytes for ``np.bincount``
FEW_VALUES = 8


class Tally:
    """Scores that take a few distinct values, as those values (ascending) and how often each occurs: what
    sorted scores answer (``size``, ``searchsorted``), without sorting them."""

    def __init__(self, values: np.ndarray, counts: np.ndarray):
        self.values = values
        self.below = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])  # runs below each value
        self.size = int(self.below[-1])

    def searchsorted(self, t, side: str = "left") -> np.ndarray:
        """How many scores are ``< t`` (``side="left"``) or ``<= t`` (``"right"``): ``np.searchsorted`` of the
        sorted scores."""
        return self.below[np.searchsorted(self.values, t, side=side)]


def is_code_table(values: np.ndarray) -> bool:
    """Whether ``values`` can be the table of :class:`CodedScores`: float64, 1 to 256 of them, strictly ascending
    (so no NaN, and -0.0 and 0.0 never both)."""
    return (values.dtype == np.float64 and values.ndim == 1 and 0 < values.size <= CODE_VALUES
            and not np.isnan(values[0]) and bool(np.all(values[1:] > values[:-1])))


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.int64), b.view(np.int64))


class CodedScores:
    """The float scores ``values[codes]``, never materialised unless asked for.

    ``codes``: uint8 of any shape (runs on the last axis); ``values``: float64, strictly ascending (so no NaN,
    and -0.0 and 0.0 never both). Indexing and slicing keep the table; ``np.asarray`` gives the floats.
    """

    __slots__ = ("codes", "values")

    def __init__(self, codes: np.ndarray, values: np.ndarray):
        if codes.dtype != np.uint8 or not is_code_table(values):
            raise ValueError("coded scores need uint8 codes and a strictly ascending float64 table of <= 256 values")
        self.codes, self.values = codes, values

    @classmethod
    def from_table(cls, indices: np.ndarray, table: np.ndarray) -> "CodedScores | None":
        """The scores ``table[indices]`` (an attack's score of each possible output), or None when their values
        do not fit a table of bytes bit for bit (more than 256, a NaN, or -0.0 beside 0.0)."""
        table = np.asarray(table)
        if table.dtype != np.float64 or table.ndim != 1:
            return None
        found = _table_codes(table.tobytes())
        if found is None:
            return None
        values, recode = found
        if recode is None and indices.dtype == np.uint8:
            return cls(indices, values)  # the table is its own ascending order: the indices are the codes
        return cls((np.arange(table.size, dtype=np.uint8) if recode is None else recode)[indices], values)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.codes.shape

    @property
    def ndim(self) -> int:
        return self.codes.ndim

    @property
    def size(self) -> int:
        return self.codes.size

    dtype = np.dtype(np.float64)

    def __len__(self) -> int:
        return len(self.codes)

    def __getitem__(self, key):
        codes = self.codes[key]
        return CodedScores(codes, self.values) if isinstance(codes, np.ndarray) else self.values[codes]

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        scores = self.values[self.codes]
        return scores if dtype is None else scores.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"CodedScores(shape={self.shape}, values={self.values.size})"

    def ravel(self) -> "CodedScores":
        return CodedScores(self.codes.reshape(-1), self.values)

    def counts(self) -> np.ndarray:
        """How many scores take each value of the table."""
        flat = self.codes.reshape(-1)
        if self.values.size > FEW_VALUES:
            return np.bincount(flat, minlength=self.values.size)
        if self.values.size == 2:  # codes 0 and 1: count the ones without a comparison
            ones = np.count_nonzero(flat)
            return np.array([flat.size - ones, ones], np.int64)
        counts = np.array([np.count_nonzero(flat == code) for code in range(1, self.values.size)], np.int64)
        return np.concatenate([[flat.size - counts.sum()], counts])

    def tally(self) -> Tally:
        """The values that occur, with their counts (a value that does not occur is not a cut between scores)."""
        counts = self.counts()
        seen = counts > 0
        return Tally(self.values[seen], counts[seen])


@functools.lru_cache(maxsize=64)
def _table_codes(table: bytes) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(ascending distinct values, each entry's code or None when the table is already ascending and distinct)
    of a float64 table's bytes; None when no byte code keeps its values bit for bit. Cached: an attack hands
    the same table with every block."""
    table = np.frombuffer(table, np.float64)
    values, inverse = np.unique(table, return_inverse=True)
    inverse = inverse.ravel()
    if values.size > CODE_VALUES or np.isnan(values[-1]) or not _same_bits(values[inverse], table):
        return None
    values.setflags(write=False)
    same = values.size == table.size and np.all(inverse == np.arange(table.size))
    return values, None if same else inverse.astype(np.uint8)


def one_table(parts: list[CodedScores]) -> list[CodedScores] | None:
    """``parts`` recoded against one table (the union of theirs), or None when the union does not fit one."""
    first = parts[0].values
    if all(_same_bits(p.values, first) for p in parts[1:]):
        return parts
    union = np.unique(np.concatenate([p.values for p in parts]))
    if union.size > CODE_VALUES:
        return None
    places = [np.searchsorted(union, p.values) for p in parts]
    if not all(_same_bits(union[place], p.values) for place, p in zip(places, parts)):  # -0.0 beside 0.0
        return None
    return [CodedScores(place.astype(np.uint8)[p.codes], union) for place, p in zip(places, parts)]
