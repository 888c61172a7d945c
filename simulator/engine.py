"""The protocol engine: the one round loop of the code base, on a SimPy clock.

SimPy owns event time (arrivals, query rounds, releases); numpy does the
arithmetic over the batch of users a round touches. Every run of a protocol
goes through :class:`MechanismRun`: the churn world (``recaudit.simulator.churn``),
learning curves (``recaudit.simulator.learning``), and every audit design that re-runs
the protocol. Processes are started in a fixed order (arrivals, rounds,
releases), so same-time events run in the same order every run.

Two seeds feed a run: the world's (catalogue aside: arrivals ``churn``,
private rows ``users``) and the mechanism's coins (``queries``, the users'
``randomizer``, the server's ``noise``). By default both are the run's root;
a full-runs audit keeps the world and draws new coins per trial.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import simpy

from recaudit.core.errors import ParameterError
from recaudit.mechanisms import Mechanism, UserBatch, WorldInfo

from .population import Catalogue
from .schedules import Cohorts, Panel
from .seeds import stream
from .transcript import Recorder, Release, Round, Transcript


@dataclass(frozen=True)
class Inserted:
    """Users placed into a run by an audit (targets, canaries): their rows and arrival ticks.

    They stay until they have answered every query of their quota, and are
    always watched by the recorder.
    """

    rows: UserBatch
    ticks: np.ndarray  # query tick (1, 2, ...) at which each arrives

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class ActiveUsers:
    """The users still able to answer, one row each, in lockstep: ids, departure, answers given, whether an
    audit inserted them, their private rows and the state they carry across rounds (None: the mechanism keeps none).
    """

    ids: np.ndarray
    departure: np.ndarray
    answered: np.ndarray
    inserted: np.ndarray
    rows: UserBatch
    carried: np.ndarray | None

    @classmethod
    def arriving(cls, ids: np.ndarray, departure: np.ndarray, rows: UserBatch, inserted: bool | np.ndarray,
                 carried: np.ndarray | None) -> "ActiveUsers":
        """New users who have not answered yet (``inserted``: all, none, or per user)."""
        return cls(ids, departure, np.zeros(ids.size, np.int64), np.array(np.broadcast_to(inserted, ids.shape)),
                   rows, carried)

    def __len__(self) -> int:
        return self.ids.size

    def take(self, index: np.ndarray | slice) -> "ActiveUsers":
        return ActiveUsers(self.ids[index], self.departure[index], self.answered[index], self.inserted[index],
                           self.rows.take(index), None if self.carried is None else self.carried[index])

    def concat(self, other: "ActiveUsers") -> "ActiveUsers":
        carried = None if self.carried is None else np.concatenate([self.carried, other.carried])
        return ActiveUsers(np.concatenate([self.ids, other.ids]), np.concatenate([self.departure, other.departure]),
                           np.concatenate([self.answered, other.answered]),
                           np.concatenate([self.inserted, other.inserted]), UserBatch.concat([self.rows, other.rows]),
                           carried)


class MechanismRun:
    """One run of a mechanism over a world. Only the users still able to answer keep their rows in memory."""

    def __init__(self, mechanism: Mechanism, population, catalogue: Catalogue, schedule,
                 world_seed: np.random.SeedSequence, coins_seed: np.random.SeedSequence | None = None,
                 recorder: Recorder | None = None, inserted: Inserted | None = None):
        # a finite population (a ratings file) gives each run its own draws: no user twice in a run
        population = population.for_run() if hasattr(population, "for_run") else population
        self.mechanism, self.population, self.catalogue, self.schedule = mechanism, population, catalogue, schedule
        coins = world_seed if coins_seed is None else coins_seed
        self.rng_churn, self.rng_users = stream(world_seed, "churn"), stream(world_seed, "users")
        self.rng_queries, self.rng_randomizer = stream(coins, "queries"), stream(coins, "randomizer")
        self.rng_noise = stream(coins, "noise")
        self.recorder = recorder or Recorder()
        self.world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
        self.state = mechanism.init_state(self.world)
        if mechanism.public_panel() > 0:  # public users: part of the world, the same in both audit worlds
            _, public = population.sample_users(mechanism.public_panel(), catalogue, stream(world_seed, "public"))
            self.state = mechanism.init_public(self.state, public)
        self.inserted = inserted
        self.arrival: list[np.ndarray] = []
        self.departure: list[np.ndarray] = []
        self.cluster: list[np.ndarray] = []
        self.inserted_ids: list[np.ndarray] = []
        self.n_users = 0
        self.users_seen = 0
        self.active = self._nobody()
        #: whether users compute personal outputs when done (the base class's computes nothing)
        self._outputs = type(mechanism).personal_output is not Mechanism.personal_output

    # ---------------------------------------------------------------- who is present

    def admit(self, times: np.ndarray, departure: np.ndarray, clusters: np.ndarray, rows: UserBatch, now: float,
              inserted: bool | np.ndarray = False) -> None:
        """Register users who arrived since the last tick (``inserted``: all, none, or per user); those already
        gone are never asked."""
        ids = self.n_users + np.arange(times.size)
        self.arrival.append(times)
        self.departure.append(departure)
        self.cluster.append(clusters)
        inserted = np.broadcast_to(inserted, ids.shape)
        if inserted.any():
            self.inserted_ids.append(ids[inserted])
        if rows.held_out is not None:
            self.recorder.held_out(ids, rows.held_out)
        self.n_users += times.size
        stays = departure > now
        k = int(stays.sum())
        self.active = self.active.concat(ActiveUsers.arriving(
            ids[stays], departure[stays], rows if k == times.size else rows.take(stays), inserted[stays],
            self.mechanism.init_carried(k)))

    def _keep_active(self, keep: np.ndarray) -> None:
        """Drop users who left or are done; each computes its personal output as it goes."""
        if keep.all():
            return
        gone = np.flatnonzero(~keep) if self._outputs else np.zeros(0, np.int64)
        if gone.size and not self.recorder.keep_all_outputs:  # outputs nobody keeps are not computed
            gone = gone[self.recorder.is_watched(self.active.ids[gone], self.active.inserted[gone])]
        for start in range(0, gone.size, self.schedule.batch_size):  # batch by batch: temporaries stay small
            part = self.active.take(gone[start:start + self.schedule.batch_size])
            outputs = self.mechanism.personal_output(part.rows, part.carried, self.state)
            self.recorder.outputs(part.ids, outputs, self.recorder.is_watched(part.ids, part.inserted))
        # (no one left: a fresh empty set, as a slice's views would keep every row and carried state alive)
        self.active = self.active.take(keep) if keep.any() else self._nobody()

    def _nobody(self) -> ActiveUsers:
        return ActiveUsers.arriving(np.zeros(0, np.int64), np.zeros(0), UserBatch.empty(self.catalogue.n_items), False,
                                    self.mechanism.init_carried(0))

    # ---------------------------------------------------------------- the round loop

    def query_round(self, now: float) -> None:
        """One round: broadcast, then every present user with queries left answers, batch by batch."""
        self._keep_active(self.active.departure > now)
        published = self.mechanism.broadcast(self.state)
        self.recorder.rounds.append(Round(now, published))
        batch_size = self.schedule.batch_size
        for start in range(0, len(self.active), batch_size):
            self._answer(slice(start, start + batch_size), published, now)
        self.state = self.mechanism.end_round(self.state, self.rng_noise)
        self._keep_active(self.active.answered < self.schedule.queries_per_user)

    def _answer(self, batch: slice, published, now: float) -> None:
        mechanism, users = self.mechanism, self.active.take(batch)
        rated = users.rows.rated if mechanism.queries_read_rated else None  # (a dense mask: built only if read)
        queries = mechanism.make_queries(len(users), self.rng_queries, self.state, rated)
        messages, carried = mechanism.respond(users.rows, queries, published, users.carried, self.rng_randomizer)
        if carried is not None:
            self.active.carried[batch] = carried
        self.state = mechanism.aggregate(self.state, queries, messages)
        self.users_seen += int(np.count_nonzero(users.answered == 0))
        watched = self.recorder.is_watched(users.ids, users.inserted)
        self.recorder.answers(now, users.ids, users.answered, watched, queries, messages, mechanism.take_queries)
        self.active.answered[batch] += 1

    def release(self, now: float) -> None:
        self.recorder.releases.append(Release(now, self.users_seen, self.mechanism.publish(self.state)))
        if self.recorder.keep_statistics:
            self.recorder.statistics = self.mechanism.statistics(self.state)

    def finish(self) -> Transcript:
        """Every user still present is done: personal outputs, then the transcript."""
        self._keep_active(np.zeros(len(self.active), dtype=bool))

        def cat(parts, dtype):
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        return self.recorder.transcript(cat(self.arrival, float), cat(self.departure, float),
                                        cat(self.cluster, np.int64), cat(self.inserted_ids, np.int64))

    # ---------------------------------------------------------------- SimPy processes

    def _admit_inserted(self, tick: int, now: float) -> None:
        if self.inserted is None:
            return
        arrive = np.flatnonzero(self.inserted.ticks == tick)
        if arrive.size:
            n = arrive.size
            self.admit(np.full(n, now), np.full(n, np.inf), np.full(n, -1), self.inserted.rows.take(arrive), now,
                       inserted=True)

    def poisson_arrivals(self, env: simpy.Environment):
        """Exact Poisson arrival times with exponential lifetimes, registered at every tick."""
        dt, churn = self.schedule.query_interval, self.schedule
        for tick in itertools.count(1):
            yield env.timeout(tick * dt - env.now)
            n = int(self.rng_churn.poisson(churn.arrival_rate * dt))
            times = np.sort(env.now - dt + dt * self.rng_churn.random(n))
            departure = times + self.rng_churn.exponential(churn.mean_lifetime, n)
            clusters, rows = self.population.sample_users(n, self.catalogue, self.rng_users)
            self.admit(times, departure, clusters, rows, env.now)
            self._admit_inserted(tick, env.now)

    def cohort_arrivals(self, env: simpy.Environment, sizes):
        """``sizes[k]`` users arrive at tick ``k + 1`` and stay for that tick's round only."""
        dt = self.schedule.query_interval
        for tick, n in enumerate(sizes, 1):
            yield env.timeout(tick * dt - env.now)
            clusters, rows = self.population.sample_users(int(n), self.catalogue, self.rng_users)
            self.admit(np.full(n, env.now), np.full(n, env.now + dt / 2), clusters, rows, env.now)
            self._admit_inserted(tick, env.now)

    def panel_arrival(self, env: simpy.Environment):
        """The whole cohort arrives at the first tick and stays until it has answered every round; users inserted
        at that tick join it in the same arrays (``_panel_rows``)."""
        dt = self.schedule.query_interval
        yield env.timeout(dt - env.now)
        n = self.schedule.n_users
        joining = np.zeros(0, np.int64) if self.inserted is None else np.flatnonzero(self.inserted.ticks == 1)
        clusters, rows = self._panel_rows(n, joining)
        m = joining.size
        self.admit(np.full(n + m, env.now), np.full(n + m, np.inf), np.concatenate([clusters, np.full(m, -1)]), rows,
                   env.now, inserted=np.arange(n + m) >= n)
        del clusters, rows  # the active set holds the rows: this frame must not keep a second copy alive
        for tick in itertools.count(2):
            yield env.timeout(tick * dt - env.now)
            self._admit_inserted(tick, env.now)

    def _panel_rows(self, n: int, joining: np.ndarray) -> tuple[np.ndarray, UserBatch]:
        """``n`` panel users' clusters, and their rows followed by the inserted users ``joining``: a matrix
        population's rows are taken straight into the joint arrays (one copy of the panel, never two), without
        their likes when the mechanism reads none."""
        draw_sources = getattr(self.population, "draw_sources", None)
        if draw_sources is not None:
            source = draw_sources(n, self.rng_users)
            parts = [(self.population.rows, source)] + ([(self.inserted.rows, joining)] if joining.size else [])
            return source, UserBatch.gather(parts, likes=self.mechanism.reads_likes)
        clusters, rows = self.population.sample_users(n, self.catalogue, self.rng_users)
        return clusters, UserBatch.concat([rows, self.inserted.rows.take(joining)]) if joining.size else rows

    def query_rounds(self, env: simpy.Environment):
        for tick in itertools.count(1):
            yield env.timeout(tick * self.schedule.query_interval - env.now)
            self.query_round(env.now)

    def releases_after(self, env: simpy.Environment, ticks):
        """A release after the round of each tick in ``ticks`` (0: before the first round)."""
        for tick in ticks:
            yield env.timeout(tick * self.schedule.query_interval - env.now)
            yield env.timeout(0)  # after every event already due now (this tick's round)
            self.release(env.now)

    def scheduled_releases(self, env: simpy.Environment):
        """A release at the first tick at or after each multiple of ``release_interval``, after its round."""
        dt = self.schedule.query_interval
        for k in itertools.count(1):
            tick = math.ceil(k * self.schedule.release_interval / dt - 1e-9)
            yield env.timeout(tick * dt - env.now)
            # a zero delay puts the release after every event already due now (this tick's round)
            yield env.timeout(0)
            self.release(env.now)


