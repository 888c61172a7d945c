"""Runs side by side: ``recaudit compare RUN_A RUN_B ... --out DIR`` writes compare.json, compare.md and
compare.html (the ε lower bounds against the claims, and the privacy–utility frontier)."""
from __future__ import annotations

import json
from pathlib import Path

from recaudit.core.errors import BadInput

from . import plots, run_figures
from .report import SCHEMA_VERSION, claim_delta, claim_epsilon, confidence_text, epsilon_cell, figure, md, render_html
from .report_text import Column, html_table, markdown_table
from ..store import hold_folder, write_json, write_text


class CompareError(BadInput, ValueError):
    """A folder given to compare holds no readable report."""


def compare_row(label: str, report: dict) -> dict:
    """One run's line in the comparison."""
    claim, audit, util = report["claim"], report["audit"], report["utility"]
    mechanism = report["scenario"]["mechanism"]
    return {"run": label, "scenario": report["scenario"]["name"], "mechanism": mechanism["kind"],
            # the ε the mechanism was configured with (the claim is the accountant's, within rounding of it)
            "epsilon": mechanism.get("epsilon") if claim["epsilon"] is not None else None,
            "claim": claim["epsilon"], "delta": claim["delta"], "model": claim["model"], "design": audit["design"],
            "tests": audit["tests_in_family"], "epsilon_lb": audit["epsilon_lb"], "confidence": audit["confidence"],
            "ceiling": audit["ceiling"], "tightness": audit["tightness"], "verdict": report["verdict"],
            "optimal_epsilon_lb": audit.get("optimal_epsilon_lb"), "uninformative": bool(audit.get("uninformative")),
            "at_ceiling": bool(audit.get("at_ceiling")), "epsilon_estimate": audit.get("epsilon_estimate"),
            "utility_metric": util["metric"], "utility": util["final_accuracy"], "rmse": util.get("rmse"),
            "zero_rmse": util.get("zero_rmse"), "mean_rmse": util.get("mean_rmse"), "bias_rmse": util.get("bias_rmse"),
            "centring_rmse": util.get("centring_rmse"),
            "als_rmse": util.get("als_rmse"), "summary": report.get("summary")}


def load_runs(run_dirs: list[Path], labels: list[str] | None = None) -> list[dict]:
    """The comparison rows of ``run_dirs`` (each must hold a report.json of this schema version), labelled
    ``labels`` (default: the folders as given)."""
    rows = []
    for run_dir, label in zip(run_dirs, labels or [str(d) for d in run_dirs]):
        path = Path(run_dir) / "report.json"
        try:
            report = json.loads(path.read_text())
        except FileNotFoundError:
            raise CompareError(f"{run_dir}: no report.json (run `recaudit run` first)") from None
        except json.JSONDecodeError as exc:
            raise CompareError(f"{path}: not JSON ({exc})") from None
        if report.get("schema_version") != SCHEMA_VERSION:
            raise CompareError(f"{path}: schema_version {report.get('schema_version')!r}; this recaudit reads "
                               f"{SCHEMA_VERSION}")
        rows.append(compare_row(label, report))
    return rows


def _fmt(x, spec: str = ".4g") -> str:
    return "n/a" if x is None else format(x, spec)


#: the columns of a comparison (Markdown and HTML alike); a column empty in every row is left out
COMPARE_COLUMNS = [
    Column("run", lambda r: r["run"], code=True, user=True),
    Column("scenario", lambda r: r["scenario"], user=True),
    Column("mechanism", lambda r: r["mechanism"], code=True, user=True),
    Column("claim ε", lambda r: claim_epsilon(r["claim"]), num=True),
    Column("δ", lambda r: r["delta"], claim_delta, num=True, nowrap=True),
    Column("design", lambda r: r["design"], code=True),
    Column("ε_LB", epsilon_cell, num=True),
    Column("optimal ε_LB", lambda r: r["optimal_epsilon_lb"], _fmt, num=True),
    Column("confidence", lambda r: r["confidence"], confidence_text, num=True),
    Column("ceiling", lambda r: r["ceiling"], _fmt, num=True),
    Column("tightness", lambda r: r["tightness"], _fmt, num=True),
    Column("verdict", lambda r: r["verdict"] + (" (uninformative)" if r["uninformative"] else "")),
    Column("utility", lambda r: r["utility"], _fmt, num=True),
    Column("held-out RMSE", lambda r: r.get("rmse"), _fmt, num=True),
]


