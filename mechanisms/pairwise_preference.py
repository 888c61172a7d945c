"""Pairwise-Preference: epsilon-local-DP item clustering in the information-rich regime.

Banerjee, Hegde, Massoulié (seed 003), section 3.2 and Figure 1; see
docs/families/local-clustering.md. Each user is asked about one public item pair
``{i, j}`` (two distinct items uniformly at random, or two of the user's rated
items when the rated set is treated as public), computes the one-bit sketch
``S = liked[i] & liked[j]`` (both rated positively; unrated counts as 0) and
releases it with the epsilon-DP bit mechanism. The server keeps the symmetric
matrix ``A_ij = sum over users asked {i, j}`` of their (de-biased) bits,
takes the ``L`` eigenvectors of ``A`` with largest |eigenvalue|,
projects each row of ``A`` on them (``A V = V diag(lambda)``) and clusters
the ``N x L`` profiles with k-means (``k = L``).

Choice of statistic (``statistic`` parameter) [D]/[G]. Pairs are asked
uniformly, so with ``n_ij`` users asked ``{i, j}`` and ``c = 1/(1+e^eps)``,
``E[sum of released bits] = n_ij (c + tanh(eps/2) M_ij)``, ``M_ij = P(both
liked)`` block-constant over item clusters. Three matrices are offered:

* ``"sum"``: the literal ``A_ij = sum_u S_hat_u`` of released bits. Its
  expectation is block-constant too, but the random counts ``n_ij`` multiply
  the large offset ``c`` and that noise swamps the signal: in our runs (N =
  100, two item clusters, w = 50, eps = 1) it needed 2-4x (or more) users
  to reach the accuracy of the de-biased sum.
* ``"debiased_sum"`` (default): ``A_ij = sum_u S_u`` with each released bit
  de-biased, ``S = ((1+e^eps) S_hat - 1)/(e^eps - 1)`` (docs/families/local-clustering.md, bit
  release) — the paper's ``A_ij = sum_u S_hat_u`` read with the unbiased
  sketch estimate. ``E[A] = n_ij M_ij``.
* ``"debiased_mean"``: the per-pair average of de-biased bits (0 for pairs
  nobody was asked); in the same runs slightly worse than ``debiased_sum``.

The server keeps the sum of released bits and ``n_ij`` per pair (both
symmetric, zero diagonal: a pair has two distinct items) and forms ``A`` at
``publish`` time, so the statistic costs nothing during aggregation.

Privacy: one bit per user through epsilon-DP randomized response, so the
protocol is epsilon-LDP per user (replace) with uniform pairs. With
``public_rated_set`` the query is two of the user's own rated items, so it
reveals them: two users whose rated sets are disjoint never share a query,
and against a user-level replace neighbour epsilon is infinite. The claim
then says what is protected — the likes given a public rated set
(``neighbouring: replace_likes``: neighbours share the rated set and differ
in their likes) — and ``queries_read_rated`` tells the audit to draw the
query from each world's row, so a user-level claim would be flagged.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import math

import numpy as np
from annotated_types import Gt

from .base import LeakyRandomizer, LocalMechanism, ParameterError, UserBatch, WorldInfo
from .clustering import kmeans

#: seed of the k-means generator inside ``publish`` (fixed: releases are deterministic)
KMEANS_SEED = 20_140_301
STATISTICS = ("debiased_sum", "sum", "debiased_mean")


@dataclass
class PairwiseState:
    """Server state: symmetric sums of released bits and query counts per item pair."""

    world: WorldInfo
    counts: np.ndarray  # sums of released bits: (N, N) float, symmetric, zero diagonal
    pair_counts: np.ndarray  # queries per pair: (N, N) int64, symmetric
    users_seen: int = 0
    seed: int = KMEANS_SEED


def random_pairs(n_users: int, n_items: int, rng: np.random.Generator) -> np.ndarray:
    """Uniform unordered pairs of distinct items, as ``(i, j)`` with ``i < j``: shape (n_users, 2)."""
    i = rng.integers(n_items, size=n_users)
    j = rng.integers(n_items - 1, size=n_users)
    j = j + (j >= i)
    return np.sort(np.stack([i, j], axis=1), axis=1)


def rated_pairs(rated: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Two distinct uniformly random rated items per user (``i < j``): shape (n_users, 2).

    Users with fewer than two rated items get a uniformly random pair of items.
    """
    rated = np.asarray(rated, dtype=bool)
    n_users, n_items = rated.shape
    keys = rng.random((n_users, n_items)) + (~rated)  # rated items have keys in [0, 1), others [1, 2)
    two = np.argpartition(keys, 1, axis=1)[:, :2]  # the two smallest keys: a uniform pair of rated items
    pairs = np.sort(two, axis=1)
    few = rated.sum(axis=1) < 2
    if few.any():
        pairs[few] = random_pairs(int(few.sum()), n_items, rng)
    return pairs


