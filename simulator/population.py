"""Populations: who rates what. Blockmodels (like bits or star levels), a rank-one world (ratings files,
panels and the registry of every kind: ``recaudit.simulator.populations``).

Every population subclasses ``Population`` with its ``kind`` (``class X(Population, kind="x")``), which
registers it in ``POPULATIONS``, and has ``catalogue(rng)`` (the items of a world) and ``sample_users(n, catalogue,
rng) -> (clusters, UserBatch)`` (fresh users' private rows, sparse; cluster -1 when unknown).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

import numpy as np
from annotated_types import Ge, Gt, Le
from scipy import sparse

from recaudit.mechanisms import ParameterError, UserBatch
from recaudit.mechanisms.sparse_rows import csr
from recaudit.core.registry import Registry

from .ratings import RatingsData, split_ratings, withhold


@dataclass(frozen=True)
class Catalogue:
    """The items of a world and, when known, their true clusters."""

    n_items: int
    n_item_clusters: int
    item_labels: np.ndarray | None  # None when the truth is unknown (real data)
    ratings_per_user: int
    item_factors: np.ndarray | None = None  # the rank-one world's item vector v


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
    redo = np.flatnonzero((items[:, 1:] == items[:, :-1]).any(axis=1))
    while redo.size:
        fresh = np.sort(rng.integers(0, n_items, (redo.size, w)), axis=1)
        items[redo] = fresh
        redo = redo[(fresh[:, 1:] == fresh[:, :-1]).any(axis=1)]
    return items


#: every population, by the kind a scenario names; a class registers itself where it is defined
POPULATIONS = Registry("population")


class Population:
    """Base of every population kind: ``class X(Population, kind="x")`` registers ``X`` in ``POPULATIONS``."""

    kind: ClassVar[str]
    #: the conformance suite (``recaudit.simulator.checks``) builds the class with these (a ``path`` field gets a
    #: generated ratings file)
    test_params: ClassVar[dict] = {}

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        POPULATIONS.add(cls, kind)


class _BlockModel(Population):
    """What the like-bit and star blockmodels share: clusters, the catalogue, who rates what."""

    def _check_blocks(self, name: str, shape: tuple[int, ...]) -> None:
        k, l = len(self.user_cluster_weights), len(self.item_cluster_weights)
        if shape[:2] != (k, l):
            raise ParameterError(name, f"must have {k}x{l} blocks (one row per user cluster, one column per "
                                       f"item cluster); got {shape[0]}x{shape[1]}")
        if self.ratings_per_user > self.n_items:
            raise ParameterError("ratings_per_user", f"must be <= n_items ({self.n_items})")
        if l > self.n_items:
            raise ParameterError("item_cluster_weights", f"{l} item clusters but only {self.n_items} items")

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        sizes = _sizes_from_weights(np.asarray(self.item_cluster_weights, float), self.n_items)
        labels = rng.permutation(np.repeat(np.arange(len(sizes)), sizes))
        return Catalogue(self.n_items, len(sizes), labels, self.ratings_per_user - getattr(self, "held_out", 0))

    def _draw(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator):
        """Users' clusters, the items each rates (n_users, w) and those items' clusters."""
        alpha = np.asarray(self.user_cluster_weights, float)
        clusters = rng.choice(alpha.size, size=n_users, p=alpha / alpha.sum())
        rated_idx = _draw_rated(n_users, self.n_items, self.ratings_per_user, rng)
        return clusters, rated_idx, catalogue.item_labels[rated_idx]

    def _batch(self, n_users: int, rated_idx: np.ndarray, values: np.ndarray, likes: np.ndarray) -> UserBatch:
        return UserBatch.from_rows(rated_idx, values, likes, self.n_items)


def _block_shape(blocks: list) -> tuple[int, ...]:
    """Shape of a nested list of blocks, or raise ValueError when it is ragged."""
    array = np.asarray(blocks, dtype=float) if blocks else np.zeros((0, 0))
    return array.shape


@dataclass
class SBMPopulation(_BlockModel, kind="sbm"):
    """Bipartite stochastic blockmodel (seed 003, docs/families/local-clustering.md).

    Users fall in ``K`` clusters with ``user_cluster_weights``; items in ``L``
    clusters with ``item_cluster_weights`` (exact sizes by largest-remainder
    rounding, then shuffled). Each user rates ``ratings_per_user`` items chosen
    uniformly; a rating is a like with probability ``like_probability[k, l]``
    and is stored as +1 (like) or -1 (dislike).
    """

    test_params: ClassVar[dict] = {"n_items": 20, "ratings_per_user": 5, "user_cluster_weights": [0.5, 0.5],
                                   "item_cluster_weights": [0.5, 0.5], "like_probability": [[0.9, 0.3], [0.6, 0.1]]}

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
        self._check_blocks("like_probability", shape)

    @property
    def b(self) -> np.ndarray:
        return np.asarray(self.like_probability, dtype=float)

    def sample_users(self, n_users: int, catalogue: Catalogue,
                     rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        """Clusters and private rows of ``n_users`` fresh users (vectorised)."""
        clusters, rated_idx, item_clusters = self._draw(n_users, catalogue, rng)
        likes = rng.random(rated_idx.shape) < self.b[clusters[:, None], item_clusters]
        values = np.array([-1.0, 1.0])[likes.view(np.uint8)]  # +1 like, -1 dislike (a lookup: twice np.where's pace)
        return clusters, self._batch(n_users, rated_idx, values, likes)


@dataclass
class StarSBMPopulation(_BlockModel, kind="sbm_stars"):
    """Blockmodel with star ratings 1..S; a like is a rating of at least ``like_threshold`` stars.

    A user of cluster ``k`` rates an item of cluster ``l`` ``s`` stars with
    probability ``star_probability[k][l][s - 1]`` (clusters and rated items as in ``sbm``).

    Like-bit mechanisms run on it unchanged (their like probability per block is
    ``like_probability``, derived). ``held_out``: ratings of each user withheld from its
    row (drawn with the user) and kept in ``UserBatch.held_out`` to score predictions.
    """

    test_params: ClassVar[dict] = {"n_items": 20, "ratings_per_user": 5, "user_cluster_weights": [0.5, 0.5],
                                   "item_cluster_weights": [0.5, 0.5], "held_out": 1,
                                   "star_probability": [[[0.1, 0.1, 0.2, 0.3, 0.3], [0.3, 0.3, 0.2, 0.1, 0.1]],
                                                        [[0.2, 0.2, 0.2, 0.2, 0.2], [0.5, 0.2, 0.1, 0.1, 0.1]]]}

    n_items: Annotated[int, Ge(2)]
    user_cluster_weights: list[Annotated[float, Gt(0)]]
    item_cluster_weights: list[Annotated[float, Gt(0)]]
    star_probability: list[list[list[Annotated[float, Ge(0), Le(1)]]]]
    ratings_per_user: Annotated[int, Ge(1)]
    like_threshold: Annotated[int, Ge(1)] = 4
    held_out: Annotated[int, Ge(0)] = 0

    def __post_init__(self) -> None:
        try:
            shape = _block_shape(self.star_probability)
        except ValueError:
            shape = ()
        if len(shape) != 3 or shape[2] < 2:
            raise ParameterError("star_probability", "must be a K x L x S array (user cluster, item cluster, "
                                                     "star level 1..S with S >= 2) of equal-length lists")
        self._check_blocks("star_probability", shape)
        p = self.stars
        if np.any(p < 0) or np.any(np.abs(p.sum(axis=2) - 1) > 1e-9):
            raise ParameterError("star_probability", "each block's star distribution must be non-negative "
                                                     "and sum to 1")
        if self.like_threshold > self.n_stars:
            raise ParameterError("like_threshold", f"must be <= the number of star levels ({self.n_stars})")
        if self.held_out >= self.ratings_per_user:
            raise ParameterError("held_out", f"must be < ratings_per_user ({self.ratings_per_user}): "
                                             "every user keeps a rating")

    @property
    def stars(self) -> np.ndarray:
        return np.asarray(self.star_probability, dtype=float)

    @property
    def n_stars(self) -> int:
        return self.stars.shape[2]

    @property
    def like_probability(self) -> np.ndarray:
        """P(like) per block: the mass of the star levels >= ``like_threshold``."""
        return self.stars[:, :, self.like_threshold - 1:].sum(axis=2)

    def sample_users(self, n_users: int, catalogue: Catalogue,
                     rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        clusters, rated_idx, item_clusters = self._draw(n_users, catalogue, rng)
        cdf = np.cumsum(self.stars, axis=2)
        u = rng.random(rated_idx.shape)
        stars = np.ones(rated_idx.shape, np.int64)  # inverse-CDF draw: 1 + levels whose CDF u passed
        for level in range(self.n_stars - 1):
            stars += u >= cdf[:, :, level][clusters[:, None], item_clusters]
        rows = self._batch(n_users, rated_idx, stars.astype(float), stars >= self.like_threshold)
        return clusters, withhold(rows, self.held_out, rng) if self.held_out else rows


def _nonzero_unit(size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform on [-1, 0) U (0, 1]: a random sign times 1 - U, U ~ U[0, 1) (never exactly 0)."""
    return np.where(rng.random(size) < 0.5, -1.0, 1.0) * (1.0 - rng.random(size))


