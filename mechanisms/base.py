"""The contracts every mechanism honours: its privacy claim and its protocol."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

import numpy as np
from annotated_types import Ge

Model = Literal["local", "central", "joint", "none"]
Unit = Literal["rating", "user"]
Neighbouring = Literal["replace", "add_remove"]
ViewKind = Literal["messages", "releases", "others", "target"]

PROTECTED_VIEW: dict[str, ViewKind] = {
    "local": "messages",
    "central": "releases",
    "joint": "others",
    "none": "target",
}


class ParameterError(ValueError):
    """A bad parameter value; ``field`` (a name or dotted path) says where, so errors can point at it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class PrivacyClaim:
    """What a mechanism promises: (epsilon, delta)-DP in a model, per unit."""

    epsilon: float
    delta: float = 0.0
    model: Model = "local"
    unit: Unit = "user"
    neighbouring: Neighbouring = "replace"
    #: the Gaussian trade-off curve the claim implies (mu-GDP), when it has one; estimators
    #: that convert through a Gaussian curve refuse claims without it
    gaussian_mu: float | None = None

    def __post_init__(self) -> None:
        if not self.epsilon >= 0:
            raise ValueError(f"epsilon must be >= 0, got {self.epsilon}")
        if not 0.0 <= self.delta < 1.0:
            raise ValueError(f"delta must be in [0, 1), got {self.delta}")

    @property
    def view(self) -> ViewKind:
        """The adversary's view this claim protects."""
        return PROTECTED_VIEW[self.model]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self) | {"view": self.view}
        if self.gaussian_mu is None:
            del d["gaussian_mu"]
        return d


@dataclass(frozen=True)
class UserBatch:
    """Private data of a batch of users as dense boolean item masks.

    ``rated[u, i]`` says user ``u`` rated item ``i``; ``liked[u, i]`` that the
    rating was positive (``liked`` implies ``rated``). Unrated items count as 0
    in every sketch.
    """

    rated: np.ndarray
    liked: np.ndarray

    def __len__(self) -> int:
        return self.rated.shape[0]

    @property
    def n_items(self) -> int:
        return self.rated.shape[1]

    def take(self, index: np.ndarray | slice) -> "UserBatch":
        return UserBatch(self.rated[index], self.liked[index])


@dataclass(frozen=True)
class WorldInfo:
    """Public facts about the world that a server may use to shape its queries."""

    n_items: int
    ratings_per_user: int
    n_item_clusters: int


class LocalMechanism(ABC):
    """A one-round local protocol: public queries, private sketches, released bits.

    The server draws a public query per user (``make_queries``); each user
    computes a true sketch from its private rows (``sketch``) and releases it
    through its randomizer (``release``); the server folds the released
    messages into its state (``aggregate``) and publishes an estimate
    (``estimate``). Every method works on a batch of users at once.
    """

    name: str = ""

    epsilon: float  # every local mechanism here is parameterised by its per-user budget

    @property
    def claim(self) -> PrivacyClaim:
        """The promise, derived from the parameters: epsilon-LDP per user (replace); override for others."""
        return PrivacyClaim(epsilon=self.epsilon, delta=0.0, model="local", unit="user", neighbouring="replace")

    @property
    def randomizer_epsilon(self) -> float:
        """The budget the randomizer actually spends per released bit (negative controls override it)."""
        return self.epsilon

    @abstractmethod
    def make_queries(self, n_users: int, rng: np.random.Generator, state: Any,
                     rated: np.ndarray | None = None) -> Any:
        """Public queries for ``n_users`` users.

        Queries may depend on the server's state (adaptive protocols) and, for
        mechanisms that treat the rated set as public, on the users' ``rated``
        masks (always passed by the simulator; ignore it otherwise).
        """

    @abstractmethod
    def sketch(self, users: UserBatch, queries: Any) -> np.ndarray:
        """True (unreleased) sketch bits, shape (n_users, n_bits)."""

    @abstractmethod
    def release(self, sketches: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Randomize sketches into the messages the server sees."""

    @abstractmethod
    def message_log_likelihood(self, messages: np.ndarray, sketches: np.ndarray) -> np.ndarray:
        """log P(messages | sketches) under the *published* randomizer, per user."""

    @abstractmethod
    def init_state(self, world: "WorldInfo") -> Any:
        """The server's state before any user answered."""

    @abstractmethod
    def aggregate(self, state: Any, queries: Any, messages: np.ndarray) -> Any:
        """Fold a batch of messages into the server's state."""

    @abstractmethod
    def estimate(self, state: Any) -> np.ndarray:
        """The published output: an item clustering (one label per item)."""

    def take_queries(self, queries: Any, index: np.ndarray | slice) -> Any:
        """Rows ``index`` of a batch of queries (arrays indexed on axis 0)."""
        return queries[index]

    def describe(self) -> dict[str, Any]:
        """Parameters for reports."""
        return {"name": self.name}


@dataclass
class LeakyRandomizer:
    """Mixin for negative controls: claims ``epsilon`` but randomizes with ``leak_factor * epsilon``.

    Put it first among the bases (``class XBroken(LeakyRandomizer, X)``) so
    its ``randomizer_epsilon`` wins; the claim stays the parent's.
    """

    leak_factor: Annotated[float, Ge(1)] = 2.0

    @property
    def randomizer_epsilon(self) -> float:
        return self.leak_factor * self.epsilon

    def describe(self) -> dict[str, Any]:
        return super().describe() | {"leak_factor": self.leak_factor}
