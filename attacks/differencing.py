"""Differencing (Calandrino et al. 2011): compare releases around the target's arrival to isolate its row.

A server that re-publishes a running statistic (``mechanisms.continual_covariance``)
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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np
from annotated_types import Ge

from mechanisms import Protocol
from simulator.neighbours import TargetPair
from simulator.transcript import View

from .base import Attack
from .subspace_alignment import _directions


def _covariances(releases) -> tuple[np.ndarray, np.ndarray]:
    """Release times and published matrices (releases x items x items) of one run."""
    try:
        matrices = np.stack([np.asarray(r.item_labels["covariance"]) for r in releases])
    except (TypeError, KeyError, IndexError):
        raise ValueError("attack differencing reads releases that publish a 'covariance' matrix "
                         "(mechanisms continual_covariance_*)") from None
    return np.array([r.time for r in releases]), matrices


@dataclass
class DifferencingAttack(Attack):
    """Mean release after the target's arrival minus mean release before it, projected on the pair's difference."""

    name = "differencing"
    views = ("releases",)
    #: releases averaged on each side of the arrival (None: all of them)
    window: Annotated[int, Ge(1)] | None = None

    def difference(self, times: np.ndarray, matrices: np.ndarray, arrival: float) -> np.ndarray:
        """Mean of the (up to ``window``) releases from ``arrival`` on, minus the mean of those before it."""
        after, before = matrices[times >= arrival], matrices[times < arrival]
        if after.shape[0] == 0:
            raise ValueError(f"no release after the target's arrival at t={arrival:g}")
        if self.window is not None:
            after, before = after[:self.window], before[before.shape[0] - min(self.window, before.shape[0]):]
        base = before.mean(axis=0) if before.shape[0] else np.zeros_like(after[0])
        return after.mean(axis=0) - base

    def scores(self, mechanism: Protocol, pair: TargetPair, view: View) -> np.ndarray:
        if view.kind != "releases":
            raise ValueError(f"attack {self.name} reads the releases view, not {view.kind!r}")
        if view.arrival is None:
            raise ValueError(f"attack {self.name} needs the audited users' arrival times in the view")
        x0, x1 = _directions(pair)
        if view.audited is not None:  # canaries of one run
            times, matrices = _covariances(view.releases[0])
            arrivals = view.arrival[0]
            return np.array([_tilt(self.difference(times, matrices, a), x0[i], x1[i])
                             for i, a in enumerate(arrivals)])
        scores = []
        for i, (releases, arrival) in enumerate(zip(view.releases, view.arrival)):
            times, matrices = _covariances(releases)
            scores.append(_tilt(self.difference(times, matrices, float(arrival[0])), x0[i % len(x0)],
                                x1[i % len(x1)]))
        return np.array(scores)


def _tilt(delta: np.ndarray, x0: np.ndarray, x1: np.ndarray) -> float:
    """``Σ_{i≤j} Δ_ij (x₁ᵢx₁ⱼ − x₀ᵢx₀ⱼ)``: the upper triangle (what symmetric noise draws independently)
    weighted by the pair's signal there — the best linear score against i.i.d. noise on it."""
    def upper(x):
        return 0.5 * (x @ delta @ x + np.diagonal(delta) @ (x * x))

    return float(upper(x1) - upper(x0))
