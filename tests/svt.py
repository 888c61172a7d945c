"""The sparse vector technique and its classic variants (Lyu, Su, Li, VLDB 2017, Figure 1) as test fixtures.

Each fixture is a harness mechanism (``sample``, ``claim``, ``neighbours``)
answering ``k`` sensitivity-1 queries against a threshold: it reports ⊤ for
a query when ``q_i + ν_i ≥ T + ρ`` (Laplace noises ρ on the threshold, ν_i
on the queries) and stops after ``cutoff`` ⊤. The outputs are sparse: per
run an ``answer`` row of ⊥ (0), ⊤ (1) and "stopped" (−1), and for the
numeric variant also ``value``, the released number at the ⊤ (0 elsewhere).
Noise scales are those of the paper with ε₁ = ε/2 for the threshold unless
it says otherwise; every variant claims ε-DP, and the ``private`` flag says
whether that is true:

* ``alg1`` (Lyu–Su–Li): ρ ~ Lap(2/ε), ν ~ Lap(4c/ε): ε-DP.
* ``alg2`` (Dwork–Roth 2014): ρ ~ Lap(2c/ε) redrawn after each ⊤, ν ~ Lap(4c/ε): ε-DP.
* ``alg3`` (Roth 2011): releases ``q_i + ν_i`` instead of ⊤, ν ~ Lap(2c/ε): not ε-DP for any ε.
* ``alg4`` (Lee–Clifton 2014): ε₁ = ε/4, ρ ~ Lap(4/ε), ν ~ Lap(4/(3ε)): only ((1 + 6c)/4)·ε-DP.
* ``alg5`` (Stoddard et al. 2014): no query noise, no cutoff: not ε-DP for any ε.
* ``alg6`` (Chen et al. 2015): ν ~ Lap(2/ε) but no cutoff: not ε-DP for any ε.

The neighbours move every query by at most 1 in the direction that favours
the rare output the variant's flaw exposes (all queries up for ``alg3``,
the ⊥ queries down and the last one up for ``alg4``, half up and half down
for the ones without cutoff); the correct variants get the same pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import PrivacyClaim


@dataclass(frozen=True)
class SparseVector:
    """SVT on sensitivity-1 queries; see the module docstring."""

    name: str
    epsilon: float
    rho_scale: float
    nu_scale: float
    cutoff: int | None
    neighbours: tuple
    private: bool
    threshold: float = 0.0
    resample: bool = False
    numeric: bool = False

    @property
    def claim(self) -> PrivacyClaim:
        return PrivacyClaim(epsilon=self.epsilon, delta=0.0, model="central")

    def sample(self, value, n: int, rng: np.random.Generator):
        """``n`` runs on the query answers ``value``: vectorised over runs, one step per query."""
        q = np.asarray(value, dtype=float)
        noisy = q[None, :] + (rng.laplace(scale=self.nu_scale, size=(n, q.size)) if self.nu_scale > 0 else 0.0)
        rho = self.threshold + rng.laplace(scale=self.rho_scale, size=n)
        answer = np.full((n, q.size), -1, dtype=np.int8)
        found = np.zeros(n, dtype=np.int64)
        for i in range(q.size):
            live = found < (self.cutoff or q.size + 1)
            top = live & (noisy[:, i] >= rho)
            answer[live, i] = top[live]
            found += top
            if self.resample and top.any():
                rho[top] = self.threshold + rng.laplace(scale=self.rho_scale, size=int(top.sum()))
        if not self.numeric:
            return answer
        return {"answer": answer, "value": np.where(answer == 1, noisy, 0.0)}


def variants(epsilon: float = 1.0, queries: int = 10, rare_threshold: float = 6.0) -> dict[str, SparseVector]:
    """The six variants at ``epsilon`` with one ⊤ allowed (two for ``alg2``), keyed by name.

    ``alg3`` and its correct twin ``alg1`` run against ``rare_threshold``, so
    most runs release nothing and the numeric answer is rare.
    """
    e = epsilon
    zeros, ones = np.zeros(queries), np.ones(queries)
    down_up = np.r_[np.ones(queries - 1), 0.0]  # ⊥ queries fall, the last one rises
    half = np.r_[np.ones(queries // 2), np.zeros(queries - queries // 2)]
    rare = dict(threshold=rare_threshold)
    return {
        "alg1": SparseVector("alg1", e, 2 / e, 4 / e, 1, (zeros, ones), True, **rare),
        "alg2": SparseVector("alg2", e, 4 / e, 8 / e, 2, (down_up, 1 - down_up), True, resample=True),
        "alg3": SparseVector("alg3", e, 2 / e, 2 / e, 1, (zeros, ones), False, numeric=True, **rare),
        "alg4": SparseVector("alg4", e, 4 / e, 4 / (3 * e), 1, (down_up, 1 - down_up), False),
        "alg5": SparseVector("alg5", e, 2 / e, 0.0, None, (half, 1 - half), False),
        "alg6": SparseVector("alg6", e, 2 / e, 2 / e, None, (half, 1 - half), False),
    }
