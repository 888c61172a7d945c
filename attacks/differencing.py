"""Differencing (Calandrino et al. 2011): compare releases around the target's arrival to isolate its row.

A server that re-publishes a running statistic (``recaudit.mechanisms.continual_covariance``)
lets an adversary who knows when the target arrived (its arrival time is in
the view) subtract what was published before from what was published after:
what remains is the target's contribution ``x xᵀ`` (plus the other newcomers'
and the noise). The score is that difference's projection on the audited
pair's row difference, ``x̂₁x̂₁ᵀ − x̂₀x̂₀ᵀ`` (``x̂_b``: the world-``b``
target's ratings as a unit vector over items; on the upper triangle, where the
noise is drawn): higher means world 1.

``window`` releases on each side are averaged (``window: 1`` is the plain
difference of the two consecutive releases around the arrival; the default
uses every release). Before the first release the server's published state
is the empty sum (zero), which is what a target arriving at the first tick is
compared with. Averaging is what a server re-drawing independent noise per
release cannot survive; a tree-structured server's releases share noise.

``differencing_noise_aware`` weighs the releases as the noise they carry is public
(``release_noise_covariance`` of the mechanism: σ and the schedule): the
generalised-least-squares estimate of the jump at the arrival in
``r_t = c + θ·[t ≥ arrival] + noise``, ``r_t`` each release's projection —
still a difference (the unknown level ``c`` cancels), and the most powerful
linear one. Against the tree it recovers the target's released nodes (e.g.
``R_9 − R_8`` is the leaf of tick 9); against the naive server it is the
difference of means.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

import numpy as np
from annotated_types import Ge

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms.continual_covariance import ContinualCovariance
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import View

from .base import Attack, AttackError
from .subspace_alignment import _directions


def _covariances(releases) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Release times, ticks and published matrices (releases x items x items) of one run."""
    try:
        matrices = np.stack([np.asarray(r.published["covariance"]) for r in releases])
        ticks = np.array([int(r.published["tick"]) for r in releases])
    except (TypeError, KeyError, IndexError):
        raise AttackError("attack differencing reads releases that publish a 'covariance' matrix "
                         "(mechanisms continual_covariance_*)") from None
    return np.array([r.time for r in releases]), ticks, matrices


@dataclass
class DifferencingAttack(Attack, kind="differencing"):
    """Releases after the target's arrival minus releases before it, projected on the pair's difference."""

    views = ("releases",)
    reads = (ContinualCovariance,)
    reads_text = "releases of a covariance matrix (continual_covariance_*)"
    test_mechanism = "continual_covariance_tree"
    #: releases used on each side of the arrival (None: all of them)
    window: Annotated[int, Ge(1)] | None = None
    #: weigh releases by the mechanism's public noise covariance (GLS) instead of averaging each side
    noise_aware: ClassVar[bool] = False

    def jump(self, mechanism, times: np.ndarray, ticks: np.ndarray, projections: np.ndarray,
             arrival: float) -> float:
        """The estimated jump of the releases' projections at ``arrival``."""
        after = times >= arrival
        if not after.any():
            raise AttackError(f"attack differencing: no release after the target's arrival at t={arrival:g}")
        if self.window is not None:
            keep = np.zeros(times.size, bool)
            keep[np.flatnonzero(after)[:self.window]] = True
            keep[np.flatnonzero(~after)[-self.window:]] = True
            times, ticks, projections, after = times[keep], ticks[keep], projections[keep], after[keep]
        if not self.noise_aware:
            base = projections[~after].mean() if (~after).any() else 0.0  # before any release: the empty sum
            return float(projections[after].mean() - base)
        design = np.column_stack([np.ones(times.size), after]) if (~after).any() else after[:, None] * 1.0
        covariance = mechanism.release_noise_covariance(ticks)
        weighted = np.linalg.solve(covariance, design)
        return float(np.linalg.solve(design.T @ weighted, weighted.T @ projections)[-1])

    def scores(self, mechanism: Mechanism, pair: TargetPair, view: View) -> np.ndarray:
        self.check_view(view, mechanism)
        if view.arrival is None:
            raise AttackError(f"attack {self.kind} needs the audited users' arrival times in the view")
        x0, x1 = _directions(pair)
        if view.audited is not None:  # canaries of one run
            times, ticks, matrices = _covariances(view.releases[0])
            return np.array([self.jump(mechanism, times, ticks, _projections(matrices, x0[i], x1[i]), a)
                             for i, a in enumerate(view.arrival[0])])
        scores = []
        for i, (releases, arrival) in enumerate(zip(view.releases, view.arrival)):
            times, ticks, matrices = _covariances(releases)
            projections = _projections(matrices, x0[i % len(x0)], x1[i % len(x1)])
            scores.append(self.jump(mechanism, times, ticks, projections, float(arrival[0])))
        return np.array(scores)


def _projections(matrices: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> np.ndarray:
    """``Σ_{i≤j} M_ij (x₁ᵢx₁ⱼ − x₀ᵢx₀ⱼ)`` per matrix: the upper triangle (what symmetric noise draws
    independently) weighted by the pair's signal there — the best linear score against i.i.d. noise on it."""
    def upper(x):
        return 0.5 * (np.einsum("i,tij,j->t", x, matrices, x) + np.einsum("tii,i->t", matrices, x * x))

    return upper(x1) - upper(x0)


@dataclass
class NoiseAwareDifferencingAttack(DifferencingAttack, kind="differencing_noise_aware"):
    """Differencing weighted by the server's public release-noise covariance (generalised least squares)."""

    noise_aware: ClassVar[bool] = True
