"""Continual release of a noisy covariance on the churn clock (issue 9; docs/families/continual-release.md).

Each user sends its ratings once, clipped to L2 norm ``row_bound`` (L), at the
first query tick it is present. The server's stream is the per-tick increment
``X_t = Σ x_i x_iᵀ`` over the users who answered at tick ``t``, and after every
tick it re-publishes the running sum ``S_t = Σ_{s≤t} X_s``: the (unnormalised)
covariance ``AᵀA`` of every user seen so far. Users who left stay in the sum —
the running-sum setting the binary-tree mechanism is built for (continual
counting with non-negative increments); forgetting them would make a departure
a second, negative contribution and double what each user touches.

Neighbouring: replace-one of a user's whole presence — the target's row
changes, its arrival tick (public, as in Calandrino et al.'s setting) does not.
Its increment ``x xᵀ`` moves to ``y yᵀ``: at most ``√2·L²`` in Frobenius norm,
so in the upper triangle the (symmetric) Gaussian noise covers.

Two servers share :class:`ContinualCovariance`:

* :class:`NaiveContinualCovariance` adds fresh noise to every release,
  calibrated for ONE release, and claims (ε, δ) for the whole stream — it
  spends a budget per release without composing: the broken server;
* :class:`TreeContinualCovariance` is the binary-tree (hierarchical) mechanism
  for running sums (Dwork, Naor, Pitassi, Rothblum 2010; Chan, Shi, Song 2011):
  the node of level ``k`` and index ``j`` holds ``Σ X_t`` over ticks
  ``(j·2^k, (j+1)·2^k]`` plus one draw of noise made when it completes; tick
  ``t``'s increment enters the ``⌈log2 T⌉ + 1`` nodes above it; the release at
  ``t`` sums the completed nodes of ``t``'s dyadic decomposition (one per set
  bit of ``t``). The claim is the accountant's composition of those
  ``⌈log2 T⌉ + 1`` Gaussian releases per answer.
"""
from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge, Gt, Lt

from .accounting import Composition, GaussianRelease, gaussian_sigma_for
from .base import ParameterError, Mechanism, RoundCost, UserBatch, WorldInfo
from .matrix_completion import clip_rows, gram, symmetric_gaussian, upper


def tree_levels(ticks: int) -> int:
    """Levels of the binary tree over ``ticks`` leaves: ``⌈log2 T⌉ + 1`` (the nodes above one leaf)."""
    return (int(ticks) - 1).bit_length() + 1


def nodes_touched(tick: int, ticks: int) -> list[tuple[int, int]]:
    """(level, index) of every node an increment at ``tick`` (1-based) enters."""
    return [(level, (tick - 1) >> level) for level in range(tree_levels(ticks))]


def nodes_summed(tick: int) -> list[tuple[int, int]]:
    """(level, index) of the completed nodes whose sum is the running total at ``tick``: one per set bit."""
    return [(level, (tick >> level) - 1) for level in range(tick.bit_length()) if (tick >> level) & 1]


@dataclass
class CovarianceState:
    """The server: this tick's increment, the tree (or running sum), and the current published matrix."""

    n_items: int
    increment: np.ndarray
    release: np.ndarray
    tick: int = 0
    users: int = 0  # users whose rows are in the sum
    running: np.ndarray | None = None  # naive: the exact running sum
    open_nodes: list = field(default_factory=list)  # tree: per level, the exact sum of the node being filled
    noisy_nodes: list = field(default_factory=list)  # tree: per level, the latest completed node with its noise
    #: every noisy statistic released so far, as (upper triangle, when): the white-box view
    released: list = field(default_factory=list)


