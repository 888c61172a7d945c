"""Schedules without churn. ``Churn`` (``simulator.churn``) is the open world; ``Panel`` a fixed cohort."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, ClassVar

from annotated_types import Ge


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
