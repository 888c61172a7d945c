"""The attack contract: views in, one score per run (or canary) out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

from mechanisms import Mechanism
from mechanisms.registry import Registry
from simulator.neighbours import TargetPair
from simulator.transcript import View, ViewKind

#: every registered attack, by kind
ATTACKS: Registry = Registry("attack")


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
    requires_fit: bool = False

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        ATTACKS.add(cls, kind)

    def fit(self, mechanism: Mechanism, pair: TargetPair, view: View, worlds: np.ndarray) -> None:
        """Learn from training runs ``view`` whose worlds are ``worlds`` (no-op unless ``requires_fit``)."""

    @abstractmethod
    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        """One score per run of ``view`` (vectorised over runs).

        Run ``r`` belongs to audited user ``r`` of ``pair`` when the pair holds
        one user per run (canaries), else to its single user.
        """