@dataclass
class ContinualCovariance(Mechanism):
    """A server re-publishing the noisy covariance of every user seen so far after each of ``ticks`` ticks.

    Central DP per user (replace-one of the user's whole presence). ``ticks``
    (T) is the stream's length: the query ticks of the run (``horizon /
    query_interval``); the server refuses a longer stream.
    """
    test_scenario: ClassVar[dict] = {
        "population": {"kind": "rank_one", "n_items": 20, "ratings_per_user": 2},
        "churn": {"arrival_rate": 20, "mean_lifetime": 2.0, "horizon": 8.0, "query_interval": 1.0,
                  "release_interval": 1.0},
        "mechanism": {"epsilon": 3.0, "delta": 1e-5, "ticks": 8},
        "attack": [{"kind": "differencing"}, {"kind": "differencing_noise_aware"}],
        "audit": {"design": "full_runs", "insert_tick": 5, "method": "gdp", "trials": 1000, "block_size": 250,
                  "alpha": 0.05},
    }

    epsilon: Annotated[float, Gt(0)]
    delta: Annotated[float, Gt(0), Lt(1)] = 1e-6
    ticks: Annotated[int, Ge(1)] = 16
    row_bound: Annotated[float, Gt(0)] = 1.0
    claim_model = "central"
    claim_unit = "user"
    claim_neighbouring = "replace"
    #: disjoint rated sets: the replacement that moves a second-moment statistic most
    audit_pair = "disjoint_support"
    #: what ``publish`` returns: a dict with the noisy ``covariance`` (utility reads it)
    publishes = "covariance"

    def __post_init__(self) -> None:
        self.claim_delta = self.delta
        self.sigma = self._sigma()

    @property
    def sensitivity(self) -> float:
        """L2 (Frobenius) sensitivity of one tick's increment to replacing one user's row: ``√2·L²``."""
        return math.sqrt(2.0) * self.row_bound ** 2

    @abstractmethod
    def _sigma(self) -> float:
        """The noise scale of every Gaussian draw (a node, or a release)."""

    def round_cost(self, world: WorldInfo, users: float) -> RoundCost:
        """The server's n x n sums grow with the stream: its increment, release, running sums or tree nodes, and
        every noisy statistic released (at most ~2 per tick); a release is one n x n matrix, and a full run's
        white-box view keeps up to two noisy triangles a tick besides (tight-continual-tree: 799 MB peak)."""
        n = world.n_items
        return RoundCost(state_bytes=8.0 * n * n * (4 + 2 * self.ticks), release_bytes=16.0 * n * n)

    def init_state(self, world: WorldInfo) -> CovarianceState:
        n = world.n_items
        return CovarianceState(n, np.zeros((n, n)), np.zeros((n, n)))

    def make_queries(self, n_users, rng, state, rated=None) -> np.ndarray:
        return np.zeros((n_users, 0))

    def respond(self, users: UserBatch, queries, published, carried, rng):
        return clip_rows(users.ratings.astype(float), self.row_bound), None

    def aggregate(self, state: CovarianceState, queries, messages) -> CovarianceState:
        state.increment += gram(messages)
        state.users += messages.shape[0]
        return state

    def end_round(self, state: CovarianceState, rng: np.random.Generator) -> CovarianceState:
        state.tick += 1
        if state.tick > self.ticks:
            raise ParameterError("ticks", f"the stream has more than ticks={self.ticks} query ticks; make ticks "
                                          f"at least horizon / query_interval")
        self._advance(state, rng)
        state.increment = np.zeros_like(state.increment)
        return state

    @abstractmethod
    def _advance(self, state: CovarianceState, rng: np.random.Generator) -> None:
        """Fold ``state.increment`` (tick ``state.tick``) in and set ``state.release``."""

    def publish(self, state: CovarianceState) -> dict[str, Any]:
        return {"covariance": state.release.copy(), "tick": state.tick}

    # ------------------------------------------------------------ the white box

    def statistics(self, state: CovarianceState) -> dict[str, np.ndarray]:
        """Every noisy statistic released so far (upper triangles, ``noisy``) and which ticks each sums
        (``first``, ``last``): the naive server's releases, or the tree's completed nodes."""
        values = [v for v, _, _ in state.released]
        n = state.n_items * (state.n_items + 1) // 2
        return {"noisy": np.array(values).reshape(len(values), n),
                "first": np.array([f for _, f, _ in state.released]),
                "last": np.array([l for _, _, l in state.released])}

    def statistic_noise(self) -> dict[str, tuple[str, float]]:
        return {"noisy": ("gaussian", self.sigma)}

    def white_box_means(self, rows: UserBatch, statistics: dict, rounds) -> dict[str, np.ndarray]:
        """``upper(x xᵀ)`` of each row (clipped) in every statistic whose ticks hold its answer tick ``rounds``."""
        x = clip_rows(rows.ratings.astype(float), self.row_bound).toarray()
        tick = np.asarray(rounds)[:, None]
        holds = (np.asarray(statistics["first"]) <= tick) & (tick <= np.asarray(statistics["last"]))
        return {"noisy": holds[..., None] * upper(x[:, :, None] * x[:, None, :])[:, None, :]}

    @abstractmethod
    def release_noise_covariance(self, ticks) -> np.ndarray:
        """Covariance of the noise one matrix entry gets in the releases at ``ticks`` (public: σ and the schedule)."""


