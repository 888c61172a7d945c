"""``recaudit grid``: a scenario's ``grid:`` run point by point, then compared.

Every point (the scenario's mechanism and each ``grid.compare`` mechanism at
every ε of ``grid.epsilons``, then each ``grid.reference`` mechanism once) is an
ordinary run of the same world and seed into ``DIR/<kind>-eps<ε>/`` (or
``DIR/<kind>/``) with its usual reports; ``DIR`` then gets the comparison of
them all (``reports.compare``: compare.json/.md/.html, held-out RMSE and ε_LB
against ε). With ``resume`` a point whose folder holds the report of the very
same scenario (fingerprint) is not rerun, and an unfinished one resumes from
its saved trial blocks.
"""
from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Callable

from .reports.compare import write_comparison
from .language.scenario import Scenario, grid_points
from .store import ProgressMismatch, hold_folder


def point_scenarios(scenario: Scenario) -> list[tuple[str, Scenario]]:
    """``(folder name, scenario)`` of every point (already validated with the grid scenario)."""
    base_dir = getattr(scenario, "_base_dir", None)
    points = []
    for point in grid_points(scenario):
        one = Scenario.model_validate(point.data, context={"base_dir": base_dir})
        one._base_dir = base_dir
        points.append((point.name, one))
    return points


def finished(run_dir: Path, scenario: Scenario) -> bool:
    """Whether ``run_dir`` holds the report of ``scenario`` (same fingerprint)."""
    try:
        saved = json.loads((run_dir / "report.json").read_text())["scenario"]
        return Scenario.model_validate(saved, context={"base_dir": getattr(scenario, "_base_dir", None)}
                                       ).fingerprint() == scenario.fingerprint()
    except Exception:  # absent, damaged or foreign: run it again
        return False


def _check_stamp(run_dir: Path, scenario: Scenario) -> None:
    stamp = run_dir / "progress" / "fingerprint.json"
    try:
        saved = json.loads(stamp.read_text())
    except (OSError, ValueError):  # absent or damaged: the point's own run decides
        return
    if saved != {"fingerprint": scenario.fingerprint()}:
        raise ProgressMismatch(f"{run_dir}: saved progress belongs to another scenario or seed ({saved} != "
                               f"{ {'fingerprint': scenario.fingerprint()} }); remove it or run without --resume")


def run_grid(scenario: Scenario, out_dir: Path, resume: bool = False, executor_type: str | None = None,
             workers: int | None = None, report: Callable[[str], None] = lambda _: None) -> list[dict]:
    """Run every point of ``scenario.grid`` into ``out_dir`` and write the comparison there; returns its rows."""
    from .reports.report import write_reports
    from .runner import run_scenario

    points = point_scenarios(scenario)
    with hold_folder(out_dir):
        if resume:  # a folder of another grid is refused before any work, as `recaudit run --resume` does
            for name, point in points:
                _check_stamp(out_dir / name, point)
        for k, (name, point) in enumerate(points, 1):
            run_dir = out_dir / name
            if resume and finished(run_dir, point):
                report(f"[{k}/{len(points)}] {name}: finished before, kept")
                continue
            report(f"[{k}/{len(points)}] {name}")
            result = run_scenario(point, run_dir, resume=resume, executor_type=executor_type, workers=workers,
                                  report=report)
            write_reports(result, run_dir)
            # a finished run is referenced from cycles through the simulator's processes: collected now, not
            # while the next point holds its own world beside it
            del result
            gc.collect()
        names = [name for name, _ in points]
        return write_comparison([out_dir / n for n in names], out_dir, labels=names,
                                title=f"{scenario.name}: utility and ε_LB against ε")
