"""Scenario files: the whole scenario model, its cross-section checks, and loading.

The sections (mechanism, population, attack, audit, ...) are generated from the
registries in ``recaudit.audits.language.sections``; this module checks what needs several of
them at once (the mechanism against the world, the estimator and design
against the claim, every sweep and grid point) and loads files.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator

from recaudit.attacks import ATTACKS
from recaudit.mechanisms import MECHANISMS, ParameterError, WorldInfo
from recaudit.audits.designs.pairs import policy_for
from recaudit.simulator.populations import POPULATIONS
from recaudit.simulator.ratings import ratings_limit
from recaudit.simulator.schedules import Panel

from ..designs import DESIGNS, DesignError
from ..stats.estimators import EstimatorError
from .limits import (GIB, LimitsConfig, estimate_cost, halving, over_grid_limits, over_limits, over_sweep_limits,
                     sweep_cost)
from .sections import (ROLE_FIELDS, SAFE_NAME, STRICT, AttackConfig, AuditConfig, ChurnConfig,  # noqa: F401
                       ExecutorConfig, GridConfig, MechanismConfig, PanelConfig, PopulationConfig, SweepAxis,
                       SweepConfig, build, build_churn, build_estimator, folder_name, with_parameter)
from .studies import StudyScenario
from .trainers import check_trainer, trainer_defaults, trainer_users  # noqa: F401 (trainer_users: re-exported)
from .validation_errors import format_validation_error
from .yamlio import ScenarioError, load_yaml


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

    _trainer_defaults = model_validator(mode="before")(classmethod(lambda cls, data: trainer_defaults(data)))

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
        return folder_name(name)

    @model_validator(mode="after")
    def _mechanism_fits_the_world(self, info: ValidationInfo) -> "Scenario":
        """Checks that need both the mechanism and the world (e.g. more sketches than sensing blocks)."""
        if getattr(build(self.mechanism, MECHANISMS), "trains", False):
            return self  # a trainer has no rounds: _audit_fits_the_claim checks it against its world
        context, mechanism = info.context or {}, build(self.mechanism, MECHANISMS)
        options = {"base_dir": context.get("base_dir"), "world_only": bool(context.get("world_only"))}
        for field, message in over_limits(estimate_cost(self, mechanism, **options), self.limits,
                                          _panel_size_field(self), halving(self, mechanism, **options))[:1]:
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
        mechanism = build(self.mechanism, MECHANISMS, (info.context or {}).get("base_dir"))
        if getattr(mechanism, "trains", False):
            if (info.context or {}).get("fit") is not None:  # from Python: the function itself, not imported
                mechanism._function = info.context["fit"]
            check_trainer(self, mechanism, (info.context or {}).get("base_dir"))
            return self
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
            build_estimator(self.audit).require(claim)
        except EstimatorError as exc:
            raise ParameterError("audit", f"{exc.field}: {exc}") from None
        _check_insert_tick(self.audit, churn)
        _check_attacks_read_their_views(self, mechanism, claim)
        try:
            policy_for(claim, mechanism, self.audit.pair)
        except ValueError as exc:
            raise ParameterError("audit.pair" if self.audit.pair is not None else "mechanism", str(exc)) from None
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
        costs, halved = [], []
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
            mechanism, base = build(one.mechanism, MECHANISMS), (info.context or {}).get("base_dir")
            costs.append(estimate_cost(one, mechanism, base_dir=base))
            halved.append(halving(one, mechanism, base_dir=base))
        for field, message in over_grid_limits(costs, list(seen), self.limits, _panel_size_field(self), halved)[:1]:
            raise ParameterError(field, message)
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






def _check_attacks_read_their_views(scenario: "Scenario", mechanism, claim) -> None:
    """Every attack can read the view the audit gives it, of this mechanism's runs (``Attack.refusal``)."""
    configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    default = scenario.audit.view or claim.view
    for i, config in enumerate(configs):
        field = "attack" if not isinstance(scenario.attack, list) else f"attack.{i}"
        view = getattr(config, "view", None) or default
        attack = build(config, ATTACKS)
        reason = attack.refusal(mechanism, view)
        if reason is None:
            design = DESIGNS[scenario.audit.design_name]()
            refused = design.attack_refusal(attack, view)
            if refused is not None:
                raise ParameterError(field, f"{refused} (audit.design: {design.kind}, audit.view: {view}); choose "
                                            f"another attack or design")
            continue
        if view in attack.views:  # the mechanism is the problem, not the view
            raise ParameterError(field, f"{reason} (audit.view: {view}); choose an attack that reads "
                                        f"{mechanism.kind} (recaudit list)")
        where = (f"{field}.view: {view}" if getattr(config, "view", None) else f"audit.view: {view}"
                 if scenario.audit.view else f"audit.view unset: the claim's view, {view}")
        raise ParameterError(field, f"{reason} ({where}); set audit.view: {attack.views[0]} or choose "
                                    f"another attack")


