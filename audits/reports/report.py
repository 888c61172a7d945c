"""Audit reports: report.json (machines), report.md and report.html (people), accuracy.svg; trials.csv on request.

``report.json`` follows the JSON Schema in ``report.schema.json`` (version
``SCHEMA_VERSION``); it is strict JSON: a number that is infinite or
undefined is written as ``null``. Every string a user chose (scenario name,
kinds, paths) is escaped in Markdown (:func:`md`) and HTML (Jinja2 autoescaping).
"""
from __future__ import annotations

import base64
import functools
import math
import re
import resource
import time
from importlib import metadata, resources
from pathlib import Path

import numpy as np

from ..stats.reach import reachable_optimal
from ..stats.sequential import STOP_REASONS
from ..utility import utility_summary
from . import plots, run_figures
from .report_text import (CEILING_NOTE, TEST_COLUMNS, _fmt, _strongest, accounting_note,  # noqa: F401
                          claim_delta, claim_epsilon, confidence_text, counts_text, epsilon_cell, estimate_cell,
                          html_table, md, method_text, optimal_cell, p_text, population_text, reach_sentence,
                          report_markdown, schedule_text, sequential_sentence, summary_line, utility_curve,
                          utility_measured, verdict_sentence)
from ..store import write_bytes, write_json, write_text

SCHEMA_VERSION = 3  # 2: summary, utility.reference, world.timeline; non-finite numbers are null
#                    3: epsilon_lb always a bound (valid_for, model_holds, bound_method, epsilon_estimate, at_ceiling)
SCHEMA_FILE = "report.schema.json"
PACKAGES = ("recaudit", "numpy", "scipy", "simpy", "pandas", "statsmodels", "pydantic", "pyyaml")


