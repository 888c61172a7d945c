"""The sections of a scenario file as pydantic models, most generated from the registries' dataclasses.

Each registered mechanism, population and attack is a dataclass whose fields
carry their constraints (``Annotated[float, Gt(0)]``); its section's model is
derived from those fields, and the audit section from every registered
estimator's fields, so a new part needs no schema code here. ``build`` turns
a section back into the part.
"""
from __future__ import annotations

import copy
import dataclasses
import re
import typing
import warnings
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import (BaseModel, ConfigDict, Field, ValidationInfo, create_model, field_validator,
                      model_validator)

from recaudit.attacks import ATTACKS
from recaudit.mechanisms import MECHANISMS, ParameterError
from recaudit.simulator.churn import Churn
from recaudit.simulator.populations import POPULATIONS

from ..designs import DESIGNS
from ..executors import MAX_WORKERS
from ..stats.estimators import (ESTIMATORS, Estimator, EstimatorError, estimator_for, estimator_settings, methods,
                                threshold_rules)

STRICT = ConfigDict(extra="forbid", allow_inf_nan=False)  # every number finite: `horizon: .inf` never ends
SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
DASK_ADDRESS = re.compile(r"([a-z]+://)?[A-Za-z0-9._\-\[\]:]+:[0-9]{1,5}")


def renamed_field(data: Any, section: str, old: str, new: str) -> Any:
    """``data`` with a field written under its old name moved to ``new``, and a one-line FutureWarning.

    Documents and reports written before the rename (``executor.kind``, ``audit.threshold``) still load;
    both names at once are refused by the model (``old`` stays an unknown field).
    """
    if isinstance(data, dict) and old in data and new not in data:
        warnings.warn(f"{section}.{old} is renamed {section}.{new}: write `{new}: {data[old]}` (the old name "
                      "will be refused by a later version)", FutureWarning, stacklevel=2)
        data = {(new if key == old else key): value for key, value in data.items()}
    return data


def folder_name(name: str) -> str:
    """``name`` if it can name the output folder runs/<name> (a scenario's ``name``), else ValueError."""
    if not SAFE_NAME.fullmatch(name):
        raise ValueError("must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit "
                         "(it names the output folder runs/<name>)")
    return name


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
    if getattr(model, "kind", None) == "trainer" and base is not None:  # fit is imported from the file's folder
        params["folder"] = Path(base) / (params.get("folder") or ".")
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
    """A fixed cohort instead of churn (``recaudit.simulator.schedules.Panel``): for iterative protocols such as
    matrix completion. ``n_users``: all of the population's users when omitted; ``rounds``: the
    mechanism's ``iterations`` when omitted."""

    model_config = STRICT
    n_users: int | None = Field(default=None, ge=1)
    rounds: int | None = Field(default=None, ge=1)
    batch_size: int = Field(default=4096, ge=1)


class _AuditBase(BaseModel):
    """How the audit runs: design, trials, confidence, estimator (by method and threshold rule, with its settings)."""

    model_config = STRICT
    design: Literal[tuple(DESIGNS)] | None = Field(  # type: ignore[valid-type]
        None, description="how scores are produced (default: one_run for the one-run methods, else local_replay)")
    trials: int = Field(200_000, ge=100, description="trials per neighbouring world (one-run: canaries)")
    alpha: float = Field(0.05, gt=0, lt=1, description="family-wise 1 - confidence of every bound")
    method: Literal[tuple(methods())] = "clopper-pearson"  # type: ignore[valid-type]
    threshold_rule: Literal[tuple(threshold_rules())] = Field(  # type: ignore[valid-type]
        "split", description="how the test's threshold is chosen (the threshold itself is a number: "
                             "threshold_value for explicit)")

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("threshold"), str):  # a rule name, not a cut
            return renamed_field(data, "audit", "threshold", "threshold_rule")
        return data

    @property
    def design_name(self) -> str:
        if self.design is not None:
            return self.design
        return "one_run" if estimator_for(self.method, self.threshold_rule).input == "canaries" else "local_replay"

    @model_validator(mode="before")
    @classmethod
    def _canaries_are_trials(cls, data: Any) -> Any:
        """``canaries: m`` (a trainer's one-run audit) is ``trials: m``; both given must agree."""
        if isinstance(data, dict) and data.get("canaries") is not None:
            if data.get("trials") is not None and data["trials"] != data["canaries"]:
                raise ParameterError("canaries", f"{data['canaries']} canaries but trials: {data['trials']} (one "
                                                 "run's canaries are its trials: give one of them)")
            data = data | {"trials": data["canaries"]}
        return data

    @model_validator(mode="after")
    def _estimator_settings(self) -> "_AuditBase":
        try:
            estimator = build_estimator(self)
        except EstimatorError as exc:
            raise ParameterError(exc.field, str(exc)) from None
        produces = DESIGNS[self.design_name].produces
        if estimator.input != produces:
            raise ParameterError("design", f"design {self.design_name} produces {produces} but method "
                                           f"{self.method} needs {estimator.input}")
        if getattr(self, "sequential", False):
            if (self.method, self.threshold_rule) != ("clopper-pearson", "split") or produces != "pairs":
                raise ParameterError("sequential", "a sequential audit tests the claim with an e-process on runs of "
                                                   "both worlds: it needs a distinguishing design and the default "
                                                   "method (clopper-pearson, threshold_rule split)")
            if self.trials < 2 * self.block_size:
                raise ParameterError("sequential", f"its batches are the blocks: trials ({self.trials}) must hold at "
                                                   f"least two blocks of block_size ({self.block_size})")
        return self


