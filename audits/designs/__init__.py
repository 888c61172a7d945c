"""Audit designs: how an audit produces scores. A new design is one module here: ``class X(Design, kind="x")``
registers it in ``DESIGNS``; every module of this package is imported below."""
import importlib
import pkgutil

from .base import DESIGNS, AuditJob, Design, DesignError, DesignOutput, TargetScores
from .local_replay import LocalReplay  # noqa: I001 (in this order: the order of the choices in messages)
from .full_runs import FullRuns
from .one_run import OneRunCanaries
from .batched_runs import BatchedRuns

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = ["AuditJob", "BatchedRuns", "DESIGNS", "Design", "DesignError", "DesignOutput", "FullRuns", "LocalReplay",
           "OneRunCanaries", "TargetScores"]
