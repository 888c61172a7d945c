"""The neighbour-policy contract and the policies of local replay (likes, users, ratings replaced).

Re-exported by :mod:`recaudit.audits.designs.pairs`, which holds the protocol-running pairs and the registries.
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from recaudit.core.errors import BadInput
from recaudit.mechanisms import LocalMechanism, UserBatch, WorldInfo
from recaudit.simulator.population import Catalogue
from recaudit.simulator.targets import TargetPair, sketches_under

__all__ = ["LikesReplace", "NeighbourPolicy", "PairError", "RatingReplace", "UserReplace"]


class PairError(BadInput, ValueError):
    """The neighbouring pair cannot show the claim (its worlds look the same to the mechanism)."""


def _rated_for(read: np.ndarray, rated: np.ndarray, w: int) -> np.ndarray:
    """A rated set of ``w`` items covering as many read items as it can, one per sketch bit in turn.

    ``read`` is (n_bits, N): the items each bit reads. Bits take turns
    (so Multi-MaxSense gets one liked item per block before any block gets
    two); the remaining slots keep the user's own rated items, then any.
    """
    n_bits, n_items = read.shape
    chosen: list[int] = []
    pools = [list(np.flatnonzero(read[b])) for b in range(n_bits)]
    while len(chosen) < w and any(pools):
        for pool in pools:
            while pool and pool[0] in chosen:
                pool.pop(0)
            if pool and len(chosen) < w:
                chosen.append(int(pool.pop(0)))
    for item in [*np.flatnonzero(rated), *np.flatnonzero(~rated)]:
        if len(chosen) >= w:
            break
        if int(item) not in chosen:
            chosen.append(int(item))
    out = np.zeros(n_items, dtype=bool)
    out[chosen] = True
    return out


class NeighbourPolicy(ABC):
    """Builds neighbouring worlds for one kind of claim."""

    unit: str
    neighbouring: str

    @abstractmethod
    def worst_case_pair(self, mechanism: LocalMechanism, population, catalogue: Catalogue, answers: int,
                        rng: np.random.Generator) -> TargetPair:
        """A target and its public queries, with the two rows that differ most under them."""

    @abstractmethod
    def rows_for_runs(self, population, catalogue: Catalogue, n: int, rng: np.random.Generator) -> TargetPair:
        """``n`` audited users' rows in both worlds, fixed before any run."""

    def _draw_target(self, mechanism, population, catalogue, answers, rng):
        world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
        state = mechanism.init_state(world)
        _, user = population.sample_users(1, catalogue, rng)
        queries = tuple(mechanism.make_queries(1, rng, state, user.rated) for _ in range(answers))
        read = np.concatenate([mechanism.query_items(q, catalogue.n_items)[0] for q in queries], axis=0)
        return user, queries, read, state

    @staticmethod
    def _checked(mechanism, pair: TargetPair, what: str) -> TargetPair:
        sketches = np.concatenate([sketches_under(mechanism, pair.rows0, pair.queries),
                                   sketches_under(mechanism, pair.rows1, pair.queries)])
        pair = TargetPair(pair.rows0, pair.rows1, pair.queries, sketches, pair.query_state)
        if pair.differing_bits == 0:
            raise PairError(f"the {what} pair built for the target's queries differs in none of its "
                            f"{sketches.shape[1]} sketch bits: this audit could show nothing about the claim")
        return pair


def _other_rated(rated: np.ndarray, w: int, rng: np.random.Generator) -> np.ndarray:
    """Per row, ``w`` random items avoiding ``rated`` as far as the catalogue allows (then some of ``rated``)."""
    rated = np.atleast_2d(rated)
    keys = rng.random(rated.shape) + rated  # unrated items first, in random order
    out = np.zeros_like(rated)
    out[np.arange(len(rated))[:, None], np.argsort(keys, axis=1)[:, :w]] = True
    return out