@dataclass
class PairwisePreference(LocalMechanism, kind="pairwise_preference"):
    """Pairwise-Preference with one item pair per user and epsilon-DP bit release."""

    epsilon: Annotated[float, Gt(0)]
    public_rated_set: bool = False
    statistic: Literal["debiased_sum", "sum", "debiased_mean"] = "debiased_sum"

    def __post_init__(self) -> None:
        if self.statistic not in STATISTICS:  # the schema checks it too; this guards direct construction
            raise ParameterError("statistic", f"must be one of {', '.join(STATISTICS)}, got {self.statistic!r}")

    @property
    def queries_read_rated(self) -> bool:
        return self.public_rated_set

    @property
    def claim_neighbouring(self) -> str:
        """``replace_likes`` with a public rated set (only the likes are protected), else ``replace``."""
        return "replace_likes" if self.public_rated_set else "replace"

    def query_log_likelihood(self, queries: np.ndarray, rated: np.ndarray) -> np.ndarray | None:
        """log P(pair | rated set) under ``rated_pairs``: uniform over rated pairs (-inf off them); None if public."""
        if not self.public_rated_set:
            return None
        rated = np.asarray(rated, dtype=bool)
        r = rated.sum(axis=1)
        rows = np.arange(len(rated))
        inside = rated[rows, queries[:, 0]] & rated[rows, queries[:, 1]]
        n = rated.shape[1]
        with np.errstate(divide="ignore"):
            own = np.where(inside, -np.log(np.maximum(r * (r - 1) / 2.0, 1.0)), -np.inf)
        return np.where(r >= 2, own, -math.log(n * (n - 1) / 2.0))

    def init_state(self, world: WorldInfo) -> PairwiseState:
        n = world.n_items
        return PairwiseState(world, np.zeros((n, n)), np.zeros((n, n), dtype=np.int64))

    def make_queries(self, n_users: int, rng: np.random.Generator, state: PairwiseState,
                     rated: np.ndarray | None = None) -> np.ndarray:
        """Item pairs ``(i, j)``, ``i < j``, shape (n_users, 2).

        With ``public_rated_set`` and ``rated`` given, two of each user's
        rated items; without ``rated`` the pairs are uniform.
        """
        if self.public_rated_set and rated is not None:
            return rated_pairs(rated, rng)
        return random_pairs(n_users, state.world.n_items, rng)

    def sketch(self, users: UserBatch, queries: np.ndarray) -> np.ndarray:
        rows = np.arange(len(users))
        return (users.liked[rows, queries[:, 0]] & users.liked[rows, queries[:, 1]])[:, None]

    def query_items(self, queries: np.ndarray, n_items: int) -> np.ndarray:
        n_users = queries.shape[0]
        items = np.zeros((n_users, 1, n_items), dtype=bool)
        items[np.arange(n_users)[:, None], 0, queries] = True
        return items

    def aggregate(self, state: PairwiseState, queries: np.ndarray, messages: np.ndarray) -> PairwiseState:
        n = state.world.n_items
        i, j = queries[:, 0], queries[:, 1]
        flat = np.concatenate([i * n + j, j * n + i])
        bits = np.tile(messages[:, 0].astype(float), 2)
        np.add.at(state.counts.reshape(-1), flat, bits)  # reshape of a C-contiguous array: a view
        np.add.at(state.pair_counts.reshape(-1), flat, 1)
        state.users_seen += len(messages)
        return state

    def matrix(self, state: PairwiseState) -> np.ndarray:
        """The symmetric pair matrix ``A`` the spectral step uses (see ``statistic``)."""
        if self.statistic == "sum":
            return state.counts.copy()
        # de-biasing: sum_u S_u = ((1 + e^eps) * sum_u S_hat_u - n_ij) / (e^eps - 1)
        e = np.exp(self.epsilon)
        debiased = ((1.0 + e) * state.counts - state.pair_counts) / (e - 1.0)
        if self.statistic == "debiased_sum":
            return debiased
        return debiased / np.maximum(state.pair_counts, 1)

    def embedding(self, state: PairwiseState) -> np.ndarray:
        """Rows of ``A`` projected on its ``L`` eigenvectors of largest |eigenvalue|: (N, L)."""
        L = max(1, min(state.world.n_item_clusters, state.world.n_items))
        values, vectors = np.linalg.eigh(self.matrix(state))
        top = np.argsort(-np.abs(values), kind="stable")[:L]
        return vectors[:, top] * values[top]  # == A @ vectors[:, top]

    def publish(self, state: PairwiseState) -> np.ndarray:
        L = state.world.n_item_clusters
        if L <= 1:
            return np.zeros(state.world.n_items, dtype=np.int64)
        rng = np.random.default_rng(state.seed)
        return kmeans(self.embedding(state), L, rng)


@dataclass
class PairwisePreferenceBroken(LeakyRandomizer, PairwisePreference, kind="pairwise_preference_broken"):
    """Negative control: claims epsilon but randomizes with ``leak_factor * epsilon``."""

