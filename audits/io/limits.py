"""What a scenario will cost, estimated before any work, and the limits it must stay within.

The estimate is deliberately simple and errs high; each term names what it
counts so a refusal says which setting to lower:

- ``state``: the mechanism's server state at the scenario's ``n_items``,
  extrapolated from the state it builds at two small sizes (a power law in
  ``n_items``: an N x N table is measured as N^2), so no mechanism needs code
  for it and nothing large is allocated to find out;
- ``batch``: one batch of users' rows over the items (``churn.batch_size`` x
  ``n_items`` x 8 bytes);
- ``scores``: every trial's score kept for the estimator (2 worlds x trials x
  targets x attacks x 8 bytes);
- ``users``: expected arrivals (``arrival_rate`` x ``horizon``);
- ``rounds``: query and release rounds (``horizon / query_interval`` and
  ``horizon / release_interval``);
- ``seconds``: the run's time on a 2-core machine: the protocol runs it makes
  (one for the world; ``full_runs`` adds two per trial and target), each
  costing ``RUN_SECONDS`` plus ``ROUND_SECONDS`` per round (the clock and the
  engine's fixed work) plus its rating-table cells (users x items x rounds
  per user) at ``CELLS_PER_SECOND``, plus one target row per trial for the
  other designs and each attack's scoring. The constants are set so the
  estimate errs high on every shipped scenario; ``./dev bench estimate``
  measures the ratio of estimated to measured time.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from mechanisms import WorldInfo

GIB = 2 ** 30
# Throughputs of the time estimate (see the module docstring), measured by ``./dev bench estimate``.
CELLS_PER_SECOND = 2e7
RUN_SECONDS = 0.05
ROUND_SECONDS = 0.002

class LimitsConfig(BaseModel):
    """The largest run a scenario may ask for; raise a limit to run beyond it on purpose."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    memory_gb: float = Field(8.0, gt=0, description="estimated peak memory, GiB")
    users: float = Field(1e8, gt=0, description="expected user arrivals (arrival_rate x horizon)")
    rounds: float = Field(1e7, gt=0, description="query and release rounds of the simulated world")
    trials: float = Field(1e9, gt=0, description="trials per world x targets x attacks")
    hours: float = Field(24.0, gt=0, description="estimated run time, hours (on a 2-core machine)")


def nbytes(value: Any, seen: set[int] | None = None) -> int:
    """Bytes held by the numpy arrays (and scipy sparse matrices) inside ``value``."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if hasattr(value, "data") and hasattr(value, "nnz"):  # scipy.sparse
        return sum(int(getattr(value, a).nbytes) for a in ("data", "indices", "indptr", "row", "col")
                   if isinstance(getattr(value, a, None), np.ndarray))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(nbytes(getattr(value, f.name), seen) for f in dataclasses.fields(value))
    if isinstance(value, dict):
        return sum(nbytes(v, seen) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(nbytes(v, seen) for v in value)
    return 0


def state_bytes(mechanism, world: WorldInfo) -> float | None:
    """The mechanism's state size at ``world``, extrapolated from two small worlds (None if unknown)."""
    n = world.n_items
    small = (256, 512)
    try:
        if n <= small[1]:
            return float(nbytes(mechanism.init_state(world)))
        measured = []
        for m in small:
            w = max(1, min(m, round(world.ratings_per_user * m / n)))
            measured.append(nbytes(mechanism.init_state(WorldInfo(m, w, world.n_item_clusters))))
    except Exception:  # a world too small for this mechanism: its own checks speak at full size
        return None
    low, high = measured
    power = min(3.0, max(0.0, math.log2(high / low))) if low > 0 and high > 0 else 1.0
    return high * (n / small[1]) ** power


