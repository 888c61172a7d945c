"""Scenario files: the pydantic models, built from the registries, and loading.

Each registered mechanism, population and attack is a dataclass whose fields
carry their constraints (``Annotated[float, Gt(0)]``); its scenario model is
derived from those fields, so a new mechanism needs no schema code here.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
import typing
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, create_model, field_validator,
                      model_validator)

import copy

from attacks import ATTACKS
from mechanisms import MECHANISMS, ParameterError, WorldInfo
from simulator.churn import Churn
from simulator.neighbours import policy_for
from simulator.schedules import Panel
from simulator.population import POPULATIONS
from simulator.ratings import ratings_limit

from ..designs import DESIGNS, DesignError
from ..stats.estimators import ESTIMATORS, Estimator, EstimatorError, estimator_settings

from ..executors import MAX_WORKERS
from .limits import GIB, LimitsConfig, estimate_cost, grid_cost, over_limits, over_sweep_limits, sweep_cost
from .validation_errors import format_validation_error
from .yamlio import ScenarioError, load_yaml

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)  # every number finite: `horizon: .inf` never ends
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
DASK_ADDRESS = re.compile(r"([a-z]+://)?[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}")


def _dataclass_fields(cls: type) -> dict[str, tuple[Any, Any]]:
    hints = typing.get_type_hints(cls, include_extras=True)
    fields: dict[str, tuple[Any, Any]] = {}
    for f in dataclasses.fields(cls):
        if not f.init or f.name.startswith("_"):
            continue
        if f.default is not dataclasses.MISSING:
            default: Any = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = Field(default_factory=f.default_factory)
        else:
            default = ...
        fields[f.name] = (hints[f.name], default)
    return fields


def _builds(cls: type):
    """An after-validator that constructs ``cls`` so its own checks run at load time."""

    def check(model: BaseModel, info: ValidationInfo) -> BaseModel:
        cls(**_params(model, info.context))
        return model

    return model_validator(mode="after")(check)


#: fields of a ``kind:`` block that say how the part is used, not how it is built
ROLE_FIELDS = ("kind", "view")


def _params(model: BaseModel, context: dict | None = None) -> dict[str, Any]:
    params = {k: getattr(model, k) for k in type(model).model_fields if k not in ROLE_FIELDS}
    base = (context or {}).get("base_dir")
    if params.get("path") is not None and base is not None:
        params["path"] = Path(base) / params["path"]
    return params


def _kind_model(kind: str, cls: type, suffix: str, **role) -> type[BaseModel]:
    return create_model(
        f"{cls.__name__}{suffix}",
        __config__=STRICT,
        __validators__={"builds": _builds(cls)},
        kind=(Literal[kind], ...),
        **role,
        **_dataclass_fields(cls),
    )


def _union(registry: dict[str, type], suffix: str, **role):
    models = tuple(_kind_model(kind, cls, suffix, **role) for kind, cls in registry.items())
    return Annotated[Union[models], Field(discriminator="kind")]


MechanismConfig = _union(MECHANISMS, "Config")
PopulationConfig = _union(POPULATIONS, "Config")
AttackConfig = _union(ATTACKS, "Config", view=(Literal["messages", "releases", "others", "target", "statistics"] | None,
                     Field(None, description="the view this attack reads (default: audit.view), so one scenario "
                                             "can set white-box and black-box attacks side by side")))
ChurnConfig = create_model("ChurnConfig", __config__=STRICT, __validators__={"builds": _builds(Churn)},
                           **_dataclass_fields(Churn))


class PanelConfig(BaseModel):
    """A fixed cohort instead of churn (``simulator.schedules.Panel``): for iterative protocols such as
    matrix completion. ``n_users``: all of the population's users when omitted; ``rounds``: the
    mechanism's ``iterations`` when omitted."""

    model_config = STRICT
    n_users: int | None = Field(default=None, ge=1)
    rounds: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=4096, ge=1)


#: the registered estimator a (method, threshold) pair names: clopper-pearson names its threshold strategy
ESTIMATOR_OF_METHOD = {"gdp": "gdp", "one-run": "one-run", "fdp-one-run": "fdp-one-run", "gauss-fit": "gauss-fit"}
#: the methods that judge canaries of one run
ONE_RUN_METHODS = ("one-run", "fdp-one-run", "gauss-fit")


