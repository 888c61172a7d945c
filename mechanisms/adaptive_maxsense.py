"""Adaptive MaxSense: MaxSense whose server focuses sensing on items still uncertain.

An adaptive query protocol in the sense of Banerjee, Hegde, Massoulié (seed
003), section 6 (adaptive lower bound ``U = Omega(N log N)``,
docs/families/local-clustering.md); the paper gives no adaptive algorithm, so the scheme below is ours
[G], built on MaxSense (section 5):

* Each user gets a public sensing vector ``H_u`` with ``H_ui ~ Bernoulli(p_i)``,
  sketches ``S_u = max_{i sensed} liked[u, i]`` and releases it with the
  epsilon-DP bit mechanism (exactly MaxSense's user side).
* For the first ``warmup_users`` answers ``p_i = theta / w`` for every item.
  Afterwards, every ``update_every`` answers, the server recomputes ``p``
  from the released bits so far: normalised scores ``x_i`` (below), exact
  1-D k-means (``k = L``) on them, decision boundaries = midpoints between
  adjacent cluster centres, ``z_i`` = distance of ``x_i`` to the nearest
  boundary in units of its standard error, weight
  ``1 + (focus - 1) exp(-z_i^2 / 2)`` (items near a boundary are sensed up to
  ``focus`` times as often), and ``p_i`` proportional to the weights with mean
  ``theta / w`` and capped at ``max_probability`` (water-filling keeps the mean). The expected
  number of items a user senses stays ``N theta / w``.
* Scores. Items are sensed unequally, so raw sums ``sum_u H_ui S_hat_u`` are
  not comparable. Between two updates ("a phase") the sensing law is fixed.
  Within a phase with ``n`` users, ``n_i`` of whom sensed item ``i``, the
  centred sum ``c_i = sum_u H_ui (S_hat_u - mean_phase)`` equals
  ``n_i (1 - n_i/n) (mean of S_hat over users who sensed i - mean over those
  who did not)``: centring alone would shrink the signal of often-sensed items
  by ``1 - p_i`` (the fault of the first version: focused items looked *less*
  separated). The server therefore keeps ``c_i`` and the weights
  ``e_i = n_i (1 - n_i/n)`` per phase and estimates
  ``x_i = sum_phases c_i / (sum_phases e_i * tanh(eps/2))``: the
  inverse-variance weighted mean, over phases, of the sensed-minus-unsensed
  difference of de-biased bits. ``x_i`` estimates
  ``P(S = 1 | i sensed) - P(S = 1 | i not sensed)``, which depends on item
  ``i``'s cluster only, up to a relative ``O(p_i w / N)`` from the sensing law
  of the other items. Its standard error is
  ``sd(S_hat) / (sqrt(sum e_i) tanh(eps/2))``. The published clustering is 1-D
  k-means on ``x`` (never-sensed items get the median).
* ``p_i`` is capped at ``max_probability`` (default 1/2): the unsensed group
  of a phase must stay large, since ``e_i`` vanishes as ``p_i -> 1``.

Privacy: each user releases one bit through epsilon-DP randomized response.
The user's query depends only on *other* users' released bits (public,
post-processing), so the protocol is epsilon-LDP per user.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np
from annotated_types import Ge, Gt, Le

from .base import LeakyRandomizer, LocalMechanism, UserBatch, WorldInfo
from .clustering import kmeans_1d
from .maxsense import sensed_sum


@dataclass
class AdaptiveMaxSenseState:
    """Server state: the current sensing law, the phase-centred score sums and their weights."""

    world: WorldInfo
    base_probability: float  # theta / w, capped at 1
    sensing_probability: np.ndarray  # p_i of the current phase, shape (N,)
    centred: np.ndarray  # sum over closed phases of H_ui (S_hat_u - phase mean)
    exposures: np.ndarray  # n_i = sum_u H_ui (all phases)
    weight: np.ndarray  # sum over closed phases of n_i (1 - n_i / n): the centred sums' weights
    phase_scores: np.ndarray  # sum_u H_ui S_hat_u in the current phase
    phase_exposures: np.ndarray  # sum_u H_ui in the current phase
    phase_bits: float = 0.0  # sum of released bits in the current phase
    phase_users: int = 0
    bits: float = 0.0  # sum of all released bits
    users_seen: int = 0
    updates: int = 0  # how many times the sensing law was recomputed

    @property
    def scores(self) -> np.ndarray:
        """Centred score sums including the open phase: ``sum_u H_ui (S_hat_u - phase mean)``."""
        if self.phase_users == 0:
            return self.centred.copy()
        return self.centred + self.phase_scores - self.phase_exposures * (self.phase_bits / self.phase_users)

    @property
    def weights(self) -> np.ndarray:
        """The centred sums' weights including the open phase: ``sum_phases n_i (1 - n_i / n)``."""
        if self.phase_users == 0:
            return self.weight.copy()
        return self.weight + self.phase_exposures * (1.0 - self.phase_exposures / self.phase_users)


