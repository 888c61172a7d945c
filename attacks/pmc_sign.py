"""PMC sign recovery: the released ``±h·sign(r − μ)`` gives away ``sign(r − μ)`` up to one global sign."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, AttackError, PublicKnowledge


def message_rows(pair: TargetPair, view: View) -> np.ndarray:
    """Index into the pair's rows for every run of ``view`` (one pair row per run, or the single one)."""
    n = len(view.messages)
    return np.arange(n) if len(pair) == n else np.zeros(n, np.int64)


def item_means_of(view: View) -> np.ndarray:
    """The item means ``μ`` each run's user was sent (its public query, one row per run)."""
    if not view.queries:
        raise AttackError("attack pmc_sign: the view holds no queries (Xin–Jaakkola users are sent μ as their query)")
    mu = np.asarray(view.queries[0], float)
    return np.broadcast_to(mu, view.messages.shape) if mu.shape[0] == 1 else mu


@dataclass
class PmcSignAttack(Attack, kind="pmc_sign"):
    """Reads the messages view. ``reconstruct``: the guess ``sign(message)`` of ``sign(r − μ)``.

    Distinguishing score: how well the message's signs match world 1's
    ``sign(r − μ)`` on the rated items, up to the global sign, minus the same
    for world 0.
    """

    views = ("messages",)
    reads = (XinJaakkola,)
    reads_text = "a Xin–Jaakkola mechanism's messages"
    test_mechanism = {"kind": "xin_jaakkola", "response": "pmc", "public_users": 20}

    def reconstruct(self, messages: np.ndarray, public: PublicKnowledge) -> np.ndarray:
        return np.sign(messages)

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        guess = self.reconstruct(view.messages, PublicKnowledge())
        mu, runs = item_means_of(view), message_rows(pair, view)
        out = []
        for rows in (pair.rows0, pair.rows1):
            ratings = rows.ratings[runs]
            truth = np.sign(ratings.toarray() - mu) * (ratings.toarray() != 0)
            count = np.maximum(np.count_nonzero(truth, axis=1), 1)
            out.append(np.abs(np.sum(guess * truth, axis=1)) / count)
        return out[1] - out[0]
