"""recaudit's public API, as ``import recaudit as ra`` shows it (docs/api.md).

Every name here is reached through ``recaudit``'s lazy attributes (``ra.run``, ``ra.estimate``, ...), so
``import recaudit`` stays light; each docstring's example is executed by the test suite
(``tests/test_api.py``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recaudit.core.errors import BadInput

from .estimate import Estimates
from .estimate import estimate as _estimate
from .harness import assert_dp, assert_not_dp, run_audit
from .language.scenario import Scenario, scenario_from_data
from .language.scenario import load_scenario as _load_file
from .language.shipped import resolve
from .language.studies import StudyScenario

__all__ = ["run", "load_scenario", "scenario_schema", "audit", "assert_dp", "assert_not_dp", "estimate",
           "load_report", "Report", "Scenario"]

#: ``ra.audit``: today's ``recaudit.audits.harness.run_audit`` (a mechanism's audit, no verdict asserted)
audit = run_audit


class InputError(BadInput, ValueError):
    """An argument the API cannot take: a scenario ``ra.run`` cannot run by itself (a sweep, a grid, a study),
    a folder without a report."""


@dataclass(frozen=True)
class Report:
    """A finished audit's report: ``report.json`` as a dict (``data``), and the folder holding it, if any.

    The figures a reader wants first are properties: ``verdict``, ``epsilon_lb`` (the strongest test's),
    ``ceiling``, ``claim``, ``tests`` and ``summary`` (one sentence).
    """

    data: dict
    folder: Path | None = None

    @property
    def verdict(self) -> str:
        return self.data["verdict"]

    @property
    def epsilon_lb(self) -> float:
        return float(self.data["audit"]["epsilon_lb"])

    @property
    def ceiling(self) -> float:
        return float(self.data["audit"]["ceiling"])

    @property
    def claim(self) -> dict:
        return self.data["claim"]

    @property
    def tests(self) -> list[dict]:
        return self.data["tests"]

    @property
    def summary(self) -> str:
        return self.data["summary"]

    def __repr__(self) -> str:
        where = "" if self.folder is None else f", folder={str(self.folder)!r}"
        return (f"Report({self.data['scenario']['name']!r}: {self.verdict}, eps_lb={self.epsilon_lb:.3f}, "
                f"ceiling={self.ceiling:.3f}{where})")


def load_scenario(scenario: str | Path | dict | Scenario) -> Scenario | StudyScenario:
    """A validated scenario from a file path, a shipped scenario's name or a dict (as a YAML file would load).

    A dict is validated exactly as a file is; a problem is a ``ra.BadInput`` naming the field:

    >>> import recaudit as ra
    >>> ra.load_scenario("quickstart").mechanism.epsilon
    1.0
    >>> data = ra.load_scenario("quickstart").model_dump(mode="json")   # the scenario as a dict
    >>> data["mechanism"]["epsilon"] = -1
    >>> ra.load_scenario(data)
    Traceback (most recent call last):
    ...
    recaudit.audits.language.yamlio.ScenarioError: scenario: mechanism.epsilon: must be > 0
    """
    if isinstance(scenario, (Scenario, StudyScenario)):
        return scenario
    if isinstance(scenario, dict):
        return scenario_from_data(scenario)
    if not isinstance(scenario, (str, Path)):
        raise InputError(f"scenario: a file path, a shipped scenario's name or a dict, got "
                                f"{type(scenario).__name__}")
    return _load_file(resolve(scenario))


def run(scenario: str | Path | dict | Scenario, out: str | Path | None = None, *, csv: bool = False,
        resume: bool = False, executor: str | None = None, workers: int | None = None,
        quiet: bool = True, progress: bool | None = None) -> Report:
    """Run one audit scenario (a file path, a shipped name, a dict or a ``ra.Scenario``) and return its report.

    With ``out`` the report files are written there as ``recaudit run --out`` writes them (``csv``: also
    ``trials.csv``; ``resume``: reuse the folder's finished blocks); without it nothing is written.
    ``quiet=False`` logs what happens; ``progress`` logs the estimate first and a progress line at most every
    30 s (done / total, rate, time left; a stderr handler is added when logging is not set up), by default
    (None) when the run is estimated over 30 s. A sweep, a grid or a study is refused naming its command.

    >>> import recaudit as ra
    >>> data = ra.load_scenario("quickstart").model_dump(mode="json")
    >>> data["churn"].update(arrival_rate=500, horizon=20.0)   # a smaller world: a second
    >>> data["audit"]["trials"] = 2000
    >>> report = ra.run(data)
    >>> report.verdict, report.epsilon_lb <= report.ceiling
    ('consistent', True)
    """
    import logging

    from .reports.report import report_dict, write_reports
    from .runner import run_scenario

    loaded = load_scenario(scenario)
    name = getattr(loaded, "name", "scenario")
    for part, command in (("study", "run"), ("sweep", "sweep"), ("grid", "grid")):
        if isinstance(loaded, StudyScenario) if part == "study" else getattr(loaded, part, None) is not None:
            raise InputError(f"{name}: {part}: a {part} scenario runs with `recaudit {command}`; ra.run "
                                    "runs one audit")
    folder = None if out is None else Path(out)
    report = (lambda message: None) if quiet else logging.getLogger("recaudit").info
    if progress is not False:
        from recaudit.mechanisms import MECHANISMS

        from .language.limits import estimate_cost
        from .language.scenario import build
        from .progress_log import PROGRESS_EVERY, ProgressLog, duration, visible

        seconds = estimate_cost(loaded, build(loaded.mechanism, MECHANISMS))["seconds"]
        if progress or seconds > PROGRESS_EVERY:
            visible()
            logging.getLogger("recaudit").info("%s: estimated %s on 2 cores; progress every %.0f s", name,
                                               duration(seconds), PROGRESS_EVERY)
            report = ProgressLog(emit=logging.getLogger("recaudit").info, messages=report)
    result = run_scenario(loaded, folder, resume=resume, executor_type=executor, workers=workers, report=report)
    data = report_dict(result) if folder is None else write_reports(result, folder, csv=csv)
    return Report(data, folder)


def load_report(folder: str | Path) -> Report:
    """The report of a finished run: ``FOLDER/report.json`` (``recaudit run --out FOLDER``, ``ra.run(..., out=)``).

    >>> import recaudit as ra, tempfile
    >>> data = ra.load_scenario("quickstart").model_dump(mode="json")
    >>> data["churn"].update(arrival_rate=500, horizon=20.0)
    >>> data["audit"]["trials"] = 2000
    >>> folder = tempfile.mkdtemp()
    >>> ra.run(data, out=folder).epsilon_lb == ra.load_report(folder).epsilon_lb
    True
    """
    from .reports.report import SCHEMA_VERSION

    folder = Path(folder)
    path = folder / "report.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"{folder}: not a run folder (report.json is missing)") from None
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: unreadable ({' '.join(str(exc).split())})") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        version = data.get("schema_version") if isinstance(data, dict) else None
        raise InputError(f"{path}: schema_version {version!r}; this recaudit reads {SCHEMA_VERSION}")
    return Report(data, folder)


def scenario_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a scenario file, for editors (``recaudit schema`` prints it).

    >>> import recaudit as ra
    >>> schema = ra.scenario_schema()
    >>> schema["$schema"], "mechanism" in schema["properties"]
    ('https://json-schema.org/draft/2020-12/schema', True)
    """
    from .language.schema import scenario_schema as schema

    return schema()


def estimate(scores: Any, members: Any = None, worlds: Any = None, *, epsilon: float, delta: float = 0.0,
             estimators: Any = None, alpha: float = 0.05, mu: float | None = None) -> Estimates:
    """Scores in, ε out: ε lower bounds from attack scores made anywhere, against the claim (ε, δ).

    ``members`` (one run: 1 for each canary that was in, 0 out) or ``worlds`` (many runs: the neighbouring
    world, 0 or 1, each run came from) labels the ``scores``. ``estimators``: kinds (``"split"``,
    ``"one-run"``, ...) or estimator instances; None runs every one registered for the design that can run,
    and lists the others in ``skipped`` with the reason (a Gaussian-DP estimator needs ``mu``, the claim's
    μ-GDP). Each bound holds at confidence ``1 - alpha`` on its own. ``recaudit estimate FILE`` is the same
    on a file.

    >>> import numpy as np, recaudit as ra
    >>> rng = np.random.default_rng(7)
    >>> members = rng.integers(0, 2, 1000)                  # each canary in with probability 1/2
    >>> scores = rng.normal(2.0 * members, 1.0)             # its attack score (higher: "in")
    >>> result = ra.estimate(scores, members=members, epsilon=1.0, delta=1e-5)
    >>> [(r.estimator, r.valid_for) for r in result]
    [('one-run', 'any mechanism'), ('gauss-fit', 'Gaussian scores')]
    >>> result["one-run"].epsilon_lb > 1.0                  # this attack shows more than the claimed ε = 1
    True
    >>> result.skipped[0][0]
    'fdp-one-run'
    """
    return _estimate(scores, members, worlds, epsilon=epsilon, delta=delta, estimators=estimators, alpha=alpha,
                     mu=mu)
