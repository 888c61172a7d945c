"""The populations read from a ratings file, fixed panels
(every user of a matrix, for iterative protocols) and selective privacy (each user keeps a share of its
ratings on the device, SP2). Each has ``catalogue(rng)`` and ``sample_users(n, catalogue, rng)``. Importing this module
fills
``POPULATIONS`` (every kind, ``recaudit.simulator.population``).
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse

from recaudit.mechanisms import ParameterError, UserBatch
from recaudit.core.errors import InternalError
from recaudit.mechanisms.sparse_rows import narrow
from recaudit.mechanisms.sp2 import allocate_private, privacy_ratios

from . import datasets
from .population import (POPULATIONS, Catalogue, Population, RankOnePopulation,  # noqa: F401 (POPULATIONS: re-exported)
                         SBMPopulation, StarSBMPopulation, rank_one_world)
from .ratings import RatingsData, RatingsFormat, load_ratings_cached, withhold


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
    if path is not None and not _same_file(Path(path), found):
        raise ParameterError("path", "give either path or dataset, not both")
    return found


def _same_file(path: Path, other: Path) -> bool:
    try:
        return path.resolve() == other.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13): not the data set's file
        return False


class _Draws:
    """One run's draws from a finite set of users without replacement: each user at most once per run."""

    def __init__(self, pool: np.ndarray, ordered: bool = False):
        self.pool, self.order, self.taken = pool, pool if ordered else None, 0

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


@dataclass
class RatingsFilePopulation(Population, kind="ratings_file"):
    """Users drawn from a ratings file (``recaudit.simulator.ratings``): each real user at most once per run.

    ``format``: ``auto`` (from the first line), ``udata`` (MovieLens ``u.data``),
    ``ratings_csv`` (MovieLens ``ratings.csv``) or ``csv`` (``user,item,rating``).
    The file is read and validated in full when the population is built (so
    ``validate`` catches every bad line); then only the ``top_items`` most rated items
    are kept, ``test_fraction`` of the ratings are held out and each user's training
    ratings are capped at ``max_ratings_per_user`` (both drawn from ``split_seed``).
    Users are drawn from the training table without replacement (a run asking for more
    users than the file holds is refused); ``bootstrap: true`` resamples them with
    replacement instead. A rating is a like when it is ``>= like_threshold``. The true item clusters are unknown:
    reports measure agreement
    with a non-private clustering of the same file instead (``recaudit.audits.utility``).
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

    def sample_users(self, n_users: int, catalogue: Catalogue,
                     rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
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
    magnitude of the data's domain (audit pairs use it). ``ordered``: a run takes the rows in their
    stored order instead of a random one (a study that fixed who is public and who arrives when).
    """

    rows: UserBatch
    test: sparse.csr_array | None = None
    max_rating: float = 1.0
    ordered: bool = False
    _draws: _Draws | None = field(default=None, init=False, repr=False)

    def for_run(self) -> "MatrixPopulation":
        """This matrix for one run: the run's draws (public users, then the panel) never repeat a row."""
        run = copy.copy(self)
        run._draws = _Draws(np.arange(len(self.rows)), self.ordered)
        return run

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        per_user = np.diff(self.rows.ratings.indptr)
        return Catalogue(self.rows.n_items, 1, None, max(1, int(per_user.max(initial=1))))

    def sample_users(self, n_users: int, catalogue: Catalogue,
                     rng: np.random.Generator) -> tuple[np.ndarray, UserBatch]:
        source = self.draw_sources(n_users, rng)
        return source, self.rows.take(source)

    def draw_sources(self, n_users: int, rng: np.random.Generator) -> np.ndarray:
        """The rows of ``n_users`` users ``sample_users`` would take (the engine takes them itself, together with
        the users joining them)."""
        return _without_replacement(np.arange(len(self.rows)), n_users, rng, self._draws)

    @classmethod
    def from_ratings(cls, data: RatingsData, like_threshold: float, max_rating: float) -> "MatrixPopulation":
        """The training table as users' rows (likes: ratings >= ``like_threshold``), built from its CSR arrays
        with 32-bit indices (no round trip through COO; a run's slices of rows then share its arrays)."""
        train = compact(data.train)
        liked = train.data >= like_threshold
        rated = np.flatnonzero(np.diff(train.indptr))  # each row's likes by one reduceat (no count per entry)
        per_row = np.zeros(train.shape[0], train.indptr.dtype)
        if rated.size:
            per_row[rated] = np.add.reduceat(liked, train.indptr[rated], dtype=per_row.dtype)
        indptr = np.zeros(train.shape[0] + 1, train.indptr.dtype)
        np.cumsum(per_row, out=indptr[1:])
        likes = sparse.csr_array((np.ones(int(indptr[-1]), bool), train.indices[liked], indptr), shape=train.shape)
        return cls(UserBatch(train, likes), data.test, max_rating)


def compact(table: sparse.csr_array) -> sparse.csr_array:
    """A CSR table in canonical form (sorted, no duplicates), float values, 32-bit indices where they fit."""
    table = sparse.csr_array(table, dtype=float)
    table.sum_duplicates()
    return narrow(table)


class _Panel(Population):
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
class RankOneMatrix(_Panel, kind="rank_one_matrix"):
    """Jain et al.'s experiment as a panel: ``rank_one_world`` (``n_users`` x ``n_items``, ξ ratings per
    user, ``test_fraction`` held out), drawn from the run's catalogue stream. For matrix completion.

    ``canary_items`` more items follow the ``n_items`` that no user rates: audit pairs that find them
    (``recaudit.audits.designs.pairs.reserved_items``) give each audited user items of its own (isolated canaries).
    """

    test_params: ClassVar[dict] = {"n_users": 30, "n_items": 20, "ratings_per_user": 5, "canary_items": 2}

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
class RatingsMatrix(_Panel, kind="ratings_matrix"):
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
    """Marks which ratings each user keeps private (SP2, ``recaudit.mechanisms.sp2.allocate_private``).

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
class SelectiveStarSBMPopulation(_SelectivePrivacy, StarSBMPopulation, kind="sbm_stars_selective"):
    """``sbm_stars`` whose users keep a Beta-distributed share of their ratings private (SP2)."""


@dataclass
class SelectiveRatingsFilePopulation(_SelectivePrivacy, RatingsFilePopulation, kind="ratings_file_selective"):
    """``ratings_file`` whose users keep a Beta-distributed share of their ratings private (SP2)."""
