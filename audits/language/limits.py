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
- ``seconds``: the run's CPU time, work counted by kind and priced by ``SECONDS_PER``
  (:func:`protocol_work`): the protocol runs it makes (one for the world;
  ``full_runs`` adds two per trial and target), each a ``run`` plus its
  ``rounds`` (the clock and the engine's fixed work) plus its rating-table
  ``cells`` (users x items x rounds per user); ``batched_runs`` costs two
  runs' arithmetic per trial (numpy batches them: no per-run Python overhead,
  but each run's small arrays still cost ``batched_rounds``), the other
  designs one target row; plus each attack's scoring and a trial ``block``
  each (a task and a file); ``./dev bench estimate`` measures the ratio of
  estimated to measured time and ``--fit`` the prices (docs/guide/limits.md);
- ``blocks`` and ``files``: trial blocks (targets x trials / block_size), each
  saved as one progress file (an upper bound: local replay saves a target's blocks in
  about ``SAVED_UNITS`` units, so its files are fewer);
- ``process``, ``table`` and ``outputs``: this process (the interpreter and its libraries,
  ``PROCESS_BYTES``), a panel's rating table (users x ratings x ``RATING_BYTES``: the population's and the
  engine's cohort), what the mechanism keeps per user (its ``round_cost``; and ``ARRIVAL_BYTES`` per arrival of a
  churn world) and, for ``batched_runs``, a block
  of runs (``block_size`` x the ``run_bytes`` its ``round_cost`` states), for ``full_runs`` a block's runs in
  both worlds, each keeping its releases (``release_bytes``) and users' outputs for the attacks;
- the mechanism's own work (``Mechanism.round_cost``: e.g. an n_items^2 Gram per round, its eigen-solve),
  ``operations`` per round, per round and held user (a server retraining on what it holds: a panel's users
  every round, arrivals half the rounds on average) and per user once, as ``operations``, added
  to every protocol run; its state is the larger
  of the extrapolated one and the one it states; a ``command`` for the command itself (imports,
  validation, reports);
- ``processes``: worker processes started (``executor.workers`` for a local
  pool or local Dask cluster, else 1), each costing ``PROCESS_BYTES`` plus its
  own copy of the state and a batch.

