"""The attack contract: views in, one score per run (or canary) out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar, Protocol

import numpy as np

from recaudit.core.errors import ParameterError
from recaudit.mechanisms import Mechanism
from recaudit.core.registry import Registry
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View, ViewKind

#: every registered attack, by kind
ATTACKS: Registry = Registry("attack")


class AttackError(ParameterError):
    """An attack cannot read this input (a view it does not read, a mechanism it does not know): the user's
    scenario asks for it, so it is bad input (exit 2). ``field`` is ``attack`` unless a setting is at fault."""

    def __init__(self, message: str, field: str = "attack"):
        super().__init__(field, message)


class Attack(ABC):
    """Scores runs: higher means "the audited user is in world 1".

    ``views`` names the views the attack can read (the audit gives it the one
    the claim protects, or a stronger one as a negative control). An attack
    that learns (``requires_fit``) is fitted on training runs only — never on
    the runs the estimator counts.
    """

    #: the registered name (``class X(Attack, kind="x")`` sets it and registers X in ``ATTACKS``)
    kind: ClassVar[str] = ""
    views: tuple[ViewKind, ...] = ("messages",)
    #: the mechanism classes whose runs it reads (empty: any mechanism's), and how a refusal names them
    reads: ClassVar[tuple[type, ...]] = ()
    reads_text: ClassVar[str] = ""
    requires_fit: bool = False
    #: whether the attack scores a trained model (a trainer's one release, ``recaudit.mechanisms.trainer``)
    reads_model: ClassVar[bool] = False
    #: the conformance suite (``recaudit.attacks.checks``, ``recaudit.audits.checks``): the parameters it builds the
    #: attack with,
    #: and the registered mechanism whose test scenario it attacks (None: no registered mechanism fits it)
    test_params: ClassVar[dict] = {}
    test_mechanism: ClassVar[str | dict | None] = "maxsense"  # a kind, or a mechanism block (kind and parameters)

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        ATTACKS.add(cls, kind)

    def refusal(self, mechanism: Mechanism | None, view: ViewKind) -> str | None:
        """Why this attack cannot score ``view`` of ``mechanism``'s runs (None: it can).

        The one place an attack says what it reads; ``recaudit validate`` asks it (through the scenario
        language) for every attack of a scenario, with the view the audit gives it, before any work. An
        attack that knows only some mechanisms overrides it (calling this first).
        """
        if view not in self.views:
            return f"{self.kind} reads the {' or '.join(self.views)} view, not {view!r}"
        if mechanism is not None and self.reads and not isinstance(mechanism, self.reads):
            return f"{self.kind} reads {self.reads_text}, not {mechanism.kind}'s"
        return None

    def check(self, mechanism: Mechanism | None, view: ViewKind) -> None:
        """Raise :class:`AttackError` with :meth:`refusal`'s reason when there is one."""
        reason = self.refusal(mechanism, view)
        if reason is not None:
            raise AttackError(f"attack {reason}")

    def check_view(self, view: View, mechanism: Mechanism | None = None) -> None:
        """:meth:`check` on a view at scoring time (an audit built outside the scenario language)."""
        self.check(mechanism, view.kind)

    def fit(self, mechanism: Mechanism, pair: TargetPair, view: View, worlds: np.ndarray) -> None:
        """Learn from training runs ``view`` whose worlds are ``worlds`` (no-op unless ``requires_fit``)."""

    @abstractmethod
    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        """One score per run of ``view`` (vectorised over runs).

        Run ``r`` belongs to audited user ``r`` of ``pair`` when the pair holds
        one user per run (canaries), else to its single user.
        """

    def score_table(self, mechanism: Mechanism, pair: TargetPair, view: View) -> tuple[np.ndarray, np.ndarray] | None:
        """The same scores as ``(indices, table)``, ``scores(...)`` being ``table[indices]`` bit for bit, for an
        attack that scores from a table of every possible output (None: it does not). An audit keeps such
        scores as one byte a run (``recaudit.audits.stats.coded``)."""
        return None


@dataclass(frozen=True)
class PublicKnowledge:
    """What a reconstruction may use besides the messages: public facts of the mechanism and its world.

    ``item_means`` (items,), ``covariance`` (items x items, a public model's Σ), ``prior`` (items x levels, the
    public distribution of each item's rating), ``levels`` (the rating scale), ``scale`` (a published noise scale).
    """

    item_means: np.ndarray | None = None
    covariance: np.ndarray | None = None
    prior: np.ndarray | None = None
    levels: np.ndarray | None = None
    scale: float | None = None


class Reconstruction(Protocol):
    """The reconstruction contract (``recaudit.audits.reconstruction`` scores it against the public prior's guess).

    ``reconstruct(messages, public)`` turns the released messages of a batch of users (users on axis 0) and
    the public knowledge into a guess of each user's private values, one row per user.
    """

    def reconstruct(self, messages: np.ndarray, public: PublicKnowledge) -> np.ndarray: ...
