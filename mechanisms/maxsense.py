"""MaxSense: epsilon-local-DP item clustering in the information-scarce regime.

Banerjee, Hegde, Massoulié (seed 003), section 5; see ALGORITHMS.md section A.
Each user gets a public sensing vector ``H_u`` (item ``i`` sensed with
probability ``theta / w``), computes ``S_u = max_{i sensed} liked[u, i]`` and
releases it with the epsilon-DP bit mechanism. The server scores items by
``c_i = sum_u H_ui * S_hat_u`` and clusters the scores with 1-D k-means.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any

import numpy as np
from annotated_types import Gt

from .base import LeakyRandomizer, LocalMechanism, UserBatch, WorldInfo
from .clustering import kmeans_1d


@dataclass
class MaxSenseState:
    """Server state: the sensing probability and the running item scores."""

    world: WorldInfo
    sensing_probability: float
    scores: np.ndarray
    users_seen: int = 0


@dataclass
class MaxSense(LocalMechanism):
    """MaxSense with one sensing query per user and epsilon-DP bit release."""

    epsilon: Annotated[float, Gt(0)]
    theta: Annotated[float, Gt(0)] = 1.0
    name: str = field(default="maxsense", init=False, repr=False)

    def init_state(self, world: WorldInfo) -> MaxSenseState:
        p = min(1.0, self.theta / world.ratings_per_user)
        return MaxSenseState(world, p, np.zeros(world.n_items))

    def make_queries(self, n_users: int, rng: np.random.Generator, state: MaxSenseState,
                     rated: np.ndarray | None = None) -> np.ndarray:
        return rng.random((n_users, state.world.n_items), dtype=np.float32) < state.sensing_probability

    def sketch(self, users: UserBatch, queries: np.ndarray) -> np.ndarray:
        return np.any(users.liked & queries, axis=1)[:, None]

    def query_items(self, queries: np.ndarray, n_items: int) -> np.ndarray:
        return queries[:, None, :]

    def aggregate(self, state: MaxSenseState, queries: np.ndarray, messages: np.ndarray) -> MaxSenseState:
        state.scores += messages[:, 0].astype(float) @ queries
        state.users_seen += len(messages)
        return state

    def estimate(self, state: MaxSenseState) -> np.ndarray:
        return kmeans_1d(state.scores, state.world.n_item_clusters)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "epsilon": self.epsilon, "theta": self.theta,
                "randomizer_epsilon": self.randomizer_epsilon}


@dataclass
class MaxSenseBroken(LeakyRandomizer, MaxSense):
    """Negative control: claims epsilon but randomizes with ``leak_factor * epsilon``."""

    name: str = field(default="maxsense_broken", init=False, repr=False)
