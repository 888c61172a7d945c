"""The figures across runs (compare, sweep, grid: matplotlib, Agg, as PNG bytes) and the ROC arithmetic.

A run report's own figures are SVG (``run_figures``): drawn at every run, they must cost milliseconds.
Every figure is a pure function of report data (and, for ROC curves, of the saved trial scores), so
``recaudit report`` redraws them identically.
"""
from __future__ import annotations

import io
import math

import numpy as np

from ..stats.coded import CodedScores, Tally, one_table

ROC_POINTS = 400  # thresholds drawn per ROC curve (quantiles of the scores when there are more)
ROC_SAMPLE = 100_000  # scores per world the thresholds are chosen from


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    _pyplot().close(fig)
    return buffer.getvalue()


def one_line(text, limit: int = 40) -> str:
    """A label on one short line (user strings may hold line breaks)."""
    text = " ".join(str(text).splitlines())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def roc_curve(negatives: np.ndarray, positives: np.ndarray, direction: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(FPR, TPR) of "score · direction ≥ t" at up to ROC_POINTS thresholds t.

    The thresholds are the distinct values of an evenly strided sample of at most
    ``ROC_SAMPLE`` scores per world (their quantiles when there are more than
    ROC_POINTS); the rates are exact counts of all scores binned at the
    thresholds, so the scores are never sorted.
    """
    counted = _coded_roc_curve(negatives, positives, direction)
    if counted is not None:
        return counted
    neg, pos = np.asarray(negatives, float), np.asarray(positives, float)
    if direction != 1:  # (no copy of ten million scores when the test reads them as they are)
        neg, pos = direction * neg, direction * pos
    sample = np.concatenate([s[::max(1, s.size // ROC_SAMPLE)] for s in (neg, pos)])
    thresholds = np.unique(sample)
    if thresholds.size > ROC_POINTS:
        thresholds = np.unique(np.quantile(thresholds, np.linspace(0, 1, ROC_POINTS)))

    def at_or_above(scores: np.ndarray) -> np.ndarray:  # share of scores >= each threshold
        if thresholds.size <= 8:  # discrete scores: a few passes beat a binary search per score
            return 1.0 - np.array([np.count_nonzero(scores < t) for t in thresholds]) / scores.size
        below = np.bincount(np.searchsorted(thresholds, scores, side="right"), minlength=thresholds.size + 1)
        return 1.0 - np.cumsum(below)[:-1] / scores.size

    return at_or_above(neg), at_or_above(pos)


def _coded_roc_curve(negatives, positives, direction: int) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`roc_curve` of coded scores from their counts per value: the same thresholds and rates, bit for
    bit, without the floats (None: not coded, or no one table)."""
    if not (isinstance(negatives, CodedScores) and isinstance(positives, CodedScores)):
        return None
    both = one_table([negatives.ravel(), positives.ravel()])
    if both is None:
        return None
    values = both[0].values if direction == 1 else direction * both[0].values
    seen = np.unique(np.concatenate([c.codes[::max(1, c.size // ROC_SAMPLE)] for c in both]))
    thresholds = np.unique(values[seen])
    if thresholds.size > ROC_POINTS:
        return None
    order = np.argsort(values)
    return tuple(1.0 - Tally(values[order], c.counts()[order]).searchsorted(thresholds) / c.size for c in both)


def dp_boundary(fpr: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """The largest TPR an (ε, δ)-DP mechanism allows at each FPR (both constraints of the trade-off curve)."""
    fpr = np.asarray(fpr, float)
    return np.minimum(1.0, np.minimum(math.exp(epsilon) * fpr + delta, 1.0 - math.exp(-epsilon) * (1.0 - delta - fpr)))




def curve_value(utility: dict) -> str:
    """The key of a utility curve's values: a covariance server's error, else clustering accuracy."""
    return "covariance_error" if "covariance_error" in utility else "accuracy"



def frontier_figure(rows: list[dict]) -> bytes | None:
    """Utility against ε for every run, one series per mechanism, the non-dominated runs joined (the frontier).

    ``rows``: ``label``, ``mechanism``, ``claim``, ``epsilon_lb``, ``utility`` (None: not drawn).
    """
    rows = [r for r in rows if r["utility"] is not None]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.6, 4.6))
    for i, mech in enumerate(sorted({r["mechanism"] for r in rows})):
        mine = sorted((r for r in rows if r["mechanism"] == mech), key=lambda r: r["claim"])
        ax.plot([r["claim"] for r in mine], [r["utility"] for r in mine], "o-", color=f"C{i % 10}",
                label=f"{one_line(mech)} (claimed ε)")
        ax.plot([r["epsilon_lb"] for r in mine], [r["utility"] for r in mine], "o", mfc="none", color=f"C{i % 10}",
                label=f"{one_line(mech)} (audited ε_LB)")
    frontier = pareto_front([(r["claim"], r["utility"]) for r in rows])
    if len(frontier) > 1:
        ax.step(*zip(*frontier), where="post", color="k", lw=1, alpha=0.6, label="frontier (claimed ε)")
    ax.set_xlabel("ε (less private →)")
    ax.set_ylabel("utility at the last release")
    ax.set_ylim(0, 1.05)
    ax.set_title("Privacy–utility frontier", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return _png(fig)


def pareto_front(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both smaller ε and larger utility, by increasing ε."""
    front, best = [], -math.inf
    for eps, util in sorted(points, key=lambda p: (p[0], -p[1])):
        if util > best:
            front.append((eps, util))
            best = util
    return front


def sweep_figure(report: dict) -> bytes:
    """scaling.png, per axis and mechanism: U* of every run (censored runs hollow, at the cap), medians, the
    fitted line with its 95% band, the theory curve with its constant fitted to the runs, and lower bounds."""
    plt = _pyplot()
    fits, points, bounds = report["fits"], report["points"], report.get("bounds", [])
    mechanisms = report.get("mechanisms") or list(dict.fromkeys(f.get("mechanism", "") for f in fits))
    axes_fits = fits[:: len(mechanisms)]
    markers, colours = "osD^v<>", plt.rcParams["axes.prop_cycle"].by_key()["color"]
    cap = report["scenario"]["sweep"]["max_users"]
    wide = len(mechanisms) > 1 or bool(bounds)  # a legend outside the axes
    fig, axes = plt.subplots(1, len(axes_fits), figsize=((8.4 if wide else 4.2) * len(axes_fits), 4.2),
                             squeeze=False)
    for ax, first in zip(axes[0], axes_fits):
        parameter = first["parameter"]
        titles = []
        for m, label in enumerate(mechanisms):
            fit = next(f for f in fits if f["parameter"] == parameter
                       and f.get("mechanism", mechanisms[0]) == label)
            colour = colours[m % len(colours)]
            pts = [p for p in points if p["parameter"] == parameter and p.get("mechanism", label) == label]
            done = [p for p in pts if p["u_star"] is not None]
            cut = [p for p in pts if p["u_star"] is None]
            ax.loglog([p["value"] for p in done], [p["u_star"] for p in done], markers[m % len(markers)],
                      color=colour, alpha=0.55, label=f"{label}: U* (runs)")
            if cut:
                ax.loglog([p["value"] for p in cut], [cap] * len(cut), "^", color=colour, alpha=0.55, mfc="none",
                          label=f"{label}: censored at {cap:,}")
            med = [(v, np.median([cap if p["u_star"] is None else p["u_star"] for p in pts if p["value"] == v]))
                   for v in fit["values"]]
            ax.loglog(*zip(*med), "-", color=colour, lw=1.5)
            if fit.get("band"):
                x = [b["x"] for b in fit["band"]]
                ax.fill_between(x, [b["low"] for b in fit["band"]], [b["high"] for b in fit["band"]],
                                color=colour, alpha=0.12, label=f"{label}: 95% CI of the fitted mean")
            theory = sorted({(p["value"], p["theory_users"]) for p in pts if p["theory_users"] is not None})
            if theory and done:
                tx, tu = np.array(theory).T
                # theory has an unknown constant: scale it to the measured points (least squares in log space)
                measured = np.array([p["u_star"] for p in done], float)
                at = np.interp([p["value"] for p in done], tx, tu)
                scale = np.exp(np.mean(np.log(measured) - np.log(at)))
                ax.loglog(tx, tu * scale, ":", color=colour, label=f"{label}: theory, scaled "
                                                                  f"(slope {fit['theory_slope']:+.2f})")
            if fit["slope"] is not None:
                titles.append(f"{label} {fit['slope']:+.2f} [{fit['ci_low']:+.2f}, {fit['ci_high']:+.2f}]")
        for k, name in enumerate(dict.fromkeys(b["bound"] for b in bounds if b["parameter"] == parameter)):
            rows = [b for b in bounds if b["parameter"] == parameter and b["bound"] == name]
            rows = [b for b in rows if b["users"] >= 1]  # a bound below one user says nothing
            if rows:
                ax.loglog([b["value"] for b in rows], [b["users"] for b in rows], "--", color="0.35",
                          dashes=(2 + 2 * k, 2), lw=1.2, label=f"lower bound, {rows[0]['label']}")
        ax.set_title("fitted slopes: " + "\n".join(titles) if titles else parameter, fontsize=7)
        ax.set_xticks(first["values"], [f"{v:g}" for v in first["values"]])
        ax.minorticks_off()
        ax.set_xlabel(parameter)
        if parameter == "population.ratings_per_user" and "n_items" in report["scenario"].get("population", {}):
            n = report["scenario"]["population"]["n_items"]  # the information regimes read better as w / N
            top = ax.secondary_xaxis("top", functions=(lambda w: w / n, lambda r: r * n))
            top.set_xlabel(f"w / N (N = {n})", fontsize=8)
            top.set_xticks([v / n for v in first["values"]], [f"{v / n:.2g}" for v in first["values"]])
            top.minorticks_off()
        ax.set_ylabel("users needed U*")
        if wide:
            ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.02, 0.5))
        else:
            ax.legend(fontsize=6.5)
        ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return _png(fig)


def rmse_figure(rows: list[dict], title: str, xlabel: str = "ε (δ = 1e-6)") -> bytes:
    """Held-out RMSE against ε per mechanism (mean over seeds, bars min–max), baselines as lines.

    ``rows``: ``mechanism``, ``epsilon`` (None for a non-private baseline), ``rmse``; optional ``zero_rmse``,
    and ``label`` naming a baseline's line (default: non-private Frank-Wolfe).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 4.6))
    names = list(dict.fromkeys(r["mechanism"] for r in rows if r["epsilon"] is not None))
    for i, name in enumerate(names):
        eps = sorted({r["epsilon"] for r in rows if r["mechanism"] == name})
        values = [[r["rmse"] for r in rows if r["mechanism"] == name and r["epsilon"] == e] for e in eps]
        mean = np.array([np.mean(v) for v in values])
        low, high = mean - np.array([min(v) for v in values]), np.array([max(v) for v in values]) - mean
        ax.errorbar(eps, mean, yerr=[low, high], fmt="o-", color=f"C{i % 10}", capsize=3, label=one_line(name))
    # one line per baseline label (mean over its rows, e.g. seeds)
    labels = list(dict.fromkeys(r.get("label", "non-private Frank-Wolfe") for r in rows
                                if r["epsilon"] is None and r["rmse"] is not None))
    for k, label in enumerate(labels):
        mine = [r["rmse"] for r in rows if r["epsilon"] is None and r["rmse"] is not None
                and r.get("label", "non-private Frank-Wolfe") == label]
        ax.axhline(float(np.mean(mine)), color=str(0.35 * min(k, 2)), ls="--", dashes=(4 + 3 * k, 2), lw=1,
                   label=one_line(label, 60))
    zero = [r["zero_rmse"] for r in rows if r.get("zero_rmse") is not None]
    if zero:
        ax.axhline(float(np.mean(zero)), color="0.5", ls=":", lw=1, label="predicting 0")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("held-out RMSE")
    ax.set_title(one_line(title, 90), fontsize=9)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)