def command_problems(scenario: Scenario, command: str, executor_type: str | None = None, workers: int | None = None,
                     full: bool = False) -> list[tuple[str, str]]:
    """``(field, message)`` for every limit ``recaudit COMMAND`` would exceed with the command line's
    ``--executor``/``--workers``/``--full`` (validation checked the scenario as written)."""
    mechanism = build(scenario.mechanism, MECHANISMS)
    if command == "sweep":
        return over_sweep_limits(sweep_cost(scenario, mechanism, full, executor_type, workers), scenario.limits, full)
    if command == "grid":
        points = [Scenario.model_validate(p.data, context={"base_dir": getattr(scenario, "_base_dir", None)})
                  for p in grid_points(scenario)]
        return [problem for point in points for problem in command_problems(point, "run", executor_type, workers)][:1]
    return over_limits(estimate_cost(scenario, mechanism, executor_type, workers), scenario.limits,
                       _panel_size_field(scenario), halving(scenario, mechanism, executor_type=executor_type,
                                                            workers=workers))


def _panel_size_field(scenario: Scenario) -> str | None:
    """The field that sets a panel's cohort (None without a panel)."""
    if scenario.panel is None:
        return None
    return "panel.n_users" if scenario.panel.n_users else "population.n_users"


def load_scenario(path: str | Path) -> Scenario | StudyScenario:
    """Load and validate a scenario (a study scenario when it names a ``study``); every problem raises one
    ScenarioError listing all of them."""
    path = Path(path)
    data, lines = load_yaml(path)
    return validate_scenario(data, str(path), lines, path.parent)


def scenario_from_data(data: Any, where: str = "scenario", base_dir: str | Path | None = None,
                       ) -> Scenario | StudyScenario:
    """Scenario data held in memory (a dict, as a YAML file would load) validated as a file is: the same
    models and checks, every problem one line ``where: dotted.field: message`` (no line numbers), all raised
    at once as one :class:`ScenarioError`. Tuples count as lists and numpy scalars as numbers; anything a
    YAML file could not hold is refused naming its field. ``base_dir``: where relative paths (ratings files)
    are found (default: the working folder)."""
    data, lines = _data_locations(data, where)
    return validate_scenario(data, where, lines, Path(base_dir) if base_dir is not None else Path("."))


def validate_scenario(data: Any, where: str, lines: dict, base_dir: Path) -> Scenario | StudyScenario:
    """The one validation of scenario data, from a file (``lines``: each field's line) or from memory
    (``lines`` from :func:`_data_locations`: every field at line 0, printed without a line)."""
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: top level must be a mapping of keys, got {type(data).__name__}")
    model = StudyScenario if "study" in data else Scenario
    try:
        scenario = model.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as exc:
        raise ScenarioError(format_validation_error(where, exc, lines, model)) from None
    scenario._base_dir = base_dir
    return scenario


def _data_locations(data: Any, where: str) -> tuple[Any, dict[tuple, int]]:
    """A copy of in-memory scenario data (tuples made lists, numpy scalars Python numbers; the caller's data is
    not changed) and every location in it (as :func:`load_yaml`'s line map, all at line 0); a value no YAML
    file could hold, a container that holds itself or more than ``MAX_EXPANDED_VALUES`` values is one
    ScenarioError naming its field."""
    import numpy as np

    from .yamllimits import MAX_EXPANDED_VALUES, dotted

    lines: dict[tuple, int] = {(): 0}
    on_path: set[int] = set()

    def plain(value: Any, loc: tuple) -> Any:
        if len(lines) > MAX_EXPANDED_VALUES:
            raise ScenarioError(f"{where}: {dotted(loc) or 'scenario'}: the scenario holds more than "
                                f"{MAX_EXPANDED_VALUES:,} values")
        if isinstance(value, np.generic):
            value = value.item()
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, Path):
            return str(value)
        if not isinstance(value, (dict, list, tuple)):
            raise ScenarioError(f"{where}: {dotted(loc) or 'scenario'}: {type(value).__name__} is not scenario "
                                "data (numbers, strings, true/false, null, lists and mappings)")
        if id(value) in on_path:
            raise ScenarioError(f"{where}: {dotted(loc)}: a value may not contain itself")
        on_path.add(id(value))
        if isinstance(value, dict):
            out = {}
            for key, item in value.items():
                if not isinstance(key, (str, int, float, bool)):
                    raise ScenarioError(f"{where}: {dotted(loc) or 'scenario'}: key {key!r} is not a string")
                lines[loc + (str(key),)] = 0
                out[key] = plain(item, loc + (str(key),))
        else:
            out = []
            for i, item in enumerate(value):
                lines[loc + (i,)] = 0
                out.append(plain(item, loc + (i,)))
        on_path.discard(id(value))
        return out

    return (plain(data, ()) if isinstance(data, dict) else data), lines


Scenario.model_rebuild()
