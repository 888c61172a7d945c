"""The world's clock: users arrive and leave, the server queries and releases (SimPy).

SimPy owns event time; the arithmetic is numpy over the batch of users a server
round touches. Three processes share one environment, started in a fixed order
so that events at equal times run in the same order every run:

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

import itertools
import math
from dataclasses import dataclass
from typing import Annotated

import numpy as np
import simpy
from annotated_types import Ge, Gt

from mechanisms import LocalMechanism, ParameterError, UserBatch, WorldInfo

from .population import Catalogue
from .seeds import stream
from .transcript import Release, Transcript


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


class _Run:
    """Mutable state of one simulation, touched only by the SimPy processes.

    Only the users still able to answer (present, with queries left) keep their
    private rows in memory, so memory follows the number present, not the
    number who ever came.
    """

    def __init__(self, population, catalogue: Catalogue, mechanism: LocalMechanism, churn: Churn,
                 root: np.random.SeedSequence):
        self.population, self.catalogue, self.mechanism, self.churn = population, catalogue, mechanism, churn
        self.rng_churn = stream(root, "churn")
        self.rng_users = stream(root, "users")
        self.rng_queries = stream(root, "queries")
        self.rng_randomizer = stream(root, "randomizer")
        world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
        self.state = mechanism.init_state(world)
        self.arrival: list[np.ndarray] = []
        self.departure: list[np.ndarray] = []
        self.cluster: list[np.ndarray] = []
        self.answers: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.releases: list[Release] = []
        self.n_users = 0
        n = catalogue.n_items
        # the users who may still answer: ids, departure times, answers given, private rows
        self.active_id = np.zeros(0, dtype=np.int64)
        self.active_departure = np.zeros(0)
        self.active_answered = np.zeros(0, dtype=np.int64)
        self.active_rows = UserBatch(np.zeros((0, n), bool), np.zeros((0, n), bool))

    def arrivals(self, env: simpy.Environment):
        dt = self.churn.query_interval
        for tick in itertools.count(1):
            yield env.timeout(tick * dt - env.now)
            n = int(self.rng_churn.poisson(self.churn.arrival_rate * dt))
            times = np.sort(env.now - dt + dt * self.rng_churn.random(n))
            departure = times + self.rng_churn.exponential(self.churn.mean_lifetime, n)
            clusters, rows = self.population.sample_users(n, self.catalogue, self.rng_users)
            ids = self.n_users + np.arange(n)
            self.arrival.append(times)
            self.departure.append(departure)
            self.cluster.append(clusters)
            self.n_users += n
            stays = departure > env.now  # users gone before this tick are never asked
            self.active_id = np.concatenate([self.active_id, ids[stays]])
            self.active_departure = np.concatenate([self.active_departure, departure[stays]])
            self.active_answered = np.concatenate([self.active_answered, np.zeros(int(stays.sum()), np.int64)])
            self.active_rows = UserBatch(np.concatenate([self.active_rows.rated, rows.rated[stays]]),
                                         np.concatenate([self.active_rows.liked, rows.liked[stays]]))

    def queries(self, env: simpy.Environment):
        for tick in itertools.count(1):
            yield env.timeout(tick * self.churn.query_interval - env.now)
            keep = self.active_departure > env.now
            self._keep_active(keep)
            for start in range(0, self.active_id.size, self.churn.batch_size):
                self._ask(slice(start, start + self.churn.batch_size), env.now)
            self._keep_active(self.active_answered < self.churn.queries_per_user)

    def _keep_active(self, keep: np.ndarray) -> None:
        if keep.all():
            return
        self.active_id, self.active_departure = self.active_id[keep], self.active_departure[keep]
        self.active_answered, self.active_rows = self.active_answered[keep], self.active_rows.take(keep)

    def _ask(self, batch: slice, now: float) -> None:
        rows = self.active_rows.take(batch)
        queries = self.mechanism.make_queries(len(rows), self.rng_queries, self.state, rows.rated)
        messages = self.mechanism.release(self.mechanism.sketch(rows, queries), self.rng_randomizer)
        self.state = self.mechanism.aggregate(self.state, queries, messages)
        self.active_answered[batch] += 1
        self.answers.append((now, self.active_id[batch].copy(), messages))

    def releases_process(self, env: simpy.Environment):
        dt = self.churn.query_interval
        for k in itertools.count(1):
            tick = math.ceil(k * self.churn.release_interval / dt - 1e-9)
            yield env.timeout(tick * dt - env.now)
            # a zero delay puts the release after every event already due now (this tick's queries)
            yield env.timeout(0)
            self.release(env.now)

    def release(self, now: float) -> None:
        users_seen = getattr(self.state, "users_seen", None)
        if users_seen is None:
            users_seen = sum(a[1].size for a in self.answers)
        self.releases.append(Release(now, int(users_seen), self.mechanism.estimate(self.state)))

    def transcript(self) -> Transcript:
        def cat(parts, dtype):
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        n_bits = self.answers[0][2].shape[1] if self.answers else 1
        return Transcript(
            arrival=cat(self.arrival, float),
            departure=cat(self.departure, float),
            user_cluster=cat(self.cluster, np.int64),
            answer_time=cat([np.full(a[1].size, a[0]) for a in self.answers], float),
            answer_user=cat([a[1] for a in self.answers], np.int64),
            messages=np.concatenate([a[2] for a in self.answers]) if self.answers else np.zeros((0, n_bits), bool),
            releases=self.releases,
        )


def simulate(population, catalogue: Catalogue, mechanism: LocalMechanism, churn: Churn,
             root: np.random.SeedSequence) -> Transcript:
    """Run the world until ``churn.horizon`` and return its transcript.

    The server releases every ``release_interval`` and once more at the
    horizon if the last scheduled release fell before it.
    """
    run = _Run(population, catalogue, mechanism, churn, root)
    env = simpy.Environment()
    # start order fixes the order of same-time events: arrivals, then queries, then releases
    env.process(run.arrivals(env))
    env.process(run.queries(env))
    env.process(run.releases_process(env))
    env.run(until=churn.horizon + churn.query_interval * 1e-9)
    if not run.releases or run.releases[-1].time < churn.horizon - 1e-9:
        run.release(churn.horizon)
    return run.transcript()
