"""The figures of one run's report (ROC, ε_LB per test, the world over time, accuracy), drawn as SVG.

Each is a pure function of report data (and, for ROC curves, of the saved
trial scores), so ``recaudit report`` redraws them byte for byte.
"""
from __future__ import annotations

import math
from html import escape

import numpy as np

from .plots import curve_value, dp_boundary, one_line
from .report_text import claim_delta, claim_epsilon, confidence_text
from .svg import FONT, LEGEND_ROW, Axis, Chart, _label, _marker, colour


def roc_figure(curves: list[dict], claim: dict) -> bytes:
    """Attack ROC curves on log–log axes with the claimed ε-DP boundary (and each test's ε_LB boundary).

    ``curves``: ``name``, ``fpr``, ``tpr``, ``epsilon_lb``, ``runs``. Points with FPR or TPR 0 cannot be drawn
    on log axes; the legend says how many runs each curve has.
    """
    floor = min((1.0 / c["runs"] for c in curves), default=1e-4)
    grid = np.logspace(math.log10(floor), 0, 120)
    chart = Chart(560, 420, (floor, 1.0), (floor, 1.05), xlog=True, ylog=True,
                  title="Attack ROC (all runs) against the ε-DP boundary",
                  xlabel="false positive rate (world 0 called world 1)", ylabel="true positive rate")
    if claim["epsilon"] is not None:  # None: a mechanism that claims nothing has no boundary to draw
        chart.line(grid, dp_boundary(grid, claim["epsilon"], claim["delta"]), "#000", width=2,
                   label=f"claimed boundary ε = {claim_epsilon(claim['epsilon'])}, δ = {claim_delta(claim['delta'])}")
    chart.line(grid, grid, "#808080", dash="2,3", label="chance (TPR = FPR)")
    for i, c in enumerate(curves):
        keep = (c["fpr"] > 0) & (c["tpr"] > 0)
        chart.line(c["fpr"][keep], c["tpr"][keep], colour(i), marker="o",
                   label=f"{one_line(c['name'])} ({c['runs']:,} runs)")
        if c.get("epsilon_lb") is not None:
            chart.line(grid, dp_boundary(grid, c["epsilon_lb"], claim["delta"]), colour(i), width=1, dash="5,3",
                       label=f"boundary at its ε_LB = {c['epsilon_lb']:.3g}")
    return chart.svg()


ROW = 22  # pixels per row of the ε_LB figure
LABEL_CHARS = 48  # longest row label drawn (longer ones are cut with …)


