"""The contracts every mechanism honours: its privacy claim and its protocol."""
from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import numpy as np
from annotated_types import Ge

from . import bit_release
from .accounting import (DEFAULT_VALUE_DISCRETIZATION, GaussianRelease, LaplaceRelease, RandomizedResponseRelease,
                         account, gaussian_sigma_for)
from .claims import Model, Neighbouring, PrivacyClaim, Unit  # noqa: F401 (PrivacyClaim re-exported)
from .costs import RoundCost
from recaudit.core.errors import ParameterError  # noqa: F401 (re-exported)
from recaudit.core.registry import Registry
from .sparse_rows import take_rows  # noqa: F401 (re-exported)
from .user_batch import UserBatch  # noqa: F401 (re-exported)

#: every registered mechanism, by kind
MECHANISMS: Registry = Registry("mechanism")


@dataclass(frozen=True)
class WorldInfo:
    """Public facts about the world that a server may use to shape its queries."""

    n_items: int
    ratings_per_user: int
    n_item_clusters: int


class Mechanism(ABC):
    """A multi-round protocol between a server and the users present (docs/architecture.md, "The contracts").

    The engine (``recaudit.simulator.engine``, the only round loop) drives it. Each
    round the server publishes ``broadcast(state)``; every present user with
    queries left gets a public query (``make_queries``) and computes a message
    from its private rows, the query, the broadcast and its own carried state
    (``respond``); the server folds each batch of messages into its state
    (``aggregate``) and, once the round's batches are in, finishes the round
    (``end_round``: where central noise goes). At release times it publishes
    ``publish(state)``. When a user is done, it may compute a personal output
    from its rows, its carried state and the server's state
    (``personal_output``: what joint DP protects). Queries, messages, carried
    state and personal outputs are numpy arrays with users on axis 0, so every
    call works on a batch.

    The claim comes from the accountant: ``privacy_event(answers)`` says what
    one user's participation releases when it answers ``answers`` queries.
    """

    #: the registered name (``class X(Mechanism, kind="x")`` sets it and registers X in ``MECHANISMS``)
    kind: ClassVar[str] = ""
    #: what the claim is about; subclasses override as their paper says
    claim_model: Model = "local"
    claim_unit: Unit = "user"
    claim_neighbouring: Neighbouring = "replace"
    claim_delta: float = 0.0
    #: a policy of ``recaudit.audits.designs.pairs.PAIR_POLICIES`` building this mechanism's worst audit pairs
    #: (None: the default policy of the claim's unit and neighbouring)
    audit_pair: str | None = None
    #: whether ``make_queries`` reads the users' private ``rated`` masks; the query then reveals the rated set,
    #: and audits draw it per run from each world's row (``query_log_likelihood`` scores it)
    queries_read_rated: bool = False
    #: whether ``respond`` / ``personal_output`` read users' likes (False: a panel's rows may leave them out)
    reads_likes: ClassVar[bool] = True
    #: the grid of the accountant's privacy-loss distributions for this mechanism's claim (pessimistic on any
    #: grid; a mechanism whose PLDs are costly, e.g. many Poisson-sampled steps, may choose a coarser one)
    accounting_grid: ClassVar[float] = DEFAULT_VALUE_DISCRETIZATION
    #: a negative control (a broken twin): its claim is knowingly false, so its audit must say "violated"
    negative_control: ClassVar[bool] = False
    #: a small scenario for the conformance suite (``recaudit.mechanisms.checks``, ``recaudit.audits.checks``): the
    #: world, the
    #: schedule, the attack and the audit; ``mechanism`` holds the test parameters (the kind is added)
    test_scenario: ClassVar[dict[str, Any]] = {
        "population": {"kind": "sbm", "n_items": 20, "ratings_per_user": 5, "user_cluster_weights": [0.5, 0.5],
                       "item_cluster_weights": [0.5, 0.5], "like_probability": [[0.9, 0.3], [0.6, 0.1]]},
        "churn": {"arrival_rate": 40, "mean_lifetime": 1.0, "horizon": 1.0, "query_interval": 0.25,
                  "release_interval": 1.0},
        "mechanism": {"epsilon": 1.0},
        "attack": {"kind": "likelihood_ratio"},
        "audit": {"trials": 20_000, "block_size": 20_000, "alpha": 0.05},
    }

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        MECHANISMS.add(cls, kind)

    @classmethod
    def test_params(cls) -> dict[str, Any]:
        """The parameters of the conformance suite's instance (``test_scenario["mechanism"]``)."""
        return {k: v for k, v in cls.test_scenario["mechanism"].items() if k != "kind"}

    def dump_config(self) -> dict[str, Any]:
        """The mechanism's kind and its parameters (its dataclass fields), as a scenario would give them."""
        return {"kind": self.kind} | {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.init}

    @abstractmethod
    def privacy_event(self, answers: int = 1):
        """The published privacy events of one user answering ``answers`` queries
        (``recaudit.mechanisms.accounting``)."""

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        """The promise for a user answering ``answers`` queries, computed by the accountant."""
        return account(self.privacy_event(answers), self.claim_delta, model=self.claim_model,
                       unit=self.claim_unit, neighbouring=self.claim_neighbouring,
                       value_discretization=self.accounting_grid)

    @property
    def claim(self) -> PrivacyClaim:
        """The promise for one answer per user."""
        return self.claim_for(1)

    @abstractmethod
    def init_state(self, world: "WorldInfo") -> Any:
        """The server's state before any user answered."""

    def round_cost(self, world: "WorldInfo", users: float) -> RoundCost:
        """The work of one round with ``users`` answering, stated from the parameters (default: the engine's only)."""
        return RoundCost()

    def public_panel(self) -> int:
        """Users the server holds in the clear before any round (a panel drawn from the population; 0: none)."""
        return 0

    def init_public(self, state: Any, rows: UserBatch) -> Any:
        """Fold the public panel's rows (drawn by the engine from the world's stream "public") into the state."""
        return state

    def broadcast(self, state: Any) -> Any:
        """What the server publishes to everyone at the start of a round (None: nothing)."""
        return None

    @abstractmethod
    def make_queries(self, n_users: int, rng: np.random.Generator, state: Any,
                     rated: np.ndarray | None = None) -> Any:
        """Public per-user queries for ``n_users`` users.

        Queries may depend on the server's state (adaptive protocols) and, for
        mechanisms that treat the rated set as public, on the users' ``rated``
        masks (always passed by the engine; ignore it otherwise).
        """

    def query_log_likelihood(self, queries: Any, rated: np.ndarray) -> np.ndarray | None:
        """log P(queries | rated set) per row, for protocols whose queries read the rated set (None otherwise)."""
        return None

    def init_carried(self, n_users: int) -> np.ndarray | None:
        """Per-user state carried across rounds for ``n_users`` new users (None: none)."""
        return None

    @abstractmethod
    def respond(self, users: UserBatch, queries: Any, published: Any, carried: np.ndarray | None,
                rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
        """Messages of a batch of users and their new carried state."""

    @abstractmethod
    def aggregate(self, state: Any, queries: Any, messages: np.ndarray) -> Any:
        """Fold a batch of messages into the server's state."""

    def end_round(self, state: Any, rng: np.random.Generator) -> Any:
        """Finish a round once all its batches are in (central noise goes here)."""
        return state

    @abstractmethod
    def publish(self, state: Any) -> Any:
        """The published output (e.g. an item clustering, one label per item)."""

    def personal_output(self, users: UserBatch, carried: np.ndarray | None, state: Any) -> np.ndarray | None:
        """What each user of a batch computes for itself when it is done (None: nothing)."""
        return None

    def statistics(self, state: Any) -> dict[str, np.ndarray] | None:
        """The noisy statistics the privacy proof is about, everything released so far (None: not modelled).

        The white-box ``statistics`` view. Mechanisms that give it also say how it is noised
        (``statistic_noise``: name -> ("gaussian" | "laplace", published scale)) and what an audited row
        adds to it given a run's published history (``white_box_means(rows, statistics, rounds)``).
        """
        return None

    def take_queries(self, queries: Any, index: np.ndarray | slice) -> Any:
        """Rows ``index`` of a batch of queries (arrays indexed on axis 0)."""
        return queries[index]


@dataclass(frozen=True)
class BitRandomizer:
    """Binary randomized response as a component: the budget it publishes and the one it spends.

    The claim and every attack use ``epsilon`` (what the protocol publishes);
    the coins use ``spent_epsilon``. A correct mechanism has them equal; a
    broken twin changes only ``spent_epsilon``.
    """

    epsilon: float
    spent_epsilon: float

    def __call__(self, bits: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return bit_release.randomized_response(bits, self.spent_epsilon, rng)

    def log_likelihood(self, messages: np.ndarray, bits: np.ndarray) -> np.ndarray:
        """log P(messages | bits) under the *published* randomizer, per row."""
        return bit_release.log_likelihood(messages, bits, self.epsilon)

    def event(self, bits: int):
        """The accountant's view: ``bits`` releases at the published budget."""
        return RandomizedResponseRelease(self.epsilon, count=bits)


@dataclass(frozen=True)
class GaussianNoise:
    """Central Gaussian noise as a component: the scale the claim is computed from and the one drawn.

    ``sensitivity`` is the L2 sensitivity of the noised quantity to one unit
    (the claim's unit). A broken twin changes only ``spent_sigma``.
    """

    sigma: float
    sensitivity: float
    spent_sigma: float | None = None

    @classmethod
    def calibrated(cls, epsilon: float, delta: float, sensitivity: float, count: int = 1) -> "GaussianNoise":
        """The smallest σ whose ``count`` releases are (ε, δ)-DP together (the accountant's PLD)."""
        return cls(gaussian_sigma_for(epsilon, delta, sensitivity, count), sensitivity)

    @property
    def spent(self) -> float:
        """The scale the coins really use."""
        return self.sigma if self.spent_sigma is None else self.spent_sigma

    def __call__(self, shape, rng: np.random.Generator) -> np.ndarray:
        return rng.normal(0.0, self.spent, shape)

    def event(self, count: int = 1):
        """The accountant's view: ``count`` releases at the published scale."""
        return GaussianRelease(self.sigma, sensitivity=self.sensitivity, count=count)

    def statement(self) -> tuple[str, float]:
        """The white-box noise statement (``Mechanism.statistic_noise``'s entries): ``("gaussian", σ)``."""
        return "gaussian", self.sigma


@dataclass(frozen=True)
class LaplaceNoise:
    """Central Laplace noise as a component, beside :class:`GaussianNoise` with the same contract.

    ``scale`` is the published ``b`` the claim is computed from, ``sensitivity`` the L1 sensitivity of the
    noised quantity to one unit: one release is ``(sensitivity / b)``-DP. A broken twin changes only
    ``spent_scale``.
    """

    scale: float
    sensitivity: float
    spent_scale: float | None = None

    def __post_init__(self) -> None:
        for name in ("scale", "sensitivity"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ParameterError(name, f"{name} must be a finite number > 0, got {value!r}")

    @classmethod
    def calibrated(cls, epsilon: float, sensitivity: float, count: int = 1) -> "LaplaceNoise":
        """``b = count · sensitivity / ε``: ``count`` releases are ε-DP together (pure, basic composition)."""
        if not (np.isfinite(epsilon) and epsilon > 0):
            raise ParameterError("epsilon", f"epsilon must be a finite number > 0, got {epsilon!r}")
        return cls(count * sensitivity / epsilon, sensitivity)

    @property
    def spent(self) -> float:
        """The scale the coins really use."""
        return self.scale if self.spent_scale is None else self.spent_scale

    def __call__(self, shape, rng: np.random.Generator) -> np.ndarray:
        return rng.laplace(0.0, self.spent, shape)

    def event(self, count: int = 1):
        """The accountant's view: ``count`` releases at the published scale."""
        return LaplaceRelease(self.scale, sensitivity=self.sensitivity, count=count)

    def statement(self) -> tuple[str, float]:
        """The white-box noise statement (``Mechanism.statistic_noise``'s entries): ``("laplace", b)``."""
        return "laplace", self.scale


class LocalMechanism(Mechanism):
    """A one-round local protocol: public queries, private sketches, randomized bits.

    Each user computes true sketch bits from its private rows (``sketch``)
    and releases them through the mechanism's ``randomizer``; everything else
    (queries, aggregation, publish) is the ``Mechanism`` contract. The claim
    is epsilon-LDP per user (replace), from the randomizer's published budget
    over the ``bits_per_answer`` bits of every answer.
    """

    epsilon: float  # every local mechanism here is parameterised by its per-user budget

    @property
    def bit_epsilon(self) -> float:
        """The budget the protocol publishes per released bit."""
        return self.epsilon

    @property
    def randomizer_epsilon(self) -> float:
        """The budget the randomizer actually spends per released bit (negative controls override it)."""
        return self.bit_epsilon

    @property
    def randomizer(self) -> BitRandomizer:
        return BitRandomizer(self.bit_epsilon, self.randomizer_epsilon)

    @property
    def bits_per_answer(self) -> int:
        return 1

    def privacy_event(self, answers: int = 1):
        return self.randomizer.event(self.bits_per_answer * answers)

    @abstractmethod
    def sketch(self, users: UserBatch, queries: Any) -> np.ndarray:
        """True (unreleased) sketch bits, shape (n_users, n_bits)."""

    @abstractmethod
    def query_items(self, queries: Any, n_items: int) -> np.ndarray:
        """Which items each sketch bit reads: bool (n_users, n_bits, n_items)."""

    def release(self, sketches: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Randomize sketches into the messages the server sees."""
        return self.randomizer(sketches, rng)

    def message_log_likelihood(self, messages: np.ndarray, sketches: np.ndarray) -> np.ndarray:
        """log P(messages | sketches) under the *published* randomizer, per user."""
        return self.randomizer.log_likelihood(messages, sketches)

    def respond(self, users: UserBatch, queries: Any, published: Any, carried: np.ndarray | None,
                rng: np.random.Generator) -> tuple[np.ndarray, None]:
        return self.release(self.sketch(users, queries), rng), None


@dataclass
class LeakyRandomizer:
    """Mixin for negative controls: claims ``epsilon`` but randomizes with ``leak_factor * epsilon``.

    Put it first among the bases (``class XBroken(LeakyRandomizer, X)``) so
    its ``randomizer_epsilon`` wins; the claim stays the parent's.
    """

    leak_factor: Annotated[float, Ge(1)] = 2.0
    negative_control: ClassVar[bool] = True

    @property
    def randomizer_epsilon(self) -> float:
        return self.leak_factor * self.epsilon