class AuditConfig(BaseModel):
    """How the audit runs: design, trials, confidence, estimator (by name, with its settings), tests."""

    model_config = STRICT
    design: Literal[tuple(DESIGNS)] | None = Field(  # type: ignore[valid-type]
        None, description="how scores are produced (default: one_run for the one-run methods, else local_replay)")
    trials: int = Field(200_000, ge=100, description="trials per neighbouring world (one-run: canaries)")
    alpha: float = Field(0.05, gt=0, lt=1, description="family-wise 1 - confidence of every bound")
    method: Literal["clopper-pearson", "gdp", "one-run", "fdp-one-run", "gauss-fit"] = "clopper-pearson"
    threshold: Literal["split", "bonferroni", "explicit"] = "split"
    selection_fraction: float = Field(0.5, gt=0, lt=1, description="split: share of trials that pick the threshold")
    thresholds: list[float] | None = Field(None, min_length=1, description="bonferroni: the fixed threshold grid")
    score_range: tuple[float, float] | None = Field(None, description="bonferroni: grid_size thresholds over it")
    grid_size: int = Field(100, ge=1)
    threshold_value: float | None = Field(None, description="explicit: the threshold, fixed in advance")
    direction: Literal[1, -1] = Field(1, description="explicit: +1 guesses world 1 when score >= threshold")
    guess_fraction: float | None = Field(None, gt=0, le=0.5, description="one-run: share of canaries guessed in (and "
                                         "out); default: the count planned on the claim (docs/guide/estimators.md)")
    check_alpha: float = Field(0.01, ge=0, lt=1, description="gauss-fit: level of the Gaussian model checks (0: none)")
    targets: int = Field(1, ge=1, description="target users audited, each a test (Holm-corrected)")
    block_size: int = Field(50_000, ge=1, description="trials per random stream and per task")
    target_candidates: int = Field(64, ge=1)
    insert_tick: int | None = Field(None, ge=1, description="full_runs: the query tick (1, 2, ...) at which the "
                                    "target arrives (default 1); e.g. mid-stream, to audit a continual release "
                                    "around the target's arrival")
    view: Literal["messages", "releases", "others", "target", "statistics"] | None = Field(
        None, description="the view attacks read (default: the one the claim protects; a stronger one, e.g. "
                          "target for a joint claim, is a negative control that should be violated; statistics "
                          "is the white box of a central or joint proof, valid against its claim)")
    pair: str | None = Field(None, description="the neighbouring pair's policy (simulator.neighbours.PAIR_POLICIES, "
                                               "e.g. single_item); default: the mechanism's, else the claim's")

    @property
    def estimator_name(self) -> str:
        return ESTIMATOR_OF_METHOD.get(self.method, self.threshold)

    @property
    def design_name(self) -> str:
        return self.design or ("one_run" if self.method in ONE_RUN_METHODS else "local_replay")

    @model_validator(mode="after")
    def _estimator_settings(self) -> "AuditConfig":
        if self.method == "gdp" and self.threshold != "split":
            raise ParameterError("threshold", "the gdp method chooses its threshold by split")
        try:
            estimator = build_estimator(self)
        except EstimatorError as exc:
            raise ParameterError(exc.field, str(exc)) from None
        produces = DESIGNS[self.design_name].produces
        if estimator.input != produces:
            raise ParameterError("design", f"design {self.design_name} produces {produces} but method "
                                           f"{self.method} needs {estimator.input}")
        return self


class ExecutorConfig(BaseModel):
    """Where trial blocks run: in this process, a local process pool, or Dask."""

    model_config = STRICT
    kind: Literal["serial", "processes", "dask"] = "serial"
    workers: int = Field(2, ge=1, le=MAX_WORKERS)
    address: str | None = Field(None, description="a Dask scheduler address; a local cluster when absent")

    @field_validator("address")
    @classmethod
    def _address_form(cls, address: str | None) -> str | None:
        if address is not None and (not DASK_ADDRESS.fullmatch(address) or int(address.rsplit(":", 1)[1]) > 65535):
            raise ValueError("must be a scheduler address such as tcp://host:8786")
        return address


