"""Scaling sweeps: users needed for accurate item clustering, over grids of N, w and ε.

For each axis of the ``sweep:`` block, one parameter takes each of its values
while everything else stays at the scenario's value. Every (axis, value,
replicate) runs a churn-free learning curve (``recaudit.simulator.learning``) until the
clustering accuracy reaches ``target_accuracy`` at ``stable_checkpoints``
consecutive checkpoints; ``U*`` is the first of those user counts (censored at
``max_users``). Per axis, ``log U* = a + slope · log x`` is fitted by OLS
(statsmodels) with a 95% confidence interval, beside the slope the theory
formula (``recaudit.mechanisms.theory``) has over the same grid.

``sweep.compare`` lists more mechanisms run on the same grids, worlds and
seeds (a paired comparison: the same catalogue and users for every
mechanism at a given axis value and replicate); ``sweep.bounds`` names lower
bounds on the users any epsilon-LDP learner needs, evaluated at every grid
value and reported beside the measured U* (``LOWER_BOUNDS``).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from recaudit.core.errors import ParameterError
from recaudit.mechanisms import MECHANISMS, theory
from recaudit.simulator.learning import checkpoints, learning_curve
from recaudit.simulator.populations import POPULATIONS
from recaudit.simulator.seeds import child_seed, stream

from .executors import as_finished, open_executor
from .language.scenario import Scenario, build
from .progress_log import beating
from .store import Progress, hold_folder
from .utility import clustering_accuracy


def sweep_task(data: dict, base_dir: str | None, axis: int, index: int, replicate: int) -> dict:
    """Run one learning curve; return U* (None when not reached) and the curve."""
    scenario = Scenario.model_validate(data, context={"base_dir": base_dir})
    sweep = scenario.sweep
    base = Path(base_dir) if base_dir else None
    population = build(scenario.population, POPULATIONS, base)
    mechanism = build(scenario.mechanism, MECHANISMS)
    root = child_seed(np.random.SeedSequence(scenario.seed), "sweep", axis, index, replicate)
    catalogue = population.catalogue(stream(root, "catalogue"))
    if catalogue.item_labels is None:
        raise ParameterError("population.kind", "a sweep needs a population with known item clusters (kind: sbm)")
    at = checkpoints(sweep.max_users, sweep.checkpoints_per_decade, sweep.start_users)
    curve, streak, u_star = [], 0, None
    for seen, labels in learning_curve(population, catalogue, mechanism, at, root):
        accuracy = clustering_accuracy(labels, catalogue.item_labels)
        curve.append((int(seen), accuracy))
        streak = streak + 1 if accuracy >= sweep.target_accuracy else 0
        if streak == sweep.stable_checkpoints:
            u_star = curve[-streak][0]
            break
    return {"axis": axis, "index": index, "replicate": replicate, "u_star": u_star, "curve": curve}


def theory_users(scenario: Scenario) -> float | None:
    """The theory's user count (up to its constant) for the scenario's mechanism, or None."""
    pop, mech = scenario.population, scenario.mechanism
    if pop.kind != "sbm":
        return None
    n, w = pop.n_items, pop.ratings_per_user
    if mech.kind.startswith("pairwise_preference"):
        return theory.pairwise_preference_users(n, ratings_per_user=w)
    if "maxsense" not in mech.kind:
        return None
    theta = getattr(mech, "theta", 1.0)
    gap = theory.maxsense_separation_exact(pop.like_probability, pop.user_cluster_weights, pop.item_cluster_weights,
                                           theta, w, n)
    if not gap > 0 or not math.isfinite(gap):
        return None
    # Q sketches at ε/Q each, with the raw score's finite-size noise factor (theory.maxsense_users)
    q = (mech.sketches or math.ceil(mech.epsilon)) if mech.kind.startswith("multi_maxsense") else 1
    return theory.maxsense_users(pop.like_probability, pop.user_cluster_weights, pop.item_cluster_weights, n, w,
                                 mech.epsilon, theta, sketches=q, score=getattr(mech, "score", "raw"))


def _fano(scenario: Scenario) -> float:
    return float(theory.fano_min_users(scenario.population.n_items, scenario.mechanism.epsilon))


def _scarce(scenario: Scenario) -> float:
    pop = scenario.population
    return theory.scarce_min_users(pop.n_items, pop.ratings_per_user, scenario.mechanism.epsilon)


def _adaptive(scenario: Scenario) -> float:
    return theory.adaptive_min_users(scenario.population.n_items)


#: lower bounds a sweep can draw (docs/families/local-clustering.md, "Lower bounds"): name -> (label, users at a
#: scenario).
#: All are stated up to constants the paper does not give (C = 1 here); Fano's is exact for two item clusters.
LOWER_BOUNDS: dict[str, tuple[str, Callable[[Scenario], float]]] = {
    "fano": ("Fano: (N/2 - 1) / (eps log2 e)", _fano),
    "scarce": ("scarce: N^2 / (w (e^eps - 1)^2)", _scarce),
    "adaptive": ("adaptive: N log N", _adaptive),
}


def contender_labels(configs: list) -> list[str]:
    """One label per compared mechanism: its kind, with the parameters that tell apart those of the same kind."""
    dumps = [c.model_dump(mode="json") for c in configs]
    labels = []
    for d in dumps:
        same = [o for o in dumps if o["kind"] == d["kind"]]
        if len(same) == 1:
            labels.append(d["kind"])
            continue
        differing = sorted(k for k in d if k != "kind" and any(o.get(k) != d[k] for o in same))
        labels.append(d["kind"] + (" (" + ", ".join(f"{k}={d[k]}" for k in differing) + ")" if differing else ""))
    return labels


def fit_slope(x: np.ndarray, u: np.ndarray, level: float = 0.95) -> dict:
    """OLS of log U on log x: slope, its confidence interval, the number of points, and the fitted line.

    ``band`` holds, at each distinct x, the fitted U and the confidence interval of the fitted mean.
    """
    import statsmodels.api as sm

    x, u = np.asarray(x, float), np.asarray(u, float)
    if np.unique(x).size < 2 or u.size < 3:
        return {"slope": None, "ci_low": None, "ci_high": None, "points": int(u.size), "intercept": None,
                "band": []}
    fit = sm.OLS(np.log(u), sm.add_constant(np.log(x))).fit()
    low, high = fit.conf_int(alpha=1 - level)[1]
    grid = np.unique(x)
    mean = fit.get_prediction(sm.add_constant(np.log(grid), has_constant="add")).summary_frame(alpha=1 - level)
    band = [{"x": float(g), "fit": float(np.exp(m)), "low": float(np.exp(lo)), "high": float(np.exp(hi))}
            for g, m, lo, hi in zip(grid, mean["mean"], mean["mean_ci_lower"], mean["mean_ci_upper"])]
    return {"slope": float(fit.params[1]), "ci_low": float(low), "ci_high": float(high), "points": int(u.size),
            "intercept": float(fit.params[0]), "band": band}


@dataclass
class SweepResult:
    """Points (one per task) and the per-axis fits."""

    scenario: Scenario
    grid: str
    points: list[dict]
    fits: list[dict]
    bounds: list[dict] = None  # one row per (axis, value, bound): its users
    mechanisms: list[str] = None  # the compared mechanisms' labels, the scenario's first

    def __post_init__(self) -> None:
        self.bounds = self.bounds or []
        self.mechanisms = self.mechanisms or [self.scenario.mechanism.kind]


def run_sweep(scenario: Scenario, out_dir: Path | None = None, full: bool = False, resume: bool = False,
              executor_type: str | None = None, workers: int | None = None,
              report: Callable[[str], None] = lambda _: None) -> SweepResult:
    """Run every (axis, value, replicate) of the scenario's sweep and fit the slopes."""
    sweep = scenario.sweep
    if sweep is None:
        raise ParameterError("sweep", "the scenario has no sweep: block")
    data = scenario.model_dump(mode="json", exclude={"sweep"}) | {"sweep": scenario.sweep.model_dump(mode="json")}
    base_dir = str(getattr(scenario, "_base_dir", "") or "") or None
    configs = [scenario.mechanism, *sweep.compare]
    labels = contender_labels(configs)
    contenders = [data | {"mechanism": config.model_dump(mode="json")} for config in configs]

    @functools.lru_cache(maxsize=256)
    def variant(a: int, i: int, c: int) -> dict:  # the scenario data of one grid value (read, never changed)
        return sweep.axes[a].apply(contenders[c], sweep.axes[a].grid(full)[i])

    def tasks():  # generated as they are run: a sweep's task list is never held whole
        for c in range(len(configs)):
            for a, axis in enumerate(sweep.axes):
                for i in range(len(axis.grid(full))):
                    yield from ((a, i, r, c) for r in range(sweep.replicates))

    total = len(configs) * sum(len(axis.grid(full)) for axis in sweep.axes) * sweep.replicates
    results: dict[tuple, dict] = {}

    def key(task):  # the first mechanism keeps the names sweeps without compare: saved before
        return "task-{}-{}-{}".format(*task[:3]) + (f"-m{task[3]}" if task[3] else "")

    ex = scenario.executor
    with beating(report), hold_folder(out_dir), open_executor(executor_type or ex.type, workers or ex.workers,
                                         ex.address, ex.max_in_flight) as executor:
        progress = Progress(out_dir / "progress-sweep" if out_dir else None,
                            {"fingerprint": scenario.fingerprint(), "grid": "full" if full else "default"}, resume,
                            what="scenario or grid", warn=report)

        def todo():
            for task in tasks():
                saved = progress.load_json(key(task))
                if saved is not None:
                    results[task] = saved
                else:
                    yield task, sweep_task, (variant(task[0], task[1], task[3]), base_dir, *task[:3])

        for task, result in as_finished(executor, todo()):
            results[task] = result
            progress.save_json(key(task), result)
            tick = getattr(report, "progress", None)
            if tick is not None:
                tick("sweep runs", len(results), total)
            else:
                report(f"sweep task {len(results)}/{total} done (axis {task[0]}, value {task[1]}, replicate "
                       f"{task[2]}, {labels[task[3]]})")

    points, fits, bounds = [], [], []
    for a, axis in enumerate(sweep.axes):
        values = axis.grid(full)
        for i, value in enumerate(values):
            first = Scenario.model_validate(variant(a, i, 0), context={"base_dir": base_dir})
            for name in sweep.bounds:
                bounds.append({"parameter": axis.parameter, "value": value, "bound": name,
                               "label": LOWER_BOUNDS[name][0], "users": LOWER_BOUNDS[name][1](first)})
        for c, label in enumerate(labels):
            xs, us, theory_u, mine = [], [], [], []
            for i, value in enumerate(values):
                variant_scenario = Scenario.model_validate(variant(a, i, c), context={"base_dir": base_dir})
                theory_u.append(theory_users(variant_scenario))
                for r in range(sweep.replicates):
                    res = results[a, i, r, c]
                    mine.append({"parameter": axis.parameter, "mechanism": label, "value": value, "replicate": r,
                                 "u_star": res["u_star"], "theory_users": theory_u[-1]})
                    if res["u_star"] is not None:
                        xs.append(value)
                        us.append(res["u_star"])
            points += mine
            fit = fit_slope(np.array(xs), np.array(us))
            # the theory has no noise: its slope on the grid is the least-squares line through its points
            fit["theory_slope"] = (float(np.polyfit(np.log(values), np.log(theory_u), 1)[0])
                                   if all(t is not None for t in theory_u) else None)
            fit["censored"] = sum(1 for p in mine if p["u_star"] is None)
            fit["parameter"] = axis.parameter
            fit["mechanism"] = label
            fit["values"] = list(values)
            fit["theory_in_ci"] = (None if fit["slope"] is None or fit["theory_slope"] is None
                                   else fit["ci_low"] <= fit["theory_slope"] <= fit["ci_high"])
            fits.append(fit)
    return SweepResult(scenario, "full" if full else "default", points, fits, bounds, labels)

