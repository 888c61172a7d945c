"""The figures of one run's report (ROC, ε_LB per test, the world over time, accuracy), drawn as SVG.

Each is a pure function of report data (and, for ROC curves, of the saved
trial scores), so ``recaudit report`` redraws them byte for byte.
"""
from __future__ import annotations

import math

import numpy as np

from .plots import curve_value, dp_boundary, one_line
from .report_text import claim_epsilon
from .svg import Chart, colour


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
                   label=f"claimed boundary ε = {claim['epsilon']:g}, δ = {claim['delta']:g}")
    chart.line(grid, grid, "#808080", dash="2,3", label="chance (TPR = FPR)")
    for i, c in enumerate(curves):
        keep = (c["fpr"] > 0) & (c["tpr"] > 0)
        chart.line(c["fpr"][keep], c["tpr"][keep], colour(i), marker="o",
                   label=f"{one_line(c['name'])} ({c['runs']:,} runs)")
        if c.get("epsilon_lb") is not None:
            chart.line(grid, dp_boundary(grid, c["epsilon_lb"], claim["delta"]), colour(i), width=1, dash="5,3",
                       label=f"boundary at its ε_LB = {c['epsilon_lb']:.3g}")
    return chart.svg()


def epsilon_figure(rows: list[dict], title: str) -> bytes:
    """ε_LB of each row (dot; a cross when violated) with its one-sided interval up to the ceiling, against the
    claimed ε (diagonal). ``rows``: ``label``, ``claim``, ``epsilon_lb``, ``ceiling``, ``confidence``,
    ``verdict``; one colour and legend entry per label, runs at the same claim spread sideways."""
    claims = [r["claim"] for r in rows]
    top = max([r["ceiling"] for r in rows if r["ceiling"] is not None] + claims + [1e-3])
    high = max(claims + [r["epsilon_lb"] for r in rows]) * 1.15 + 0.05
    conf = sorted({r["confidence"] for r in rows})
    chart = Chart(640, 420, (0, high), (0, max(high, top * 1.05)), xlabel="claimed ε",
                  ylabel="ε lower bound (bar: up to the ceiling)",
                  title=f"{title} (confidence {', '.join(f'{100 * c:.4g} %' for c in conf)})")
    chart.line([0, high], [0, high], "#000", width=1, label="ε_LB = claimed ε")
    labels = list(dict.fromkeys(r["label"] for r in rows))
    span = max(claims) - min(claims)
    width = 0.04 * (span if span > 0 else max(claims[0], 1.0))
    same: dict[float, list[int]] = {}
    for i, r in enumerate(rows):
        same.setdefault(round(r["claim"], 6), []).append(i)  # accountants' claims differ in the last digits
    for i, r in enumerate(rows):
        group = same[round(r["claim"], 6)]
        x = r["claim"] + width * (group.index(i) - (len(group) - 1) / 2)
        col = colour(labels.index(r["label"]))
        chart.segment(x, r["epsilon_lb"], x, max(r["ceiling"] or top, r["epsilon_lb"]), col)
        chart.line([x], [r["epsilon_lb"]], col, width=0, size=4,
                   marker="x" if r.get("verdict") == "violated" else "o")
    for i, label in enumerate(labels):
        chart.line([], [], colour(i), width=0, marker="o", label=one_line(label))
    if any(r.get("verdict") == "violated" for r in rows):
        chart.line([], [], "#4d4d4d", width=0, marker="x", label="violated (cross)")
    return chart.svg()


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
