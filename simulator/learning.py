"""Learning curves without churn: how the server's estimate improves with users seen."""
from __future__ import annotations

from typing import Iterator

import numpy as np
import simpy

from recaudit.mechanisms import Mechanism

from .engine import MechanismRun
from .population import Catalogue
from .schedules import Cohorts
from .transcript import Recorder


def checkpoints(max_users: int, per_decade: int, start: int = 10) -> np.ndarray:
    """Geometric user counts ``start .. max_users`` with ``per_decade`` points per factor 10."""
    n = int(np.ceil(np.log10(max_users / start) * per_decade)) + 1
    points = np.unique(np.round(start * 10 ** (np.arange(n) / per_decade)).astype(np.int64))
    return np.append(points[points < max_users], max_users)


def learning_curve(population, catalogue: Catalogue, mechanism: Mechanism, at: np.ndarray,
                   root: np.random.SeedSequence, batch_size: int = 4096) -> Iterator[tuple[int, np.ndarray]]:
    """Yield ``(users_seen, published item labels)`` at each user count in ``at``.

    The churn-free limit of the simulator: a cohort of at most ``batch_size``
    users arrives at each tick and answers one query (``recaudit.simulator.engine``);
    the caller may stop early by closing the generator, so a sweep pays only
    for the users it needs.
    """
    run, env, stops = _cohort_run(population, catalogue, mechanism, at, root, batch_size, Recorder(answers=False))
    for tick, users in stops:
        env.run(until=tick + 0.5)
        yield users, mechanism.publish(run.state)


def serve(population, catalogue: Catalogue, mechanism: Mechanism, users: int, root: np.random.SeedSequence,
          batch_size: int = 4096, recorder: Recorder | None = None) -> MechanismRun:
    """The finished run after ``users`` fresh users each answered one query (its ``state``, ``finish()``)."""
    run, env, stops = _cohort_run(population, catalogue, mechanism, [users], root, batch_size,
                                  recorder or Recorder(answers=False))
    env.run(until=stops[-1][0] + 0.5)
    return run


def _cohort_run(population, catalogue, mechanism, at, root, batch_size, recorder):
    sizes, stops, seen = [], [], 0
    for target in np.asarray(at, dtype=np.int64):
        while seen < target:
            sizes.append(int(min(batch_size, target - seen)))
            seen += sizes[-1]
        stops.append((len(sizes), seen))
    run = MechanismRun(mechanism, population, catalogue, Cohorts(tuple(sizes), batch_size=batch_size), root,
                       recorder=recorder)
    env = simpy.Environment()
    env.process(run.cohort_arrivals(env, sizes))
    env.process(run.query_rounds(env))
    return run, env, stops

