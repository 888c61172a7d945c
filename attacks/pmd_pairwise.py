"""PMD pairwise reconstruction: the released candidate keeps the user's 2nd-order structure (by design)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, PublicKnowledge
from .pmc_sign import item_means_of, message_rows


@dataclass
class PmdPairwiseAttack(Attack, kind="pmd_pairwise"):
    """Reads the messages view. ``reconstruct``: the centred candidate ``a = x − μ``, whose products
    ``sign(a_i a_j)`` guess ``sign((r_i − μ_i)(r_j − μ_j))``; given the public ``Σ``, the candidate
    smoothed by it, ``a Σ`` (its noise off the model's item subspace damped).

    Distinguishing score: ``(a·r₁')² / ‖r₁'‖² − (a·r₀')² / ‖r₀'‖²`` over the rated
    items (``r_b' = r_b − μ`` in world b): PMD picks candidates aligned with ±r'.
    """

    views = ("messages",)
    reads = (XinJaakkola,)
    reads_text = "a Xin–Jaakkola mechanism's messages"
    test_mechanism = "xin_jaakkola"

    def reconstruct(self, messages: np.ndarray, public: PublicKnowledge) -> np.ndarray:
        """The centred candidate ``x − μ``, smoothed by the public ``Σ`` when given."""
        a = messages - public.item_means
        return a if public.covariance is None else a @ public.covariance

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        mu, runs = item_means_of(view), message_rows(pair, view)
        a = self.reconstruct(view.messages, PublicKnowledge(item_means=mu))
        out = []
        for rows in (pair.rows0, pair.rows1):
            dense = rows.ratings[runs].toarray()
            target = np.where(dense != 0, dense - mu, 0.0)
            out.append(np.sum(a * target, axis=1) ** 2 / np.maximum(np.sum(target ** 2, axis=1), 1e-12))
        return out[1] - out[0]
