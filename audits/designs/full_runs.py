"""``full_runs``: one run = the whole protocol re-run on the scenario's world (valid for every claim).

Every trial replays the scenario's world (the same arrivals and private rows:
the world stream is fixed) with fresh mechanism coins (queries, randomizer,
server noise) and the target inserted at tick ``audit.insert_tick`` (default the
first), holding its world-0 or world-1 row; the attacks read the claim's view cut from that run's
transcript. It is the honest way to audit central and joint claims, and a
check on local replay for local ones — at the price of one protocol run per
trial, so keep the world small.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from recaudit.simulator.engine import Inserted, run_protocol
from recaudit.simulator.seeds import stream
from recaudit.simulator.transcript import Recorder

from .base import Design, DesignError, DesignOutput, attack_outputs, fit_attacks, stack_views, view_of
from .sequential_blocks import run_blocks

#: the most user-answers (users per run x runs) a full-runs audit may cost before it is refused at load time
MAX_USER_RUNS = 5e8


def whole_run(job, pair, world: int, coins, kinds=None):
    """One whole protocol run with the target in ``world``; the claim's view of it (or, given ``kinds``,
    a dict of those views)."""
    wanted = (job.view,) if kinds is None else kinds
    inserted = Inserted(pair.rows(world), np.full(1, job.insert_tick, dtype=np.int64))
    everyone = bool({"others", "statistics"} & set(wanted))
    transcript = run_protocol(job.mechanism, job.population, job.catalogue, job.churn, job.world_seed(), coins,
                              Recorder(answers=False, outputs="all" if everyone else "watched",
                                       statistics="statistics" in wanted), inserted)
    views = {k: view_of(transcript, k, transcript.inserted, job.answers) for k in wanted}
    return views[job.view] if kinds is None else views


def runs_block(job, pair, target: int, index: int, size: int) -> dict[str, np.ndarray]:
    """Scores (attacks, 2, size): ``size`` runs per world, run ``i`` with coins ("trials", target, index, world, i)."""
    kinds = tuple(dict.fromkeys(job.attack_views))
    runs = [[whole_run(job, pair, world, job.root("trials", target, index, world, i), kinds) for i in range(size)]
            for world in (0, 1)]
    return attack_outputs(job, pair, {k: [stack_views([r[k] for r in runs[w]]) for w in (0, 1)] for k in kinds})


@dataclass(frozen=True)
class FullRuns(Design, kind="full_runs"):
    """The whole protocol per trial on the scenario's (small) world, the target inserted."""


    def check(self, mechanism, claim, churn, trials) -> None:
        super().check(mechanism, claim, churn, trials)
        cost = churn.arrival_rate * churn.horizon * 2 * trials
        if cost > MAX_USER_RUNS:
            raise DesignError(f"design full_runs re-runs the whole world per trial: {churn.arrival_rate:g} "
                              f"arrivals x horizon {churn.horizon:g} x 2 x {trials} trials = {cost:.3g} user-runs "
                              f"(more than {MAX_USER_RUNS:.0e}); make the world smaller or use one_run")

    def scores(self, job, policy, targets, trials, block_size, world, executor, progress, report):
        pairs = [policy.rows_for_runs(job.population, job.catalogue, 1, stream(job.root(), "target", t))
                 for t in range(targets)]
        if any(a.requires_fit for a in job.attacks):
            pair = pairs[0]
            job = replace(job, attacks=fit_attacks(job, pair, lambda w, seed: stack_views(
                [whole_run(job, pair, w, seed.spawn(trials)[i]) for i in range(trials)])))
        return DesignOutput(pairs, run_blocks(runs_block, job, pairs, trials, block_size, executor, progress,
                                              report))