def _estimator_fields() -> dict[str, tuple[Any, Any]]:
    """Every registered estimator's settings, once each (estimators sharing a name share its type and default)."""
    fields: dict[str, tuple[Any, Any]] = {}
    for cls in ESTIMATORS.values():
        for name, spec in _dataclass_fields(cls).items():
            if fields.setdefault(name, spec) != spec:
                raise TypeError(f"estimator setting {name!r} differs between estimators: {fields[name]} vs {spec}")
    return fields


#: the audit section: the fields above, every estimator's settings (generated), then the targets and views
AuditConfig = create_model(
    "AuditConfig", __base__=_AuditBase, **_estimator_fields(),
    targets=(int, Field(1, ge=1, description="target users audited, each a test (Holm-corrected)")),
    block_size=(int, Field(50_000, ge=1, description="trials per random stream and per task")),
    target_candidates=(int, Field(64, ge=1)),
    insert_tick=(int | None, Field(None, ge=1, description="full_runs: the query tick (1, 2, ...) at which the "
                                   "target arrives (default 1); e.g. mid-stream, to audit a continual release "
                                   "around the target's arrival")),
    view=(Literal["messages", "releases", "others", "target", "statistics"] | None, Field(
        None, description="the view attacks read (default: the one the claim protects; a stronger one, e.g. "
                          "target for a joint claim, is a negative control that should be violated; statistics "
                          "is the white box of a central or joint proof, valid against its claim)")),
    sequential=(bool, Field(False, description="draw the runs block by block and stop as soon as an anytime-valid "
                                               "test decides (a violation shown, or none possible at the budget "
                                               "left); trials is the budget, block_size the batch")),
    canaries=(int | None, Field(None, ge=100, description="one_run of a trainer: the canary users (sets trials)")),
    canary=(Literal["isolated", "resampled"], Field("isolated", description=(
        "one_run of a trainer: isolated canaries rate items no one else rates (the worst case), resampled ones "
        "are real users of the population (the typical case)"))),
    canary_ratings=(int, Field(2, ge=1, description="one_run of a trainer: ratings of each isolated canary "
                                                    "(each on an item of its own)")),
    reference_runs=(int, Field(0, ge=0, le=64, description=(
        "one_run of a trainer: more training runs without any canary, to calibrate each canary's scores (offline "
        "LiRA: minus its mean reference score; each attack's calibrated scores are one more test)"))),
    pair=(str | None, Field(None,
                            description="the neighbouring pair's policy (recaudit.audits.designs.pairs.PAIR_POLICIES, "
                                              "e.g. single_item); default: the mechanism's, else the claim's")),
)


class ExecutorConfig(BaseModel):
    """Where trial blocks run: in this process, a local process pool, or Dask."""

    model_config = STRICT
    type: Literal["serial", "processes", "dask"] = "serial"
    workers: int = Field(2, ge=1, le=MAX_WORKERS)
    address: str | None = Field(None, description="a Dask scheduler address; a local cluster when absent")
    max_in_flight: int | None = Field(None, ge=1, le=100_000, description=(
        "at most this many tasks in flight (default: 2 per worker process, or 2 per thread of a Dask cluster)"))

    @field_validator("address")
    @classmethod
    def _address_form(cls, address: str | None) -> str | None:
        if address is not None and (not DASK_ADDRESS.fullmatch(address) or int(address.rsplit(":", 1)[1]) > 65535):
            raise ValueError("must be a scheduler address such as tcp://host:8786")
        return address

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        return renamed_field(data, "executor", "kind", "type")


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


def build(config: BaseModel, registry: dict[str, type], base_dir: Path | None = None):
    """Instantiate the registered class a ``kind:`` block names."""
    return registry[config.kind](**_params(config, {"base_dir": base_dir}))


def build_churn(config: BaseModel) -> Churn:
    return Churn(**_params(config))


def build_estimator(audit: BaseModel) -> Estimator:
    """The registered estimator the audit names, configured from its settings (the e-process of
    ``audit.sequential``: :class:`recaudit.audits.stats.sequential.SequentialEstimator`)."""
    if getattr(audit, "sequential", False):
        from ..stats.sequential import SequentialEstimator

        return SequentialEstimator(batch=audit.block_size, budget=audit.trials)
    cls = estimator_for(audit.method, audit.threshold_rule)
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
