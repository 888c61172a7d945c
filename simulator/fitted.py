"""A synthetic world calibrated to a real ratings file, at any size (``population: {kind: fitted, ...}``).

For when the real data at the papers' scale is not at hand: the file (``path`` or ``dataset``) is fitted
once — the users' activity (ratings per user, heavy-tailed) and the items' popularity, the rating
levels, and a low-rank structure (biased ALS, ``recaudit.mechanisms.baselines``: global mean, user
and item biases, rank-``rank`` factors, the residual spread) — and a world of ``users`` x ``items``
is drawn from the fit:

* items: the ``items`` most popular items of the file when it has that many, else the file's items
  resampled (popularity jittered by a log-normal factor of spread 0.1, factors and bias kept);
* users: activity resampled from the file's (times ``mean_activity`` / the file's mean when given, e.g. Netflix's
  209 ratings per user from MovieLens-100K's 106; capped at ``items``); factors and bias drawn from the
  Gaussian with the mean and covariance of the fitted users';
* who rates what: each user's items drawn by popularity without replacement (draws with
  replacement, duplicates dropped, then cut to the user's activity: users with many ratings on a
  small catalogue may get slightly fewer);
* ratings: ``μ + b_u + b_i + p_uᵀq_i + N(0, σ²)`` snapped to the nearest of the file's levels.

Built in chunks of users (bounded memory), from the run's catalogue stream; a panel like
``ratings_matrix`` (every user once, ``test_fraction`` held out). The last world built is kept (``_LAST``): the
points of a study on one world (the same settings and seed) build it once — at 480,189 users that is minutes.
The catalogue's ``ratings_per_user`` is the world's mean activity, as a ratings file's (the private centring's
typical weight and a canary's ratings read it; before issue 33 it was the largest activity).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, ClassVar

import numpy as np
from annotated_types import Ge, Gt, Lt
from scipy import sparse

from recaudit.mechanisms import ParameterError
from recaudit.mechanisms.baselines import fit_als

from .population import Catalogue
from .populations import MatrixPopulation, _Panel, ratings_path
from .ratings import RatingsData, RatingsFormat, load_ratings_cached

#: ratings drawn per chunk of users (bounds the builder's temporaries to a few hundred MB)
CHUNK_RATINGS = 4_000_000
#: the last world built, by its settings and seed
_LAST: dict = {}


@dataclass(frozen=True)
class Fit:
    """What a ratings file says about its world."""

    activity: np.ndarray       # ratings per user
    popularity: np.ndarray     # ratings per item
    levels: np.ndarray         # the rating values that occur, sorted
    mean: float
    item_bias: np.ndarray
    item_factors: np.ndarray
    user_mean: np.ndarray      # mean of (p_u, b_u) over users
    user_cov: np.ndarray       # their covariance
    noise: float               # residual standard deviation of the fit


@functools.lru_cache(maxsize=2)
def fit_file(path: str, format: str, rank: int, size: int, mtime_ns: int) -> Fit:
    """The fit of a ratings file (remembered for the last two files, keyed by size and mtime)."""
    table = sparse.csr_array(load_ratings_cached(path, format=format).train)
    if rank >= min(table.shape):
        raise ParameterError("rank", f"must be below the file's {table.shape[1]} items and {table.shape[0]} users")
    model = fit_als(table, rank, np.random.default_rng(0))
    coo = sparse.coo_array(table)
    residual = coo.data - model.predict(coo.row, coo.col)
    users = np.hstack([model.user_factors, model.bias.user_bias[:, None]])
    return Fit(activity=np.diff(table.indptr), popularity=np.bincount(coo.col, minlength=table.shape[1]),
               levels=np.unique(table.data), mean=model.bias.mean, item_bias=model.bias.item_bias,
               item_factors=model.item_factors, user_mean=users.mean(axis=0), user_cov=np.cov(users.T),
               noise=float(residual.std()))


@dataclass
class FittedMatrix(_Panel, kind="fitted"):
    """A ``users`` x ``items`` panel drawn from a fit of a ratings file (see the module's docstring)."""

    test_params: ClassVar[dict] = {"users": 40, "items": 12, "rank": 2}

    users: Annotated[int, Ge(1)]
    items: Annotated[int, Ge(2)]
    path: Path | None = None
    dataset: str | None = None
    format: RatingsFormat = "auto"
    rank: Annotated[int, Ge(1)] = 10
    test_fraction: Annotated[float, Ge(0), Lt(1)] = 0.01
    like_threshold: float = 4.0
    max_rating: Annotated[float, Gt(0)] = 5.0
    mean_activity: Annotated[float, Gt(0)] | None = None
    _population: MatrixPopulation | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.path = ratings_path(self.path, self.dataset)
        self.fit()  # reads and fits the file now: a bad file or rank is refused at validation

    def fit(self) -> Fit:
        info = Path(self.path).stat()
        return fit_file(str(Path(self.path).resolve()), self.format, self.rank, info.st_size, info.st_mtime_ns)

    def size(self) -> int:
        return self.users

    def catalogue(self, rng: np.random.Generator) -> Catalogue:
        """The catalogue, without drawing the world: it is built from ``rng``'s next seed when first used."""
        self._seed = int(rng.integers(2 ** 63))
        self._population = None
        return Catalogue(self.items, 1, None, max(1, round(float(self._activity(self.fit().activity).mean()))))

    def _activity(self, activity: np.ndarray) -> np.ndarray:
        """Ratings per user as drawn: the file's, scaled to ``mean_activity`` if given, capped at ``items``."""
        scale = 1.0 if self.mean_activity is None else self.mean_activity / activity.mean()
        return np.minimum(np.round(activity * scale).astype(np.int64), self.items)

    def sample_users(self, n_users, catalogue, rng):
        return self.matrix.sample_users(n_users, catalogue, rng)

    def for_run(self) -> MatrixPopulation:
        return self.matrix.for_run()

    @property
    def matrix(self) -> MatrixPopulation:
        if self._population is None:
            if not hasattr(self, "_seed"):
                raise ParameterError("population", "catalogue() draws the world's seed: call it first")
            key = (repr({k: v for k, v in self.__dict__.items() if not k.startswith("_")}), self._seed)
            if key not in _LAST:
                _LAST.clear()  # the old world goes before the new one is built
                _LAST[key] = self._build(np.random.default_rng(self._seed))
            self._population = _LAST[key]
        return self._population

    def _build(self, rng: np.random.Generator) -> MatrixPopulation:
        fit = self.fit()
        item_rng, user_rng, rate_rng, split_rng = rng.spawn(4)
        source = self._items(fit, item_rng)
        popularity = fit.popularity[source] * (np.exp(item_rng.normal(0, 0.1, self.items))
                                               if self.items > fit.popularity.size else 1.0)
        cumulative = np.cumsum(popularity / popularity.sum())
        activity = user_rng.choice(self._activity(fit.activity), self.users)
        parts = []
        start = 0
        while start < self.users:
            stop = int(np.searchsorted(np.cumsum(activity[start:]), CHUNK_RATINGS)) + start + 1
            stop = min(self.users, stop)
            parts.append(self._chunk(fit, source, cumulative, activity[start:stop], start, rate_rng))
            start = stop
        rows = np.concatenate([p[0] for p in parts])
        cols = np.concatenate([p[1] for p in parts])
        values = np.concatenate([p[2] for p in parts])
        held = split_rng.random(values.size) < self.test_fraction
        shape = (self.users, self.items)
        train = sparse.csr_array((values[~held], (rows[~held], cols[~held])), shape=shape)
        test = sparse.csr_array((values[held], (rows[held], cols[held])), shape=shape)
        data = RatingsData(train, test, np.arange(self.users), np.arange(self.items))
        return MatrixPopulation.from_ratings(data, self.like_threshold, self.max_rating)

    def _items(self, fit: Fit, rng: np.random.Generator) -> np.ndarray:
        """The file's item behind each item of the world."""
        if self.items <= fit.popularity.size:
            return np.sort(np.argsort(-fit.popularity, kind="stable")[:self.items])
        return rng.choice(fit.popularity.size, self.items)

    def _chunk(self, fit: Fit, source: np.ndarray, cumulative: np.ndarray, activity: np.ndarray, first: int,
               rng: np.random.Generator):
        """Rows, columns and ratings of users ``first, first + 1, ...`` with the given activity."""
        n = activity.size
        draws = np.ceil(activity * 1.3).astype(np.int64) + 2
        users = np.repeat(np.arange(n), draws)
        items = np.minimum(np.searchsorted(cumulative, rng.random(users.size)), self.items - 1)
        key = np.unique(users * self.items + items)  # sorted by user; duplicates gone
        users, items = key // self.items, key % self.items
        order = np.lexsort((rng.random(key.size), users))  # random order within each user
        users, items = users[order], items[order]
        starts = np.searchsorted(users, np.arange(n))
        keep = np.arange(users.size) - starts[users] < activity[users]
        users, items = users[keep], items[keep]
        profile = rng.multivariate_normal(fit.user_mean, fit.user_cov, n, method="eigh")
        factors, bias = profile[:, :-1], profile[:, -1]
        file_items = source[items]
        raw = (fit.mean + bias[users] + fit.item_bias[file_items]
               + np.einsum("ij,ij->i", factors[users], fit.item_factors[file_items])
               + rng.normal(0.0, fit.noise, users.size))
        nearest = np.clip(np.searchsorted(fit.levels, raw), 1, fit.levels.size - 1)
        lower, upper = fit.levels[nearest - 1], fit.levels[nearest]
        values = np.where(raw - lower < upper - raw, lower, upper)
        values[raw <= fit.levels[0]] = fit.levels[0]
        values[raw >= fit.levels[-1]] = fit.levels[-1]
        return users + first, items, values
