"""Reports of harness audits (a library's mechanism audited with :func:`recaudit.audits.harness.run_audit`).

:func:`write_audit_report` writes ``report.json`` (strict JSON), ``report.md``
and ``report.html`` (autoescaped, self-contained) for one audit or a
neighbour search, so a library audit can be handed on like a scenario run's:
the claim (and how it was converted), the neighbouring relation, the bound at
its confidence with its ceiling, and whether the seed reproduces the run.
"""
from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

from .harness import AuditRun, NeighbourSearch
from .reports.report import claim_delta, claim_epsilon, finite, md, render_html
from .reports.report_text import uninformative_reason
from .store import write_text

#: libraries whose versions a library audit records when they are installed
LIBRARIES = ("numpy", "diffprivlib", "opendp", "python-dp", "dp-accounting")


def _versions() -> dict[str, str]:
    found = {}
    for name in LIBRARIES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def audit_dict(run: AuditRun, title: str) -> dict:
    """The audit as a JSON-ready dict (no NaN or infinity: those become null)."""
    b = run.bound
    return finite({
        "title": title,
        "claim": {"epsilon": run.claimed_epsilon, "delta": run.claimed_delta, "conversion": run.conversion},
        "neighbouring": run.neighbouring,
        "trials_per_world": run.trials,
        "attack": run.attack,
        "method": b.method,
        "epsilon_lb": b.epsilon_lb,
        "confidence": 1.0 - b.alpha,
        "ceiling": b.ceiling,
        "tightness": b.epsilon_lb / run.claimed_epsilon if run.claimed_epsilon > 0 else None,
        "optimal_epsilon_lb": run.optimal,
        "optimal_tightness": (run.optimal / run.claimed_epsilon
                              if run.optimal is not None and 0 < run.claimed_epsilon < float("inf") else None),
        "uninformative": run.uninformative,
        "counts": {"false_pos": b.false_pos, "n_neg": b.n_neg, "false_neg": b.false_neg, "n_pos": b.n_pos},
        "p_value": run.p_value,
        "verdict": "violated" if run.violated else "consistent",
        "reproducible": run.reproducible,
        "not_reproducible_because": run.not_reproducible,
        "seed": repr(run.seed),
        "packages": _versions(),
    })


def summary(report: dict) -> str:
    """The audit in one sentence (with the reproducibility caveat when it applies)."""
    delta = f", δ = {claim_delta(report['claim']['delta'])}" if report["claim"]["delta"] else ""
    if report["uninformative"]:
        shows = (f"is uninformative ({uninformative_reason(report)}), so its ε_LB = {report['epsilon_lb']:.3g} is "
                 "no evidence about the claim")
    else:
        shows = (f"shows ε ≥ {report['epsilon_lb']:.3g} at {100 * report['confidence']:.4g} % confidence "
                 f"(ceiling {report['ceiling']:.3g})")
    optimal = report["optimal_epsilon_lb"]
    power = (f"; the optimal test on these runs would show ε ≥ {optimal:.3g} if the claim were tight"
             if optimal is not None else "")
    text = (f"{report['title']} claims ε = {claim_epsilon(report['claim']['epsilon'])}{delta}; the audit "
            f"({report['neighbouring']} neighbours) {shows}{power}: {report['verdict']}.")
    if not report["reproducible"]:
        text += " Not reproducible: " + report["not_reproducible_because"]
    return text


def _markdown(report: dict) -> str:
    lines = [f"# Audit: {md(report['title'])}", "", md(summary(report)), "",
             "| | |", "|---|---|",
             (f"| claim | ε = {claim_epsilon(report['claim']['epsilon'])}, "
              f"δ = {claim_delta(report['claim']['delta'])} |")]
    if report["claim"]["conversion"]:
        lines.append(f"| claim converted | {md(report['claim']['conversion'])} |")
    c = report["counts"]
    lines += [f"| neighbours | {md(report['neighbouring'])} |",
              f"| runs | {report['trials_per_world']:,} per world, attack {md(report['attack'])}, "
              f"method {md(report['method'])} |",
              f"| ε_LB | {report['epsilon_lb']:.4g} at {100 * report['confidence']:.4g} % confidence "
              f"(ceiling {report['ceiling']:.4g}) |",
              f"| counts | FP {c['false_pos']}/{c['n_neg']}, FN {c['false_neg']}/{c['n_pos']} |",
              f"| power | optimal ε_LB {_optimal_text(report)} |",
              "| reproducible | " + ("yes" if report["reproducible"]
                                     else "NOT REPRODUCIBLE: " + md(report["not_reproducible_because"])) + " |",
              f"| packages | {md(', '.join(f'{k} {v}' for k, v in report['packages'].items()))} |", ""]
    return "\n".join(lines)


def _optimal_text(report: dict) -> str:
    """The optimal test's figure and the uninformative flag, for the md and html tables."""
    optimal = report["optimal_epsilon_lb"]
    text = "n/a (no claim)" if optimal is None else f"{optimal:.4g} on these runs if the claim were exactly tight"
    return text + (f"; the test is UNINFORMATIVE ({uninformative_reason(report)})" if report["uninformative"]
                   else "")


def write_audit_report(run: AuditRun | NeighbourSearch, out_dir, title: str = "mechanism") -> dict:
    """Write ``report.json``, ``report.md`` and ``report.html`` of ``run`` into ``out_dir``; return the dict."""
    if isinstance(run, NeighbourSearch):
        run = run.worst
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    report = audit_dict(run, title)
    report["summary"] = summary(report)
    write_text(out / "report.json", json.dumps(report, indent=2, allow_nan=False) + "\n")
    write_text(out / "report.md", _markdown(report))
    write_text(out / "report.html", render_html("harness.html", report=report, power=_optimal_text(report)))
    return report