def waterfill(weights: np.ndarray, mean: float, cap: float = 1.0) -> np.ndarray:
    """Probabilities proportional to ``weights`` with the given mean, capped at ``cap`` (the excess is spread).

    ``weights`` must be positive. Loops at most once per distinct capped set
    (a handful of numpy passes, never per user).
    """
    weights = np.asarray(weights, dtype=float)
    if mean >= cap:
        return np.full_like(weights, min(mean, 1.0))
    n = weights.size
    target = mean * n
    capped = np.zeros(n, dtype=bool)
    while True:
        free = ~capped
        scale = (target - cap * capped.sum()) / weights[free].sum()
        p = np.where(capped, cap, scale * weights)
        over = free & (p > cap)
        if not over.any():
            return np.minimum(p, cap)
        capped |= over


@dataclass
class AdaptiveMaxSense(LocalMechanism, kind="adaptive_maxsense"):
    """MaxSense with an adaptive server: after a warm-up, uncertain items are sensed more often."""
    test_scenario = {**LocalMechanism.test_scenario,
                     "mechanism": {"epsilon": 1.0, "warmup_users": 10, "update_every": 10}}

    epsilon: Annotated[float, Gt(0)]
    theta: Annotated[float, Gt(0)] = 1.0
    warmup_users: Annotated[int, Ge(0)] = 1000
    focus: Annotated[float, Ge(1)] = 4.0
    update_every: Annotated[int, Ge(1)] = 1000
    max_probability: Annotated[float, Gt(0), Le(1)] = 0.5

    def init_state(self, world: WorldInfo) -> AdaptiveMaxSenseState:
        p = min(1.0, self.theta / world.ratings_per_user)
        n = world.n_items
        return AdaptiveMaxSenseState(world, p, np.full(n, p), np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n),
                                     np.zeros(n))

    def make_queries(self, n_users: int, rng: np.random.Generator, state: AdaptiveMaxSenseState,
                     rated: np.ndarray | None = None) -> np.ndarray:
        return rng.random((n_users, state.world.n_items)) < state.sensing_probability

    def sketch(self, users: UserBatch, queries: np.ndarray) -> np.ndarray:
        return users.likes_any(queries)[:, None]

    def query_items(self, queries: np.ndarray, n_items: int) -> np.ndarray:
        return queries[:, None, :]

    def aggregate(self, state: AdaptiveMaxSenseState, queries: np.ndarray,
                  messages: np.ndarray) -> AdaptiveMaxSenseState:
        bits = messages[:, 0].astype(float)
        state.phase_scores += sensed_sum(bits, queries)
        exposed = queries.sum(axis=0)
        state.phase_exposures += exposed
        state.exposures += exposed
        state.phase_bits += float(bits.sum())
        state.bits += float(bits.sum())
        state.phase_users += len(bits)
        state.users_seen += len(bits)
        if state.users_seen >= self.warmup_users and (state.updates == 0 or state.phase_users >= self.update_every):
            self.update_sensing(state)
        return state

    def normalised_scores(self, state: AdaptiveMaxSenseState) -> tuple[np.ndarray, np.ndarray]:
        """De-biased sensed-minus-unsensed scores ``x`` and their standard errors (nan/inf where unmeasured).

        An item is unmeasured while its weight is 0: never sensed, or sensed by
        every user of every phase so far.
        """
        t = np.tanh(self.epsilon / 2.0)
        e = state.weights
        measured = e > 1e-9
        safe = np.where(measured, e, 1.0)
        x = np.where(measured, state.scores / safe / t, np.nan)
        m = state.bits / state.users_seen if state.users_seen else 0.5
        sd = max(np.sqrt(m * (1.0 - m)), 1e-12)
        se = np.where(measured, sd / np.sqrt(safe) / t, np.inf)
        return x, se

    def update_sensing(self, state: AdaptiveMaxSenseState) -> None:
        """Close the phase and recompute the sensing law from the scores so far."""
        state.centred = state.scores
        state.weight = state.weights
        state.phase_scores[:] = 0.0
        state.phase_exposures[:] = 0.0
        state.phase_bits, state.phase_users = 0.0, 0
        state.updates += 1
        x, se = self.normalised_scores(state)
        seen = np.isfinite(x)
        L = state.world.n_item_clusters
        if L <= 1 or self.focus == 1.0 or seen.sum() <= L:
            return
        labels = kmeans_1d(x[seen], L)
        sums = np.bincount(labels, weights=x[seen], minlength=L)
        centres = np.sort(sums / np.maximum(np.bincount(labels, minlength=L), 1))
        boundaries = (centres[1:] + centres[:-1]) / 2.0
        z = np.zeros(x.size)  # never-sensed items count as maximally uncertain
        z[seen] = np.min(np.abs(x[seen, None] - boundaries[None, :]), axis=1) / se[seen]
        weights = 1.0 + (self.focus - 1.0) * np.exp(-0.5 * z * z)
        state.sensing_probability = waterfill(weights, state.base_probability, self.max_probability)

    def publish(self, state: AdaptiveMaxSenseState) -> np.ndarray:
        x, _ = self.normalised_scores(state)
        seen = np.isfinite(x)
        x = np.where(seen, x, np.median(x[seen]) if seen.any() else 0.0)
        return kmeans_1d(x, state.world.n_item_clusters)


@dataclass
class AdaptiveMaxSenseBroken(LeakyRandomizer, AdaptiveMaxSense, kind="adaptive_maxsense_broken"):
    """Negative control: claims epsilon but randomizes with ``leak_factor * epsilon``."""