class LikesReplace(NeighbourPolicy):
    """User-level, likes only: the rated set is public and shared, every like of the target changes."""

    unit, neighbouring = "user", "replace_likes"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        user, queries, read, state = self._draw_target(mechanism, population, catalogue, answers, rng)
        rated = _rated_for(read, user.rated[0], catalogue.ratings_per_user)[None, :]
        pair = TargetPair(UserBatch.from_masks(rated, np.zeros_like(rated)), UserBatch.from_masks(rated, rated.copy()),
                          queries,
                          query_state=state)
        return self._checked(mechanism, pair, "user-level")

    def rows_for_runs(self, population, catalogue, n, rng):
        _, users = population.sample_users(n, catalogue, rng)
        return TargetPair(UserBatch.from_masks(users.rated, np.zeros_like(users.liked)),
                          UserBatch.from_masks(users.rated, users.rated))


class UserReplace(LikesReplace):
    """User-level, replace-one: the target's whole row changes (its rated set and its likes).

    World 1 likes every item it rates, world 0 none. When the queries read
    the rated set, world 0 also rates other items (disjoint where the
    catalogue allows): the query then tells the worlds apart, as it should
    under this claim. Otherwise the rated sets may as well agree (sketches
    read likes only), which keeps the worst case for the drawn queries.
    """

    unit, neighbouring = "user", "replace"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        pair = super().worst_case_pair(mechanism, population, catalogue, answers, rng)
        if not getattr(mechanism, "queries_read_rated", False):
            return pair
        rated0 = _other_rated(pair.rows1.rated, catalogue.ratings_per_user, rng)
        pair = TargetPair(UserBatch.from_masks(rated0, np.zeros_like(rated0)), pair.rows1, pair.queries,
                          query_state=pair.query_state)
        return self._checked(mechanism, pair, "user-level")

    def rows_for_runs(self, population, catalogue, n, rng):
        pair = super().rows_for_runs(population, catalogue, n, rng)
        # world 0 rates other items (a separate stream: the rows above are unchanged by it)
        other = np.random.default_rng(rng.bit_generator.seed_seq.spawn(1)[0])
        rated0 = _other_rated(pair.rows1.rated, catalogue.ratings_per_user, other)
        return TargetPair(UserBatch.from_masks(rated0, np.zeros_like(rated0)), pair.rows1)


class RatingReplace(NeighbourPolicy):
    """Rating-level, replace-one: one rating of the target changes (a like becomes a dislike)."""

    unit, neighbouring = "rating", "replace"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        user, queries, read, state = self._draw_target(mechanism, population, catalogue, answers, rng)
        rated = _rated_for(read, user.rated[0], catalogue.ratings_per_user)
        read_rated = read.any(axis=0) & rated
        item = int(np.flatnonzero(read_rated)[0]) if read_rated.any() else int(np.flatnonzero(rated)[0])
        alone = np.zeros_like(rated)
        alone[item] = True
        # world 1 likes ``item`` and world 0 does not; the other likes either stay off (a sketch that is a
        # max needs the item alone) or stay on (a sketch that needs every read item liked): keep the better
        candidates = []
        for liked1 in (alone, read_rated | alone):
            liked0 = liked1 & ~alone
            pair = TargetPair(UserBatch.from_masks(rated[None], liked0[None]),
                              UserBatch.from_masks(rated[None], liked1[None]), queries, query_state=state)
            candidates.append((np.count_nonzero(sketches_under(mechanism, pair.rows0, queries)
                                                != sketches_under(mechanism, pair.rows1, queries)), pair))
        return self._checked(mechanism, max(candidates, key=lambda c: c[0])[1], "rating-level")

    def rows_for_runs(self, population, catalogue, n, rng):
        _, users = population.sample_users(n, catalogue, rng)
        first = np.argmax(users.rated, axis=1)
        liked1 = users.rated.copy()
        liked0 = users.rated.copy()
        liked0[np.arange(n), first] = False
        return TargetPair(UserBatch.from_masks(users.rated, liked0), UserBatch.from_masks(users.rated, liked1))
