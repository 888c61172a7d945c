"""What a mechanism promises: the privacy claim and the view of the adversary it protects."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Literal

from recaudit.core.errors import ParameterError

Model = Literal["local", "central", "joint", "none"]
Unit = Literal["rating", "user"]
#: ``replace``: any row for any row; ``add_remove``: one row more or less; ``replace_likes``: the
#: user's likes change but its rated set stays (the rated set is public: protocols whose queries read it);
#: ``replace_private``: the user's private ratings (which items, and their values) change, its public ones stay
#: (selective privacy, SP2: only the ratings a user keeps on its device are protected)
Neighbouring = Literal["replace", "add_remove", "replace_likes", "replace_private"]
#: ``statistics`` is the white-box view: the noisy statistics a central or joint proof is about (stronger than
#: ``releases`` and ``others``, which are post-processing of it plus other users' own data)
ViewKind = Literal["messages", "releases", "others", "target", "statistics"]

PROTECTED_VIEW: dict[str, ViewKind] = {
    "local": "messages",
    "central": "releases",
    "joint": "others",
    "none": "target",
}


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
    #: how the (ε, δ) figure was derived when the claim was stated in another currency (zCDP, Rényi, GDP)
    conversion: str | None = None

    def __post_init__(self) -> None:
        if not self.epsilon >= 0:
            raise ParameterError("epsilon", f"epsilon must be >= 0, got {self.epsilon}")
        if not 0.0 <= self.delta < 1.0:
            raise ParameterError("delta", f"delta must be in [0, 1), got {self.delta}")

    @classmethod
    def none(cls) -> "PrivacyClaim":
        """A claim that promises nothing (no ε at all): for mechanisms that make no DP claim.

        Audits still measure ε_LB, reported as measured leakage; the verdict is
        ``no_claim`` (never consistent or violated).
        """
        return cls(epsilon=math.inf, model="none")

    @property
    def promises(self) -> bool:
        """Whether there is any ε to hold the mechanism to."""
        return self.model != "none"

    @property
    def view(self) -> ViewKind:
        """The adversary's view this claim protects."""
        return PROTECTED_VIEW[self.model]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self) | {"view": self.view}
        for optional in ("gaussian_mu", "conversion"):
            if d[optional] is None:
                del d[optional]
        return d
