"""Retraining under churn: a trainer refitted at every release on the users present (docs/guide/trainers.md).

With ``churn`` a trainer's scenario is a continual release. The population's ``N`` users and the ``m`` canaries
arrive at times uniform on ``[0, horizon)`` (a Poisson process of rate ``(N + m)/horizon`` conditioned on its
count) and each stays an exponential lifetime of mean ``churn.mean_lifetime``. A SimPy clock releases at every
multiple of ``churn.release_interval`` up to the horizon: the trainer is refitted from scratch (its own seed per
release) on the users present then — a member canary among them while present, a non-member never.

Every attack scores every canary on every release it was present at, and a canary's score is the mean of those:
the adversary sees all the models and knows when each canary was present (arrival times are public, as in the
engine's churn worlds). A canary present at no release cannot show anything; the public schedule, drawn before
any coin is looked at, leaves it out of the audit (the report counts it), so the estimators' guarantee holds for
the others. The claim is the user's, for everything published: all releases together.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import simpy
from scipy import sparse

from recaudit.simulator.seeds import stream

from .base import DesignError
from .trainer_canaries import Canaries, TrainerRun, canaries_checked, score_model

#: churn settings a trainer's schedule does not read (it has no queries; arrivals follow the population's size)
UNUSED_CHURN = ("arrival_rate", "query_interval", "queries_per_user", "batch_size")


def release_times(horizon: float, interval: float) -> np.ndarray:
    """Every multiple of ``interval`` in ``(0, horizon]`` (computed as ``k * interval``, not accumulated)."""
    return interval * np.arange(1, int(np.floor(horizon / interval + 1e-9)) + 1)


def retrain_under_churn(job, churn, population_users: int, m: int, kind: str, per_canary: int,
                        report: Callable[[str], None] = lambda _: None) -> TrainerRun:
    """Refit the trainer at every release on the users present; each canary's score averaged over its releases."""
    mechanism, root = job.mechanism, job.root()
    canaries, build_seconds, check_seconds = canaries_checked(job, population_users, m, kind, per_canary, report)
    background, rows = canaries.without, sparse.csr_matrix(canaries.rows)
    n = background.shape[0]
    schedule = stream(root, "trainer", "churn")
    arrive = schedule.uniform(0.0, churn.horizon, n + m)
    leave = arrive + schedule.exponential(churn.mean_lifetime, n + m)
    times = release_times(churn.horizon, churn.release_interval)
    pair = canaries.pair()
    sums, seen = np.zeros((len(job.attacks), m)), np.zeros(m)
    state: dict = {"train": 0.0, "attack": 0.0, "sizes": []}

    def retrain(k: int, now: float) -> None:
        present = (arrive <= now) & (now < leave)
        users, members = present[:n], present[n:] & (canaries.worlds == 1)
        if not users.any() and not members.any():
            raise DesignError(f"nobody is present at release {k + 1} (t = {now:g}): raise churn.mean_lifetime or "
                              f"lower churn.release_interval")
        stacked = sparse.vstack([background[users], rows[members]], format="csr")
        order = stream(root, "trainer", "order", k).permutation(stacked.shape[0])
        training = sparse.csr_matrix(stacked[order])
        training.sort_indices()
        report(f"release {k + 1} of {times.size} (t = {now:g}): training on {training.shape[0]:,} users "
               f"({int(members.sum())} member canaries present)")
        started = time.perf_counter()
        model = mechanism.train(training, stream(root, "trainer", "fit", k))
        trained = time.perf_counter()
        sums[:, present[n:]] += score_model(job, model, training.shape[0], pair, m, background[users])[:, present[n:]]
        seen[present[n:]] += 1
        state.update(model=model, training=training, users=users, order=order, members=members)
        state["train"] += trained - started
        state["attack"] += time.perf_counter() - trained
        state["sizes"].append(int(training.shape[0]))

    def releases(env: simpy.Environment):
        for k, when in enumerate(times):
            yield env.timeout(when - env.now)
            retrain(k, float(when))

    env = simpy.Environment()
    env.process(releases(env))
    env.run()
    kept = seen > 0
    if not kept.any():
        raise DesignError("no canary is present at any release: raise churn.mean_lifetime or lower "
                          "churn.release_interval")
    last = _last_release(canaries, state, kept)
    return TrainerRun(last, state["model"], sums[:, kept] / seen[kept], state["train"], build_seconds,
                      state["attack"], check_seconds, release_times=tuple(float(t) for t in times),
                      training_users=tuple(state["sizes"]), unscored=int(m - kept.sum()))


def _last_release(canaries: Canaries, state: dict, kept: np.ndarray) -> Canaries:
    """The canaries scored, with the last release's training matrix and its rows' held-out ratings (the utility)."""
    held = None
    if canaries.without_held_out is not None:
        members = int(state["members"].sum())
        stacked = sparse.vstack([canaries.without_held_out[state["users"]],
                                 sparse.csr_array((members, canaries.without_held_out.shape[1]))], format="csr")
        held = sparse.csr_array(stacked[state["order"]])
    return Canaries(state["training"], canaries.rows[kept], canaries.worlds[kept], canaries.kind,
                    canaries.population_users, canaries.reserved_items, held, canaries.without,
                    canaries.without_held_out)