@functools.lru_cache(maxsize=None)
def _version(name: str) -> str | None:
    """The installed version of ``name`` (read from its metadata once per process: 3 ms a package)."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _pair_dict(pair) -> dict | None:
    if pair.differing_bits is None:
        return None
    return {"differing_bits": pair.differing_bits, "world0": pair.sketches[0].astype(int).tolist(),
            "world1": pair.sketches[1].astype(int).tolist()}


def _test_dict(test, claim) -> dict:
    est = test.estimate
    bound = est.to_dict()  # the estimator's own figures, its headline bound's ε and ceiling on top
    own = test.bound.to_dict()
    d = {
        "name": test.name,
        "target": test.target,
        "attack": test.attack,
        "claim": {"epsilon": claim.epsilon, "delta": claim.delta},
        "epsilon_lb": bound["epsilon_lb"],
        "confidence": 1.0 - bound["alpha"],
        "alpha": bound["alpha"],
        "ceiling": bound["ceiling"],
        "method": bound["method"],
        "bound_method": bound["bound_method"],
        "valid_for": bound["valid_for"],
        "model_holds": bound["model_holds"],
        "is_bound": bound["is_bound"],
        "epsilon_estimate": bound["epsilon_estimate"],
        "estimate_ceiling": bound["estimate_ceiling"],
        "at_ceiling": bound["at_ceiling"],
        "threshold_strategy": bound.get("threshold_rule", "guesses"),  # the key of schema_version 2
        "tightness": bound["epsilon_lb"] / claim.epsilon if 0 < claim.epsilon < math.inf else None,
        "p_value": test.p_value,
        "holm_adjusted_p_value": test.adjusted_p_value,
        "verdict": test.verdict,
        "target_sketches": _pair_dict(test.pair),
    }
    d["optimal_epsilon_lb"] = test.estimate.optimal
    d["optimal_tightness"] = (test.estimate.optimal / claim.epsilon
                              if test.estimate.optimal is not None and 0 < claim.epsilon < math.inf else None)
    d["uninformative"] = test.estimate.uninformative
    if "false_pos" in bound:
        d["counts"] = {k: bound[k] for k in ("false_pos", "n_neg", "false_neg", "n_pos")}
        d["threshold"], d["direction"] = bound["threshold"], bound["direction"]
        if own.get("mu_lb") is not None:
            d["mu_lb"], d["mu_ceiling"] = own["mu_lb"], own["mu_ceiling"]
    elif "mu_hat" in bound:  # Gaussian fit of canary scores
        if est.fallback is not None:  # the bound is the one-run bound's guesses
            d["counts"] = {k: getattr(est.fallback, k) for k in ("r", "v", "m", "k_pos", "k_neg")}
        else:
            d["counts"] = {"m": bound["n_out"] + bound["n_in"], "n_in": bound["n_in"], "n_out": bound["n_out"]}
        d.update({k: bound[k] for k in ("mu_hat", "mu_lb", "model_rejected")})
        d["model_check_p_value"] = bound["check_p_value"]
    else:
        d["counts"] = {k: bound[k] for k in ("r", "v", "m", "k_pos", "k_neg")}
        if own.get("mu_lb") is not None:
            d["mu_lb"], d["mu_ceiling"] = own["mu_lb"], own["mu_ceiling"]
    d["optimal_epsilon_lb_reachable"] = None
    if getattr(test, "reach", None) is not None:
        d["pair_reach"] = test.reach
        d["optimal_epsilon_lb_reachable"] = reachable_optimal(test.estimate, test.reach, claim)
    if "reason" in bound:  # a sequential audit: how many runs, and why it stopped
        d["sequential"] = {"runs_per_world": bound["runs"], "budget": bound["budget"], "first_batch": bound["batch"],
                           "reason": bound["reason"], "explanation": STOP_REASONS[bound["reason"]],
                           "e_value": bound["e_value"], "max_e_value": bound["max_e_value"],
                           "inside_e_value": bound["inside_e_value"]}
    return d


def report_dict(result) -> dict:
    """The JSON report. Everything except ``timing`` is a function of scenario and seed."""
    claim = result.claim
    scenario = result.scenario
    tests = [_test_dict(t, claim) for t in result.tests]
    strongest = _strongest(tests)
    packages = getattr(result, "packages", None) or {name: _version(name) for name in PACKAGES}
    report = {
        "schema_version": SCHEMA_VERSION,
        "scenario": scenario.model_dump(mode="json"),
        "seed": {"root": scenario.seed, "entropy": str(np.random.SeedSequence(scenario.seed).entropy)},
        "packages": packages,
        "claim": claim.to_dict() | accounting_note(scenario),
        "audit": {
            "view": getattr(scenario.audit, "view", None) or claim.view,  # the view the attacks read
            # the audited pair: its relation, and whether it is the claim's own (else a weaker one, labelled)
            **({"pair": result.pair} if getattr(result, "pair", None) else {}),
            "design": result.design,
            "trials_per_world": scenario.audit.trials if result.design != "one_run" else None,
            # a sequential audit: the runs per world it drew before it stopped (None: the fixed design)
            "runs_per_world_used": max((t["sequential"]["runs_per_world"] for t in tests if "sequential" in t),
                                       default=None),
            "canaries": scenario.audit.trials if result.design == "one_run" else None,
            "family_alpha": scenario.audit.alpha,
            "tests_in_family": len(tests),
            "correction": "Holm step-down on the verdicts; every bound at alpha / tests (simultaneous)",
            # the strongest test, for readers who want one number
            **{k: strongest[k] for k in ("name", "attack", "epsilon_lb", "alpha", "confidence", "ceiling", "method",
                                         "threshold_strategy", "tightness", "counts", "optimal_epsilon_lb",
                                         "optimal_tightness", "uninformative", "bound_method", "valid_for",
                                         "model_holds", "is_bound", "epsilon_estimate", "estimate_ceiling",
                                         "at_ceiling")},
        },
        "tests": tests,
        "verdict": result.verdict,
        "utility": result.utility,
        "world": result.world,
        "timing": result.timing,
    }
    if getattr(result, "trainer", None):
        report["trainer"] = result.trainer
    for key in ("optimal_epsilon_lb_reachable", "mu_lb", "mu_ceiling"):
        report["audit"][key] = strongest.get(key)
    report = finite(report)
    report["summary"] = verdict_sentence(report)
    return report


def finite(data):
    """``data`` with every infinite or NaN float replaced by None (numpy scalars become Python numbers)."""
    if isinstance(data, dict):
        return {k: finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [finite(v) for v in data]
    if isinstance(data, np.generic):
        data = data.item()
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


def write_reports(result, out_dir: Path, csv: bool = False) -> dict:
    """Write every report file into ``out_dir`` (and ``trials.csv`` with ``csv``); return the JSON report.

    ``report.json`` is written last; a fresh run's ``timing`` counts the writing
    (``writing_seconds``) in its ``total_seconds`` and gives the command's CPU time.
    """
    started = time.time()
    out_dir.mkdir(parents=True, exist_ok=True)
    report = report_dict(result)
    write_text(out_dir / "report.md", report_markdown(report))
    write_text(out_dir / "report.html", report_html(report, result.tests))
    if csv:
        write_trials_csv(result.tests, out_dir / "trials.csv")
    accuracy = run_figures.accuracy_figure(report)
    if accuracy is not None:
        write_bytes(out_dir / "accuracy.svg", accuracy)
    if getattr(result, "started", None) is not None:  # a fresh run (not a rebuilt report)
        now = time.time()
        report["timing"].update(writing_seconds=round(now - started, 3), total_seconds=round(now - result.started, 3),
                                cpu_seconds=round(cpu_seconds(), 3))
    write_json(out_dir / "report.json", report, allow_nan=False)
    return report


def cpu_seconds() -> float:
    """CPU time of this process and its finished child processes (e.g. a process pool's workers)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def write_trials_csv(tests, path: Path) -> None:
    """Every trial's score as CSV (``test,trial,world,part,score``), on request (``--csv``, ``recaudit export``).

    A one-run audit's rows are canaries and its label column is ``member`` (1: the canary was in the run),
    as ``recaudit estimate`` reads it; many runs' is ``world``.
    """
    import pandas as pd

    names = list(dict.fromkeys(t.name for t in tests))
    parts = ["selection", "evaluation", "canary"]
    columns: dict[str, list] = {"test": [], "trial": [], "world": [], "part": [], "score": []}

    def add(test, world, part, score):
        score = np.asarray(score)  # coded scores as the floats they stand for
        n = score.size
        for key, value in (("test", np.full(n, names.index(test.name))), ("trial", np.arange(n)),
                           ("world", world), ("part", part), ("score", score)):
            columns[key].append(value)

    for test in tests:
        if test.worlds is not None:  # one-run canaries
            add(test, test.worlds, np.full(test.scores.size, 2), test.scores)
            continue
        n = test.scores.shape[1]
        n_sel = [n - test.bound.n_neg, n - test.bound.n_pos] if test.bound.threshold_rule == "split" else [0, 0]
        for world in (0, 1):
            add(test, np.full(n, world), (np.arange(n) >= n_sel[world]).astype(np.int64), test.scores[world])
    merged = {key: np.concatenate(value) for key, value in columns.items()}
    label = "member" if tests and all(test.worlds is not None for test in tests) else "world"
    table = pd.DataFrame({"test": pd.Categorical.from_codes(merged["test"], names), "trial": merged["trial"],
                          label: merged["world"], "part": pd.Categorical.from_codes(merged["part"], parts),
                          "score": merged["score"]})
    write_bytes(path, table.to_csv(index=False).encode())


# ---------------------------------------------------------------- HTML

MAX_ROC_CURVES = 6


@functools.lru_cache(maxsize=1)
def _environment():
    """The Jinja2 environment of the report templates, autoescaping every template; one per process, so each
    template is compiled once (0.15 s of CPU a report), not at every report."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.files(__package__) / "templates")),
                             autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(num=_fmt, confidence=confidence_text, bound=epsilon_cell, counts=counts_text, pvalue=p_text,
                       claim=claim_epsilon, breakable=_breakable, estimate=estimate_cell, optimal=optimal_cell,
                       method=method_text)
    return env


def _breakable(text):
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after every ``_`` and ``/``: identifiers such
    as ``differencing_noise_aware`` or a run folder's path wrap in a narrow column instead of widening it."""
    import markupsafe

    return markupsafe.Markup("<wbr>").join(markupsafe.escape(part) for part in re.split(r"(?<=[_/])", str(text)))


def render_html(template: str, **context) -> str:
    """Render one of the package's HTML templates (every value autoescaped)."""
    return _environment().get_template(template).render(**context)


def figure(title: str, image: bytes | None, caption: str) -> dict | None:
    """A figure for a template: the PNG or SVG embedded as a data URI."""
    if image is None:
        return None
    kind = "svg+xml" if image.startswith(b"<svg") else "png"
    return {"title": title, "caption": caption, "src": f"data:image/{kind};base64," + base64.b64encode(image).decode()}


def roc_curves(report: dict, tests) -> list[dict]:
    """ROC curves of the strongest tests (at most MAX_ROC_CURVES) from their scores."""
    rows = sorted(zip(report["tests"], tests), key=lambda pair: -pair[0]["epsilon_lb"])[:MAX_ROC_CURVES]
    curves = []
    for d, test in rows:
        if test.worlds is not None:
            neg, pos = test.scores[test.worlds == 0], test.scores[test.worlds == 1]
        else:
            neg, pos = test.scores[0], test.scores[1]
        fpr, tpr = plots.roc_curve(neg, pos, d.get("direction") or 1)
        curves.append({"name": d["name"], "fpr": fpr, "tpr": tpr, "epsilon_lb": d["epsilon_lb"],
                       "runs": int(min(neg.size, pos.size))})
    return curves


def report_figures(report: dict, tests) -> list[dict]:
    """Every figure of one run's HTML report."""
    claim = report["claim"]
    shown = min(len(report["tests"]), MAX_ROC_CURVES)
    claimed = claim["epsilon"] is not None
    figures = [
        figure("Attack ROC", run_figures.roc_figure(roc_curves(report, tests), claim),
               f"Each test's true against false positive rate over all its runs ({shown} strongest of "
               f"{len(report['tests'])} tests), log–log. "
               + (f"No ({claim_epsilon(claim['epsilon'])}, {claim_delta(claim['delta'])})-DP mechanism can put a "
                  "point above the black "
                  "boundary; points that do, beyond sampling error, contradict the claim. " if claimed else
                  "The mechanism claims nothing (no claimed boundary). ")
               + "Dashed: the boundary at each test's ε_LB."),
        None if not claimed else figure("ε lower bounds against the claim",
               run_figures.epsilon_figure([{"label": t["name"], "claim": t["claim"]["epsilon"],
                                      "epsilon_lb": t["epsilon_lb"], "ceiling": t["ceiling"],
                                      "confidence": t["confidence"], "verdict": t["verdict"]}
                                     for t in report["tests"]], "ε_LB per test"),
               "One row per test: the claimed ε (black tick) and the test's lower bound (dot; a cross when "
               "violated) with its one-sided interval [ε_LB, ∞) drawn up to the ceiling (the largest bound these "
               "runs could show). A dot right of the tick: the claim is exceeded."),
        figure("The world over time", run_figures.timeline_figure(report["world"], report["utility"]),
               "Users present in the churn world and the server's releases (grey lines)"
               + (f", with the {report['utility']['metric']} of each release." if utility_curve(report["utility"])
                  else ".")),
    ]
    return [f for f in figures if f is not None]


def report_html(report: dict, tests) -> str:
    """The self-contained HTML report of one run (figures embedded)."""
    return report_page(report, report_figures(report, tests))


def report_page(report: dict, figures: list[dict]) -> str:
    """The HTML report of ``report`` with ``figures`` (from :func:`figure`)."""
    return render_html("report.html", report=report, figures=figures,
                       tests_table=html_table(report["tests"], TEST_COLUMNS),
                       population=population_text(report["scenario"]["population"]),
                       utility=utility_summary(report["utility"]), curve=utility_curve(report["utility"]),
                       measured=utility_measured(report["utility"]), schedule=schedule_text(report),
                       ceiling_note=CEILING_NOTE, reach=[line for line in map(reach_sentence, report["tests"]) if line],
                       sequential=[line for line in map(sequential_sentence, report["tests"]) if line])


def schema() -> dict:
    """The published JSON Schema of ``report.json``."""
    import json

    return json.loads((resources.files(__package__) / SCHEMA_FILE).read_text())
