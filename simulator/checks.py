"""The conformance checks of a population kind (``POPULATIONS``) that need no scenario.

``tests/test_conformance.py`` runs them, with ``recaudit.audits.checks.check_population_constraints``, over every
registered population: a new population is done when its rows pass.
"""
from __future__ import annotations

import dataclasses
import functools
import tempfile
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from .population import POPULATIONS, Population
from .seeds import stream


@functools.lru_cache(maxsize=1)
def generated_ratings_file() -> Path:
    """A small ``user,item,rating`` file (60 users, 25 items, 1-5 stars), written once per process."""
    rng = np.random.default_rng(20261127)
    users, items = np.divmod(np.arange(60 * 25), 25)
    keep = rng.random(users.size) < 0.6
    stars = rng.integers(1, 6, users.size)
    path = Path(tempfile.mkdtemp(prefix="recaudit-checks-")) / "ratings.csv"
    lines = [f"{u},{i},{s}" for u, i, s in zip(users[keep], items[keep], stars[keep])]
    path.write_text("user,item,rating\n" + "\n".join(lines) + "\n")
    return path


def params(cls: type[Population]) -> dict:
    """``cls.test_params``, with a generated ratings file for a class that reads one (a ``path`` field)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    extra = {"path": generated_ratings_file()} if "path" in fields and "path" not in cls.test_params else {}
    return dict(cls.test_params) | extra


def users(cls: type[Population], n: int = 6, seed: int = 0):
    """Catalogue and ``n`` users of a fresh instance, from the ``catalogue`` and ``users`` streams of ``seed``."""
    population = cls(**params(cls))
    root = np.random.SeedSequence(seed)
    catalogue = population.catalogue(stream(root, "catalogue"))
    clusters, rows = population.sample_users(n, catalogue, stream(root, "users"))
    return catalogue, clusters, rows


def check_population_registered(cls: type[Population]) -> None:
    """Registered under its kind, and built from its test parameters."""
    assert POPULATIONS[cls.kind] is cls, f"{cls.__name__} is not POPULATIONS[{cls.kind!r}]"
    cls(**params(cls))


def check_population_users_on_axis_0(cls: type[Population]) -> None:
    """``sample_users(n)`` gives ``n`` clusters and ``n`` rows over the catalogue's items (or more: canaries)."""
    catalogue, clusters, rows = users(cls)
    assert clusters.shape == (6,), f"{cls.kind}: clusters of shape {clusters.shape} for 6 users"
    assert len(rows) == 6 and rows.ratings.shape[0] == 6, f"{cls.kind}: {len(rows)} rows for 6 users"
    assert rows.ratings.shape[1] >= catalogue.n_items, f"{cls.kind}: rows narrower than the catalogue"
    assert rows.ratings.nnz > 0, f"{cls.kind}: the users rate nothing"


def check_population_same_seed_same_users(cls: type[Population]) -> None:
    """The same seed gives the same users; another seed other users (no randomness outside the streams)."""
    _, clusters, rows = users(cls)
    _, clusters_again, rows_again = users(cls)
    assert np.array_equal(clusters, clusters_again), f"{cls.kind}: the same seed gave other clusters"
    assert (rows.ratings != rows_again.ratings).nnz == 0, f"{cls.kind}: the same seed gave other ratings"
    _, _, other = users(cls, seed=1)
    assert (rows.ratings != other.ratings).nnz > 0, f"{cls.kind}: seeds 0 and 1 gave the same ratings"


CHECKS: tuple[Callable[[type[Population]], None], ...] = (
    check_population_registered, check_population_users_on_axis_0, check_population_same_seed_same_users)


def yield_checks(cls: type[Population]) -> Iterator[Callable[[type[Population]], None]]:
    """Every population check that needs no scenario."""
    yield from CHECKS