def compare_markdown(rows: list[dict], title: str = "Comparison of audit runs") -> str:
    rmse = any(r.get("rmse") is not None for r in rows)
    lines = [f"# {md(title)}", "", *markdown_table(rows, COMPARE_COLUMNS)]
    metrics = sorted({r["utility_metric"] for r in rows if r["utility"] is not None})
    lines += ["", (f"Utility: {md('; '.join(metrics))} at the last release. " if metrics else "")
              + "ε_LB: the strongest test of each run "
              "(a lower bound at the stated confidence; the ceiling is the largest bound its runs could show; optimal "
              "ε_LB is what the best test would show on the same runs if the claim were exactly tight; an "
              "uninformative test's ε_LB = 0 is no evidence). "
              "Claim none: the mechanism claims nothing (a non-private reference).", ""]
    if rmse:
        lines += rmse_markdown(rows)
    return "\n".join(lines)


def rmse_markdown(rows: list[dict]) -> list[str]:
    """Held-out RMSE as an ε × mechanism table, with the runs that claim nothing (references) beneath."""
    private = private_rmse_rows(rows)
    names = list(dict.fromkeys(r["mechanism"] for r in private))
    epsilons = sorted({r["epsilon"] for r in private})
    cell: dict[tuple, list[float]] = {}
    for r in private:
        cell.setdefault((r["mechanism"], r["epsilon"]), []).append(r["rmse"])
    lines = ["## Held-out RMSE" + (" against ε" if private else ""), ""]
    if private:  # no table without a private run to fill it
        lines += ["(ε: each mechanism's configured ε; mean over runs of the same ε)", "",
                  "| ε | " + " | ".join(md(n) for n in names) + " |", "|---:|" + "---:|" * len(names)]
        for eps in epsilons:
            means = [sum(v) / len(v) if (v := cell.get((n, eps))) else None for n in names]
            lines.append(f"| {eps:g} | " + " | ".join(_fmt(m) for m in means) + " |")
        lines.append("")
    for r in rows:
        if r["claim"] is None and r.get("rmse") is not None:
            lines.append(f"- {md(r['run'])} ({md(r['mechanism'])}, claims nothing): {r['rmse']:.4g}")
    zero = next((r["zero_rmse"] for r in rows if r.get("zero_rmse") is not None), None)
    if zero is not None:
        lines.append(f"- predicting 0: {zero:.4g}")
    mean = next((r["mean_rmse"] for r in rows if r.get("mean_rmse") is not None), None)
    if mean is not None:
        lines.append(f"- predicting the mean training rating: {mean:.4g}")
    for key, what in (("bias_rmse", "the non-private bias model (μ + b_u + b_i)"),
                      ("als_rmse", "non-private ALS (biased, rank 20)")):
        value = next((r[key] for r in rows if r.get(key) is not None), None)
        if value is not None:
            lines.append(f"- {what}: {value:.4g}")
    return lines + [""]


def private_rmse_rows(rows: list[dict]) -> list[dict]:
    """The runs with a configured ε and a held-out RMSE: what an RMSE-against-ε table or plot is made of."""
    return [r for r in rows if r["epsilon"] is not None and r.get("rmse") is not None]


def run_labels(rows: list[dict]) -> list[str]:
    """How figures name runs: by scenario name when those tell the runs apart, else by the run as given."""
    names = [r["scenario"] for r in rows]
    return names if len(set(names)) == len(names) else [r["run"] for r in rows]


