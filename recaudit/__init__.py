"""recaudit: simulation and privacy audits for private recommender systems.

One import package; its subpackages are ``recaudit.mechanisms``, ``recaudit.simulator``,
``recaudit.attacks``, ``recaudit.audits`` and ``recaudit.studies`` (imports flow in that order),
with ``recaudit.core`` (errors, registries) beneath them all.

The public API (docs/api.md) is this package's attributes, imported on first use (PEP 562), so
``import recaudit.mechanisms`` never loads the audits layer::

    import recaudit as ra
    report = ra.run("quickstart")                                   # a scenario: file, shipped name or dict
    result = ra.estimate(scores, members=members, epsilon=1, delta=1e-5)   # scores in, ε out
"""
from importlib import metadata as _metadata
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and editors see; at run time the names load on first use (below)
    from recaudit.audits.api import (Report, Scenario, assert_dp, assert_not_dp, audit, estimate,  # noqa: F401
                                     load_report, load_scenario, run, scenario_schema)
    from recaudit.audits.trainer_audit import audit_trainer  # noqa: F401
    from recaudit.core.errors import BadInput  # noqa: F401

try:
    __version__ = _metadata.version("recaudit")
except _metadata.PackageNotFoundError:  # a source tree that is not installed
    __version__ = "0+unknown"

#: every public name and the module that defines it (``recaudit.audits.api`` implements them)
_API = {
    "run": "recaudit.audits.api",
    "load_scenario": "recaudit.audits.api",
    "Scenario": "recaudit.audits.api",
    "scenario_schema": "recaudit.audits.api",
    "audit": "recaudit.audits.api",
    "assert_dp": "recaudit.audits.api",
    "assert_not_dp": "recaudit.audits.api",
    "estimate": "recaudit.audits.api",
    "load_report": "recaudit.audits.api",
    "Report": "recaudit.audits.api",
    "audit_trainer": "recaudit.audits.trainer_audit",
    "BadInput": "recaudit.core.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name: str):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'recaudit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))
