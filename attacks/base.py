"""The attack contract: views in, one score per trial out."""
from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from mechanisms import LocalMechanism
from simulator.neighbours import TargetPair
from simulator.transcript import View


class DistinguishingAttack(ABC):
    """Scores trials: higher means "the target is in world 1"."""

    name: str = ""

    @abstractmethod
    def scores(self, mechanism: LocalMechanism, pair: TargetPair, view: View) -> np.ndarray:
        """One score per row of ``view.messages`` (vectorised over trials)."""
