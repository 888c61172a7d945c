"""Neighbouring worlds for an audit: two versions of one target user."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from mechanisms import LocalMechanism, UserBatch, WorldInfo

from .population import Catalogue
from .transcript import View


@dataclass(frozen=True)
class TargetPair:
    """A target user in two neighbouring worlds (user-level, replace).

    ``rows`` holds the target's private row in world 0 and world 1 (a batch of
    two); the target answers ``len(queries)`` public queries, fixed before the
    trials because queries are public and drawn independently of private data;
    ``sketches[b]`` are its true sketch bits in world ``b`` (all queries
    concatenated).
    """

    rows: UserBatch
    queries: tuple[Any, ...]
    sketches: np.ndarray  # shape (2, n_bits)

    @property
    def differing_bits(self) -> int:
        return int(np.count_nonzero(self.sketches[0] != self.sketches[1]))


def target_sketches(mechanism: LocalMechanism, rows: UserBatch, queries: tuple[Any, ...]) -> np.ndarray:
    """True sketch bits of each row under every query, concatenated: (n_rows, n_bits)."""
    parts = [mechanism.sketch(rows, mechanism.take_queries(q, np.zeros(len(rows), dtype=np.int64)))
             for q in queries]
    return np.concatenate(parts, axis=1)


def local_target_pair(population, catalogue: Catalogue, mechanism: LocalMechanism, queries_per_user: int,
                      rng: np.random.Generator, candidates: int = 64) -> TargetPair:
    """Pick a target whose sketches differ most between its two worlds.

    Each candidate is a fresh user with the population's rated set; world 0
    dislikes every rated item, world 1 likes every rated item. Among
    ``candidates`` draws of (user, queries) the one with the most differing
    sketch bits wins (ties: the first), so the audit tests a pair the claim
    must cover and the attack can tell apart.
    """
    world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
    state = mechanism.init_state(world)
    _, users = population.sample_users(candidates, catalogue, rng)
    queries = [mechanism.make_queries(candidates, rng, state, users.rated) for _ in range(queries_per_user)]
    none = UserBatch(users.rated, np.zeros_like(users.liked))
    every = UserBatch(users.rated, users.rated.copy())
    s0 = np.concatenate([mechanism.sketch(none, q) for q in queries], axis=1)
    s1 = np.concatenate([mechanism.sketch(every, q) for q in queries], axis=1)
    best = int(np.argmax((s0 != s1).sum(axis=1)))
    pick = np.array([best])
    rows = UserBatch(np.concatenate([users.rated[pick]] * 2), np.concatenate([none.liked[pick], every.liked[pick]]))
    chosen = tuple(mechanism.take_queries(q, pick) for q in queries)
    return TargetPair(rows, chosen, np.stack([s0[best], s1[best]]))


def runs_view(mechanism: LocalMechanism, pair: TargetPair, worlds: np.ndarray, rng: np.random.Generator) -> View:
    """The target's released messages over independent runs, run ``t`` in world ``worlds[t]``.

    Under a local protocol the target's messages depend only on its own row,
    its public queries and the randomizer's coins, so a run is exactly one
    release of its true sketches; other users' messages are independent of
    the target's world and carry no information about it. (A one-run audit's
    canaries are such runs with random worlds.)
    """
    sketches = pair.sketches[np.asarray(worlds, dtype=np.int64)]
    return View("messages", messages=mechanism.release(sketches, rng), queries=pair.queries)


def target_messages_view(mechanism: LocalMechanism, pair: TargetPair, world: int, trials: int,
                         rng: np.random.Generator) -> View:
    """``trials`` independent runs of the target, all in ``world``."""
    return runs_view(mechanism, pair, np.full(trials, world), rng)
