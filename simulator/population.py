"""Populations: who rates what. Blockmodels (like bits or star levels), a rank-one world, a ratings file.

Every population has ``catalogue(rng)`` (the items of a world) and ``sample_users(n, catalogue,
rng) -> (clusters, UserBatch)`` (fresh users' private rows, sparse; cluster -1 when unknown).
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from annotated_types import Ge, Gt, Le, Lt
from scipy import sparse

from mechanisms import ParameterError, UserBatch
from mechanisms.errors import InternalError
from mechanisms.sp2 import allocate_private, privacy_ratios

from . import datasets
from .ratings import RatingsData, RatingsFormat, load_ratings_cached, split_ratings, withhold


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
    redo = np.flatnonzero((np.diff(items, axis=1) == 0).any(axis=1))
    while redo.size:
        fresh = np.sort(rng.integers(0, n_items, (redo.size, w)), axis=1)
        items[redo] = fresh
        redo = redo[(np.diff(fresh, axis=1) == 0).any(axis=1)]
    return items


class _BlockModel:
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
class SBMPopulation(_BlockModel):
    """Bipartite stochastic blockmodel (seed 003, docs/families/local-clustering.md).

    Users fall in ``K`` clusters with ``user_cluster_weights``; items in ``L``
    clusters with ``item_cluster_weights`` (exact sizes by largest-remainder
    rounding, then shuffled). Each user rates ``ratings_per_user`` items chosen
    uniformly; a rating is a like with probability ``like_probability[k, l]``
    and is stored as +1 (like) or -1 (dislike).
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
        self._check_blocks("like_probability", shape)

    @property
    def b(self) -> np.ndarray:
        return np.asarray(self.like_probability, dtype=float)

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        """Clusters and private rows of ``n_users`` fresh users (vectorised)."""
        clusters, rated_idx, item_clusters = self._draw(n_users, catalogue, rng)
        likes = rng.random(rated_idx.shape) < self.b[clusters[:, None], item_clusters]
        return clusters, self._batch(n_users, rated_idx, np.where(likes, 1.0, -1.0), likes)


@dataclass
class StarSBMPopulation(_BlockModel):
    """Blockmodel with star ratings 1..S; a like is a rating of at least ``like_threshold`` stars.

    A user of cluster ``k`` rates an item of cluster ``l`` ``s`` stars with
    probability ``star_probability[k][l][s - 1]`` (clusters and rated items as in ``sbm``).

    Like-bit mechanisms run on it unchanged (their like probability per block is
    ``like_probability``, derived). ``held_out``: ratings of each user withheld from its
    row (drawn with the user) and kept in ``UserBatch.held_out`` to score predictions.
    """

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

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        clusters, rated_idx, item_clusters = self._draw(n_users, catalogue, rng)
        cdf = np.cumsum(self.stars, axis=2)
        u = rng.random(rated_idx.shape)
        stars = np.ones(rated_idx.shape, np.int64)  # inverse-CDF draw: 1 + levels whose CDF u passed
        for level in range(self.n_stars - 1):
            stars += u >= cdf[:, :, level][clusters[:, None], item_clusters]
        rows = self._batch(n_users, rated_idx, stars.astype(float), stars >= self.like_threshold)
        return clusters, withhold(rows, self.held_out, rng) if self.held_out else rows


def ratings_path(path: Path | None, dataset: str | None) -> Path:
    """The ratings file a population reads: ``path``, or the cached, verified file of a named data set."""
    if dataset is None:
        if path is None:
            raise ParameterError("path", "give a ratings file (path) or a data set (dataset: movielens-100k)")
        return Path(path)
    try:
        found = datasets.find(dataset)
    except datasets.DataError as exc:
        raise ParameterError("dataset", str(exc)) from None
    if path is not None and Path(path).resolve() != found.resolve():
        raise ParameterError("path", "give either path or dataset, not both")
    return found


class _Draws:
    """One run's draws from a finite set of users without replacement: each user at most once per run."""

    def __init__(self, pool: np.ndarray):
        self.pool, self.order, self.taken = pool, None, 0

    def take(self, n: int, rng: np.random.Generator) -> np.ndarray:
        if self.order is None:
            self.order = rng.permutation(self.pool)
        if self.taken + n > self.order.size:
            raise ParameterError("n_users", f"the run asks for more than the {self.order.size} users the data "
                                            "holds (each real user is drawn at most once; bootstrap: true "
                                            "resamples them)")
        self.taken += n
        return self.order[self.taken - n:self.taken]


def _without_replacement(pool: np.ndarray, n: int, rng: np.random.Generator, draws: "_Draws | None") -> np.ndarray:
    """``n`` distinct users of ``pool``: from the run's draws when there is a run, else a fresh sample."""
    if draws is not None:
        return draws.take(n, rng)
    if n > pool.size:
        raise ParameterError("n_users", f"{n} users asked for, the data holds {pool.size}")
    return rng.choice(pool, n, replace=False)


