"""Auditing a trainer from Python: the same audit as a scenario file's ``mechanism: {kind: trainer}``.

``audit_trainer(fit, scenario)`` takes the training function itself (any callable ``fit(ratings, rng)``,
docs/guide/trainers.md) and the rest of a scenario as a mapping (population, claim, audit, attacks); it
validates them as a file's, runs the one training run with its canaries and returns the
:class:`~recaudit.audits.runner.AuditResult` (with ``out_dir``, the reports are written there too).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from pydantic import ValidationError

from .language.scenario import Scenario
from .language.validation_errors import format_validation_error
from .language.yamlio import ScenarioError
from .reports.report import write_reports
from .runner import AuditResult, run_scenario


def function_name(fit: Callable) -> str:
    """``module:qualname`` of a function (how a scenario would name it)."""
    return f"{getattr(fit, '__module__', '?')}:{getattr(fit, '__qualname__', type(fit).__name__)}"


def _places(data: Any, at: tuple = ()) -> dict[tuple, int]:
    """Every key path of ``data`` (a mapping built in Python has no lines: each is line 1), so validation errors
    name the fields as written."""
    places = {at: 1}
    if isinstance(data, dict):
        for key, value in data.items():
            places |= _places(value, at + (str(key),))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            places |= _places(value, at + (index,))
    return places


def trainer_scenario(fit: Callable | str, data: dict[str, Any], base_dir: Path | None = None) -> Scenario:
    """``data`` (a scenario's mapping, ``mechanism`` holding at least ``claim`` if any) validated as a trainer
    audit of ``fit``: a function, or its ``"package.module:function"``. Problems raise one :class:`ScenarioError`."""
    mechanism = dict(data.get("mechanism") or {}) | {"kind": "trainer",
                                                     "fit": fit if isinstance(fit, str) else function_name(fit)}
    data = {"name": "trainer-audit", "seed": 0} | data | {"mechanism": mechanism}
    context = {"base_dir": base_dir, "fit": None if isinstance(fit, str) else fit}
    try:
        scenario = Scenario.model_validate(data, context=context)
    except ValidationError as exc:
        raise ScenarioError(format_validation_error("<trainer scenario>", exc, _places(data), Scenario)) from None
    scenario._base_dir = base_dir
    scenario._fit = None if isinstance(fit, str) else fit
    return scenario


def audit_trainer(fit: Callable | str, data: dict[str, Any], out_dir: Path | None = None,
                  report: Callable[[str], None] = lambda _: None) -> AuditResult:
    """One training run of ``fit`` with canaries, every canary scored, the claim judged (see the module).

    >>> import recaudit as ra
    >>> from recaudit.mechanisms import als                  # a non-private ALS in numpy: fit(ratings, rng)
    >>> stars = [[[.1, .1, .2, .3, .3], [.3, .3, .2, .1, .1]], [[.2, .2, .2, .2, .2], [.5, .2, .1, .1, .1]]]
    >>> world = {"kind": "sbm_stars", "n_items": 150, "ratings_per_user": 15, "star_probability": stars,
    ...          "user_cluster_weights": [.5, .5], "item_cluster_weights": [.5, .5]}
    >>> result = ra.audit_trainer(als.fit, {"seed": 5, "population": world, "panel": {"n_users": 300},
    ...                                     "mechanism": {"claim": {"epsilon": 1.0}, "options": {"factors": 8}},
    ...                                     "audit": {"canaries": 200}})
    >>> result.verdict, round(result.strongest.estimate.epsilon_lb, 2), result.trainer["attacks"]["fold_in"]["auc"]
    ('violated', 4.09, 1.0)
    """
    scenario = trainer_scenario(fit, data)
    result = run_scenario(scenario, out_dir, report=report)
    if out_dir is not None:
        write_reports(result, Path(out_dir))
    return result
