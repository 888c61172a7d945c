"""Study scenarios: a paper's tables computed by code of their own, run by ``recaudit run`` like any scenario.

A study scenario names a ``study:`` instead of a world, mechanism and audit::

    name: xin-jaakkola-study-movielens-100k
    seed: 0
    study: {kind: xin_jaakkola, dataset: movielens-100k, private: 600, replicates: 5}

A study kind is a dataclass in the top-level ``studies`` package, ``class X(Study, kind="x")``, whose
fields are its settings. :meth:`Study.check` refuses before any work (the data too small, a data set
not fetched); :meth:`Study.run` writes its tables into the output folder, saving each part as it
finishes, so a rerun into the same folder resumes. ``audits`` never imports ``studies`` (the layer
above it): the packages in ``STUDY_PACKAGES`` are imported by name when a scenario names a study,
as a plugin would be.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path
from typing import Any, Callable, ClassVar

from pydantic import BaseModel, Field, TypeAdapter, ValidationError, field_validator

from recaudit.core.errors import BadInput
from recaudit.core.registry import Registry

from .limits import GIB, LimitsConfig, hours
from .sections import STRICT, folder_name

#: every study, by the kind a scenario names; a class registers itself where it is defined
STUDIES = Registry("study")
#: packages whose modules define study kinds, imported when a scenario names a study
STUDY_PACKAGES = ("recaudit.studies",)


class DataTooSmall(BadInput, ValueError):
    """The data cannot hold what the study asks of it (raised by ``Study.check``, before any work)."""


class Study:
    """Base of every study kind: ``@dataclass class X(Study, kind="x")`` registers ``X`` in ``STUDIES``."""

    kind: ClassVar[str]

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        STUDIES.add(cls, kind)

    def check(self) -> None:
        """Refuse before any work (raise ``BadInput``): the data too small for the settings, say."""

    def run(self, out: Path, seed: int, log: Callable[[str], None]) -> list[Path]:
        """Compute the tables into ``out`` (resuming the parts already saved there); the files written."""
        raise NotImplementedError

    def estimate(self, seed: int, limits: LimitsConfig) -> dict[str, Any]:
        """What the whole study will cost before any work: ``seconds`` (CPU on 2 cores), ``memory`` (peak bytes)
        and ``basis`` (how it was estimated). Subclasses say; each states how it was checked."""
        raise NotImplementedError


def check_study_limits(name: str, cost: dict[str, Any], limits: LimitsConfig, study: "Study | None" = None,
                       seed: int = 0) -> None:
    """Refuse a study over ``limits`` (hours, memory) in one line naming the study's setting that costs the most
    (:func:`costliest_setting`) and the limit to raise."""
    over = [("memory", cost["memory"] > limits.memory_gb * GIB, "memory_gb",
             f"the study would need about {cost['memory'] / GIB:.3g} GiB, over limits.memory_gb = "
             f"{limits.memory_gb:g}"),
            ("seconds", cost["seconds"] > limits.hours * 3600, "hours",
             f"the study would take about {hours(cost['seconds'])} on 2 cores, over limits.hours = "
             f"{limits.hours:g}")]
    for key, exceeded, limit, message in over:
        if exceeded:
            field = costliest_setting(study, seed, limits, key) if study is not None else None
            lower = f"study.{field} costs the most: lower it, or " if field else "no setting of the study changes it: "
            raise BadInput(f"{name}: {message} ({lower}raise limits.{limit} in the scenario on purpose)")


def costliest_setting(study: "Study", seed: int, limits: LimitsConfig, key: str) -> str | None:
    """The setting of ``study`` that costs the most ``key`` (``seconds`` or ``memory``) by its own estimate: the one
    whose smallest value (1, or a list's first element; half when 1 is refused) saves the most. None: no setting
    lowers it."""
    base = float(study.estimate(seed, limits)[key])
    best, name = 0.0, None
    for f in dataclasses.fields(study):
        value = getattr(study, f.name)
        if not f.init or isinstance(value, bool):
            continue
        if isinstance(value, int):
            smaller = [1, value // 2] if value > 1 else []
        elif isinstance(value, float):
            smaller = [value / 2] if value > 0 else []
        elif isinstance(value, list):
            smaller = [value[:1], value[: (len(value) + 1) // 2]] if len(value) > 1 else []
        else:
            smaller = []
        for candidate in smaller:
            try:
                saved = base - float(dataclasses.replace(study, **{f.name: candidate}).estimate(seed, limits)[key])
            except Exception:  # a value the study refuses: try the next
                continue
            if saved > best * (1 + 1e-9):
                best, name = saved, f.name
            break
    return name


def describe_estimate(cost: dict[str, Any]) -> str:
    """The estimate as one line: time, memory and what it counts."""
    seconds = cost["seconds"]
    when = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else \
        f"{seconds / 3600:.1f} h"
    return f"estimated {when} of CPU on 2 cores, peak about {cost['memory'] / 2 ** 20:.0f} MB ({cost['basis']})"


def study_kinds() -> Registry:
    """``STUDIES`` with every study package imported."""
    for package in STUDY_PACKAGES:
        importlib.import_module(package)
    return STUDIES


def build_study(block: dict) -> Study:
    """The study a scenario's ``study:`` block describes (``ValueError`` naming the field otherwise)."""
    if not isinstance(block, dict) or "kind" not in block:
        raise ValueError("needs a kind: one of " + ", ".join(sorted(study_kinds())))
    kinds = study_kinds()
    if block["kind"] not in kinds:
        raise ValueError(f"unknown study {block['kind']!r}; registered: {', '.join(sorted(kinds))}")
    cls = kinds[block["kind"]]
    settings = {k: v for k, v in block.items() if k != "kind"}
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(settings) - known)
    if unknown:
        raise ValueError(f"{block['kind']}: unknown setting {unknown[0]!r}; known: {', '.join(sorted(known))}")
    try:
        return TypeAdapter(cls).validate_python(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = '.'.join(map(str, first['loc']))
        raise ValueError(f"{block['kind']}{'.' + where if where else ''}: {first['msg']}") from None


class StudyScenario(BaseModel):
    """A study run as a scenario: its name (the output folder), seed and ``study`` block."""

    model_config = STRICT
    name: str = Field(min_length=1)
    description: str = ""
    seed: int = Field(ge=0)
    study: dict[str, Any]
    limits: LimitsConfig = Field(default_factory=LimitsConfig)

    @field_validator("name")
    @classmethod
    def _name_is_a_folder_name(cls, name: str) -> str:
        return folder_name(name)

    @field_validator("study")
    @classmethod
    def _study_builds(cls, block: dict) -> dict:
        build_study(block)
        return block

    def build(self) -> Study:
        return build_study(self.study)

    def announce(self, study: Study, where: str) -> str:
        """The study's estimate as one line, before any work; ``BadInput`` (one line) over ``limits``."""
        cost = study.estimate(self.seed, self.limits)
        check_study_limits(where, cost, self.limits, study, self.seed)
        return f"{self.name}: {describe_estimate(cost)}"
