"""Dinur–Nissim linear-programming reconstruction of a bit database from noisy subset sums."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import optimize, sparse

from recaudit.mechanisms import Mechanism
from recaudit.core.errors import InternalError
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, AttackError
from .pmc_sign import message_rows


def lp_reconstruct(subsets: np.ndarray, answers: np.ndarray) -> np.ndarray:
    """Bits ``x`` (rounded at ½) of the LP ``min Σ_j e_j`` s.t. ``|q_j·x − a_j| ≤ e_j``, ``0 ≤ x ≤ 1``.

    Dinur and Nissim (PODS 2003): with noise o(√n) on O(n) random subset sums
    the rounded solution agrees with the database on all but o(n) bits.
    ``subsets``: (queries, n) 0/1; ``answers``: (queries,).
    """
    q = sparse.csr_array(np.asarray(subsets, float))
    k, n = q.shape
    eye = sparse.eye_array(k, format="csr")
    # variables [x (n), e (k)]:  Qx − e ≤ a  and  −Qx − e ≤ −a
    a_ub = sparse.vstack([sparse.hstack([q, -eye]), sparse.hstack([-q, -eye])], format="csr")
    b_ub = np.concatenate([answers, -answers])
    cost = np.concatenate([np.zeros(n), np.ones(k)])
    bounds = [(0.0, 1.0)] * n + [(0.0, None)] * k
    result = optimize.linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    if result.status != 0:
        raise InternalError(f"linprog failed: {result.message}")
    return (result.x[:n] >= 0.5).astype(float)


@dataclass
class DinurNissimAttack(Attack, kind="dinur_nissim"):
    """Reads a messages view of noisy subset sums of the user's like bits over the items.

    Each run's queries hold the subsets (runs, queries x items, flattened) and
    its message the noisy sums (runs, queries). Score: agreement of the LP
    reconstruction with world 1's like bits minus with world 0's, over the
    items rated in either world.
    """

    views = ("messages",)
    test_mechanism = None  # no registered mechanism releases noisy subset sums

    def refusal(self, mechanism: Mechanism | None, view) -> str | None:
        reason = super().refusal(mechanism, view)
        if reason is None and mechanism is not None and not getattr(mechanism, "subset_sums", False):
            reason = (f"{self.kind} reads noisy subset sums (a mechanism with subset_sums = True); "
                      f"{mechanism.kind} releases none")
        return reason

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        if not view.queries:
            raise AttackError(f"attack {self.kind} reads a messages view with subset queries")
        runs = message_rows(pair, view)
        answers = np.asarray(view.messages, float)
        subsets = np.asarray(view.queries[0], float)
        if subsets.shape[0] == 1:
            subsets = np.broadcast_to(subsets, (answers.shape[0], subsets.shape[1]))
        n_items = subsets.shape[1] // answers.shape[1]
        l0, l1 = pair.rows0.liked[runs].astype(float), pair.rows1.liked[runs].astype(float)
        out = np.zeros(answers.shape[0])
        for r in range(answers.shape[0]):
            x = lp_reconstruct(subsets[r].reshape(answers.shape[1], n_items), answers[r])
            out[r] = np.mean(x == l1[r]) - np.mean(x == l0[r])
        return out