def run_protocol(mechanism: Mechanism, population, catalogue: Catalogue, churn, world_seed: np.random.SeedSequence,
                 coins_seed: np.random.SeedSequence | None = None, recorder: Recorder | None = None,
                 inserted: Inserted | None = None) -> Transcript:
    """Run the churn world (or a :class:`Panel`, or :class:`Cohorts`) until ``churn.horizon``; its transcript.

    The server releases every ``release_interval`` (``Cohorts``: after its
    ``release_ticks``) and once more at the horizon if the last release fell before it.
    """
    run = MechanismRun(mechanism, population, catalogue, churn, world_seed, coins_seed, recorder, inserted)
    env = simpy.Environment()
    if isinstance(churn, Cohorts):
        env.process(run.cohort_arrivals(env, churn.sizes))
    else:
        env.process(run.panel_arrival(env) if isinstance(churn, Panel) else run.poisson_arrivals(env))
    env.process(run.query_rounds(env))
    env.process(run.releases_after(env, churn.release_ticks) if isinstance(churn, Cohorts)
                else run.scheduled_releases(env))
    env.run(until=churn.horizon + churn.query_interval * 1e-9)
    releases = run.recorder.releases
    if not releases or releases[-1].time < churn.horizon - 1e-9:
        run.release(churn.horizon)
    return run.finish()


def spread_ticks(n_users: int, churn, answers: int) -> np.ndarray:
    """Arrival ticks spreading ``n_users`` inserted users evenly over the run, leaving room for their answers."""
    last = int(math.floor(churn.horizon / churn.query_interval + 1e-9)) - answers + 1
    if last < 1:
        raise ParameterError("churn.horizon",
                             f"the horizon ({churn.horizon:g}) holds fewer query rounds than the {answers} answers "
                         f"an inserted user must give")
    return 1 + (np.arange(n_users) * last) // max(n_users, 1)
