"""Multi-MaxSense: MaxSense with ``Q`` disjoint sensing sets per user, epsilon/Q each.

Banerjee, Hegde, Massoulié (seed 003), section 5, Figure 3 and Theorem 5.3;
see docs/families/local-clustering.md. Each user gets a uniformly random partition of
the ``N`` items into blocks of ``N * theta / w`` items (``w / theta`` blocks);
``Q`` of the blocks become the user's (disjoint, public) sensing sets. The
user computes ``Q`` MaxSense sketches ``S_uq = max_{i in block q} liked[u, i]``
and releases each with the bit mechanism at ``epsilon / Q``, so by basic
composition the user's messages are epsilon-LDP. Every item is in a given
sensing set with probability ``theta / w`` (as in MaxSense). The server
scores items by ``c_i = sum_u sum_q H_uqi * S_hat_uq`` and clusters the
scores with exact 1-D k-means (``k = L``).

Details [D]/[G]:

* ``Q = sketches``, default ``ceil(epsilon)`` [D] (fixes MaxSense's
  saturation at large epsilon).
* Block size ``= clip(round(N * theta / w), 1, N)`` items [G]: the paper's
  ``N theta / w`` need not be an integer. The exact per-item sensing
  probability per sketch is ``block_size / N``; the number of blocks is
  ``N // block_size`` (a remainder of fewer than ``block_size`` items is
  never sensed together as a block). ``Q`` larger than the number of blocks
  raises ``ParameterError`` when the world is known (``init_state``).
* Queries are a boolean array ``(n_users, Q, N)``: one uniform permutation per
  user (argsort of uniform keys), block ``q`` = items ranked
  ``q * block_size .. (q + 1) * block_size - 1``.
* ``score: centred`` [G] subtracts the mean released bit from every bit
  before summing (see ``maxsense``): the raw sum's noise from how many users
  sensed each item is ``theory.score_noise_factor`` at share ``Q theta / w``,
  which makes the raw score's epsilon-slope steeper than composition alone
  predicts at small ``w`` (``theory.maxsense_users``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from annotated_types import Ge, Gt

from .base import LocalMechanism, ParameterError, UserBatch, WorldInfo
from .clustering import kmeans_1d
from .maxsense import centred_scores, sensed_sum


@dataclass
class MultiMaxSenseState:
    """Server state: the block size and the running item scores."""

    world: WorldInfo
    block_size: int
    scores: np.ndarray
    users_seen: int = 0  # answers folded in (the engine's releases count distinct users)
    exposures: np.ndarray | None = None  # sum over answers and sketches of H_uqi
    bits: float = 0.0  # sum of released bits
    released: int = 0  # released bits (answers x Q)

    @property
    def sensing_probability(self) -> float:
        """P(item in a given sensing set) = block_size / N."""
        return self.block_size / self.world.n_items


def block_size(n_items: int, ratings_per_user: int, theta: float) -> int:
    """Items per block: ``round(N * theta / w)`` clipped to ``[1, N]``."""
    return int(min(n_items, max(1, round(n_items * theta / ratings_per_user))))


def partition_queries(n_users: int, n_items: int, size: int, q: int, rng: np.random.Generator) -> np.ndarray:
    """``q`` disjoint uniformly random blocks of ``size`` items per user: bool (n_users, q, n_items)."""
    order = np.argsort(rng.random((n_users, n_items)), axis=1)[:, : q * size]
    queries = np.zeros((n_users, q, n_items), dtype=bool)
    users = np.arange(n_users)[:, None, None]
    sets = np.arange(q)[None, :, None]
    queries[users, sets, order.reshape(n_users, q, size)] = True
    return queries


@dataclass
class MultiMaxSense(LocalMechanism, kind="multi_maxsense"):
    """Multi-MaxSense: ``Q`` disjoint MaxSense sketches per user, each released at epsilon/Q."""

    epsilon: Annotated[float, Gt(0)]
    theta: Annotated[float, Gt(0)] = 1.0
    sketches: Annotated[int, Ge(1)] | None = None
    score: Literal["raw", "centred"] = "raw"

    def __post_init__(self) -> None:
        if self.sketches is not None and self.sketches < 1:  # also checked by the schema
            raise ParameterError("sketches", "must be >= 1")

    @property
    def n_sketches(self) -> int:
        """``Q``: the ``sketches`` parameter, or ``ceil(epsilon)`` when unset."""
        return int(self.sketches) if self.sketches is not None else max(1, math.ceil(self.epsilon))

    @property
    def bit_epsilon(self) -> float:
        """The per-bit budget the protocol publishes: epsilon / Q."""
        return self.epsilon / self.n_sketches

    @property
    def bits_per_answer(self) -> int:
        return self.n_sketches

    def init_state(self, world: WorldInfo) -> MultiMaxSenseState:
        size = block_size(world.n_items, world.ratings_per_user, self.theta)
        blocks = world.n_items // size
        if self.n_sketches > blocks:
            raise ParameterError("sketches", f"Q = {self.n_sketches} sensing sets need as many disjoint blocks, "
                                 f"but N = {world.n_items} items make only {blocks} blocks of {size} "
                                 f"(theta * N / w with theta = {self.theta:g}, w = {world.ratings_per_user})")
        return MultiMaxSenseState(world, size, np.zeros(world.n_items), exposures=np.zeros(world.n_items))

    def make_queries(self, n_users: int, rng: np.random.Generator, state: MultiMaxSenseState,
                     rated: np.ndarray | None = None) -> np.ndarray:
        return partition_queries(n_users, state.world.n_items, state.block_size, self.n_sketches, rng)

    def sketch(self, users: UserBatch, queries: np.ndarray) -> np.ndarray:
        return np.any(users.liked[:, None, :] & queries, axis=2)

    def query_items(self, queries: np.ndarray, n_items: int) -> np.ndarray:
        return queries

    def aggregate(self, state: MultiMaxSenseState, queries: np.ndarray, messages: np.ndarray) -> MultiMaxSenseState:
        n = state.world.n_items
        bits = messages.reshape(-1).astype(float)
        state.scores += sensed_sum(bits, queries.reshape(-1, n))
        state.exposures += queries.reshape(-1, n).sum(axis=0)
        state.bits += float(bits.sum())
        state.released += bits.size
        state.users_seen += len(messages)
        return state

    def item_scores(self, state: MultiMaxSenseState) -> np.ndarray:
        """The scores clustered: raw sums, or centred on the mean released bit (``score``)."""
        return centred_scores(state.scores, state.exposures, state.bits, state.released, self.score)

    def publish(self, state: MultiMaxSenseState) -> np.ndarray:
        return kmeans_1d(self.item_scores(state), state.world.n_item_clusters)


@dataclass
class MultiMaxSenseBroken(MultiMaxSense, kind="multi_maxsense_broken"):
    """Negative control: spends the full epsilon on every one of the Q sketches (Q * epsilon in all).

    The published randomizer (``message_log_likelihood``) and the claim still
    say epsilon/Q per bit and epsilon per user. With ``Q = 1`` this twin would
    equal the correct mechanism, so it requires ``Q >= 2`` (set ``sketches``
    or use epsilon > 1).
    """
    negative_control = True
    test_scenario = {**MultiMaxSense.test_scenario, "mechanism": {"epsilon": 2.0}}  # Q = 2 sketches


    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n_sketches < 2:
            raise ParameterError("sketches", f"the broken twin leaks only with Q >= 2 sketches; Q = "
                                 f"{self.n_sketches} (epsilon = {self.epsilon:g}); set sketches >= 2")

    @property
    def randomizer_epsilon(self) -> float:
        return self.epsilon
