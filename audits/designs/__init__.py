"""Audit designs: how an audit produces scores. A new design is one module plus one line in ``DESIGNS``."""
from .base import AuditJob, Design, DesignError, DesignOutput
from .batched_runs import BatchedRuns
from .full_runs import FullRuns
from .local_replay import LocalReplay
from .one_run import OneRunCanaries

DESIGNS: dict[str, type[Design]] = {
    "local_replay": LocalReplay,
    "full_runs": FullRuns,
    "one_run": OneRunCanaries,
    "batched_runs": BatchedRuns,
}

__all__ = ["AuditJob", "BatchedRuns", "DESIGNS", "Design", "DesignError", "DesignOutput", "FullRuns", "LocalReplay",
           "OneRunCanaries"]