def _nonzero_unit(size: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform on [-1, 0) U (0, 1]: a random sign times 1 - U, U ~ U[0, 1) (never exactly 0)."""
    return np.where(rng.random(size) < 0.5, -1.0, 1.0) * (1.0 - rng.random(size))


@dataclass
class RankOnePopulation:
    """Jain et al.'s synthetic rank-one world ``Y = u vᵀ`` with |Y| <= 1 (seed 004, docs/families/matrix-completion.md).

    Items' ``v_j`` and users' ``u_i`` are uniform on [-1, 1] without 0 (a random sign
    times 1 − U, U ~ U[0, 1)), and ``v`` is rescaled so ``max |v_j| = 1``: every
    ``|Y_ij| <= 1`` and no rating is 0. Each user observes ``ratings_per_user`` (ξ)
    items chosen uniformly, rated ``Y_ij``; a like is ``Y_ij >= like_threshold``.
    Users' clusters (and items' labels) are the signs of ``u`` (``v``): 0 positive, 1
    negative — with the default threshold 0 a user likes exactly the items of its own sign.
    """

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
        """Users' factors ``u`` and their observed ratings (CSR), drawn ``batch`` users at a time."""
        u = _nonzero_unit(n_users, rng)
        w, rows = self.ratings_per_user, []
        for start in range(0, n_users, batch):
            stop = min(n_users, start + batch)
            rated = _draw_rated(stop - start, self.n_items, w, rng)
            values = u[start:stop, None] * catalogue.item_factors[rated]
            indptr = np.arange(0, (stop - start) * w + 1, w)
            rows.append(sparse.csr_array((values.ravel(), rated.ravel(), indptr), shape=(stop - start, self.n_items)))
        table = sparse.vstack(rows, format="csr") if rows else sparse.csr_array((0, self.n_items))
        table.sort_indices()
        return u, table

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
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
    train, test = split_ratings(observed, test_fraction, None, seed)
    ids = np.arange(n_users), np.arange(n_items)
    return RankOneWorld(RatingsData(train, test, *ids), u, catalogue.item_factors)


@dataclass
class RatingsFilePopulation:
    """Users drawn from a ratings file (``simulator.ratings``): each real user at most once per run.

    ``format``: ``auto`` (from the first line), ``udata`` (MovieLens ``u.data``),
    ``ratings_csv`` (MovieLens ``ratings.csv``) or ``csv`` (``user,item,rating``).
    The file is read and validated in full when the population is built (so
    ``validate`` catches every bad line); then only the ``top_items`` most rated items
    are kept, ``test_fraction`` of the ratings are held out and each user's training
    ratings are capped at ``max_ratings_per_user`` (both drawn from ``split_seed``).
    Users are drawn from the training table without replacement (a run asking for more
    users than the file holds is refused); ``bootstrap: true`` resamples them with
    replacement instead. A rating is a like when it is ``>= like_threshold``. The true item clusters are unknown: reports measure agreement
    with a non-private clustering of the same file instead (``audits.utility``).
    ``held_out``: ratings of each sampled user withheld from its row (all but one at
    most) and kept in ``UserBatch.held_out`` to score predictions.
    """

    path: Path | None = None
    #: a data set fetched by ``recaudit data fetch`` (instead of ``path``), e.g. ``movielens-100k``
    dataset: str | None = None
    like_threshold: float = 4.0
    n_item_clusters: Annotated[int, Ge(1)] = 2
    format: RatingsFormat = "auto"
    top_items: Annotated[int, Ge(1)] | None = None
    max_ratings_per_user: Annotated[int, Ge(1)] | None = None
    test_fraction: Annotated[float, Ge(0), Lt(1)] = 0.0
    #: ``uniform`` (that fraction of all ratings) or ``per_user`` (of each user's)
    split: Literal["uniform", "per_user"] = "uniform"
    split_seed: Annotated[int, Ge(0)] = 0
    held_out: Annotated[int, Ge(0)] = 0
    bootstrap: bool = False
    _data: RatingsData | None = field(default=None, init=False, repr=False)
    _table: tuple | None = field(default=None, init=False, repr=False)
    _draws: _Draws | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = ratings_path(self.path, self.dataset)
        if not np.isfinite(self.like_threshold):
            raise ParameterError("like_threshold", "must be a finite number")
        self._data = load_ratings_cached(self.path, format=self.format, top_items=self.top_items,
                                         max_ratings_per_user=self.max_ratings_per_user,
                                         test_fraction=self.test_fraction, seed=self.split_seed,
                                         split=self.split)

    @property
    def data(self) -> RatingsData:
        """The whole table: training and held-out ratings, original ids."""
        return self._data

    def _users(self) -> tuple[UserBatch, np.ndarray, int]:
        """The training rows as one batch, the rows that hold ratings, and the mean ratings per user."""
        if self._table is None:
            counts = self._data.ratings_per_user()
            active = np.flatnonzero(counts)
            w = max(1, int(round(counts.sum() / max(1, active.size))))
            self._table = (self._data.batch(self.like_threshold), active, w)
        return self._table

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        _, _, w = self._users()
        return Catalogue(self._data.n_items, self.n_item_clusters, None, w)

    def item_like_rates(self) -> np.ndarray:
        """Fraction of the file's users who like each item: the non-private statistic reports compare to."""
        users, active, _ = self._users()
        return np.asarray(users.take(active).likes.sum(axis=0), dtype=float).ravel() / max(active.size, 1)

    def size(self) -> int | None:
        """Distinct users the file holds (None with ``bootstrap``: no limit)."""
        return None if self.bootstrap else int(self._users()[1].size)

    def for_run(self) -> "RatingsFilePopulation":
        """This population for one run: its draws never repeat a user (unless ``bootstrap``)."""
        run = copy.copy(self)
        run._draws = None if self.bootstrap else _Draws(self._users()[1])
        return run

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        users, active, _ = self._users()
        pick = active[rng.integers(active.size, size=n_users)] if self.bootstrap else \
            _without_replacement(active, n_users, rng, self._draws)
        rows = users.take(pick)
        return np.full(n_users, -1), withhold(rows, self.held_out, rng) if self.held_out else rows