def frontier_note(rows: list[dict]) -> str:
    """The runs the privacy–utility frontier cannot place, named (a figure never drops a run silently)."""
    label = dict(zip(map(id, rows), run_labels(rows)))
    no_utility = [r for r in rows if r["claim"] is not None and r["utility"] is None]
    no_claim = [label[id(r)] for r in rows if r["claim"] is None]
    parts = []
    if no_utility:
        rmse = " (their held-out RMSE is in the table)" if any(r.get("rmse") is not None for r in no_utility) else ""
        parts.append(f"{', '.join(label[id(r)] for r in no_utility)}: no utility at the last release{rmse}")
    if no_claim:
        parts.append(f"{', '.join(no_claim)}: claims no ε to place it at")
    return f" Not drawn: {'; '.join(parts)}." if parts else ""


def compare_figures(rows: list[dict]) -> list[dict]:
    claimed = [r for r in rows if r["claim"] is not None]
    rmse = [r for r in rows if r.get("rmse") is not None]
    labels = dict(zip(map(id, rows), run_labels(rows)))
    figures = [
        figure("Held-out RMSE against ε",
               plots.rmse_figure([{"mechanism": r["mechanism"], "epsilon": r["epsilon"], "rmse": r["rmse"],
                                   "zero_rmse": r["zero_rmse"], "label": f"{r['run']} (claims nothing)"}
                                  for r in rmse], "held-out RMSE against ε", xlabel="configured ε"),
               "Each mechanism's held-out RMSE at each configured ε; dashed lines are the runs claiming nothing "
               "(non-private references), the dotted one predicting 0.") if private_rmse_rows(rows) else None,
        figure("ε lower bounds against the claims",
               run_figures.epsilon_figure([{"label": labels[id(r)], "claim": r["claim"],
                                      "epsilon_lb": r["epsilon_lb"], "ceiling": r["ceiling"],
                                      "confidence": r["confidence"], "verdict": r["verdict"]} for r in claimed],
                                    "ε_LB across runs") if claimed else None,
               "One row per run: its claimed ε (black tick) and its strongest lower bound (dot; a cross when "
               "violated) with the one-sided interval up to the ceiling. A dot right of its tick, beyond the "
               "confidence stated, contradicts that run's claim; a tight audit puts the dot just left of it."
               + (f" Not drawn: {', '.join(labels[id(r)] for r in rows if r['claim'] is None)} (claims no ε)."
                  if len(claimed) < len(rows) else "")),
        figure("Privacy–utility frontier",
               plots.frontier_figure([{"label": labels[id(r)], "mechanism": r["mechanism"], "claim": r["claim"],
                                       "epsilon_lb": r["epsilon_lb"], "utility": r["utility"]} for r in claimed]),
               "Utility at the last release against the claimed ε (filled) and the audited ε_LB (hollow), one "
               "series per mechanism; the black steps join the runs no other run beats on both."
               + frontier_note(rows))
        if any(r["utility"] is not None for r in claimed) else None,
    ]
    return [f for f in figures if f is not None]


def write_comparison(run_dirs: list[Path], out_dir: Path, labels: list[str] | None = None,
                     title: str = "Comparison of audit runs") -> list[dict]:
    """Tabulate and plot ``run_dirs`` (labelled ``labels``) into ``out_dir``; returns the rows."""
    rows = load_runs(run_dirs, labels)
    with hold_folder(out_dir):  # refused: a folder of the user's own files, or one another process is writing
        write_json(out_dir / "compare.json", {"schema_version": SCHEMA_VERSION, "runs": rows}, allow_nan=False)
        write_text(out_dir / "compare.md", compare_markdown(rows, title))
        metrics = sorted({r["utility_metric"] for r in rows if r["utility"] is not None})
        write_text(out_dir / "compare.html", render_html("compare.html", rows=rows, figures=compare_figures(rows),
                                                         table=html_table(rows, COMPARE_COLUMNS), metrics=metrics))
    return rows
