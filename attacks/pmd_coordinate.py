"""PMD single-coordinate attack: one released coordinate against the two worlds' rating of that item."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, AttackError, PublicKnowledge
from .pmc_sign import message_rows


@dataclass
class PmdCoordinateAttack(Attack, kind="pmd_coordinate"):
    """Reads the messages view; looks at ONE coordinate per run: the first rated item where the worlds differ.

    Score: ``|x_i − r₀_i| − |x_i − r₁_i|`` (closer to world 1's rating scores
    higher). Under PMD every coordinate is uniform over the levels whatever the
    rating, so this should show nothing. ``reconstruct``: the released level
    itself as the guess of every rating.
    """

    views = ("messages",)
    reads = (XinJaakkola,)
    reads_text = "a Xin–Jaakkola mechanism's messages"
    test_mechanism = "xin_jaakkola"

    def reconstruct(self, messages: np.ndarray, public: PublicKnowledge) -> np.ndarray:
        return messages

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        runs = message_rows(pair, view)
        r0, r1 = pair.rows0.ratings[runs].toarray(), pair.rows1.ratings[runs].toarray()
        differs = (r0 != r1) & (r0 != 0) & (r1 != 0)
        if not differs.any(axis=1).all():
            raise AttackError(f"attack {self.kind}: some audited user has no rated item whose rating differs "
                             "between the worlds")
        item = np.argmax(differs, axis=1)
        at = np.arange(len(runs))
        x = view.messages[at, item]
        return np.abs(x - r0[at, item]) - np.abs(x - r1[at, item])
