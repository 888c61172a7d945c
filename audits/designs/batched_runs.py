"""``batched_runs``: whole protocol runs of a small panel world, many at once (numpy over a runs axis).

The same game as ``full_runs`` — the scenario's world (the panel's users, drawn from the world stream as
the engine draws them) with the target appended in world 0 or world 1, fresh coins per run — but a block
of runs is one call of the mechanism's ``panel_runs`` (vectorised over runs; for one run it draws the
engine's noise and equals the engine's run, ``tests/test_tight_audits.py``). It yields the white-box
``statistics`` view only, which is what makes 10⁵–10⁶ runs per world of private Frank–Wolfe affordable.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from recaudit.mechanisms import UserBatch
from recaudit.simulator.schedules import Panel
from recaudit.simulator.seeds import stream
from recaudit.simulator.transcript import StatisticsView

from .base import Design, DesignError, DesignOutput, attack_outputs
from .sequential_blocks import run_blocks


def world_rows(job) -> UserBatch:
    """The panel's users as the engine draws them (stream "users" of the world seed, a fresh run's draws)."""
    population = job.population.for_run() if hasattr(job.population, "for_run") else job.population
    _, rows = population.sample_users(job.churn.n_users, job.catalogue, stream(job.world_seed(), "users"))
    return rows


def batch_block(job, pair, target: int, index: int, size: int) -> dict[str, np.ndarray]:
    """Scores (attacks, 2, size) of ``size`` runs per world, world ``b``'s coins ("trials", target, index, b)."""
    rows = world_rows(job)
    views = []
    for world in (0, 1):
        rng = np.random.default_rng(job.root("trials", target, index, world))
        statistics = job.mechanism.panel_runs(UserBatch.concat([rows, pair.rows(world)]), size, rng)
        views.append(StatisticsView(statistics=statistics))
    return attack_outputs(job, pair, views)


@dataclass(frozen=True)
class BatchedRuns(Design, kind="batched_runs"):
    """Whole runs of a panel world, a block at a time through the mechanism's ``panel_runs``."""

    test_mechanism: ClassVar[str] = "mcsherry_mironov"
    test_audit: ClassVar[dict] = {"view": "statistics", "pair": "single_flip"}
    test_attack: ClassVar[list | None] = [{"kind": "known_noise"}]
    fits_attacks: ClassVar[bool] = False
    gives_views: ClassVar[tuple[str, ...] | None] = ("statistics",)

    def check(self, mechanism, claim, churn, trials) -> None:
        super().check(mechanism, claim, churn, trials)
        if not hasattr(mechanism, "panel_runs"):
            raise DesignError(f"design batched_runs needs a mechanism that runs many panels at once "
                              f"(panel_runs); {mechanism.kind} has none: use full_runs")
        if not isinstance(churn, Panel):
            raise DesignError("design batched_runs runs a panel world: give the scenario a panel")

    def scores(self, job, policy, targets, trials, block_size, world, executor, progress, report):
        if job.view != "statistics" or any(v != "statistics" for v in job.attack_views):
            raise DesignError("design batched_runs gives the statistics view only (audit.view: statistics)")
        if any(a.requires_fit for a in job.attacks):
            raise DesignError("design batched_runs cannot fit a learning attack")
        pairs = [policy.rows_for_runs(job.population, job.catalogue, 1, stream(job.root(), "target", t))
                 for t in range(targets)]
        return DesignOutput(pairs, run_blocks(batch_block, job, pairs, trials, block_size, executor, progress,
                                              report))
