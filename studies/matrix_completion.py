"""Matrix completion against ε on a ratings file, over per-user splits: held-out RMSE beside predicting the mean.

Each point is the scenario a ``recaudit grid`` point would be (a ``ratings_matrix`` population with
``split_seed`` = the split, a ``panel`` of every user, the mechanism at that ε), its world run alone:
no audit and no canaries (``recaudit.audits.runner.measure_world``), so a point costs one run. Every finished
point is saved to ``mc_study.json``; a rerun keeps every saved point whose scenario is unchanged.

With ``population`` (a population block, e.g. ``{kind: fitted, ...}``: a synthetic world calibrated to a file) instead
of a ratings file, a split is a new world (the study's seed + the split) and ``users`` lists the world sizes to run
every mechanism at (the m-scaling of seed 004). Each point records its RMSE beside the mean, the non-private bias
model and ALS (``recaudit.audits.utility``; ALS only up to 10⁶ training ratings), its own private bias model
(``centring_rmse``) and its CPU seconds.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from recaudit.mechanisms import MECHANISMS
from recaudit.simulator import datasets
from recaudit.simulator.ratings import load_ratings

from pydantic import ValidationError

from recaudit.audits.language.limits import LimitsConfig, estimate_cost
from recaudit.audits.language.scenario import Scenario
from recaudit.audits.language.sections import build
from recaudit.audits.language.studies import DataTooSmall, Study
from recaudit.audits.runner import measure_world
from recaudit.core.errors import BadInput


#: the attack a point's scenario names (never run: a study point has no audit; validation wants one that fits)
ATTACK_OF = {"mcsherry_mironov": "covariance_projection", "mcsherry_mironov_exact": "covariance_projection"}
#: the utility's references beside a point (bias model, ALS on the training table) and the held-out tables: the peak
#: a MovieLens-100K point measured above the point's own estimate (827 MB peak RSS against 465 MB estimated)
REFERENCES_BYTES = 400 * 2 ** 20
#: what a point records beside its RMSE (``recaudit.audits.utility.completion_rmse``)
BASELINES = ("centring_rmse", "bias_rmse", "als_rmse")


def label(block: dict) -> str:
    """A mechanism block's name in the tables: its ``label`` if it has one, else its kind and the settings
    that tell it apart."""
    if "label" in block:
        return block["label"]
    shown = ("centre", "eigen", "noise", "rank")
    return block["kind"] + "".join(f" {k}={block[k]}" for k in shown if k in block)


@dataclass
class MatrixCompletionStudy(Study, kind="matrix_completion"):
    """Held-out RMSE of matrix-completion mechanisms at every ε of ``epsilons`` (and the ``reference``
    mechanisms once) on a ratings file, over ``splits`` per-user splits (``test_fraction`` held out),
    mean ± sd beside predicting the mean training rating; the worlds alone, no audit."""

    dataset: str | None = None
    ratings: str | None = None
    splits: int = 5
    test_fraction: float = 0.2
    max_rating: float = 5.0
    epsilons: list[float] = field(default_factory=lambda: [1.0, 2.0, 5.0])
    mechanisms: list[dict] = field(default_factory=list)  # kind blocks (and an optional label); the study sets ε
    reference: list[dict] = field(default_factory=list)  # kind blocks run as written (non-private)
    min_users: int = 100
    population: dict | None = None  # a population block instead of a ratings file (a split is a new world)
    users: list[int] = field(default_factory=list)  # with ``population``: its sizes (``users``) to run at

    def _population(self, split: int, users: int | None = None) -> dict:
        if self.population is not None:
            return self.population | ({} if users is None else {"users": users})
        where = {"dataset": self.dataset} if self.dataset else {"path": self.ratings}
        return {"kind": "ratings_matrix", **where, "test_fraction": self.test_fraction, "split": "per_user",
                "split_seed": split, "max_rating": self.max_rating}

    def _sizes(self) -> list[int | None]:
        if self.users and self.population is None:
            raise DataTooSmall("users: world sizes need a population block (population: {kind: fitted, ...})")
        return list(self.users) or [None]

    def points(self, seed: int, limits: LimitsConfig | None = None) -> list[tuple[str, float | None, int, Scenario]]:
        """``(label, ε, split, scenario)`` of every point, validated as scenarios whose world runs alone (no audit:
        the cost checked against the study's ``limits`` counts no canaries); a point that does not validate is
        one line of bad input."""
        limits = limits or getattr(self, "_limits", None) or LimitsConfig()
        out = []
        for size, split in [(size, split) for size in self._sizes() for split in range(self.splits)]:
            runs = [(b, e) for b in self.mechanisms for e in self.epsilons] + [(b, None) for b in self.reference]
            for block, epsilon in runs:
                mechanism = {k: v for k, v in block.items() if k != "label"} | ({} if epsilon is None
                                                                                  else {"epsilon": epsilon})
                data = {"name": "point", "seed": seed + (split if self.population is not None else 0),
                        "population": self._population(split, size), "panel": {},
                        "mechanism": mechanism, "audit": {"design": "one_run", "method": "one-run"},
                        "attack": {"kind": ATTACK_OF.get(block["kind"], "subspace_alignment")},
                        "limits": limits.model_dump()}
                try:
                    scenario = Scenario.model_validate(data, context={"world_only": True})
                except ValidationError as exc:
                    first = exc.errors()[0]  # a limit's refusal names its field in the error, not the loc
                    where = ".".join(filter(None, [*map(str, first["loc"]),
                                                   getattr((first.get("ctx") or {}).get("error"), "field", None)]))
                    raise BadInput(f"study point {label(block)} ε={epsilon} split {split}"
                                   f"{'' if size is None else f' users {size}'}: "
                                   f"{where + ': ' if where else ''}{first['msg'].removeprefix('Value error, ')}"
                                   ) from None
                out.append((label(block), epsilon, split, scenario))
        return out

    def _users_of(self, scenario: Scenario) -> int | None:
        return getattr(scenario.population, "users", None) if self.population is not None else None

    def estimate(self, seed: int, limits: LimitsConfig) -> dict:
        """The points' world costs (``estimate_cost(world_only=True)``): their CPU added up (run one after another),
        the largest point's memory and the utility's references. MovieLens-100K, 4 points: 43 s estimated, 40 s CPU
        measured; 865 MB estimated, 827 MB peak RSS measured."""
        self._limits = limits
        costs = [estimate_cost(s, build(s.mechanism, MECHANISMS), world_only=True)
                 for *_, s in self.points(seed, limits)]
        return {"seconds": sum(c["world_seconds"] for c in costs) + 5.0,
                "memory": max(c["memory"] for c in costs) + REFERENCES_BYTES,
                "basis": f"{len(costs)} points, each its world alone"}

    def check(self) -> None:
        for block in self.mechanisms + self.reference:
            if block.get("kind") not in MECHANISMS:
                raise DataTooSmall(f"mechanisms: unknown mechanism {block.get('kind')!r}")
        if self.population is not None:
            self._sizes()
            return  # the population checks its own file when the points are validated
        path = datasets.find(self.dataset) if self.dataset else Path(self.ratings)
        data = load_ratings(path)
        if data.n_users < self.min_users:
            raise DataTooSmall(f"{path}: {data.n_users} users are too few (min_users: {self.min_users})")

    def run(self, out: Path, seed: int, log) -> list[Path]:
        out.mkdir(parents=True, exist_ok=True)
        saved = out / "mc_study.json"
        previous = json.loads(saved.read_text()) if saved.exists() else {}
        done = {p["fingerprint"]: p for p in previous.get("points", [])}  # a point is its scenario
        result = {"settings": {k: v for k, v in self.__dict__.items() if not k.startswith("_")} | {"seed": seed},
                  "points": []}
        for name, epsilon, split, scenario in self.points(seed):
            if scenario.fingerprint() in done:
                result["points"].append(done[scenario.fingerprint()] | {"mechanism": name})
                continue
            begun = time.process_time()
            utility = measure_world(scenario)
            users = self._users_of(scenario)
            result["points"].append({"mechanism": name, "epsilon": epsilon, "split": split, "users": users,
                                     "rmse": utility["rmse"], "mean_rmse": utility.get("mean_rmse"),
                                     "zero_rmse": utility["zero_rmse"], "fingerprint": scenario.fingerprint(),
                                     **{k: utility.get(k) for k in BASELINES},
                                     "cpu_seconds": round(time.process_time() - begun, 1),
                                     "mechanism_settings": scenario.mechanism.model_dump()})
            log(f"{name} ε={epsilon} split {split}{'' if users is None else f' users {users}'}: RMSE "
                f"{utility['rmse']:.4f} (mean {utility['mean_rmse']:.4f}, its private bias model "
                f"{_number(utility.get('centring_rmse'))}, bias model {_number(utility.get('bias_rmse'))})")
            saved.write_text(json.dumps(result, indent=1))
            (out / "mc_study.md").write_text(markdown(result))
        (out / "mc_study.md").write_text(markdown(result))
        return [out / "mc_study.md", saved]


def _number(value) -> str:
    return "–" if value is None else f"{value:.4f}"


def _cell(values: list) -> str:
    if any(v is None for v in values) or not values:
        return "–"
    values = np.array(values, float)
    return f"{values.mean():.4f} ± {values.std(ddof=1):.4f}" if values.size > 1 else f"{values.mean():.4f}"


def markdown(result: dict) -> str:
    """RMSE mean ± sd over the finished splits, per mechanism and ε; predicting the mean beside it."""
    points = result["points"]
    keys = list(dict.fromkeys((p.get("users"), p["mechanism"], p["epsilon"]) for p in points))
    sized = any(p.get("users") is not None for p in points)
    population = result["settings"].get("population")
    held = "a new world per split" if population else "per-user splits"
    fraction = (population or {}).get("test_fraction", 0.01) if population else result["settings"]["test_fraction"]
    lines = ["# Matrix completion against ε", "",
             f"Held-out RMSE over {held} ({fraction:g} held out), mean ± sd; "
             "the world alone (no audit, no canaries). Its private bias model: the run's own released centring "
             "and users' offsets alone; bias model and ALS (rank 20): non-private, fitted on the same training "
             "ratings (ALS only up to 10⁶ of them).", "",
             "| " + ("users | " if sized else "") + "mechanism | ε | splits | RMSE | its private bias model | "
             "predicting the mean | bias model | ALS | CPU s per point |",
             "|" + ("---:|" if sized else "") + "---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for users, name, epsilon in keys:
        rows = [p for p in points if p["mechanism"] == name and p["epsilon"] == epsilon and p.get("users") == users]
        cpu = [p.get("cpu_seconds") for p in rows]
        shown = "–" if epsilon is None else f"{epsilon:g}"
        lines.append("| " + (f"{users:,} | " if sized else "") + f"{name} | {shown} | {len(rows)} | "
                     f"{_cell([p['rmse'] for p in rows])} | "
                     f"{_cell([p.get('centring_rmse') for p in rows])} | {_cell([p['mean_rmse'] for p in rows])} | "
                     f"{_cell([p.get('bias_rmse') for p in rows])} | {_cell([p.get('als_rmse') for p in rows])} | "
                     f"{'–' if None in cpu else f'{np.mean(cpu):.0f}'} |")
    return "\n".join(lines) + "\n"
