"""Covariance projection: which world's target row do McSherry–Mironov's noisy measurements lean toward?

McSherry–Mironov (docs/families/mcsherry-mironov.md) publish noisy sums, counts, the weighted
covariance ``Cov = Σ_u w_u r̂_u r̂_uᵀ`` and weights ``Wgt = Σ_u w_u e_u e_uᵀ``.
Given the published ``MAvg`` (post-processing), a target row's contribution
``c_k(row)`` to every measurement ``k`` is known: its ratings and count
(``GSum``, ``GCount``), its row and pattern (``MSum``, ``MCount``) and
``w r̂ r̂ᵀ``, ``w e eᵀ`` (upper triangles). The score is the inverse-variance
weighted projection of the published values ``y_k`` on the difference of
the two worlds' contributions:

    Σ_k ⟨c_k(row₁) − c_k(row₀), y_k⟩ / Var_k

— the likelihood-ratio statistic for Gaussian noise when everything else is
fixed, a strong linear test for Laplace noise. Views: ``releases`` and
``others`` read the run's last release (other users' outputs are functions of
it and their own rows); ``target`` compares the target's own output with the
output each world's row gives under the same release (the negative control).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import sparse

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.mcsherry_mironov import McSherryMironov
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack


def _symmetric(upper: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros((n, n))
    out[np.triu_indices(n)] = upper
    return out + np.triu(out, 1).T


def _upper_form(rows: sparse.csr_array, weight: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """``Σ_{j≤k} w x_j x_k Y_jk`` per row: the inner product of ``w x xᵀ`` (upper) with ``Y`` (upper)."""
    n = rows.shape[1]
    full = _symmetric(upper, n)
    quad = np.asarray((rows @ full) * rows.toarray()).sum(axis=1)  # xᵀ Y x (off-diagonal counted twice)
    diag = np.asarray(rows.multiply(rows) @ np.diag(full)).ravel()
    return weight * (quad + diag) / 2.0


def contribution_scores(mechanism, release, rows: sparse.csr_array) -> np.ndarray:
    """``Σ_k ⟨c_k(row), y_k⟩ / Var_k`` for every row (users x items CSR) against one release."""
    rows = mechanism._clipped(sparse.csr_array(rows, dtype=float))
    pattern = sparse.csr_array((np.ones(rows.nnz), rows.indices, rows.indptr), shape=rows.shape)
    centred = mechanism.centred(rows, release.MAvg)
    weight = mechanism.weights(rows)
    y = release.measurements
    scales = mechanism.noise_scales()
    var = {k: (2.0 if mechanism.noise == "laplace" else 1.0) * s * s for k, s in scales.items()}
    score = (np.asarray(rows.sum(axis=1)).ravel() * y["GSum"][0] / var["GSum"]
             + np.diff(rows.indptr) * y["GCount"][0] / var["GCount"]
             + np.asarray(rows @ y["MSum"]).ravel() / var["MSum"]
             + np.asarray(pattern @ y["MCount"]).ravel() / var["MCount"])
    score += _upper_form(centred, weight, y["Cov"]) / var["Cov"]
    score += _upper_form(pattern, weight, y["Wgt"]) / var["Wgt"]
    return score


@dataclass
class CovarianceProjectionAttack(Attack, kind="covariance_projection"):
    """Inverse-variance projection of McSherry–Mironov's measurements on the target's contribution."""

    views = ("releases", "others", "target")
    reads = (McSherryMironov,)
    reads_text = "McSherry–Mironov's releases (mcsherry_mironov*)"
    test_mechanism = "mcsherry_mironov"

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        rows0, rows1 = pair.rows0.ratings, pair.rows1.ratings
        if view.kind == "target":
            return self._target_scores(mechanism, pair, view)
        if view.audited is not None:  # canaries: every one against the run's single release
            release = view.releases[0][-1].published
            return (contribution_scores(mechanism, release, rows1)
                    - contribution_scores(mechanism, release, rows0))
        out = np.empty(len(view.releases))
        for i, releases in enumerate(view.releases):
            release, j = releases[-1].published, i % len(pair)
            out[i] = (contribution_scores(mechanism, release, rows1[[j]])[0]
                      - contribution_scores(mechanism, release, rows0[[j]])[0])
        return out

    @staticmethod
    def _target_scores(mechanism, pair: TargetPair, view: View) -> np.ndarray:
        """The target's own output against the output each world's row gives with the same release.

        A user's output is ``[1, r̄_u, p_u]`` over ``[MAvg; 1; Qᵀ]``: the basis
        gives ``MAvg`` and ``Q``, so the attack recomputes ``r̄`` and ``p`` for both
        candidate rows; the score is how much closer the output is to world 1's.
        """
        from recaudit.mechanisms.mcsherry_mironov import Release, user_factors

        outputs = [view.target[0]] if view.audited is not None else list(view.target)
        scores = []
        for i, rows in enumerate(outputs):
            published = Release({}, 0.0, rows.basis[0], None, rows.basis[2:].T)
            users = np.arange(len(rows)) if view.audited is not None else np.array([i % len(pair)])
            distance = []
            for world in (pair.rows0, pair.rows1):
                offset, factor = user_factors(mechanism, published, world.ratings[users])
                expected = np.column_stack([np.ones(users.size), offset, factor])
                distance.append(np.linalg.norm(rows.coefficients - expected, axis=1))
            scores.append(distance[0] - distance[1])
        return np.concatenate(scores)


__all__ = ["CovarianceProjectionAttack", "contribution_scores"]
