"""The Xin–Jaakkola study's worlds: public, private and evaluation users split from a blockmodel or a ratings file."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import sparse

from recaudit.mechanisms import UserBatch
from recaudit.simulator.population import StarSBMPopulation
from recaudit.simulator.ratings import hold_out_per_user, load_ratings
from recaudit.simulator.seeds import stream

from recaudit.audits.language.studies import DataTooSmall

PUBLIC, EVALUATION, HELD_OUT, BATCH = 100, 200, 10, 20
HI, LO = [0.02, 0.05, 0.13, 0.35, 0.45], [0.45, 0.35, 0.13, 0.05, 0.02]


@dataclass
class World:
    name: str
    public: UserBatch
    private: UserBatch
    train: sparse.csr_array  # evaluation users' ratings they keep
    test: tuple[np.ndarray, np.ndarray, np.ndarray]  # (user, item, rating) held out
    levels: list[float]
    pairs_from: UserBatch  # users whose rated sets the distinguishing pairs borrow


class _Rows:
    """A population over fixed rows (with replacement), for the star-pattern pair."""

    def __init__(self, rows: UserBatch, n_stars: int):
        self.rows, self.n_stars = rows, n_stars

    def sample_users(self, n, catalogue, rng):
        pick = rng.integers(0, len(self.rows), n)
        return np.full(n, -1), self.rows.take(pick)


def split_world(name: str, rows: UserBatch, levels: list[float], n_private: int, rng) -> World:
    counts = np.diff(rows.ratings.indptr)
    users = rng.permutation(len(rows))
    rich = users[counts[users] >= 2 * HELD_OUT]
    evaluation = rich[:EVALUATION]
    rest = np.setdiff1d(users, evaluation, assume_unique=True)
    rest = rest[rng.permutation(rest.size)]
    public, private = rest[:PUBLIC], rest[PUBLIC:PUBLIC + n_private]
    if private.size < n_private or evaluation.size < EVALUATION:
        raise DataTooSmall(f"{name}: {len(rows)} users are too few for {PUBLIC} public, {n_private} private and "
                         f"{EVALUATION} evaluation users (with >= {2 * HELD_OUT} ratings)")
    train, test = hold_out_per_user(rows.take(evaluation).ratings, HELD_OUT, rng)
    return World(name, rows.take(public), rows.take(private), train, test, levels, rows.take(evaluation))


def blockmodel_world(n_items: int, n_private: int, seed: int) -> World:
    pop = StarSBMPopulation(n_items=n_items, user_cluster_weights=[1, 1, 1], item_cluster_weights=[1, 1, 1],
                            star_probability=[[HI if k == l else LO for l in range(3)] for k in range(3)],
                            ratings_per_user=40)
    root = np.random.SeedSequence(seed)
    catalogue = pop.catalogue(stream(root, "catalogue"))
    _, rows = pop.sample_users(PUBLIC + n_private + EVALUATION + 100, catalogue, stream(root, "users"))
    return split_world(f"star SBM ({n_items} items, 3 clusters, 40 ratings/user)", rows,
                       [1.0, 2.0, 3.0, 4.0, 5.0], n_private, stream(root, "split"))


def file_population(n_items: int, seed: int) -> StarSBMPopulation:
    """A blockmodel unlike the study's own (4 x 5 blocks, star distributions drawn at random) for the file."""
    rng = np.random.default_rng(seed)
    stars = rng.dirichlet(np.full(5, 0.6), size=(4, 5)).round(6)
    stars[..., -1] = 1.0 - stars[..., :-1].sum(axis=2)
    stars = np.clip(stars, 0.0, 1.0)
    stars /= stars.sum(axis=2, keepdims=True)
    return StarSBMPopulation(n_items=n_items, user_cluster_weights=[1, 2, 1, 1],
                             item_cluster_weights=[1, 1, 2, 1, 1], star_probability=stars.tolist(),
                             ratings_per_user=30)


def file_world(path: Path, n_private: int, seed: int, top_items: int | None = 150) -> World:
    data = load_ratings(path, top_items=top_items or None)
    values = np.unique(data.train.data)
    if values.size > 10:
        raise DataTooSmall(f"{path}: {values.size} distinct ratings; the study needs discrete levels (PMD)")
    coo = data.train.tocoo()
    rows = UserBatch.from_coo(coo.row, coo.col, coo.data, coo.data >= values.max(), coo.shape)
    return split_world(f"ratings file {path.name} ({data.n_items} items, {data.n_users} users)", rows,
                       values.tolist(), n_private, stream(np.random.SeedSequence(seed), "split"))
