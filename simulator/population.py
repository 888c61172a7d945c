"""Populations: who rates what. Bipartite stochastic blockmodel or a ratings file."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import numpy as np
from annotated_types import Ge, Gt, Le

from mechanisms import ParameterError, UserBatch


@dataclass(frozen=True)
class Catalogue:
    """The items of a world and, when known, their true clusters."""

    n_items: int
    n_item_clusters: int
    item_labels: np.ndarray | None  # None when the truth is unknown (real data)
    ratings_per_user: int


def _sizes_from_weights(weights: np.ndarray, total: int) -> np.ndarray:
    """Largest-remainder rounding of ``weights * total`` to integers summing to ``total``."""
    raw = weights / weights.sum() * total
    sizes = np.floor(raw).astype(np.int64)
    order = np.argsort(-(raw - sizes), kind="stable")
    sizes[order[: total - sizes.sum()]] += 1
    return sizes


def _draw_rated(n_users: int, n_items: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """``w`` distinct items per user, uniformly at random: shape (n_users, w).

    For ``w`` small against ``n_items``, draw with replacement and redraw the
    rows that hold a repeat (a few rounds, O(n w log w)); otherwise take the
    ``w`` smallest of ``n_items`` uniform keys per user (O(n N)).
    """
    if w >= n_items:
        return np.tile(np.arange(n_items), (n_users, 1))
    if w * w > n_items:
        return np.argpartition(rng.random((n_users, n_items)), w - 1, axis=1)[:, :w]
    items = np.sort(rng.integers(0, n_items, (n_users, w)), axis=1)
    redo = np.flatnonzero((np.diff(items, axis=1) == 0).any(axis=1))
    while redo.size:
        fresh = np.sort(rng.integers(0, n_items, (redo.size, w)), axis=1)
        items[redo] = fresh
        redo = redo[(np.diff(fresh, axis=1) == 0).any(axis=1)]
    return items


@dataclass
class SBMPopulation:
    """Bipartite stochastic blockmodel (seed 003, ALGORITHMS.md A).

    Users fall in ``K`` clusters with ``user_cluster_weights``; items in ``L``
    clusters with ``item_cluster_weights`` (exact sizes by largest-remainder
    rounding, then shuffled). Each user rates ``ratings_per_user`` items chosen
    uniformly; a rating is a like with probability ``like_probability[k, l]``.
    """

    n_items: Annotated[int, Ge(2)]
    user_cluster_weights: list[Annotated[float, Gt(0)]]
    item_cluster_weights: list[Annotated[float, Gt(0)]]
    like_probability: list[list[Annotated[float, Ge(0), Le(1)]]]
    ratings_per_user: Annotated[int, Ge(1)]

    def __post_init__(self) -> None:
        k, l = len(self.user_cluster_weights), len(self.item_cluster_weights)
        shape = (len(self.like_probability), *{len(row) for row in self.like_probability})
        if shape != (k, l):
            raise ParameterError("like_probability", f"must be a {k}x{l} matrix (one row per user cluster, "
                                 f"one column per item cluster); rows have lengths "
                                 f"{[len(row) for row in self.like_probability]}")
        b = self.b
        if np.any(b < 0) or np.any(b > 1):
            raise ParameterError("like_probability", "entries must lie in [0, 1]")
        if self.ratings_per_user > self.n_items:
            raise ParameterError("ratings_per_user", f"must be <= n_items ({self.n_items})")
        if l > self.n_items:
            raise ParameterError("item_cluster_weights", f"{l} item clusters but only {self.n_items} items")

    @property
    def b(self) -> np.ndarray:
        return np.asarray(self.like_probability, dtype=float)

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        sizes = _sizes_from_weights(np.asarray(self.item_cluster_weights, float), self.n_items)
        labels = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
        return Catalogue(self.n_items, len(sizes), labels, self.ratings_per_user)

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        """Clusters and private rows of ``n_users`` fresh users (vectorised)."""
        alpha = np.asarray(self.user_cluster_weights, float)
        clusters = rng.choice(alpha.size, size=n_users, p=alpha / alpha.sum())
        rated_idx = _draw_rated(n_users, self.n_items, self.ratings_per_user, rng)
        like_p = self.b[clusters[:, None], catalogue.item_labels[rated_idx]]
        likes = rng.random(like_p.shape) < like_p
        users = np.repeat(np.arange(n_users), self.ratings_per_user)
        items, likes = rated_idx.ravel(), likes.ravel()
        return clusters, UserBatch.from_coo(users, items, np.where(likes, 1.0, -1.0), likes,
                                            (n_users, self.n_items))


@dataclass
class RatingsFilePopulation:
    """Users resampled (with replacement) from a ratings file: CSV with columns user,item,rating.

    A rating counts as a like when it is ``>= like_threshold``. The true item
    clusters are unknown: reports measure agreement with a non-private
    clustering of the same file instead (``audits.utility``).
    """

    path: Path
    like_threshold: float = 4.0
    n_item_clusters: Annotated[int, Ge(1)] = 2
    _table: tuple = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = Path(self.path)
        if not self.path.is_file():
            raise ParameterError("path", f"ratings file not found: {self.path}")
        import pandas as pd

        try:
            columns = set(pd.read_csv(self.path, nrows=0).columns)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParameterError("path", f"{self.path}: not a readable CSV ({exc})") from None
        missing = {"user", "item", "rating"} - columns
        if missing:
            raise ParameterError("path", f"{self.path}: missing columns {sorted(missing)} (need user,item,rating)")

    def _load(self) -> tuple[UserBatch, int]:
        if self._table is None:
            import pandas as pd

            frame = pd.read_csv(self.path)
            users, user_idx = np.unique(frame["user"].to_numpy(), return_inverse=True)
            items, item_idx = np.unique(frame["item"].to_numpy(), return_inverse=True)
            stars = frame["rating"].to_numpy(float)
            table = UserBatch.from_coo(user_idx, item_idx, stars, stars >= self.like_threshold,
                                       (users.size, items.size))
            w = max(1, int(round(table.ratings.nnz / users.size)))
            self._table = (table, w)
        return self._table

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        users, w = self._load()
        return Catalogue(users.n_items, self.n_item_clusters, None, w)

    def item_like_rates(self) -> np.ndarray:
        """Fraction of the file's users who like each item: the non-private statistic reports compare to."""
        users, _ = self._load()
        return np.asarray(users.likes.sum(axis=0), dtype=float).ravel() / len(users)

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        users, _ = self._load()
        pick = rng.integers(len(users), size=n_users)
        return np.full(n_users, -1), users.take(pick)


POPULATIONS = {"sbm": SBMPopulation, "ratings_file": RatingsFilePopulation}