A sweep (:func:`sweep_cost`) adds its learning curves, each costed at its
worst case (``max_users`` users over the largest ``n_items`` of the grid), one
file per curve; a grid (:func:`grid_cost`) is the sum of its points' runs.
"""
from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from recaudit.mechanisms import WorldInfo
from recaudit.simulator.populations import POPULATIONS

from .sections import build

GIB = 2 ** 30
#: CPU seconds per unit of each kind of work the time estimate counts (see the module docstring), fitted to
#: measured runs by ``./dev bench estimate --fit`` (docs/guide/limits.md)
SECONDS_PER = {
    "commands": 4.6,  # the command's imports, validation and reports
    "runs": 0.008,  # a protocol run's fixed work
    "rounds": 6.7e-4,  # a round's clock and engine work
    "batched_rounds": 8.8e-6,  # a batched run's floor per round: numpy's per-matrix work on small arrays
    "cells": 6.2e-9,  # a rating-table cell: users x items x rounds per user, and the audit's per-item scoring
    "operations": 1.7e-9,  # a mechanism's own arithmetic (Mechanism.round_cost): sparse-dense products, BLAS
    "batched_operations": 3e-9,  # the same inside batched runs: numpy over many runs' small arrays, slower per op
    "blocks": 8.8e-4,  # a trial block's task, streams and progress file
}
PROCESS_BYTES = 150 * 2 ** 20  # a process: the interpreter, numpy, scipy (measured ~120 MB)
#: what the engine and transcript keep per arrival of a churn world (measured 70-85 at 5 x 10^5 and 2 x 10^6)
ARRIVAL_BYTES = 100.0
RATING_BYTES = 64  # a panel's rating, held by the population and the engine's cohort (measured ~55)
#: executors that start ``workers`` processes on this machine (a Dask address uses the cluster's)
LOCAL_POOLS = ("processes", "dask")
#: the terms of the memory estimate (bytes), added up
MEMORY_TERMS = ("process", "state", "batch", "table", "outputs", "scores", "runs", "workers")


def cores() -> int:
    """The cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LimitsConfig(BaseModel):
    """The largest run a scenario may ask for; raise a limit to run beyond it on purpose."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    memory_gb: float = Field(8.0, gt=0, description="estimated peak memory, GiB")
    users: float = Field(1e8, gt=0, description="expected user arrivals (arrival_rate x horizon)")
    rounds: float = Field(1e7, gt=0, description="query and release rounds of the simulated world")
    trials: float = Field(1e9, gt=0, description="trials per world x targets x attacks")
    hours: float = Field(24.0, gt=0, description="estimated run time, hours (on a 2-core machine)")
    files: float = Field(1e5, gt=0, description="files written: one per trial block or sweep curve")
    processes: int | None = Field(None, ge=1, description="worker processes (default: the machine's cores)")
    ratings_gb: float = Field(1.0, gt=0, description="size of a ratings file, GiB, checked before reading it")


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


def processes(executor_type: str, workers: int, address: str | None) -> int:
    """Worker processes an executor starts on this machine."""
    return workers if executor_type in LOCAL_POOLS and not (executor_type == "dask" and address) else 1


def world_facts(scenario, base_dir=None) -> tuple[WorldInfo | None, float | None]:
    """The population's world (items, ratings per user, item clusters) and size (None: unknown or unbounded).

    A ratings file has no ``n_items``: it is read (cached, and validation reads it anyway) for its counts.
    """
    pop = scenario.population
    clusters = len(getattr(pop, "item_cluster_weights", (0, 0)))
    if getattr(pop, "n_items", None) is not None:
        return WorldInfo(pop.n_items, getattr(pop, "ratings_per_user", 1), clusters), getattr(pop, "n_users", None)
    if getattr(pop, "path", None) is None and getattr(pop, "dataset", None) is None:
        return None, None
    try:
        population = build(pop, POPULATIONS, base_dir if base_dir is not None else getattr(scenario, "_base_dir",
                                                                                             None))
        catalogue = population.catalogue(np.random.default_rng(0))
    except Exception:  # a file that cannot be read: the population's own check names it
        return None, None
    world = WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters)
    return world, population.size() if hasattr(population, "size") else None


def estimate_cost(scenario, mechanism, executor_type: str | None = None, workers: int | None = None,
                  base_dir=None, world_only: bool = False) -> dict[str, float]:
    """The cost terms of ``scenario`` (see the module docstring); memory terms in bytes.

    ``world_only``: the world's run alone, no audit (a study's point, ``recaudit.audits.runner.measure_world``):
    no canaries, scores, trial blocks or audit time.

    ``executor_type`` and ``workers`` override the scenario's executor (the command line's ``--executor``,
    ``--workers``);
    ``base_dir``: where a relative ratings file path starts (default: the scenario's folder).
    """
    churn, audit = scenario.churn, scenario.audit
    world, size = world_facts(scenario, base_dir)
    n_items = world.n_items if world is not None else None
    attacks = len(scenario.attack) if isinstance(scenario.attack, list) else 1
    cost = {"users": churn.arrival_rate * churn.horizon,
            "rounds": churn.horizon / churn.query_interval + churn.horizon / churn.release_interval,
            "trials": float(audit.trials) * audit.targets * attacks,
            "scores": 2.0 * audit.trials * audit.targets * attacks * 8}
    batch_size = churn.batch_size
    if scenario.panel is not None:  # a fixed cohort: its size and the mechanism's rounds, one release
        panel = scenario.panel
        cost["users"] = float(panel.n_users or (size or 0) - mechanism.public_panel())
        cost["rounds"] = float(panel.rounds or getattr(mechanism, "rounds", getattr(mechanism, "iterations", 1))) + 1
        batch_size = panel.batch_size
    if world_only:
        cost["trials"] = cost["scores"] = 0.0
    elif audit.design_name == "one_run":  # its canaries are users of the run too
        cost["users"] += float(audit.trials) * audit.targets
    cost["process"] = float(PROCESS_BYTES)
    if n_items is not None:
        cost["batch"] = float(batch_size) * n_items * 8
        own = mechanism.round_cost(world, cost["users"] if scenario.panel is not None else min(
            churn.arrival_rate * churn.mean_lifetime,
            churn.arrival_rate * churn.query_interval * churn.queries_per_user))
        cost["operations"], cost["once"] = own.operations, own.once
        cost["held_user_operations"], cost["user_operations"] = own.held_user_operations, own.user_operations
        cost["state"] = max(state_bytes(mechanism, world) or 0.0, own.state_bytes)
        if world_only:
            pass
        elif audit.design_name == "batched_runs":  # a block of whole runs at once, in this process or a worker's
            cost["runs"] = min(audit.block_size, audit.trials) * own.run_bytes
        elif audit.design_name == "full_runs":  # a block's runs in both worlds, each run's releases and outputs kept
            releases = cost["rounds"] if scenario.panel is not None else churn.horizon / churn.release_interval
            cost["runs"] = 2 * min(audit.block_size, audit.trials) * (releases * own.release_bytes
                                                                      + cost["users"] * own.user_bytes)
        cost["outputs"] = cost["users"] * (own.user_bytes + (0.0 if scenario.panel is not None else ARRIVAL_BYTES))
        if scenario.panel is not None:
            cost["table"] = cost["users"] * world.ratings_per_user * RATING_BYTES
    ex = scenario.executor
    cost["processes"] = float(processes(executor_type or ex.type, workers or ex.workers, ex.address))
    cost["workers"] = 0.0 if cost["processes"] == 1 else cost["processes"] * (
        PROCESS_BYTES + cost.get("state", 0.0) + cost.get("batch", 0.0))
    if "runs" in cost:  # a block of runs in each process that runs one (the workers' if any, else this one)
        cost["runs"] *= min(cost["processes"], audit.targets * math.ceil(audit.trials / audit.block_size))
    cost["memory"] = sum(cost.get(k, 0.0) for k in MEMORY_TERMS)
    cost["blocks"] = 0.0 if world_only or audit.design_name == "one_run" else audit.targets * math.ceil(audit.trials /
                                                                                          audit.block_size)
    cost["files"] = cost["blocks"]
    world, audit_work = protocol_work(scenario, cost, n_items or 1)
    cost["world_seconds"], cost["audit_seconds"] = seconds_of(world), 0.0 if world_only else seconds_of(audit_work)
    cost["seconds"] = SECONDS_PER["commands"] + cost["world_seconds"] + cost["audit_seconds"]
    return cost


def sweep_cost(scenario, mechanism, full: bool = False, executor_type: str | None = None,
               workers: int | None = None) -> dict[str, float]:
    """The cost of ``scenario.sweep`` (its default or ``full`` grid): every learning curve at its worst case."""
    sweep, pop = scenario.sweep, scenario.population
    curves = (1 + len(sweep.compare)) * sum(len(axis.grid(full)) for axis in sweep.axes) * sweep.replicates
    n_items = max([getattr(pop, "n_items", 1)] + [max(axis.grid(full)) for axis in sweep.axes
                                                  if axis.parameter == "population.n_items"])
    checkpoints = sweep.checkpoints_per_decade * max(1.0, math.log10(sweep.max_users / sweep.start_users)) + 1
    curve_seconds = seconds_of(curve_work(sweep, n_items, checkpoints))
    ex = scenario.executor
    workers_ = float(processes(executor_type or ex.type, workers or ex.workers, ex.address))
    world = WorldInfo(n_items, getattr(pop, "ratings_per_user", 1), len(getattr(pop, "item_cluster_weights", (0, 0))))
    state = state_bytes(mechanism, world) or 0.0
    per_process = state + 4096.0 * n_items * 8
    terms = {"sweep.replicates": curves * checkpoints * 64.0,  # every curve's points, kept
             "population.n_items": per_process,  # a mechanism's state and a batch of rows over the items
             "executor.workers": workers_ * (PROCESS_BYTES + per_process) if workers_ > 1 else 0.0}
    memory = PROCESS_BYTES + sum(terms.values())
    return {"curves": float(curves), "files": float(curves), "processes": workers_, "memory": memory,
            "memory_field": max(terms, key=terms.get),
            "seconds": SECONDS_PER["commands"] + curves * curve_seconds, "curve_seconds": curve_seconds,
            "n_items": float(n_items), "checkpoints": checkpoints}


def curve_work(sweep, n_items: int, checkpoints: float) -> dict[str, float]:
    """The work of one learning curve: ``max_users`` users' rows, their batches and checkpoints, its file."""
    return {"runs": 1.0, "cells": sweep.max_users * n_items, "rounds": sweep.max_users / 4096 + checkpoints,
            "blocks": 1.0}


def grid_cost(costs: list[dict[str, float]]) -> dict[str, float]:
    """The cost of a grid from its points' costs: run one after another in one command, so time and files add
    up, and the command's own work (imports, validation) counts once."""
    return {"seconds": sum(c["seconds"] for c in costs) - SECONDS_PER["commands"] * (len(costs) - 1),
            "files": sum(c["files"] for c in costs),
            "memory": max(c["memory"] for c in costs), "processes": max(c["processes"] for c in costs)}


def seconds_of(work: dict[str, float]) -> float:
    """Estimated CPU seconds of ``work`` (counts of the kinds in ``SECONDS_PER``)."""
    return sum(count * SECONDS_PER[kind] for kind, count in work.items())


def protocol_work(scenario, cost: dict[str, float], n_items: int) -> tuple[dict[str, float], dict[str, float]]:
    """The work of the world's protocol run, and of the audit: its trials and blocks (see ``SECONDS_PER``)."""
    audit = scenario.audit
    rounds_per_user = cost["rounds"] if scenario.panel is not None else scenario.churn.queries_per_user
    cells = max(cost["users"], 1.0) * n_items * max(rounds_per_user, 1.0) + cost["rounds"] * n_items
    # a server retraining on all it holds: a panel's users are all held from round 1, arrivals half the time
    held_rounds = cost["rounds"] if scenario.panel is not None else cost["rounds"] / 2
    own = (cost.get("operations", 0.0) * cost["rounds"] + cost.get("once", 0.0)
           + cost.get("held_user_operations", 0.0) * cost["users"] * held_rounds
           + cost.get("user_operations", 0.0) * cost["users"])
    world = {"runs": 1.0, "rounds": cost["rounds"], "cells": cells, "operations": own}
    attacks = cost["trials"] / (audit.trials * audit.targets)
    trials = float(audit.trials * audit.targets)
    scoring = 2 * attacks * n_items * trials
    if audit.design_name == "full_runs":
        trial_work = {kind: 2 * trials * count for kind, count in world.items()}
    elif audit.design_name == "batched_runs":  # whole runs batched with numpy: each costs its arithmetic only
        trial_work = {"cells": 2 * trials * cells, "batched_operations": 2 * trials * own,
                      "batched_rounds": 2 * trials * cost["rounds"]}
    else:  # a target row per trial
        trial_work = {"cells": 2 * n_items * trials}
    trial_work["cells"] += scoring
    return world, trial_work | {"blocks": cost["blocks"]}


def over_limits(cost: dict[str, float], limits: LimitsConfig, panel: str | None = None,
                halved: Callable[[str], dict[str, float] | None] | None = None) -> list[tuple[str, str]]:
    """``(field to lower, message)`` for every limit the run's cost exceeds.

    ``panel``: for a fixed cohort, the field that sets its size (``panel.n_users`` or ``population.n_users``);
    ``halved``: the run's :func:`halving`, to name the field that costs the most time (:func:`time_field`).
    """
    problems = over_processes(cost["processes"], limits)  # first: more processes cost memory too
    if cost["memory"] > limits.memory_gb * GIB:
        terms = {k: cost[k] for k in MEMORY_TERMS if cost.get(k)}
        largest = max(terms, key=terms.get)
        field = {"scores": "audit.trials", "runs": "audit.block_size", "workers": "executor.workers", "table": panel,
                 "outputs": panel or "churn.horizon"}.get(largest) or "population.n_items"
        parts = ", ".join(f"{k} {v / GIB:.3g} GiB" for k, v in terms.items())
        problems.append((field, f"the run would need about {cost['memory'] / GIB:.3g} GiB ({parts}), over "
                                f"limits.memory_gb = {limits.memory_gb:g}"))
    users = (("users", "users in the panel's cohort", panel) if panel else
             ("users", "expected user arrivals (arrival_rate x horizon)", "churn.horizon"))
    rounds = (("rounds", "rounds (the panel's rounds and its release)", "panel.rounds") if panel else
              ("rounds", "query and release rounds (horizon / intervals)", "churn.query_interval"))
    for key, what, field in (users, rounds, ("trials", "trials (trials x targets x attacks)", "audit.trials")):
        if cost[key] > getattr(limits, key):
            problems.append((field, f"{cost[key]:.3g} {what}, over limits.{key} = {getattr(limits, key):.3g}"))
    if cost["files"] > limits.files:
        problems.append(("audit.block_size", f"{cost['files']:.3g} trial blocks (targets x trials / block_size), "
                                             f"each saved as a file, over limits.files = {limits.files:.3g}"))
    if cost["seconds"] > limits.hours * 3600:
        blocks = SECONDS_PER["blocks"] * cost["blocks"]
        problems.append((time_field(cost, panel, halved),
                         f"the run would take about {hours(cost['seconds'])} on 2 cores (world "
                         f"{hours(cost['world_seconds'])}, audit {hours(cost['audit_seconds'])}"
                         + (f", of which {hours(blocks)} for {cost['blocks']:.3g} blocks" if blocks else "")
                         + f"), over limits.hours = {limits.hours:g}"))
    return problems


def time_field(cost: dict[str, float], panel: str | None = None,
               halved: Callable[[str], dict[str, float] | None] | None = None) -> str:
    """The field whose work costs the most of a run's time: its trial blocks' overhead (``audit.block_size``, to
    raise) when that is over half; the audit's trials when the audit outweighs the world; else of the world's
    time, the field whose halving saves the most by the estimate (``halved(field)``, :func:`halving`): the
    cohort's size (``panel``, or ``churn.horizon`` for arrivals), the one-run audit's canaries (``audit.trials``)
    or the items — these only when they save clearly more (1.25 x: every cell of the rating table counts both
    users and items, and only the mechanism's own items x items work tells them apart)."""
    if SECONDS_PER["blocks"] * cost["blocks"] > cost["seconds"] / 2:
        return "audit.block_size"
    if cost["audit_seconds"] > cost["world_seconds"]:
        return "audit.trials"
    users = panel or "churn.horizon"
    if halved is None:
        return users
    saved = {field: cost["world_seconds"] - smaller["world_seconds"]
             for field in (users, "audit.trials", "population.n_items") if (smaller := halved(field)) is not None}
    items = saved.pop("population.n_items", 0.0)
    best = max(saved, key=saved.get) if saved else users
    return "population.n_items" if items > 1.25 * saved.get(best, 0.0) else best


def halving(scenario, mechanism, **options) -> Callable[[str], dict[str, float] | None]:
    """``halved(field)``: the cost estimate of ``scenario`` with the number at ``section.key`` halved (None when
    there is no such number); ``options`` as :func:`estimate_cost`'s."""
    def halved(field: str) -> dict[str, float] | None:
        section, _, key = field.partition(".")
        part = getattr(scenario, section, None)
        value = getattr(part, key, None)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 1:
            return None
        smaller = part.model_copy(update={key: value / 2 if isinstance(value, float) else value // 2})
        try:
            return estimate_cost(scenario.model_copy(update={section: smaller}), mechanism, **options)
        except Exception:  # a variant the estimate cannot take: not a candidate
            return None
    return halved


def over_grid_limits(costs: list[dict[str, float]], names: list[str], limits: LimitsConfig, panel: str | None = None,
                     halved: list[Callable] | None = None) -> list[tuple[str, str]]:
    """``(field, message)`` for the limits a grid's points exceed together (each alone was checked): the field
    is the one that costs the most in the costliest point (:func:`time_field`; trial blocks for files)."""
    total, problems = grid_cost(costs), []
    for key, limit, what in (("seconds", limits.hours * 3600, "hours"), ("files", limits.files, "files")):
        if total[key] > limit:
            worst = max(range(len(costs)), key=lambda i: costs[i][key])
            field = time_field(costs[worst], panel, halved[worst] if halved else None) if key == "seconds" \
                else "audit.block_size"
            amount = hours if key == "seconds" else (lambda n: f"{n:.3g} files")
            problems.append((field, f"the grid's {len(costs)} runs would take {amount(total[key])} together, over "
                                    f"limits.{what} = {getattr(limits, what):g}; {field} costs the most in its "
                                    f"costliest run, {names[worst]} ({amount(costs[worst][key])}): lower it or "
                                    "list fewer grid.epsilons"))
    return problems


def over_processes(count: float, limits: LimitsConfig) -> list[tuple[str, str]]:
    """The refusal of more worker processes than ``limits.processes`` (default: the machine's cores)."""
    allowed = limits.processes or cores()
    if count <= allowed:
        return []
    where = f"limits.processes = {allowed}" if limits.processes else f"the machine's {allowed} cores"
    return [("executor.workers", f"{count:.0f} worker processes, over {where}; lower executor.workers or raise "
                                 "limits.processes on purpose")]


def over_sweep_limits(cost: dict[str, float], limits: LimitsConfig, full: bool = False) -> list[tuple[str, str]]:
    """``(field to lower, message)`` for every limit the sweep's cost exceeds."""
    grid = "full_values" if full else "values"
    what = f"sweep.replicates (or the axes' {grid})"
    problems = over_processes(cost["processes"], limits)
    if cost["files"] > limits.files:
        problems.append(("sweep.replicates", f"{cost['curves']:.3g} learning curves (mechanisms x axes' {grid} x "
                                             f"replicates), each saved as a file, over limits.files = "
                                             f"{limits.files:.3g}; lower {what}"))
    if cost["memory"] > limits.memory_gb * GIB:
        problems.append((cost["memory_field"], f"the sweep would need about {cost['memory'] / GIB:.3g} GiB, over "
                                            f"limits.memory_gb = {limits.memory_gb:g}"))
    if cost["seconds"] > limits.hours * 3600:
        problems.append(("sweep.max_users", f"{cost['curves']:.3g} learning curves of up to "
                                            f"{hours(cost['curve_seconds'])} each would take about "
                                            f"{hours(cost['seconds'])}, over limits.hours = {limits.hours:g}; "
                                            f"lower sweep.max_users or {what}"))
    return problems


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.3g} hours"
