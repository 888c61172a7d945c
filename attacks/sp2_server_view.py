"""The SP2 server's view of one device: its public ratings and which item factors it fetched (the fetch log)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms.sp2 import SP2

from .base import Attack


@dataclass
class SP2ServerViewAttack(Attack, kind="sp2_server_view"):
    """Scores a run by how many of world 1's private items the target fetched, minus world 0's.

    Reads the ``messages`` view of SP2 (public ratings, then the fetch
    request, one column per item each). A device that fetches everything
    scores 0 in both worlds; one that fetches only its private items scores
    ``+|private|`` in world 1 and ``-|private|`` in world 0.
    """

    views = ("messages",)
    reads = (SP2,)
    reads_text = "SP2's messages (sp2*)"
    test_mechanism = "sp2"

    def scores(self, mechanism, pair, view) -> np.ndarray:
        self.check_view(view, mechanism)
        n_items = pair.rows0.n_items
        fetched = np.asarray(view.messages, float)[:, n_items:2 * n_items]
        private0, private1 = (pair.rows0.private_mask.toarray().astype(float),
                              pair.rows1.private_mask.toarray().astype(float))
        if len(pair) == 1:
            private0, private1 = np.repeat(private0, len(fetched), 0), np.repeat(private1, len(fetched), 0)
        return np.einsum("ij,ij->i", fetched, private1 - private0)
