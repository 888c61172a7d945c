"""Subspace alignment: does what the adversary sees lean toward the world-1 target's rated items or the world-0 one's?

For matrix-completion protocols (docs/families/matrix-completion.md) a target enters the global
statistic ``W = Σ A_iᵀA_i`` through its rated items, so every item vector
derived from ``W`` tilts toward the target's direction ``x_b`` (its ratings
as a unit vector over items, in world ``b``). The score is the tilt toward
``x_1`` minus the tilt toward ``x_0``:

* ``releases``: ``Σ_t (v̂_t·x_1)² − (v̂_t·x_0)²`` over every published vector;
* ``others``: the same over the other users' completed rows, ``‖Y_{−i} x_1‖² − ‖Y_{−i} x_0‖²``
  (their rows are computed from the published vectors and their own data —
  and from anything else the protocol really gave them);
* ``target``: the target's own row against its ratings, ``y·x_1 − y·x_0``
  (the negative control: joint DP says nothing about it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.matrix_completion import GramCompletion
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View, rows_of

from .base import Attack, AttackError


def _directions(pair: TargetPair) -> tuple[np.ndarray, np.ndarray]:
    """Unit item vectors of the audited users' ratings in world 0 and 1: (n_users, n_items) each."""
    out = []
    for rows in (pair.rows0, pair.rows1):
        dense = rows.ratings.toarray().astype(float)
        out.append(dense / np.maximum(np.linalg.norm(dense, axis=1, keepdims=True), 1e-300))
    return out[0], out[1]


def _published_basis(release) -> np.ndarray:
    """Every item vector of a run's last release (``{"basis": rows}``)."""
    return np.asarray(release[-1].published["basis"])


@dataclass
class SubspaceAlignmentAttack(Attack, kind="subspace_alignment"):
    """Tilt of the adversary's item vectors toward the world-1 target's items, minus toward world 0's."""

    views = ("releases", "others", "target")
    reads = (GramCompletion,)
    reads_text = "a Gram matrix completion's item vectors (private_frank_wolfe*, private_projected_gradient)"
    test_mechanism = "private_frank_wolfe"

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        x0, x1 = _directions(pair)
        if view.audited is not None:
            return self._canary_scores(view, x0, x1)
        if view.kind == "releases":
            bases = [_published_basis(r) for r in view.releases]
            return np.array([_tilt(b, x1[i % len(x1)]) - _tilt(b, x0[i % len(x0)]) for i, b in enumerate(bases)])
        if view.kind == "others":
            scores = []
            for i, (_, rows) in enumerate(view.others):
                # ‖C B x‖² for rows C @ B: no dense rows needed
                scores.append(_rows_tilt(rows, x1[i % len(x1)]) - _rows_tilt(rows, x0[i % len(x0)]))
            return np.array(scores)
        if view.kind == "target":
            rows = [t.dense()[0] for t in view.target]
            return np.array([r @ x1[i % len(x1)] - r @ x0[i % len(x0)] for i, r in enumerate(rows)])
        raise AttackError(f"attack {self.kind} reads releases, others or target views, not {view.kind!r}")

    def _canary_scores(self, view: View, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
        """Every canary of one run at once (``x0``, ``x1``: one row per canary)."""
        if view.kind == "releases":
            basis = _published_basis(view.releases[0])
            return np.sum((x1 @ basis.T) ** 2, axis=1) - np.sum((x0 @ basis.T) ** 2, axis=1)
        if view.kind == "target":
            rows = view.target[0]
            return np.sum(rows.coefficients * ((x1 - x0) @ rows.basis.T), axis=1)
        if view.kind == "others":
            users, rows = view.others[0]
            own = rows[rows_of(users, view.audited)].coefficients
            second = rows.coefficients.T @ rows.coefficients  # Σ_j c_j c_jᵀ: rows y_j = c_j B

            def tilt(x):  # Σ_j (y_j·x)² over everyone's rows but the canary's own, from z = B x (one product)
                z = x @ rows.basis.T
                return np.sum((z @ second) * z, axis=1) - np.sum(own * z, axis=1) ** 2

            return tilt(x1) - tilt(x0)
        raise AttackError(f"attack {self.kind} reads releases, others or target views, not {view.kind!r}")


def _tilt(basis: np.ndarray, x: np.ndarray) -> float:
    return float(np.sum((basis @ x) ** 2))


def _rows_tilt(rows, x: np.ndarray) -> float:
    if rows is None or len(rows) == 0:
        return 0.0
    return float(np.sum((rows.coefficients @ (rows.basis @ x)) ** 2))


@dataclass
class UnpublishedDirectionAttack(Attack, kind="unpublished_direction"):
    """The others view only: tilt of the part of other users' rows that no published vector explains.

    Under a protocol whose users combine only what it publishes, that part is
    zero in both worlds (score 0, nothing to learn). A protocol that hands
    users an unpublished global quantity shows it here.
    """

    views = ("others",)
    reads = (GramCompletion,)
    reads_text = "a Gram matrix completion's item vectors (private_frank_wolfe*, private_projected_gradient)"
    test_mechanism = "private_frank_wolfe"

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        if view.audited is not None:
            raise AttackError(f"attack {self.kind} reads the others view of one run per audited user")
        x0, x1 = _directions(pair)
        scores = []
        for i, ((_, rows), releases) in enumerate(zip(view.others, view.releases)):
            if rows is None or len(rows) == 0:
                scores.append(0.0)
                continue
            published = _published_basis(releases)
            q, _ = np.linalg.qr(published.T)  # orthonormal span of the published vectors (items x k)
            residual = rows.basis - (rows.basis @ q) @ q.T  # each row vector's unpublished part
            tilt = [float(np.sum((rows.coefficients @ (residual @ x[i % len(x)])) ** 2)) for x in (x0, x1)]
            scores.append(tilt[1] - tilt[0])
        return np.array(scores)
