"""Schedules without churn. ``Churn`` (``recaudit.simulator.churn``) is the open world; ``Panel`` a fixed cohort;
``Cohorts`` one cohort per round."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Ge
import numpy as np


@dataclass
class Panel:
    """A fixed cohort answering an iterative protocol: ``n_users`` arrive at the first tick and stay
    for ``rounds`` rounds (one answer each), then compute their personal outputs; the server releases
    once, after the last round. The schedule of matrix completion over a known set of users.
    """

    n_users: Annotated[int, Ge(1)]
    rounds: Annotated[int, Ge(1)] = 1
    batch_size: Annotated[int, Ge(1)] = 4096
    query_interval: ClassVar[float] = 1.0

    @property
    def horizon(self) -> float:
        return self.rounds * self.query_interval

    @property
    def release_interval(self) -> float:
        return self.horizon

    @property
    def queries_per_user(self) -> int:
        return self.rounds

    @property
    def arrival_rate(self) -> float:
        """Users per unit time, so that ``arrival_rate * horizon`` is the cohort (cost estimates)."""
        return self.n_users / self.horizon


@dataclass(frozen=True)
class Cohorts:
    """Users arrive in cohorts, one per tick: ``sizes[k]`` at tick ``k + 1``, each answering once in that
    tick's round, so the server's updates between cohorts reach the next one. The server releases after
    the round of each tick in ``release_ticks`` (0: before the first round) and after the last.
    The schedule of learning curves and of an update every ``k`` users (:meth:`every`).
    """

    sizes: tuple[int, ...]
    release_ticks: tuple[int, ...] = ()
    batch_size: Annotated[int, Ge(1)] = 4096
    query_interval: ClassVar[float] = 1.0
    queries_per_user: ClassVar[int] = 1

    @classmethod
    def every(cls, n_users: int, k: int, release_at: tuple[int, ...] = ()) -> "Cohorts":
        """``n_users`` in cohorts of ``k`` (the last may be smaller); a release once ``release_at[j]`` users
        have answered (after the first cohort that reaches the count; 0: before any answer)."""
        sizes = (k,) * (n_users // k) + ((n_users % k,) if n_users % k else ())
        reached = np.cumsum(sizes)
        ticks = {0 if n <= 0 else int(np.searchsorted(reached, min(n, n_users))) + 1 for n in release_at}
        return cls(sizes, tuple(sorted(ticks)), batch_size=k)

    @property
    def n_users(self) -> int:
        return int(sum(self.sizes))

    @property
    def horizon(self) -> float:
        return len(self.sizes) * self.query_interval

    @property
    def arrival_rate(self) -> float:
        return self.n_users / max(self.horizon, self.query_interval)