def estimate_cost(scenario, mechanism) -> dict[str, float]:
    """The cost terms of ``scenario`` (see the module docstring); memory terms in bytes."""
    pop, churn, audit = scenario.population, scenario.churn, scenario.audit
    n_items = getattr(pop, "n_items", None)
    attacks = len(scenario.attack) if isinstance(scenario.attack, list) else 1
    cost = {"users": churn.arrival_rate * churn.horizon,
            "rounds": churn.horizon / churn.query_interval + churn.horizon / churn.release_interval,
            "trials": float(audit.trials) * audit.targets * attacks,
            "scores": 2.0 * audit.trials * audit.targets * attacks * 8}
    batch_size = churn.batch_size
    if scenario.panel is not None:  # a fixed cohort: its size and the mechanism's rounds, one release
        panel = scenario.panel
        cost["users"] = float(panel.n_users or getattr(pop, "n_users", 0))
        cost["rounds"] = float(panel.rounds or getattr(mechanism, "iterations", 1)) + 1
        batch_size = panel.batch_size
    if n_items is not None:
        cost["batch"] = float(batch_size) * n_items * 8
        world = WorldInfo(n_items, getattr(pop, "ratings_per_user", 1), len(getattr(pop, "item_cluster_weights", (0, 0))))
        state = state_bytes(mechanism, world)
        if state is not None:
            cost["state"] = state
    cost["memory"] = sum(cost.get(k, 0.0) for k in ("state", "batch", "scores"))
    world_seconds, per_trial_seconds = protocol_seconds(scenario, cost, n_items or 1)
    cost["world_seconds"] = world_seconds
    cost["audit_seconds"] = per_trial_seconds * scenario.audit.trials * scenario.audit.targets
    cost["seconds"] = cost["world_seconds"] + cost["audit_seconds"]
    return cost


def protocol_seconds(scenario, cost: dict[str, float], n_items: int) -> tuple[float, float]:
    """Estimated seconds of the world's protocol run, and of one trial of the audit design."""
    audit = scenario.audit
    rounds_per_user = cost["rounds"] if scenario.panel is not None else scenario.churn.queries_per_user
    cells = max(cost["users"], 1.0) * n_items * max(rounds_per_user, 1.0) + cost["rounds"] * n_items
    world = RUN_SECONDS + ROUND_SECONDS * cost["rounds"] + cells / CELLS_PER_SECOND
    attacks = cost["trials"] / (audit.trials * audit.targets)
    scoring = 2 * attacks * n_items / CELLS_PER_SECOND
    if audit.design_name == "full_runs":
        return world, 2 * world + scoring
    return world, 2 * n_items / CELLS_PER_SECOND + scoring


def over_limits(cost: dict[str, float], limits: LimitsConfig) -> list[tuple[str, str]]:
    """``(field to lower, message)`` for every limit the cost exceeds."""
    problems = []
    if cost["memory"] > limits.memory_gb * GIB:
        terms = {k: cost[k] for k in ("state", "batch", "scores") if k in cost}
        largest = max(terms, key=terms.get)
        field = "audit.trials" if largest == "scores" else "population.n_items"
        parts = ", ".join(f"{k} {v / GIB:.3g} GiB" for k, v in terms.items())
        problems.append((field, f"the run would need about {cost['memory'] / GIB:.3g} GiB ({parts}), over "
                                f"limits.memory_gb = {limits.memory_gb:g}"))
    for key, what, field in (("users", "expected user arrivals (arrival_rate x horizon)", "churn.horizon"),
                             ("rounds", "query and release rounds (horizon / intervals)", "churn.query_interval"),
                             ("trials", "trials (trials x targets x attacks)", "audit.trials")):
        if cost[key] > getattr(limits, key):
            problems.append((field, f"{cost[key]:.3g} {what}, over limits.{key} = {getattr(limits, key):.3g}"))
    if cost["seconds"] > limits.hours * 3600:
        field = "audit.trials" if cost["audit_seconds"] > cost["world_seconds"] else "churn.horizon"
        problems.append((field, f"the run would take about {cost['seconds'] / 3600:.3g} hours on 2 cores "
                                f"(world {cost['world_seconds'] / 3600:.3g} h, audit "
                                f"{cost['audit_seconds'] / 3600:.3g} h), over limits.hours = {limits.hours:g}"))
    return problems
