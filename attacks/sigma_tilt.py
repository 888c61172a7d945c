"""Σ tilt: does the published item–item matrix lean toward the world-1 canary's ratings or the world-0 one's?

For Xin–Jaakkola every private response ``u`` enters the M-step as ``½ u uᵀ``
in ``S``, and the server publishes ``Σ ∝ S^{1/2}``; so ``Σ²`` holds each
answer's outer product. Score: ``x₁ᵀ Σ² x₁ − x₀ᵀ Σ² x₀`` with ``x_b`` the
audited user's centred ratings in world b (``r_b − μ`` on its rated items,
unit length), from the last release. Reads the ``releases`` view.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.xin_jaakkola import XinJaakkola
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack


def _centred_units(rows, mu: np.ndarray) -> np.ndarray:
    dense = rows.ratings.toarray()
    x = np.where(dense != 0, dense - mu, 0.0)
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-300)


@dataclass
class SigmaTiltAttack(Attack, kind="sigma_tilt"):
    """``x₁ᵀΣ²x₁ − x₀ᵀΣ²x₀`` on the last published ``(μ, Σ)`` (one run per audited user, or many canaries)."""

    views = ("releases",)
    reads = (XinJaakkola,)
    reads_text = "a Xin–Jaakkola mechanism's published (μ, Σ)"
    test_mechanism = "xin_jaakkola"

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        if view.audited is not None:  # canaries: one run, one model for all
            return self._tilt(view.releases[0][-1].published, pair.rows0, pair.rows1)
        out = []
        for i, releases in enumerate(view.releases):
            run = np.array([i % len(pair)])
            out.append(self._tilt(releases[-1].published, pair.rows0.take(run), pair.rows1.take(run))[0])
        return np.array(out)

    @staticmethod
    def _tilt(model, rows0, rows1) -> np.ndarray:
        square = model.sigma @ model.sigma
        x0, x1 = _centred_units(rows0, model.mu), _centred_units(rows1, model.mu)
        return np.einsum("ni,ij,nj->n", x1, square, x1) - np.einsum("ni,ij,nj->n", x0, square, x0)
