"""Bayesian posterior reconstruction from Laplace-noised rating vectors, with a prior from public users."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, PublicKnowledge
from .pmc_sign import message_rows


def level_prior(public_ratings, levels: np.ndarray, smoothing: float = 1.0) -> np.ndarray:
    """P(level | item) from public users' ratings (items x levels), add-``smoothing`` counts."""
    from scipy import sparse

    r = sparse.csr_array(public_ratings)
    level = np.argmin(np.abs(r.data[:, None] - levels[None, :]), axis=1)
    counts = np.zeros((r.shape[1], levels.size))
    np.add.at(counts, (r.indices, level), 1.0)
    counts += smoothing
    return counts / counts.sum(axis=1, keepdims=True)


@dataclass
class LaplacePosteriorAttack(Attack, kind="laplace_posterior"):
    """Reads the messages view of a mechanism releasing ``value + Lap(0, b)`` per item (``scale`` b).

    ``reconstruct``: the posterior over levels of every released coordinate,
    ``P(level | x) ∝ prior(level) · exp(−|x − level| / b)``, and its mode.
    Distinguishing score: the exact log-likelihood ratio of world 1's ratings
    against world 0's over the rated items (the Neyman–Pearson test when the
    rated items are released as they are, as the completed vector keeps them).
    """

    views = ("messages",)
    reads = (XinJaakkola,)
    reads_text = "a Xin–Jaakkola mechanism's messages"
    test_mechanism = "xin_jaakkola_laplace"

    def refusal(self, mechanism: Mechanism | None, view) -> str | None:
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and getattr(mechanism, "scale", None) is None:
            reason = f"{self.kind} needs a Laplace mechanism (a published noise scale); {mechanism.kind} has none"
        return reason

    @staticmethod
    def posterior(messages: np.ndarray, prior: np.ndarray, levels: np.ndarray, scale: float) -> np.ndarray:
        """(users, items, levels) posterior of every coordinate; ``prior`` is (items, levels)."""
        log = np.log(prior)[None] - np.abs(messages[:, :, None] - levels[None, None, :]) / scale
        log -= log.max(axis=2, keepdims=True)
        post = np.exp(log)
        return post / post.sum(axis=2, keepdims=True)

    def reconstruct(self, messages: np.ndarray, public: PublicKnowledge) -> np.ndarray:
        """Each coordinate's posterior mode under the public ``prior``, ``levels`` and noise ``scale``."""
        levels = np.asarray(public.levels, float)
        return levels[np.argmax(self.posterior(messages, public.prior, levels, public.scale), axis=2)]

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        scale = mechanism.scale
        runs = message_rows(pair, view)
        r0, r1 = pair.rows0.ratings[runs].toarray(), pair.rows1.ratings[runs].toarray()
        rated = (r0 != 0) & (r1 != 0)
        x = view.messages
        return np.sum(np.where(rated, np.abs(x - r0) - np.abs(x - r1), 0.0), axis=1) / scale
