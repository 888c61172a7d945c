"""``UserBatch``: the private rows of a batch of users, sparse (users x items)."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from scipy import sparse

from recaudit.core.errors import ParameterError
from .sparse_rows import csr, from_entries, from_mask, gather_rows, index_dtype, stack_rows, take_rows


@dataclass(frozen=True, eq=False)
class UserBatch:
    """Private rows of a batch of users, sparse (users x items; a population is never held dense).

    ``ratings`` stores one entry per rating a user gave, with its value: stars
    in a star world, +1 (like) / -1 (dislike) in a like-bit world; values are
    never 0. ``likes`` marks the ratings that count as likes (a subset of the
    stored entries). ``rated`` and ``liked`` are dense boolean masks of the
    batch, built on first use for mechanisms that work on batches of bits.
    ``private`` marks the ratings their users keep on the device (selective
    privacy, SP2; a subset of the stored entries); None means none is private.
    ``held_out`` (same shape, optional) holds ratings the population withheld from
    the user's row to score predictions (``recaudit.audits.utility``): no mechanism reads it.
    ``likes`` is None when they were left out: the engine leaves them out of a panel's copy of the
    population for a mechanism that reads none (``Mechanism.reads_likes``), so reading them fails loudly.
    """

    ratings: sparse.csr_array
    likes: sparse.csr_array | None
    private: sparse.csr_array | None = None
    held_out: sparse.csr_array | None = None

    def __post_init__(self) -> None:
        if self.likes is not None and self.ratings.shape != self.likes.shape:
            raise ParameterError("ratings",
                                 f"ratings {self.ratings.shape} and likes {self.likes.shape} differ in shape")
        if self.private is not None and self.private.shape != self.ratings.shape:
            raise ParameterError("ratings",
                                 f"ratings {self.ratings.shape} and private {self.private.shape} differ in shape")

    @classmethod
    def from_masks(cls, rated: np.ndarray, liked: np.ndarray, values: np.ndarray | None = None) -> "UserBatch":
        """From dense masks (a batch); ``values`` (same shape) gives star ratings, else likes are +1, dislikes -1."""
        rated = np.asarray(rated, dtype=bool)
        liked = np.asarray(liked, dtype=bool) & rated
        if values is None:
            values = np.where(liked, 1.0, -1.0)
        elif np.any(np.asarray(values)[rated] == 0):
            raise ParameterError("ratings", "a rating's value may not be 0 (it would vanish from the sparse matrix)")
        return cls(from_mask(rated, np.asarray(values, float)), from_mask(liked))

    @classmethod
    def from_coo(cls, users: np.ndarray, items: np.ndarray, values: np.ndarray, liked: np.ndarray,
                 shape: tuple[int, int]) -> "UserBatch":
        """From one entry per rating (no duplicate (user, item) pairs, no zero values); rows sorted by item."""
        users, items = np.asarray(users, np.int64), np.asarray(items, np.int64)
        values, liked = np.asarray(values, float), np.asarray(liked, bool)
        key = users * shape[1] + items
        if np.any(key[1:] <= key[:-1]):  # (already in order when drawn user by user, items sorted)
            order = np.argsort(key, kind="stable")
            users, items, values, liked = users[order], items[order], values[order], liked[order]
        return cls(from_entries(users, items, values, shape),
                   from_entries(users[liked], items[liked], np.ones(int(np.count_nonzero(liked)), bool), shape))

    @classmethod
    def from_rows(cls, items: np.ndarray, values: np.ndarray, liked: np.ndarray, n_items: int) -> "UserBatch":
        """From the same number of ratings per user: ``items`` (users x ratings, distinct per row), their
        ``values`` and ``liked`` flags; the CSR arrays are built directly (rows sorted by item, as from COO)."""
        items = np.asarray(items)
        n, w = items.shape
        if w > 1 and np.any(items[:, 1:] < items[:, :-1]):
            order = np.argsort(items, axis=1)
            items, values, liked = (np.take_along_axis(np.asarray(a), order, axis=1) for a in (items, values, liked))
        liked = np.asarray(liked, dtype=bool)
        index = index_dtype(n * w, (n, n_items))
        indices = items.astype(index).ravel()
        ratings = csr(np.asarray(values, float).ravel(), indices, np.arange(n + 1, dtype=index) * w, (n, n_items))
        likes_ptr = np.zeros(n + 1, index)
        np.cumsum(liked.sum(axis=1), out=likes_ptr[1:])
        # (positions, not a boolean mask: NumPy gathers them four times faster than it applies a random mask)
        likes = csr(np.ones(int(likes_ptr[-1]), bool), indices[np.flatnonzero(liked)], likes_ptr, (n, n_items))
        return cls(ratings, likes)

    @classmethod
    def empty(cls, n_items: int) -> "UserBatch":
        no_entries, indptr = np.zeros(0, np.int32), np.zeros(1, np.int32)
        return cls(csr(np.zeros(0), no_entries, indptr, (0, n_items)),
                   csr(np.zeros(0, bool), no_entries, indptr, (0, n_items)))

    @classmethod
    def concat(cls, batches: "list[UserBatch]") -> "UserBatch":
        if len(batches) > 1 and sum(len(b) > 0 for b in batches) == 1:  # (churn: the active set is often empty)
            return next(b for b in batches if len(b) > 0)
        private = None
        if any(b.private is not None for b in batches):
            private = sparse.vstack([b.private_mask for b in batches], format="csr")
        held_out = None
        if any(b.held_out is not None for b in batches):
            held_out = sparse.vstack([b.held_out if b.held_out is not None else sparse.csr_array(b.ratings.shape)
                                      for b in batches], format="csr")
        likes = None if any(b.likes is None for b in batches) else stack_rows([b.likes for b in batches])
        return cls(stack_rows([b.ratings for b in batches]), likes, private, held_out)

    @classmethod
    def gather(cls, parts: "list[tuple[UserBatch, np.ndarray | slice]]", likes: bool = True) -> "UserBatch":
        """``concat([batch.take(index) for batch, index in parts])`` built in one allocation per matrix
        (``gather_rows``): the parts are never copied out first. ``likes=False`` leaves the likes out."""
        private = None
        if any(b.private is not None for b, _ in parts):
            private = gather_rows([(b.private_mask, index) for b, index in parts])
        held_out = None
        if any(b.held_out is not None for b, _ in parts):
            held_out = gather_rows([(b.held_out if b.held_out is not None else sparse.csr_array(b.ratings.shape),
                                     index) for b, index in parts])
        likes = likes and all(b.likes is not None for b, _ in parts)
        return cls(gather_rows([(b.ratings, index) for b, index in parts]),
                   gather_rows([(b.likes, index) for b, index in parts]) if likes else None, private, held_out)

    @property
    def private_mask(self) -> sparse.csr_array:
        """The private ratings as a sparse boolean matrix (empty when none is private)."""
        if self.private is None:
            return sparse.csr_array(self.ratings.shape, dtype=bool)
        return sparse.csr_array(self.private, dtype=bool)

    def with_private(self, private: sparse.csr_array | None) -> "UserBatch":
        """The same rows with ``private`` marking the ratings kept on the device."""
        return UserBatch(self.ratings, self.likes, None if private is None else sparse.csr_array(private, dtype=bool),
                         self.held_out)

    def __len__(self) -> int:
        return self.ratings.shape[0]

    @property
    def n_items(self) -> int:
        return self.ratings.shape[1]

    @functools.cached_property
    def rated(self) -> np.ndarray:
        r = self.ratings
        return csr(np.ones(r.nnz, bool), r.indices, r.indptr, r.shape).toarray()

    @functools.cached_property
    def liked(self) -> np.ndarray:
        return self.likes.toarray()

    def likes_any(self, items: np.ndarray) -> np.ndarray:
        """Per user, whether it likes any item ``items`` (a dense boolean users x items mask) marks:
        ``np.any(liked & items, axis=1)`` read off the sparse likes, without the dense mask."""
        likes = self.likes
        rows = np.repeat(np.arange(likes.shape[0]), np.diff(likes.indptr))
        hit = np.zeros(likes.shape[0], dtype=bool)
        hit[rows[np.flatnonzero(items[rows, likes.indices])]] = True
        return hit

    def take(self, index: np.ndarray | slice) -> "UserBatch":
        private = None if self.private is None else take_rows(self.private, index)
        held_out = None if self.held_out is None else take_rows(self.held_out, index)
        likes = None if self.likes is None else take_rows(self.likes, index)
        return UserBatch(take_rows(self.ratings, index), likes, private, held_out)

    def where(self, use_other: np.ndarray, other: "UserBatch") -> "UserBatch":
        """Row ``u`` from ``other`` where ``use_other[u]``, else from this batch."""
        n = len(self)
        pick = np.where(np.asarray(use_other, bool), np.arange(n) + n, np.arange(n))
        return UserBatch.concat([self, other]).take(pick)