@dataclass
class RankOnePopulation(Population, kind="rank_one"):
    """Jain et al.'s synthetic rank-one world ``Y = u vᵀ`` with |Y| <= 1 (seed 004, docs/families/matrix-completion.md).

    Items' ``v_j`` and users' ``u_i`` are uniform on [-1, 1] without 0 (a random sign
    times 1 − U, U ~ U[0, 1)), and ``v`` is rescaled so ``max |v_j| = 1``: every
    ``|Y_ij| <= 1`` and no rating is 0. Each user observes ``ratings_per_user`` (ξ)
    items chosen uniformly, rated ``Y_ij``; a like is ``Y_ij >= like_threshold``.
    Users' clusters (and items' labels) are the signs of ``u`` (``v``): 0 positive, 1
    negative — with the default threshold 0 a user likes exactly the items of its own sign.
    """

    test_params: ClassVar[dict] = {"n_items": 20, "ratings_per_user": 5}

    n_items: Annotated[int, Ge(2)]
    ratings_per_user: Annotated[int, Ge(1)]
    like_threshold: Annotated[float, Ge(-1), Le(1)] = 0.0

    def __post_init__(self) -> None:
        if self.ratings_per_user > self.n_items:
            raise ParameterError("ratings_per_user", f"must be <= n_items ({self.n_items})")

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        v = _nonzero_unit(self.n_items, rng)
        v /= np.abs(v).max()
        return Catalogue(self.n_items, 2, (v < 0).astype(np.int64), self.ratings_per_user, item_factors=v)

    def draw(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator,
             batch: int = 20_000) -> tuple[np.ndarray, sparse.csr_array]:
        """Users' factors ``u`` and their observed ratings (CSR, each row sorted by item), drawn ``batch`` users at
        a time straight into the table's arrays (32-bit indices where they fit: no second table while drawing)."""
        u = _nonzero_unit(n_users, rng)
        w = self.ratings_per_user
        index = np.int32 if max(n_users * w, self.n_items) < 2 ** 31 else np.int64
        values, items = np.empty(n_users * w), np.empty(n_users * w, index)
        for start in range(0, n_users, batch):
            stop = min(n_users, start + batch)
            rated = np.sort(_draw_rated(stop - start, self.n_items, w, rng), axis=1)
            items[start * w:stop * w] = rated.ravel()
            np.multiply(u[start:stop, None], catalogue.item_factors[rated],
                        out=values[start * w:stop * w].reshape(stop - start, w))
        indptr = np.arange(0, n_users * w + 1, w, dtype=index)
        return u, csr(values, items, indptr, (n_users, self.n_items))

    def sample_users(self, n_users: int, catalogue: Catalogue,
                     rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        u, table = self.draw(n_users, catalogue, rng)
        users = np.repeat(np.arange(n_users), np.diff(table.indptr))
        batch = UserBatch.from_coo(users, table.indices, table.data, table.data >= self.like_threshold, table.shape)
        return (u < 0).astype(np.int64), batch


@dataclass(frozen=True, eq=False)
class RankOneWorld:
    """A rank-one matrix-completion problem: observed ratings (``data.train``), held-out ones
    (``data.test``), and the factors with ``Y = outer(user_factors, item_factors)``."""

    data: RatingsData
    user_factors: np.ndarray
    item_factors: np.ndarray

    def truth(self, users: np.ndarray, items: np.ndarray) -> np.ndarray:
        """``Y`` at the given entries (any entry, observed or not)."""
        return self.user_factors[users] * self.item_factors[items]


def rank_one_world(n_users: int, n_items: int, ratings_per_user: int, rng: np.random.Generator,
                   test_fraction: float = 0.01) -> RankOneWorld:
    """Jain et al.'s synthetic experiment: ``n_users`` users observing ``ratings_per_user`` (ξ)
    uniform entries each of ``Y = u vᵀ`` (|Y| <= 1, no zeros); ``test_fraction`` of those
    ratings (exactly, uniformly) held out, so each user keeps at most ξ training ratings."""
    population = RankOnePopulation(n_items=n_items, ratings_per_user=min(ratings_per_user, n_items))
    catalogue = population.catalogue(rng)
    u, observed = population.draw(n_users, catalogue, rng)
    seed = np.random.SeedSequence(rng.integers(2**63))
    train, test = split_ratings(observed, test_fraction, None, seed, in_place=True)  # (the draw is ours)
    ids = np.arange(n_users), np.arange(n_items)
    return RankOneWorld(RatingsData(train, test, *ids), u, catalogue.item_factors)