@dataclass
class NaiveContinualCovariance(ContinualCovariance, kind="continual_covariance_naive"):
    """Broken server: every release gets fresh noise for (ε, δ) of ONE release; the claim ignores the rest."""
    negative_control = True
    #: the shipped scenario's stream (16 ticks, target at tick 9): its audit is violated (tests/test_continual.py)
    test_scenario = {**ContinualCovariance.test_scenario,
                     "churn": {**ContinualCovariance.test_scenario["churn"], "horizon": 16.0},
                     "mechanism": {"epsilon": 3.0, "delta": 1e-5, "ticks": 16},
                     "audit": {**ContinualCovariance.test_scenario["audit"], "insert_tick": 9}}


    def _sigma(self) -> float:
        return gaussian_sigma_for(self.epsilon, self.delta, self.sensitivity, 1)

    def privacy_event(self, answers: int = 1):
        """What it claims: one release per answer (the releases after it are not composed)."""
        return GaussianRelease(self.sigma, self.sensitivity, count=answers)

    def release_noise_covariance(self, ticks) -> np.ndarray:
        """Fresh noise per release: σ² I."""
        return self.sigma ** 2 * np.eye(len(ticks))

    def spent_event(self, releases: int):
        """What it really publishes about a user present in ``releases`` releases (for reports)."""
        return GaussianRelease(self.sigma, self.sensitivity, count=releases)

    def _advance(self, state, rng) -> None:
        state.running = state.increment.copy() if state.running is None else state.running + state.increment
        state.release = state.running + symmetric_gaussian(state.n_items, self.sigma, rng)
        state.released.append((upper(state.release), 1, state.tick))


@dataclass
class TreeContinualCovariance(ContinualCovariance, kind="continual_covariance_tree"):
    """The binary-tree mechanism: (ε, δ) for the whole stream, each release a sum of ≤ ⌈log2 T⌉+1 noisy nodes."""


    @property
    def levels(self) -> int:
        return tree_levels(self.ticks)

    def _sigma(self) -> float:
        return gaussian_sigma_for(self.epsilon, self.delta, self.sensitivity, tree_levels(self.ticks))

    def privacy_event(self, answers: int = 1):
        """Each answer enters one node per level: ``levels`` Gaussian releases, composed."""
        return Composition([GaussianRelease(self.sigma, self.sensitivity)], count=self.levels * answers)

    def release_noise_covariance(self, ticks) -> np.ndarray:
        """Releases share noise through their common nodes: σ² x (nodes summed by both)."""
        nodes = [set(nodes_summed(int(t))) for t in ticks]
        return self.sigma ** 2 * np.array([[len(a & b) for b in nodes] for a in nodes], dtype=float)

    def _advance(self, state, rng) -> None:
        t, n = state.tick, state.n_items
        if not state.open_nodes:
            state.open_nodes = [np.zeros((n, n)) for _ in range(self.levels)]
            state.noisy_nodes = [None] * self.levels
        for level in range(self.levels):
            state.open_nodes[level] += state.increment
            if t % (1 << level) == 0:  # node (level, t / 2^level - 1) completes: noise it once
                state.noisy_nodes[level] = state.open_nodes[level] + symmetric_gaussian(n, self.sigma, rng)
                state.released.append((upper(state.noisy_nodes[level]), t - (1 << level) + 1, t))
                state.open_nodes[level] = np.zeros((n, n))
        state.release = sum((state.noisy_nodes[level] for level, _ in nodes_summed(t)), np.zeros((n, n)))
