"""The attack contract: views in, one score per run (or canary) out."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from mechanisms import Protocol
from simulator.neighbours import TargetPair
from simulator.transcript import View, ViewKind


class Attack(ABC):
    """Scores runs: higher means "the audited user is in world 1".

    ``views`` names the views the attack can read (the audit gives it the one
    the claim protects, or a stronger one as a negative control). An attack
    that learns (``requires_fit``) is fitted on training runs only — never on
    the runs the estimator counts.
    """

    name: str = ""
    views: tuple[ViewKind, ...] = ("messages",)
    requires_fit: bool = False

    def fit(self, mechanism: Protocol, pair: TargetPair, view: View, worlds: np.ndarray) -> None:
        """Learn from training runs ``view`` whose worlds are ``worlds`` (no-op unless ``requires_fit``)."""

    @abstractmethod
    def scores(self, mechanism: Protocol, pair: TargetPair, view: View) -> np.ndarray:
        """One score per run of ``view`` (vectorised over runs).

        Run ``r`` belongs to audited user ``r`` of ``pair`` when the pair holds
        one user per run (canaries), else to its single user.
        """