class SweepAxis(BaseModel):
    """One parameter varied alone over a grid (the rest stays at the scenario's value)."""

    model_config = STRICT
    parameter: str = Field(pattern=r"^(population|mechanism)\.[a-z_]+$",
                           description="dotted path, e.g. population.n_items or mechanism.epsilon")
    values: list[float] = Field(min_length=2, description="the default (small) grid")
    full_values: list[float] | None = Field(None, min_length=2, description="the full grid, with --full")
    linked: dict[str, float] = Field(default_factory=dict,
                                     description="other parameters set to factor x value (rounded for integers), "
                                                 "e.g. {population.ratings_per_user: 0.5} keeps w = N / 2")

    def apply(self, data: dict, value) -> dict:
        """Scenario data with this axis at ``value`` (and its linked parameters)."""
        data = with_parameter(data, self.parameter, value)
        for dotted, factor in self.linked.items():
            section, _, key = dotted.partition(".")
            current = data.get(section, {}).get(key)
            linked = factor * value
            data = with_parameter(data, dotted, int(round(linked)) if isinstance(current, int) else linked)
        return data

    def grid(self, full: bool = False) -> list[float]:
        values = self.full_values if full and self.full_values else self.values
        # integers stay integers so integer fields (n_items, ratings_per_user) validate
        return [int(v) if float(v).is_integer() and not self.parameter.endswith("epsilon") else v for v in values]


class SweepConfig(BaseModel):
    """The users needed (U*) for accurate clustering, measured over grids of parameters."""

    model_config = STRICT
    axes: list[SweepAxis] = Field(min_length=1)
    replicates: int = Field(3, ge=1)
    target_accuracy: float = Field(1.0, gt=0, le=1, description="1.0 = exact item clustering")
    stable_checkpoints: int = Field(2, ge=1, description="consecutive checkpoints at the target")
    max_users: int = Field(2_000_000, ge=10)
    start_users: int = Field(100, ge=1)
    checkpoints_per_decade: int = Field(20, ge=1)
    compare: list[MechanismConfig] = Field(
        default_factory=list, description="more mechanisms measured on the same grids, worlds and seeds as "
                                          "the scenario's (each axis applies to each of them)")
    bounds: list[Literal["fano", "scarce", "adaptive"]] = Field(
        default_factory=list, description="lower bounds on U drawn beside U* (mechanisms/theory.py): Fano, "
                                          "N^2/(w (e^eps - 1)^2), N log N")


class GridConfig(BaseModel):
    """Held-out utility and ε_LB against ε: the scenario's mechanism and ``compare`` at every ε of ``epsilons``
    (each point an ordinary run of the same world and seed), ``reference`` mechanisms run once as they are
    (e.g. non-private ``frank_wolfe``). Run by ``recaudit grid``."""

    model_config = STRICT
    epsilons: list[float] = Field(min_length=1, description="the ε of every point (replaces each mechanism's "
                                                            "epsilon)")
    compare: list[MechanismConfig] = Field(default_factory=list,
                                           description="more mechanisms run at every ε beside the scenario's "
                                                       "(without epsilon: the grid sets it)")
    reference: list[MechanismConfig] = Field(default_factory=list,
                                             description="mechanisms run once, as written (the baseline lines); "
                                                         "folder <kind>, or <kind>-<index> when a kind repeats")
    attacks: dict[str, list[AttackConfig]] = Field(
        default_factory=dict, description="the attacks of a mechanism kind's points, instead of the scenario's "
                                          "attack (e.g. {mcsherry_mironov: [{kind: covariance_projection}]})")

    @field_validator("epsilons")
    @classmethod
    def _positive_distinct(cls, epsilons: list[float]) -> list[float]:
        if any(e <= 0 for e in epsilons):
            raise ValueError("every ε must be > 0")
        if len(set(epsilons)) != len(epsilons):
            raise ValueError("ε values must be distinct")
        return epsilons

    @field_validator("compare", mode="before")
    @classmethod
    def _epsilon_from_the_grid(cls, compare: Any, info: ValidationInfo) -> Any:
        """Each compare mechanism gets the grid's first ε to validate with (every ε is checked per point)."""
        if not isinstance(compare, list):
            return compare
        first = (info.data.get("epsilons") or [1.0])[0]
        filled = []
        for i, mechanism in enumerate(compare):
            if isinstance(mechanism, dict):
                if "epsilon" in mechanism:
                    raise ParameterError(f"{i}.epsilon", "set by grid.epsilons; leave it out")
                mechanism = mechanism | {"epsilon": first}
            filled.append(mechanism)
        return filled


