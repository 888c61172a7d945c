"""The churn world: users arrive and leave, the server queries and releases.

The schedule is this module's ``Churn``; the clock and the round loop are
``recaudit.simulator.engine``. Three processes share one environment, started in a
fixed order so that events at equal times run in the same order every run:

* arrivals: at every tick (``query_interval``) the users who arrived since the
  previous tick join, with exact Poisson arrival times and exponential lifetimes;
* queries: at every tick the server sends one query to each present user that
  has answered fewer than ``queries_per_user`` queries; users who arrive and
  leave between two ticks are never asked (churn costs data);
* releases: at the first tick at or after each multiple of ``release_interval``,
  after that tick's queries, the server publishes its estimate.

Tick times are computed as ``k * query_interval`` (not accumulated), so the
processes meet at exactly equal times.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np
from annotated_types import Ge, Gt

from recaudit.mechanisms import ParameterError, Mechanism

from .engine import run_protocol
from .population import Catalogue
from .transcript import Recorder, Transcript


@dataclass
class Churn:
    """Arrivals, lifetimes and the server's schedule (time in arbitrary units)."""

    arrival_rate: Annotated[float, Gt(0)] = 100.0
    mean_lifetime: Annotated[float, Gt(0)] = 1.0
    horizon: Annotated[float, Gt(0)] = 100.0
    query_interval: Annotated[float, Gt(0)] = 0.25
    release_interval: Annotated[float, Gt(0)] = 10.0
    queries_per_user: Annotated[int, Ge(1)] = 1
    batch_size: Annotated[int, Ge(1)] = 4096

    def __post_init__(self) -> None:
        for name in ("query_interval", "release_interval"):
            if getattr(self, name) > self.horizon:
                raise ParameterError(name, f"must not exceed the horizon ({self.horizon:g})")


def simulate(population, catalogue: Catalogue, mechanism: Mechanism, churn: Churn, root: np.random.SeedSequence,
             recorder: Recorder | None = None) -> Transcript:
    """Run the churn world until ``churn.horizon`` (``recaudit.simulator.engine.run_protocol``).

    Keeps every message by default (``recorder`` to keep less).
    """
    return run_protocol(population=population, catalogue=catalogue, mechanism=mechanism, churn=churn,
                        world_seed=root, recorder=recorder or Recorder(messages="all"))
