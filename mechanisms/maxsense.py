"""MaxSense: epsilon-local-DP item clustering in the information-scarce regime.

Banerjee, Hegde, Massoulié (seed 003), section 5; see docs/families/local-clustering.md.
Each user gets a public sensing vector ``H_u`` (item ``i`` sensed with
probability ``theta / w``), computes ``S_u = max_{i sensed} liked[u, i]`` and
releases it with the epsilon-DP bit mechanism. The server scores items by
``c_i = sum_u H_ui * S_hat_u`` and clusters the scores with 1-D k-means.

``score: centred`` [G] scores ``sum_u H_ui (S_hat_u - mean released bit)``
instead: the same expected gaps without the noise of how many users sensed
each item (``theory.score_noise_factor``: the raw score's per-user variance
is ``1 + m(1 - theta/w)/(1 - m)`` times the centred one's, ``m`` the mean
released bit), so it needs fewer users. The paper's raw sum is the default.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from annotated_types import Gt

from .base import LeakyRandomizer, LocalMechanism, UserBatch, WorldInfo
from .clustering import kmeans_1d
from .uniform_draws import float32_uniform_below


@dataclass
class MaxSenseState:
    """Server state: the sensing probability and the running item scores."""

    world: WorldInfo
    sensing_probability: float
    scores: np.ndarray
    users_seen: int = 0  # answers folded in (the engine's releases count distinct users)
    exposures: np.ndarray | None = None  # sum_u H_ui: how many answers sensed each item
    bits: float = 0.0  # sum of released bits


@dataclass
class MaxSense(LocalMechanism, kind="maxsense"):
    """MaxSense with one sensing query per user and epsilon-DP bit release."""

    epsilon: Annotated[float, Gt(0)]
    theta: Annotated[float, Gt(0)] = 1.0
    score: Literal["raw", "centred"] = "raw"

    def init_state(self, world: WorldInfo) -> MaxSenseState:
        p = min(1.0, self.theta / world.ratings_per_user)
        return MaxSenseState(world, p, np.zeros(world.n_items), exposures=np.zeros(world.n_items))

    def make_queries(self, n_users: int, rng: np.random.Generator, state: MaxSenseState,
                     rated: np.ndarray | None = None) -> np.ndarray:
        return float32_uniform_below(rng, (n_users, state.world.n_items), state.sensing_probability)

    def sketch(self, users: UserBatch, queries: np.ndarray) -> np.ndarray:
        return users.likes_any(queries)[:, None]

    def query_items(self, queries: np.ndarray, n_items: int) -> np.ndarray:
        return queries[:, None, :]

    def aggregate(self, state: MaxSenseState, queries: np.ndarray, messages: np.ndarray) -> MaxSenseState:
        bits = messages[:, 0].astype(float)
        state.scores += sensed_sum(bits, queries)
        state.exposures += column_counts(queries)
        state.bits += float(bits.sum())
        state.users_seen += len(messages)
        return state

    def item_scores(self, state: MaxSenseState) -> np.ndarray:
        """The scores clustered: raw sums, or centred on the mean released bit (``score``)."""
        return centred_scores(state.scores, state.exposures, state.bits, state.users_seen, self.score)

    def publish(self, state: MaxSenseState) -> np.ndarray:
        return kmeans_1d(self.item_scores(state), state.world.n_item_clusters)


def sensed_sum(bits: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``bits @ queries`` for 0/1 ``bits``: on boolean queries a count of the sent rows (the same integers,
    thirty times faster than casting the queries to floats for the product)."""
    if queries.dtype != bool:
        return bits @ queries
    return column_counts(queries[bits.astype(bool)]).astype(float)


def column_counts(mask: np.ndarray) -> np.ndarray:
    """How many rows of a boolean ``mask`` are set in each column: its bytes summed into int32 (twice the pace
    of ``mask.sum(axis=0)``, which widens every entry to int64)."""
    return np.add.reduce(mask.view(np.uint8), axis=0, dtype=np.int32)


def centred_scores(scores: np.ndarray, exposures: np.ndarray, bits: float, released: int, score: str) -> np.ndarray:
    """``scores`` as they are (``raw``), or minus ``exposures`` times the mean of the ``released`` bits
    (``centred``)."""
    if score == "raw" or released == 0:
        return scores.copy()
    return scores - exposures * (bits / released)


@dataclass
class MaxSenseBroken(LeakyRandomizer, MaxSense, kind="maxsense_broken"):
    """Negative control: claims epsilon but randomizes with ``leak_factor * epsilon``."""