class Scenario(BaseModel):
    """A whole run: the world, the mechanism, the adversary and the audit."""

    model_config = STRICT
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(ge=0)
    population: PopulationConfig
    churn: ChurnConfig = Field(default_factory=lambda: ChurnConfig())
    panel: PanelConfig | None = None
    mechanism: MechanismConfig
    attack: AttackConfig | list[AttackConfig] = Field(default_factory=lambda: {"kind": "likelihood_ratio"},
                                                      validate_default=True)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    sweep: SweepConfig | None = None
    grid: GridConfig | None = None
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @model_validator(mode="wrap")
    @classmethod
    def _ratings_files_within_the_limit(cls, data: Any, handler):
        """Ratings files are read while validating: their size is held to ``limits.ratings_gb`` first."""
        try:
            limit = LimitsConfig.model_validate((data or {}).get("limits") or {}).ratings_gb
        except (ValidationError, AttributeError):  # reported where it is, by the limits field
            limit = LimitsConfig().ratings_gb
        with ratings_limit(limit * GIB):
            return handler(data)

    @field_validator("name")
    @classmethod
    def _name_is_a_folder_name(cls, name: str) -> str:
        if not SAFE_NAME.fullmatch(name):
            raise ValueError("must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit "
                             "(it names the output folder runs/<name>)")
        return name

    @model_validator(mode="after")
    def _mechanism_fits_the_world(self) -> "Scenario":
        """Checks that need both the mechanism and the world (e.g. more sketches than sensing blocks)."""
        cost = estimate_cost(self, build(self.mechanism, MECHANISMS))
        for field, message in over_limits(cost, self.limits, panel=_panel_size_field(self))[:1]:
            raise ParameterError(field, message)  # before anything of the world's size is built
        pop = self.population
        if pop.kind in ("sbm", "sbm_stars", "rank_one"):
            world = WorldInfo(pop.n_items, pop.ratings_per_user, len(getattr(pop, "item_cluster_weights", (0, 0))))
            try:
                build(self.mechanism, MECHANISMS).init_state(world)
            except ParameterError as exc:
                raise ParameterError(f"mechanism.{exc.field}", str(exc)) from None
        return self

    @model_validator(mode="after")
    def _audit_fits_the_claim(self, info: ValidationInfo) -> "Scenario":
        """The estimator and the design must be valid for the claim the mechanism makes."""
        mechanism = build(self.mechanism, MECHANISMS)
        population = None
        if self.panel is not None:
            population = build(self.population, POPULATIONS, (info.context or {}).get("base_dir"))
        try:
            churn = build_schedule(self, mechanism, population)
        except ParameterError as exc:
            raise ParameterError(exc.field, str(exc)) from None
        if population is None and self.population.kind.startswith("ratings_file"):
            population = build(self.population, POPULATIONS, (info.context or {}).get("base_dir"))
        _check_users_available(population, mechanism, churn)
        try:
            claim = mechanism.claim_for(churn.queries_per_user)
        except ValueError as exc:  # the accountant's errors (and dp-accounting's), at the boundary
            raise ParameterError(_mechanism_field(self.mechanism, exc), f"the accountant cannot compute the "
                                                                        f"claim: {exc}") from None
        try:
            build_estimator(self.audit).check_claim(claim)
        except EstimatorError as exc:
            raise ParameterError("audit", f"{exc.field}: {exc}") from None
        _check_insert_tick(self.audit, churn)
        if self.audit.pair is not None:
            try:
                policy_for(claim, mechanism, self.audit.pair)
            except ValueError as exc:
                raise ParameterError("audit.pair", str(exc)) from None
        ticks = getattr(mechanism, "ticks", None)
        if ticks is not None and self.panel is None and _query_ticks(churn) > ticks:
            raise ParameterError("mechanism.ticks", f"the run has {_query_ticks(churn)} query ticks (horizon / "
                                                    f"query_interval) but the server's stream holds {ticks}")
        try:
            DESIGNS[self.audit.design_name]().check(mechanism, claim, churn, self.audit.trials)
        except DesignError as exc:
            raise ParameterError("audit.design", str(exc)) from None
        return self

    @model_validator(mode="after")
    def _sweep_values_are_valid(self, info: ValidationInfo) -> "Scenario":
        """Every grid value must give a valid scenario, checked before any work."""
        if self.sweep is None:
            return self
        mechanism = build(self.mechanism, MECHANISMS)
        full = [p for p in over_sweep_limits(sweep_cost(self, mechanism, full=True), self.limits, full=True)
                if "files" in p[1]]  # the full grid's time is checked by `sweep --full`; its length here
        for field, message in (over_sweep_limits(sweep_cost(self, mechanism), self.limits) + full)[:1]:
            raise ParameterError(field, message)  # before validating each value of a grid too long to run
        data = self.model_dump(mode="json", exclude={"sweep"})
        contenders = [self.mechanism, *self.sweep.compare]
        for c, mechanism in enumerate(contenders):
            variant = data | {"mechanism": mechanism.model_dump(mode="json")}
            where = "" if c == 0 else f" (compare[{c - 1}]: {mechanism.kind})"
            for a, axis in enumerate(self.sweep.axes):
                section, _, key = axis.parameter.partition(".")
                config = mechanism if section == "mechanism" else getattr(self, section)
                if key not in type(config).model_fields:
                    raise ParameterError("sweep", f"axes[{a}].parameter: {section} of kind "
                                                  f"{config.kind!r} has no parameter {key!r}{where}")
                for value in axis.grid(full=False) + axis.grid(full=True):
                    try:
                        Scenario.model_validate(axis.apply(variant, value), context=info.context)
                    except ValidationError as exc:
                        problem = exc.errors()[0]
                        raise ParameterError("sweep", f"axes[{a}]: {axis.parameter} = {value} is invalid"
                                                      f"{where}: {problem['msg']}") from None
        return self

    @model_validator(mode="after")
    def _grid_points_are_valid(self, info: ValidationInfo) -> "Scenario":
        """Every point of the grid must itself be a valid scenario, checked before any work."""
        if self.grid is None:
            return self
        kinds = {self.mechanism.kind} | {m.kind for m in self.grid.compare + self.grid.reference}
        for kind in self.grid.attacks:
            if kind not in kinds:
                raise ParameterError(f"grid.attacks.{kind}", f"no mechanism of the grid is {kind!r} (the grid's: "
                                                             f"{', '.join(sorted(kinds))})")
        seen: dict[str, str] = {}
        costs = []
        for point in grid_points(self):
            if point.name in seen:
                raise ParameterError(point.field, f"runs into the same folder {point.name}/ as {seen[point.name]} "
                                                  "(each mechanism kind once per ε)")
            seen[point.name] = point.field
            try:
                one = Scenario.model_validate(point.data, context=info.context)
            except ValidationError as exc:
                problem = exc.errors()[0]
                where = ".".join(str(p) for p in problem["loc"])
                error = (problem.get("ctx") or {}).get("error")
                where = ".".join(filter(None, [where, getattr(error, "field", None)])) or "scenario"
                eps = "" if point.epsilon is None else f" at ε = {point.epsilon:g}"
                raise ParameterError(point.field, f"{point.kind}{eps} is not a valid scenario: {where}: "
                                                  f"{error if error is not None else problem['msg']}") from None
            costs.append(estimate_cost(one, build(one.mechanism, MECHANISMS)))
        total = grid_cost(costs)
        for key, limit, what in (("seconds", self.limits.hours * 3600, "hours"), ("files", self.limits.files, "files")):
            if total[key] > limit:
                amount = f"{total[key] / 3600:.3g} hours" if key == "seconds" else f"{total[key]:.3g} files"
                raise ParameterError("grid.epsilons", f"the grid's {len(costs)} runs would take {amount} together, "
                                                      f"over limits.{what} = {getattr(self.limits, what):g}")
        return self

    def fingerprint(self) -> str:
        """A hash of everything that determines the results (not the executor)."""
        data = self.model_dump(mode="json", exclude={"executor", "description", "limits"})  # includes sweep
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class GridPoint:
    """One run of a grid: its folder name, the field that defines it, and the scenario data it runs."""

    name: str
    field: str  # e.g. grid.compare.0 (for error messages)
    kind: str
    epsilon: float | None  # None: a reference, run as written
    data: dict


