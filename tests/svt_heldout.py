"""Held-out sparse-vector settings for the generic attack (issue 31): fixed before any audit of them was run.

The attack was developed on ``tests/svt.py`` (ε = 1, ten queries, cutoff 1, threshold 6, all queries up by one).
These settings vary the cutoff c, the threshold T, the number and pattern of queries and ε; they were written
down (and committed) before the attack was run on any of them, and nothing in the attack was changed after
seeing their results. For each setting:

* ``roth``: Roth's numeric SVT (Lyu–Su–Li Algorithm 3): ρ ~ Lap(2/ε), ν ~ Lap(2c/ε), releases ``q_i + ν_i`` at
  each ⊤: not ε-DP for any ε (the broken one to catch);
* ``alg1``: Lyu–Su–Li Algorithm 1 (ρ ~ Lap(2/ε), ν ~ Lap(4c/ε), ⊤/⊥ only): ε-DP;
* ``alg2``: Dwork–Roth (ρ ~ Lap(2c/ε) redrawn after each ⊤, ν ~ Lap(4c/ε)): ε-DP;
* ``alg7``: Lyu–Su–Li Algorithm 7 with a numeric answer done right: ε₁ = ε/4 for ρ ~ Lap(1/ε₁), ε₂ = ε/2 for
  ν ~ Lap(2c/ε₂), ε₃ = ε/4 for a *fresh* ``q_i + Lap(c/ε₃)`` at each ⊤: ε-DP, and mixed output like ``roth``.

Every variant of a setting gets the same neighbouring pair.
"""
from __future__ import annotations

import numpy as np

from tests.svt import SparseVector


def _pattern(q0, q1) -> tuple:
    return (np.asarray(q0, dtype=float), np.asarray(q1, dtype=float))


#: name -> (ε, cutoff c, threshold T, (q0, q1)); the tuning fixture is tests/svt.py (ε 1, c 1, T 6, 10 zeros/ones)
SETTINGS = {
    # more queries, a lower threshold: answers common, the loss builds over 19 ⊥
    "H1-c1-T3-k20": (1.0, 1, 3.0, _pattern(np.zeros(20), np.ones(20))),
    # cutoff 2, a mixed query vector, every query up by one
    "H2-c2-T4-k24": (1.0, 2, 4.0, _pattern(np.tile([0.0, -1.0, 1.0, 0.5], 6),
                                            np.tile([0.0, -1.0, 1.0, 0.5], 6) + 1.0)),
    # ε = 2, increasing queries, the first two unchanged
    "H3-eps2-T2-k8": (2.0, 1, 2.0, _pattern(np.linspace(-1.0, 0.0, 8),
                                             np.r_[np.linspace(-1.0, 0.0, 8)[:2], np.linspace(-1.0, 0.0, 8)[2:] + 1])),
    # ε = 0.5, high threshold, the last four queries unchanged
    "H4-eps0.5-T8-k16": (0.5, 1, 8.0, _pattern(np.zeros(16), np.r_[np.ones(12), np.zeros(4)])),
}


class NumericSparseVector(SparseVector):
    """Algorithm 7: the released number at a ⊤ is ``q_i`` plus fresh Laplace noise of ``value_scale``."""

    def __init__(self, *args, value_scale: float, **kwargs):
        super().__init__(*args, **kwargs)
        object.__setattr__(self, "value_scale", value_scale)

    def sample(self, value, n, rng):
        answer = super().sample(value, n, rng)
        q = np.asarray(value, dtype=float)
        fresh = q[None, :] + rng.laplace(scale=self.value_scale, size=(n, q.size))
        return {"answer": answer, "value": np.where(answer == 1, fresh, 0.0)}


def heldout(setting: str) -> dict[str, SparseVector]:
    """The four variants of one held-out setting, keyed ``roth``, ``alg1``, ``alg2``, ``alg7``."""
    e, c, t, pair = SETTINGS[setting]
    return {
        "roth": SparseVector(f"{setting}/roth", e, 2 / e, 2 * c / e, c, pair, False, threshold=t, numeric=True),
        "alg1": SparseVector(f"{setting}/alg1", e, 2 / e, 4 * c / e, c, pair, True, threshold=t),
        "alg2": SparseVector(f"{setting}/alg2", e, 2 * c / e, 4 * c / e, c, pair, True, threshold=t, resample=True),
        "alg7": NumericSparseVector(f"{setting}/alg7", e, 4 / e, 4 * c / e, c, pair, True, threshold=t,
                                    value_scale=4 * c / e),
    }
