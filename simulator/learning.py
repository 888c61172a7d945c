"""Learning curves without churn: how the server's estimate improves with users seen."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from mechanisms import LocalMechanism, WorldInfo

from .population import Catalogue
from .seeds import stream


def checkpoints(max_users: int, per_decade: int, start: int = 10) -> np.ndarray:
    """Geometric user counts ``start .. max_users`` with ``per_decade`` points per factor 10."""
    n = int(np.ceil(np.log10(max_users / start) * per_decade)) + 1
    points = np.unique(np.round(start * 10 ** (np.arange(n) / per_decade)).astype(np.int64))
    return np.append(points[points < max_users], max_users)


def learning_curve(population, catalogue: Catalogue, mechanism: LocalMechanism, at: np.ndarray,
                   root: np.random.SeedSequence, batch_size: int = 4096) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(users_seen, published item labels)`` at each user count in ``at``.

    Users arrive one after another and each answers one query (the churn-free
    limit of the simulator); the caller may stop early by closing the
    generator, so a sweep pays only for the users it needs.
    """
    rng_users, rng_queries, rng_release = stream(root, "users"), stream(root, "queries"), stream(root, "randomizer")
    world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
    state = mechanism.init_state(world)
    seen = 0
    for target in np.asarray(at, dtype=np.int64):
        while seen < target:
            n = int(min(batch_size, target - seen))
            _, rows = population.sample_users(n, catalogue, rng_users)
            queries = mechanism.make_queries(n, rng_queries, state, rows.rated)
            state = mechanism.aggregate(state, queries, mechanism.release(mechanism.sketch(rows, queries), rng_release))
            seen += n
        yield seen, mechanism.estimate(state)