def grid_points(scenario: "Scenario") -> list[GridPoint]:
    """The grid's points: every (mechanism, ε) then every reference, each as ordinary scenario data."""
    grid = scenario.grid
    base = scenario.model_dump(mode="json", exclude={"grid", "sweep"})

    def data(name: str, mechanism) -> dict:
        attack = grid.attacks.get(mechanism.kind)
        return base | {"name": f"{scenario.name}-{name}"[:100], "mechanism": mechanism.model_dump(mode="json")} | (
            {} if attack is None else {"attack": [a.model_dump(mode="json") for a in attack]})

    contenders = [("mechanism", scenario.mechanism)] + [(f"grid.compare.{i}", m) for i, m in enumerate(grid.compare)]
    points = []
    repeated = [m.kind for _, m in contenders]
    for eps in grid.epsilons:
        for index, (field, mechanism) in enumerate(contenders):
            if "epsilon" not in type(mechanism).model_fields:
                raise ParameterError(field, f"{mechanism.kind} has no epsilon to vary; list it under grid.reference")
            # a kind listed twice (e.g. two variants of private_frank_wolfe) is told apart by its position
            label = mechanism.kind if repeated.count(mechanism.kind) == 1 else f"{mechanism.kind}-{index}"
            name = f"{label}-eps{eps:g}"
            points.append(GridPoint(name, field, mechanism.kind, eps,
                                    data(name, mechanism.model_copy(update={"epsilon": eps}))))
    kinds = [m.kind for m in grid.reference]
    for i, mechanism in enumerate(grid.reference):
        name = mechanism.kind if kinds.count(mechanism.kind) == 1 else f"{mechanism.kind}-{i}"
        points.append(GridPoint(name, f"grid.reference.{i}", mechanism.kind, None, data(name, mechanism)))
    return points