@dataclass
class MatrixPopulation:
    """Users are the rows of a given sparse ratings matrix, drawn without replacement (a panel).

    ``rows`` holds the training ratings; ``test`` (same shape, optional) the
    held-out ones. The first array ``sample_users`` returns (the cluster
    labels of other populations) holds each user's source row, so outputs can
    be matched to held-out ratings. ``max_rating`` is the largest rating
    magnitude of the data's domain (audit pairs use it).
    """

    rows: UserBatch
    test: sparse.csr_array | None = None
    max_rating: float = 1.0
    _draws: _Draws | None = field(default=None, init=False, repr=False)

    def for_run(self) -> "MatrixPopulation":
        """This matrix for one run: the run's draws (public users, then the panel) never repeat a row."""
        run = copy.copy(self)
        run._draws = _Draws(np.arange(len(self.rows)))
        return run

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        per_user = np.diff(self.rows.ratings.indptr)
        return Catalogue(self.rows.n_items, 1, None, max(1, int(per_user.max(initial=1))))

    def sample_users(self, n_users: int, catalogue: Catalogue, rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        source = _without_replacement(np.arange(len(self.rows)), n_users, rng, self._draws)
        return source, self.rows.take(source)

    @classmethod
    def from_ratings(cls, data: RatingsData, like_threshold: float, max_rating: float) -> "MatrixPopulation":
        train = data.train.tocoo()
        rows = UserBatch.from_coo(train.row, train.col, train.data, train.data >= like_threshold, train.shape)
        return cls(rows, data.test, max_rating)


class _Panel:
    """A finite set of users with held-out ratings, built once on first use (``_matrix``)."""

    _population: MatrixPopulation | None

    def _build(self, rng: np.random.Generator) -> MatrixPopulation:
        raise NotImplementedError

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        self._population = self._build(rng)
        return self._population.catalogue(rng)

    def sample_users(self, n_users, catalogue, rng):
        if self._population is None:
            raise InternalError("catalogue() builds the matrix: call it first")
        return self._population.sample_users(n_users, catalogue, rng)

    def for_run(self) -> MatrixPopulation:
        if self._population is None:
            raise RuntimeError("catalogue() builds the matrix: call it first")
        return self._population.for_run()

    @property
    def matrix(self) -> MatrixPopulation:
        return self._population


@dataclass
class RankOneMatrix(_Panel):
    """Jain et al.'s experiment as a panel: ``rank_one_world`` (``n_users`` x ``n_items``, ξ ratings per
    user, ``test_fraction`` held out), drawn from the run's catalogue stream. For matrix completion.

    ``canary_items`` more items follow the ``n_items`` that no user rates: audit pairs that find them
    (``simulator.neighbours.reserved_items``) give each audited user items of its own (isolated canaries).
    """

    n_users: Annotated[int, Ge(1)]
    n_items: Annotated[int, Ge(2)]
    ratings_per_user: Annotated[int, Ge(1)]
    test_fraction: Annotated[float, Ge(0), Lt(1)] = 0.01
    canary_items: Annotated[int, Ge(0)] = 0
    _population: MatrixPopulation | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.ratings_per_user > self.n_items:
            raise ParameterError("ratings_per_user", f"must be <= n_items ({self.n_items})")

    def size(self) -> int:
        return self.n_users

    def canary_item_ids(self) -> np.ndarray:
        return self.n_items + np.arange(self.canary_items)

    def _build(self, rng):
        world = rank_one_world(self.n_users, self.n_items, self.ratings_per_user, rng, self.test_fraction)
        data = world.data
        if self.canary_items:
            shape = (self.n_users, self.n_items + self.canary_items)
            data = dataclasses.replace(data, train=_widened(data.train, shape), test=_widened(data.test, shape),
                                       item_ids=np.arange(shape[1]))
        return MatrixPopulation.from_ratings(data, 0.0, 1.0)


def _widened(ratings: sparse.csr_array | None, shape: tuple[int, int]) -> sparse.csr_array | None:
    """The same ratings in a matrix of more (empty) columns."""
    if ratings is None:
        return None
    ratings = sparse.csr_array(ratings)
    return sparse.csr_array((ratings.data, ratings.indices, ratings.indptr), shape=shape)


@dataclass
class RatingsMatrix(_Panel):
    """Every user of a ratings file once (a panel), with a held-out split: for matrix completion.

    Options as ``ratings_file``; ``max_rating`` is the top of the rating scale (audit pairs use it).
    """

    path: Path | None = None
    dataset: str | None = None
    format: RatingsFormat = "auto"
    top_items: Annotated[int, Ge(1)] | None = None
    max_ratings_per_user: Annotated[int, Ge(1)] | None = None
    test_fraction: Annotated[float, Ge(0), Lt(1)] = 0.01
    split: Literal["uniform", "per_user"] = "uniform"
    split_seed: Annotated[int, Ge(0)] = 0
    like_threshold: float = 4.0
    max_rating: Annotated[float, Gt(0)] = 5.0
    _population: MatrixPopulation | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = ratings_path(self.path, self.dataset)
        self._data()  # validates the whole file now

    def _data(self) -> RatingsData:
        return load_ratings_cached(self.path, format=self.format, top_items=self.top_items,
                                   max_ratings_per_user=self.max_ratings_per_user,
                                   test_fraction=self.test_fraction, seed=self.split_seed,
                                   split=self.split)

    def size(self) -> int:
        return self._data().n_users

    def _build(self, rng):
        return MatrixPopulation.from_ratings(self._data(), self.like_threshold, self.max_rating)


@dataclass
class _SelectivePrivacy:
    """Marks which ratings each user keeps private (SP2, ``mechanisms.sp2.allocate_private``).

    ``allocation``: ``H1`` (a privacy ratio per user) or ``H2`` (per item),
    drawn from Beta(``privacy_beta``); H2's item ratios are the world's, drawn
    once from ``allocation_seed``. Listed first among a population's bases, so
    its fields follow the population's and its methods wrap the population's.
    """

    allocation: Literal["H1", "H2"] = "H1"
    privacy_beta: list[Annotated[float, Gt(0)]] = field(default_factory=lambda: [2.0, 2.0])
    allocation_seed: Annotated[int, Ge(0)] = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.privacy_beta) != 2:
            raise ParameterError("privacy_beta", f"must be two Beta parameters [a, b], got {self.privacy_beta}")

    def _item_ratios(self, n_items: int) -> np.ndarray:
        return privacy_ratios(n_items, tuple(self.privacy_beta), np.random.default_rng(self.allocation_seed))

    def _with_private(self, rows: UserBatch, rng: np.random.Generator) -> UserBatch:
        ratios = self._item_ratios(rows.n_items) if self.allocation == "H2" else None
        return rows.with_private(allocate_private(rows.ratings, self.allocation, tuple(self.privacy_beta), rng,
                                                  ratios))

    def sample_users(self, n_users, catalogue, rng):
        clusters, rows = super().sample_users(n_users, catalogue, rng)
        return clusters, self._with_private(rows, rng)


@dataclass
class SelectiveStarSBMPopulation(_SelectivePrivacy, StarSBMPopulation):
    """``sbm_stars`` whose users keep a Beta-distributed share of their ratings private (SP2)."""


@dataclass
class SelectiveRatingsFilePopulation(_SelectivePrivacy, RatingsFilePopulation):
    """``ratings_file`` whose users keep a Beta-distributed share of their ratings private (SP2)."""


POPULATIONS = {"sbm": SBMPopulation, "sbm_stars": StarSBMPopulation, "rank_one": RankOnePopulation,
               "ratings_file": RatingsFilePopulation, "rank_one_matrix": RankOneMatrix,
               "ratings_matrix": RatingsMatrix, "sbm_stars_selective": SelectiveStarSBMPopulation,
               "ratings_file_selective": SelectiveRatingsFilePopulation}