def epsilon_figure(rows: list[dict], title: str) -> bytes:
    """One row per test or run, each labelled: its claimed ε (black tick), its ε_LB (dot; a cross when violated)
    and the one-sided interval [ε_LB, ∞) drawn up to the ceiling (an arrow and the ceiling's value when it lies
    beyond the axis). Runs spread down the figure whatever their claims (a sweep of ε or sixteen runs at ε = 1
    alike), and its height follows its rows: one test is one short row, not an empty square.

    ``rows``: ``label``, ``claim``, ``epsilon_lb``, ``ceiling`` (None: unbounded), ``confidence``, ``verdict``.
    """
    labels = [one_line(r["label"], LABEL_CHARS) for r in rows]
    left = 16 + 6.2 * max(map(len, labels), default=4)  # DejaVu Sans at 11 px: about 6 px a character
    width, right, top, bottom = 640 + int(left), 84, 30, 44
    plot = top + ROW * len(rows)
    near = max([r["claim"] for r in rows] + [r["epsilon_lb"] for r in rows] + [1e-3])
    ceilings = [r["ceiling"] for r in rows if r["ceiling"] is not None]
    # every claim and bound inside the axis; the ceilings too unless far beyond them (then drawn as arrows)
    high = max(near * 1.15, max(ceilings) * 1.05 if ceilings and max(ceilings) <= 2.5 * near else 0.0)
    x = Axis(0.0, high, left, width - right)
    conf = sorted({r["confidence"] for r in rows})
    legend = [("claimed ε", "#000", "tick"), ("ε_LB (dot; cross: violated)", colour(0), "o"),
              ("one-sided interval up to the ceiling", colour(0), "line")]
    full = plot + bottom + LEGEND_ROW * len(legend) + 6
    out = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{full}" '
            f'viewBox="0 0 {width} {full}" style="{FONT};font-size:11px">'),
           f'<rect width="{width}" height="{full}" fill="white"/>',
           (f'<text x="{(x.start + x.stop) / 2:.0f}" y="16" text-anchor="middle" font-size="12">'
            f'{escape(title)} (confidence {escape(", ".join(confidence_text(c) for c in conf))})</text>')]
    for tick in x.ticks():
        p = float(x([tick])[0])
        out.append(f'<line x1="{p:.1f}" y1="{top}" x2="{p:.1f}" y2="{plot}" stroke="#000" stroke-opacity="0.12"/>')
        out.append(f'<text x="{p:.1f}" y="{plot + 14}" text-anchor="middle">{escape(_label(tick, False))}</text>')
    out.append(f'<rect x="{x.start}" y="{top}" width="{x.stop - x.start}" height="{plot - top}" fill="none" '
               'stroke="#000"/>')
    out.append(f'<text x="{(x.start + x.stop) / 2:.0f}" y="{plot + 32}" text-anchor="middle">ε (the claim, and '
               'the lower bound at the confidence above)</text>')
    for i, (r, label) in enumerate(zip(rows, labels)):
        y = top + ROW * (i + 0.5)
        col = "#c62828" if r.get("verdict") == "violated" else colour(0)
        lb, claim = (float(v) for v in x([r["epsilon_lb"], r["claim"]]))
        end = x.stop if r["ceiling"] is None else min(float(x([r["ceiling"]])[0]), x.stop)
        out.append(f'<text x="{left - 8:.0f}" y="{y + 4:.1f}" text-anchor="end">{escape(label)}</text>')
        out.append(f'<line x1="{lb:.1f}" y1="{y:.1f}" x2="{end:.1f}" y2="{y:.1f}" stroke="{col}" stroke-width="1.5" '
                   'stroke-opacity="0.6"/>')
        if r["ceiling"] is None or float(x([r["ceiling"]])[0]) > x.stop:
            out.append(f'<path d="M{end - 6:.1f},{y - 4:.1f}L{end:.1f},{y:.1f}L{end - 6:.1f},{y + 4:.1f}" '
                       f'fill="none" stroke="{col}"/>')
            said = "unbounded" if r["ceiling"] is None else f"ceiling {r['ceiling']:.3g}"
            out.append(f'<text x="{x.stop + 4:.1f}" y="{y + 4:.1f}" fill="#555">{escape(said)}</text>')
        else:
            out.append(f'<line x1="{end:.1f}" y1="{y - 4:.1f}" x2="{end:.1f}" y2="{y + 4:.1f}" stroke="{col}"/>')
        out.append(f'<line x1="{claim:.1f}" y1="{y - 8:.1f}" x2="{claim:.1f}" y2="{y + 8:.1f}" stroke="#000" '
                   'stroke-width="2"/>')
        out.append(_marker("x" if r.get("verdict") == "violated" else "o", lb, y, 4.0, col))
    for k, (text, col, kind) in enumerate(legend):
        y = plot + bottom + k * LEGEND_ROW
        a = x.start
        if kind == "tick":
            out.append(f'<line x1="{a + 14}" y1="{y - 7}" x2="{a + 14}" y2="{y + 7}" stroke="{col}" stroke-width="2"/>')
        elif kind == "line":
            out.append(f'<line x1="{a}" y1="{y}" x2="{a + 28}" y2="{y}" stroke="{col}" stroke-width="1.5" '
                       'stroke-opacity="0.6"/>')
        else:
            out.append(_marker("o", a + 14, y, 4.0, col))
        out.append(f'<text x="{a + 36}" y="{y + 4}">{escape(text)}</text>')
    out.append("</svg>")
    return ("\n".join(out) + "\n").encode()


def timeline_figure(world: dict, utility: dict) -> bytes | None:
    """Users present over time, the releases, and the utility of each release (None without a timeline)."""
    timeline = world.get("timeline")
    if not timeline:
        return None
    key = curve_value(utility)
    curve = [p for p in utility["curve"] if p.get(key) is not None]
    releases = world.get("release_times") or [p["time"] for p in utility["curve"]]
    times = list(timeline["time"]) + list(releases)
    label = "relative covariance error" if key == "covariance_error" else utility["metric"]
    values = [p[key] for p in curve]
    y2 = None if not curve else (0, 1.02) if key == "accuracy" else (0, max(values + [1e-9]) * 1.05)
    chart = Chart(800, 330, (min(times), max(times)), (0, max(timeline["users_present"] + [1]) * 1.05),
                  title="The world over time", xlabel="time", ylabel="users present", y2lim=y2,
                  y2label=one_line(label, 45))
    chart.line(timeline["time"], timeline["users_present"], colour(0), label="users present")
    for i, at in enumerate(releases):
        chart.segment(at, 0, at, chart.y.high if not chart.y.log else 1, "#bfbfbf", 0.8)
    if releases:
        chart.line([], [], "#bfbfbf", width=0.8, label="release")
    if curve:
        chart.line([p["time"] for p in curve], values, colour(2), marker="s", right=True, label=label)
    return chart.svg()


def accuracy_figure(report: dict) -> bytes | None:
    """Item clustering accuracy of each release against the users the server had seen (None without a curve)."""
    curve = [p for p in report["utility"]["curve"] if p["accuracy"] is not None]
    if not curve:
        return None
    seen = [p["users_seen"] for p in curve]
    chart = Chart(640, 330, (0, max(seen + [1]) * 1.05), (0, 1.02), xlabel="users seen by the server",
                  ylabel="item clustering accuracy",
                  title=f"{report['scenario']['name']}: {report['scenario']['mechanism']['kind']}, "
                        f"ε = {claim_epsilon(report['claim']['epsilon'])}")
    chart.line(seen, [p["accuracy"] for p in curve], colour(0), marker="o")
    return chart.svg()