def _mechanism_field(config: BaseModel, exc: Exception) -> str:
    """``mechanism.<field>`` when the error names a field of the mechanism's block, else ``mechanism``."""
    field = getattr(exc, "field", None)
    return f"mechanism.{field}" if field in type(config).model_fields else "mechanism"


def _query_ticks(churn) -> int:
    return int(math.floor(churn.horizon / churn.query_interval + 1e-9))


def _check_insert_tick(audit: AuditConfig, churn) -> None:
    """``audit.insert_tick`` is for full_runs, and must leave the target room for all its answers."""
    if audit.insert_tick is None:
        return
    if audit.design_name != "full_runs":
        raise ParameterError("audit.insert_tick", f"only design full_runs inserts its target at a chosen tick "
                                                  f"(design is {audit.design_name})")
    last = _query_ticks(churn) - churn.queries_per_user + 1
    if audit.insert_tick > last:
        raise ParameterError("audit.insert_tick", f"{audit.insert_tick} is too late: the run has "
                                                  f"{_query_ticks(churn)} query ticks and the target must answer "
                                                  f"{churn.queries_per_user} (latest: {max(last, 0)})")


def build(config: BaseModel, registry: dict[str, type], base_dir: Path | None = None):
    """Instantiate the registered class a ``kind:`` block names."""
    return registry[config.kind](**_params(config, {"base_dir": base_dir}))


def build_churn(config: BaseModel) -> Churn:
    return Churn(**_params(config))


