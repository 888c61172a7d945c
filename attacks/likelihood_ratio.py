"""The likelihood-ratio test on a target's released messages (Neyman–Pearson optimal)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mechanisms import LocalMechanism
from simulator.neighbours import TargetPair
from simulator.transcript import View

from .base import DistinguishingAttack


@dataclass
class LikelihoodRatioAttack(DistinguishingAttack):
    """Score = log P(messages | world 1) − log P(messages | world 0).

    Uses the mechanism's *published* randomizer and the target's true sketches
    in both worlds; for a known randomizer this is the most powerful test, so
    the audit's bound is as tight as the trial count allows.
    """

    name: str = field(default="likelihood_ratio", init=False, repr=False)

    def scores(self, mechanism: LocalMechanism, pair: TargetPair, view: View) -> np.ndarray:
        if view.kind != "messages":
            raise ValueError(f"the likelihood-ratio attack reads the 'messages' view, got {view.kind!r}")
        messages = view.messages
        s0 = np.broadcast_to(pair.sketches[0], messages.shape)
        s1 = np.broadcast_to(pair.sketches[1], messages.shape)
        return mechanism.message_log_likelihood(messages, s1) - mechanism.message_log_likelihood(messages, s0)
