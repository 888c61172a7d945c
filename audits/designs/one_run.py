"""``one_run``: m canaries, each in world 1 with probability ½, inside ONE run of the protocol.

The canaries are users whose rows are fixed before the run (the neighbour
policy's world-0 and world-1 rows; a fair coin per canary picks which one it
holds). They are inserted into the scenario's own world run — the run that
also measures utility — spread evenly over its query rounds, and each gives
all its answers. The attacks score every canary from the claim's view of
that one run; the one-run estimators turn the top and bottom guesses into a
bound (Steinke, Nasr, Jagielski 2023). One protocol run, however many canaries.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from recaudit.simulator.engine import Inserted, spread_ticks
from recaudit.simulator.seeds import stream
from recaudit.simulator.transcript import View, canary_view

from .base import CANARIES, Design, DesignError, DesignOutput, TargetScores, view_of


@dataclass(frozen=True)
class OneRunCanaries(Design, kind="one_run"):
    """Canaries inside the world's one run; scores per canary with its secret world."""

    produces: ClassVar[str] = "canaries"
    fits_attacks: ClassVar[bool] = False  # its canaries are all counted


    def _canaries(self, job, policy, m):
        pair = policy.rows_for_runs(job.population, job.catalogue, m, stream(job.root(), "canaries"))
        worlds = stream(job.root(), "canaries", "worlds").integers(0, 2, m)
        return pair, worlds

    def inserts(self, job, policy, trials):
        pair, worlds = self._canaries(job, policy, trials)
        rows = pair.rows0.where(worlds == 1, pair.rows1)
        return Inserted(rows, spread_ticks(trials, job.churn, job.answers))

    def scores(self, job, policy, targets, trials, block_size, world, executor, progress, report):
        if any(a.requires_fit for a in job.attacks):
            raise DesignError("design one_run cannot fit a learning attack yet (its canaries are all counted)")
        pair, worlds = self._canaries(job, policy, trials)
        views: dict[str, View] = {}
        for kind in dict.fromkeys(job.attack_views):
            views[kind] = (view_of(world, kind, world.inserted, job.answers) if kind == "messages"
                           else canary_view(world, kind, world.inserted))
        run = TargetScores(np.stack([a.scores(job.mechanism, pair, views[kind])
                                     for a, kind in zip(job.attacks, job.attack_views)]), worlds)
        if progress is not None:  # the run's score store (``recaudit report`` reads it back)
            progress.save_arrays(CANARIES, run.to_arrays())
        return DesignOutput([pair], [run])
