"""The sweep reports: sweep.json, sweep.md, sweep.html and the scaling plots (users needed against each
parameter)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from . import plots
from .report import PACKAGES, SCHEMA_VERSION, _version, figure, finite, md, render_html
from ..store import write_bytes, write_json, write_text


def write_sweep_reports(result, out_dir: Path) -> dict:
    """sweep.json, sweep.md, sweep.html, sweep_points.csv and scaling.png for a scaling sweep."""
    sweep = result.scenario.sweep
    report = finite({
        "schema_version": SCHEMA_VERSION,
        "scenario": result.scenario.model_dump(mode="json"),
        "grid": result.grid,
        "packages": {name: _version(name) for name in PACKAGES},
        "definition": f"U* = users seen when item clustering accuracy first reaches {sweep.target_accuracy:g} "
                      f"and stays there for {sweep.stable_checkpoints} checkpoints "
                      f"({sweep.checkpoints_per_decade} per decade); censored at {sweep.max_users:,}",
        "mechanisms": list(result.mechanisms),
        "fits": result.fits,
        "points": result.points,
        "medians": sweep_medians(result),
        "bounds": result.bounds,
    })
    write_sweep_files(report, out_dir)
    return report


def sweep_markdown(report: dict) -> str:
    scenario, mechanisms = report["scenario"], report["mechanisms"]
    names = ", ".join(f"`{_code(m)}`" for m in mechanisms)
    lines = [f"# Scaling sweep: {md(scenario['name'])} ({report['grid']} grid)", "",
             f"Mechanism{'s' if len(mechanisms) > 1 else ''} {names}. {report['definition']}.", "",
             "| mechanism | parameter | values | fitted log-log slope | 95% CI | theory slope on this grid | "
             "theory in CI | censored runs |", "|---|---|---|---:|---|---:|---|---:|"]
    for f in report["fits"]:
        slope = "n/a" if f["slope"] is None else f"{f['slope']:+.2f}"
        ci = "n/a" if f["slope"] is None else f"[{f['ci_low']:+.2f}, {f['ci_high']:+.2f}]"
        th = "n/a" if f["theory_slope"] is None else f"{f['theory_slope']:+.2f}"
        inside = {None: "n/a", True: "yes", False: "**no**"}[f["theory_in_ci"]]
        lines.append(f"| {md(f.get('mechanism', mechanisms[0]))} | {f['parameter']} | "
                     f"{', '.join(f'{v:g}' for v in f['values'])} | {slope} | {ci} | {th} | {inside} | "
                     f"{f['censored']} |")
    lines += ["", "Theory slopes come from the formulas in `mechanisms/theory.py` evaluated on the same grid "
              "(their constants are unknown, so only slopes are compared; the plotted theory curve has its "
              "constant fitted to the runs). Censored runs (target not reached by the cap) are left out of "
              "the fit and drawn at the cap in `scaling.png`.", ""]
    lines += _median_tables(report)
    return "\n".join(lines)


def _code(text) -> str:
    """``text`` for a Markdown code span: one line, no backticks (nothing inside a code span is markup)."""
    return " ".join(str(text).replace("`", "'").splitlines())


def sweep_medians(result) -> list[dict]:
    """Per axis value and mechanism: the median U* over replicates, censored runs counted as ``max_users``.

    ``censored_median`` is set when the median itself is censored (then it is only a lower bound).
    """
    cap = result.scenario.sweep.max_users
    rows = []
    for fit in result.fits:
        label = fit.get("mechanism", result.mechanisms[0])
        for value in fit["values"]:
            runs = [p["u_star"] for p in result.points if p["parameter"] == fit["parameter"]
                    and p.get("mechanism", label) == label and p["value"] == value]
            median = float(np.median([cap if u is None else u for u in runs]))
            rows.append({"parameter": fit["parameter"], "value": value, "mechanism": label, "median": median,
                         "censored": sum(u is None for u in runs), "runs": len(runs),
                         "censored_median": median >= cap})
    return rows


def _median_tables(report: dict) -> list[str]:
    """Markdown: per axis, median U* of every mechanism and every lower bound at each value."""
    mechanisms, medians, bounds = report["mechanisms"], report["medians"], report["bounds"]
    lines = []
    for fit in report["fits"][:: len(mechanisms)]:
        parameter = fit["parameter"]
        names = list(dict.fromkeys(b["bound"] for b in bounds if b["parameter"] == parameter))
        head = [f"`{_code(m)}` median U*" for m in mechanisms] + [f"bound: {n}" for n in names]
        lines += [f"Median U* over {report['scenario']['sweep']['replicates']} replicates (≥: the median run was "
                  f"censored; (k) = k runs censored), lower bounds beside:", "",
                  f"| {parameter} | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(head)]
        for value in fit["values"]:
            cells = []
            for m in mechanisms:
                row = next(r for r in medians if r["parameter"] == parameter and r["mechanism"] == m
                           and r["value"] == value)
                cells.append(("≥" if row["censored_median"] else "") + f"{row['median']:,.0f}"
                             + (f" ({row['censored']})" if row["censored"] else ""))
            for n in names:
                users = next(b["users"] for b in bounds if b["parameter"] == parameter
                             and b["bound"] == n and b["value"] == value)
                cells.append(f"{users:,.3g}")
            lines.append(f"| {value:g} | " + " | ".join(cells) + " |")
        lines.append("")
    if bounds:
        drawn = list(dict.fromkeys(b["bound"] for b in bounds))
        scope = {"fano": "Fano's is for two item clusters", "scarce": "the scarce one is stated (C = 1) for "
                 "w = o(N^(1/3)) and eps <= ln 2", "adaptive": "the adaptive one (C = 1) for w = 1"}
        lines += ["Bounds (`mechanisms/theory.py`, docs/families/local-clustering.md): "
                  + "; ".join(dict.fromkeys(b["label"] for b in bounds)) + ". "
                  + "; ".join(scope[n] for n in drawn) + ".", ""]
    return lines


def write_sweep_files(report: dict, out_dir: Path) -> None:
    """Every file of a sweep report from its JSON (``recaudit report`` calls this on a saved sweep.json)."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "sweep.json", report, allow_nan=False)
    write_bytes(out_dir / "sweep_points.csv", pd.DataFrame(report["points"]).to_csv(index=False).encode())
    write_text(out_dir / "sweep.md", sweep_markdown(report))
    png = plots.sweep_figure(report)
    write_bytes(out_dir / "scaling.png", png)
    fig = figure("Users needed against each swept parameter", png,
                 "U* of every run (dots) on log–log axes, runs censored at the cap drawn as hollow triangles "
                 "(left out of the fit), the OLS line with the 95% confidence band of its mean, and the theory "
                 "curve with its unknown constant fitted to the runs (only its slope is a prediction).")
    write_text(out_dir / "sweep.html", render_html("sweep.html", report=report, figures=[fig]))
