"""A randomizer-free attack: how many released bits agree with the world-1 sketch rather than the world-0 one."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import LocalMechanism
from recaudit.simulator.targets import sketches_under

from .base import Attack


@dataclass
class SketchAgreementAttack(Attack, kind="sketch_agreement"):
    """Score = #bits equal to the world-1 sketch − #bits equal to the world-0 sketch.

    Needs the true sketches in both worlds but not the randomizer: it stays
    valid when the published budget is wrong or unknown, where the
    likelihood ratio weighs bits by the published budget. For one bit, or
    bits of equal budget, it orders runs exactly as the likelihood ratio does.
    """

    views = ("messages",)
    reads = (LocalMechanism,)
    reads_text = "a local mechanism's messages (a LocalMechanism)"

    def scores(self, mechanism, pair, view) -> np.ndarray:
        self.check_view(view, mechanism)
        messages = np.asarray(view.messages, dtype=bool)
        runs = np.arange(len(messages)) if len(pair) == len(messages) else np.zeros(len(messages), np.int64)
        s0 = sketches_under(mechanism, pair.rows0.take(runs), view.queries)
        s1 = sketches_under(mechanism, pair.rows1.take(runs), view.queries)
        return (messages == s1).sum(axis=1).astype(float) - (messages == s0).sum(axis=1)