def build_schedule(scenario: "Scenario", mechanism, population):
    """The run's schedule: the ``panel`` cohort when the scenario has one, else its churn."""
    if scenario.panel is None:
        return build_churn(scenario.churn)
    cfg = scenario.panel
    size = population.size() if hasattr(population, "size") else None
    public = mechanism.public_panel()
    n_users = cfg.n_users or (None if size is None else size - public)
    if n_users is None:
        raise ParameterError("panel.n_users", f"population {scenario.population.kind!r} has no fixed size: "
                                              "give panel.n_users")
    if size is not None and n_users + public > size:
        raise ParameterError("panel.n_users", f"{n_users} users asked for" + (f" besides {public} public ones"
                                              if public else "") + f", the population has {size}")
    iterations = getattr(mechanism, "rounds", None) or getattr(mechanism, "iterations", None)
    rounds = cfg.rounds or iterations or 1
    if iterations is not None and rounds != iterations:
        raise ParameterError("panel.rounds", f"the mechanism runs {iterations} iterations; panel.rounds is {rounds}")
    return Panel(n_users, rounds, cfg.batch_size)


def _check_users_available(population, mechanism, churn) -> None:
    """Refuse, before any work, a run that needs more distinct users than a finite population holds
    (a churn run: its arrivals' mean plus 5 standard deviations, and the mechanism's public users)."""
    size = population.size() if population is not None and hasattr(population, "size") else None
    if size is None or isinstance(churn, Panel):
        return  # a panel is checked by build_schedule
    mean = churn.arrival_rate * churn.horizon
    need = math.ceil(mean + 5 * math.sqrt(mean)) + mechanism.public_panel()
    if need > size:
        raise ParameterError("population", f"the run needs up to {need:,} distinct users ({mean:,.0f} arrivals "
                                           f"expected over the horizon, {mechanism.public_panel()} public), the "
                                           f"ratings file holds {size:,}: lower churn.arrival_rate or horizon, or "
                                           "set population.bootstrap: true to resample users")


def build_estimator(audit: AuditConfig) -> Estimator:
    """The registered estimator the audit names, configured from its settings."""
    cls = ESTIMATORS[audit.estimator_name]
    return cls(**{name: getattr(audit, name) for name in estimator_settings(cls)})


def with_parameter(data: dict, dotted: str, value) -> dict:
    """A deep copy of scenario data with ``dotted`` (e.g. ``mechanism.epsilon``) set to ``value``."""
    data = copy.deepcopy(data)
    *parents, leaf = dotted.split(".")
    node = data
    for key in parents:
        node = node[key]
    if leaf not in node and not isinstance(node, dict):
        raise KeyError(dotted)
    node[leaf] = value
    return data


def command_problems(scenario: Scenario, command: str, kind: str | None = None, workers: int | None = None,
                     full: bool = False) -> list[tuple[str, str]]:
    """``(field, message)`` for every limit ``recaudit COMMAND`` would exceed with the command line's
    ``--executor``/``--workers``/``--full`` (validation checked the scenario as written)."""
    mechanism = build(scenario.mechanism, MECHANISMS)
    if command == "sweep":
        return over_sweep_limits(sweep_cost(scenario, mechanism, full, kind, workers), scenario.limits, full)
    if command == "grid":
        points = [Scenario.model_validate(p.data, context={"base_dir": getattr(scenario, "_base_dir", None)})
                  for p in grid_points(scenario)]
        return [problem for point in points for problem in command_problems(point, "run", kind, workers)][:1]
    return over_limits(estimate_cost(scenario, mechanism, kind, workers), scenario.limits,
                       panel=_panel_size_field(scenario))


def _panel_size_field(scenario: Scenario) -> str | None:
    """The field that sets a panel's cohort (None without a panel)."""
    if scenario.panel is None:
        return None
    return "panel.n_users" if scenario.panel.n_users else "population.n_users"


def load_scenario(path: str | Path) -> Scenario:
    """Load and validate a scenario; every problem raises one ScenarioError listing all of them."""
    path = Path(path)
    data, lines = load_yaml(path)
    try:
        scenario = Scenario.model_validate(data, context={"base_dir": path.parent})
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(str(path), exc, lines, Scenario)) from None
    scenario._base_dir = path.parent
    return scenario


Scenario.model_rebuild()
