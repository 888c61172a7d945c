"""Audit reports: report.json (machines), report.md (people), trials.csv, accuracy.png."""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

import numpy as np

from .store import write_bytes, write_json, write_text

SCHEMA_VERSION = 1
PACKAGES = ("recaudit", "numpy", "scipy", "simpy", "pandas", "statsmodels", "pydantic", "pyyaml")
WALL_CLOCK_FIELDS = ("timing",)


def _version(name: str) -> str | None:
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
    bound = test.bound.to_dict()
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
        "threshold_strategy": bound.get("strategy", "guesses"),
        "tightness": bound["epsilon_lb"] / claim.epsilon if claim.epsilon > 0 else None,
        "p_value": test.p_value,
        "holm_adjusted_p_value": test.adjusted_p_value,
        "verdict": test.verdict,
        "target_sketches": _pair_dict(test.pair),
    }
    if "false_pos" in bound:
        d["counts"] = {k: bound[k] for k in ("false_pos", "n_neg", "false_neg", "n_pos")}
        d["threshold"], d["direction"] = bound["threshold"], bound["direction"]
        if bound.get("mu_lb") is not None:
            d["mu_lb"], d["mu_ceiling"] = bound["mu_lb"], bound["mu_ceiling"]
    else:
        d["counts"] = {k: bound[k] for k in ("r", "v", "m", "k_pos", "k_neg")}
    return d


def report_dict(result) -> dict:
    """The JSON report. Everything except ``timing`` is a function of scenario and seed."""
    claim = result.claim
    scenario = result.scenario
    tests = [_test_dict(t, claim) for t in result.tests]
    strongest = max(tests, key=lambda t: t["epsilon_lb"])
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario": scenario.model_dump(mode="json"),
        "seed": {"root": scenario.seed, "entropy": str(np.random.SeedSequence(scenario.seed).entropy)},
        "packages": {name: _version(name) for name in PACKAGES},
        "claim": claim.to_dict(),
        "audit": {
            "view": claim.view,
            "design": result.design,
            "trials_per_world": scenario.audit.trials if result.design != "one_run" else None,
            "canaries": scenario.audit.trials if result.design == "one_run" else None,
            "family_alpha": scenario.audit.alpha,
            "tests_in_family": len(tests),
            "correction": "Holm step-down on the verdicts; every bound at alpha / tests (simultaneous)",
            # the strongest test, for readers who want one number
            **{k: strongest[k] for k in ("name", "attack", "epsilon_lb", "alpha", "confidence", "ceiling", "method",
                                         "threshold_strategy", "tightness", "counts")},
        },
        "tests": tests,
        "verdict": result.verdict,
        "utility": result.utility,
        "world": result.world,
        "timing": result.timing,
    }


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


def report_markdown(report: dict) -> str:
    """A short human summary of ``report``."""
    claim, audit, util = report["claim"], report["audit"], report["utility"]
    runs = (f"{audit['trials_per_world']:,} trials per world" if audit["trials_per_world"]
            else f"{audit['canaries']:,} canaries in one run")
    lines = [
        f"# Audit: {report['scenario']['name']}",
        "",
        f"**Verdict: {report['verdict']}** — the claim is "
        + ("contradicted: the mechanism is provably less private than it says."
           if report["verdict"] == "violated" else
           "not contradicted by this audit (an audit can never prove privacy)."),
        "",
        f"- mechanism `{report['scenario']['mechanism']['kind']}`; claim ({claim['epsilon']:g}, {claim['delta']:g})-DP, "
        f"{claim['model']} model, per {claim['unit']} ({claim['neighbouring']}), protecting the `{claim['view']}` view",
        f"- strongest test: ε_LB = **{audit['epsilon_lb']:.4f}** at {audit['confidence']:.4g} confidence "
        f"(ceiling {audit['ceiling']:.4f}, tightness {_fmt(audit['tightness'])}), {runs} "
        f"(design `{audit['design']}`)",
        f"- family of {audit['tests_in_family']} test(s) at family-wise α = {audit['family_alpha']:g}: "
        f"{audit['correction']}",
        f"- utility: {util['metric']} at the last release: {_fmt(util['final_accuracy'])}",
        "",
        "## Tests",
        "",
        "| test | claim ε | ε_LB | confidence | ceiling | method | threshold | tightness | counts | "
        "Holm p | verdict |",
        "|---|---:|---:|---:|---:|---|---|---:|---|---:|---|",
    ]
    for t in report["tests"]:
        c = t["counts"]
        counts = (f"FP {c['false_pos']}/{c['n_neg']}, FN {c['false_neg']}/{c['n_pos']}" if "false_pos" in c
                  else f"{c['v']}/{c['r']} guesses right of {c['m']}")
        lines.append(f"| {t['name']} | {t['claim']['epsilon']:g} | {t['epsilon_lb']:.4f} | {t['confidence']:.4g} | "
                     f"{t['ceiling']:.4f} | {t['method']} | {t['threshold_strategy']} | {_fmt(t['tightness'])} | "
                     f"{counts} | {t['holm_adjusted_p_value']:.3g} | {t['verdict']} |")
    lines += [
        "",
        "ε_LB is a lower bound on the mechanism's true ε; the ceiling is the largest bound this many runs could "
        "show. A verdict is `violated` when the Holm-adjusted p-value of \"the claim holds\" is below α.",
        "",
        "## Utility over time",
        "",
        "| time | users seen | accuracy |",
        "|---:|---:|---:|",
    ]
    lines += [f"| {p['time']:g} | {p['users_seen']:,} | {_fmt(p['accuracy'])} |" for p in util["curve"]]
    w = report["world"]
    lines += ["", f"World: {w['users_arrived']:,} users arrived, {w['users_answered']:,} answered, "
              f"{w['releases']} releases over {w['n_items']} items in {w['n_item_clusters']} clusters.",
              "", f"Seed {report['seed']['root']}; schema version {report['schema_version']}.", ""]
    return "\n".join(lines)


def write_reports(result, out_dir: Path) -> dict:
    """Write every report file into ``out_dir`` and return the JSON report."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    report = report_dict(result)
    write_json(out_dir / "report.json", report)
    write_text(out_dir / "report.md", report_markdown(report))
    frames = []
    for test in result.tests:
        if test.worlds is not None:  # one-run canaries
            n = test.scores.size
            frames.append(pd.DataFrame({"test": test.name, "trial": np.arange(n), "world": test.worlds,
                                        "part": "canary", "score": test.scores}))
            continue
        n_sel = [test.scores.shape[1] - test.bound.n_neg, test.scores.shape[1] - test.bound.n_pos]
        for world in (0, 1):
            idx = np.arange(test.scores.shape[1])
            part = np.where(idx < n_sel[world], "selection", "evaluation") if test.bound.strategy == "split" \
                else np.full(idx.size, "evaluation")
            frames.append(pd.DataFrame({"test": test.name, "trial": idx, "world": world, "part": part,
                                        "score": test.scores[world]}))
    write_bytes(out_dir / "trials.csv", pd.concat(frames, ignore_index=True).to_csv(index=False).encode())
    _plot_accuracy(report, out_dir / "accuracy.png")
    return report


def _plot_accuracy(report: dict, path: Path) -> None:
    curve = [p for p in report["utility"]["curve"] if p["accuracy"] is not None]
    if not curve:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5), sharey=True)
    for ax, key, label in ((axes[0], "time", "time"), (axes[1], "users_seen", "users seen by the server")):
        ax.plot([p[key] for p in curve], [p["accuracy"] for p in curve], marker="o")
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[1].xaxis.set_major_formatter(matplotlib.ticker.EngFormatter())
    axes[0].set_ylabel("item clustering accuracy")
    axes[0].set_ylim(0, 1.02)
    fig.suptitle(f"{report['scenario']['name']}: {report['scenario']['mechanism']['kind']}, "
                 f"ε = {report['claim']['epsilon']:g}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_sweep_reports(result, out_dir: Path) -> dict:
    """sweep.json, sweep.md, sweep_points.csv and scaling.png for a scaling sweep."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    sweep = result.scenario.sweep
    report = {
        "schema_version": SCHEMA_VERSION,
        "scenario": result.scenario.model_dump(mode="json"),
        "grid": result.grid,
        "packages": {name: _version(name) for name in PACKAGES},
        "definition": f"U* = users seen when item clustering accuracy first reaches {sweep.target_accuracy:g} "
                      f"and stays there for {sweep.stable_checkpoints} checkpoints "
                      f"({sweep.checkpoints_per_decade} per decade); censored at {sweep.max_users:,}",
        "fits": result.fits,
        "points": result.points,
    }
    write_bytes(out_dir / "sweep_points.csv", pd.DataFrame(result.points).to_csv(index=False).encode())
    report["medians"] = sweep_medians(result)
    report["bounds"] = result.bounds
    write_json(out_dir / "sweep.json", report)
    mechanisms = ", ".join(f"`{m}`" for m in result.mechanisms)
    lines = [f"# Scaling sweep: {result.scenario.name} ({result.grid} grid)", "",
             f"Mechanism{'s' if len(result.mechanisms) > 1 else ''} {mechanisms}. {report['definition']}.", "",
             "| mechanism | parameter | values | fitted log-log slope | 95% CI | theory slope on this grid | "
             "theory in CI | censored runs |", "|---|---|---|---:|---|---:|---|---:|"]
    for f in result.fits:
        slope = "n/a" if f["slope"] is None else f"{f['slope']:+.2f}"
        ci = "n/a" if f["slope"] is None else f"[{f['ci_low']:+.2f}, {f['ci_high']:+.2f}]"
        th = "n/a" if f["theory_slope"] is None else f"{f['theory_slope']:+.2f}"
        inside = {None: "n/a", True: "yes", False: "**no**"}[f["theory_in_ci"]]
        lines.append(f"| {f.get('mechanism', result.mechanisms[0])} | {f['parameter']} | "
                     f"{', '.join(f'{v:g}' for v in f['values'])} | {slope} | {ci} | {th} | {inside} | "
                     f"{f['censored']} |")
    lines += ["", "Theory slopes come from the formulas in `mechanisms/theory.py` evaluated on the same grid "
              "(their constants are unknown, so only slopes are compared).", ""]
    lines += _median_tables(result, report["medians"])
    write_text(out_dir / "sweep.md", "\n".join(lines))
    _plot_sweep(result, out_dir / "scaling.png")
    return report


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


def _median_tables(result, medians: list[dict]) -> list[str]:
    """Markdown: per axis, median U* of every mechanism and every lower bound at each value."""
    lines = []
    for fit in result.fits[:: len(result.mechanisms)]:
        parameter = fit["parameter"]
        names = list(dict.fromkeys(b["bound"] for b in result.bounds if b["parameter"] == parameter))
        head = [f"`{m}` median U*" for m in result.mechanisms] + [f"bound: {n}" for n in names]
        lines += [f"Median U* over {result.scenario.sweep.replicates} replicates (≥: the median run was censored; "
                  f"(k) = k runs censored), lower bounds beside:", "",
                  f"| {parameter} | " + " | ".join(head) + " |", "|---:|" + "---:|" * len(head)]
        for value in fit["values"]:
            cells = []
            for m in result.mechanisms:
                row = next(r for r in medians if r["parameter"] == parameter and r["mechanism"] == m
                           and r["value"] == value)
                cells.append(("≥" if row["censored_median"] else "") + f"{row['median']:,.0f}"
                             + (f" ({row['censored']})" if row["censored"] else ""))
            for n in names:
                users = next(b["users"] for b in result.bounds if b["parameter"] == parameter
                             and b["bound"] == n and b["value"] == value)
                cells.append(f"{users:,.3g}")
            lines.append(f"| {value:g} | " + " | ".join(cells) + " |")
        lines.append("")
    if result.bounds:
        drawn = list(dict.fromkeys(b["bound"] for b in result.bounds))
        scope = {"fano": "Fano's is for two item clusters", "scarce": "the scarce one is stated (C = 1) for "
                 "w = o(N^(1/3)) and eps <= ln 2", "adaptive": "the adaptive one (C = 1) for w = 1"}
        lines += ["Bounds (`mechanisms/theory.py`, ALGORITHMS.md A): "
                  + "; ".join(dict.fromkeys(b["label"] for b in result.bounds)) + ". "
                  + "; ".join(scope[n] for n in drawn) + ".", ""]
    return lines


def _plot_sweep(result, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mechanisms = result.mechanisms
    axes_fits = result.fits[:: len(mechanisms)]
    markers, colours = "osD^v<>", plt.rcParams["axes.prop_cycle"].by_key()["color"]
    cap = result.scenario.sweep.max_users
    wide = len(mechanisms) > 1 or bool(result.bounds)  # a legend outside the axes
    fig, axes = plt.subplots(1, len(axes_fits), figsize=((8.4 if wide else 4.2) * len(axes_fits), 4.2),
                             squeeze=False)
    for ax, first in zip(axes[0], axes_fits):
        parameter = first["parameter"]
        titles = []
        for m, label in enumerate(mechanisms):
            fit = next(f for f in result.fits if f["parameter"] == parameter
                       and f.get("mechanism", mechanisms[0]) == label)
            colour = colours[m % len(colours)]
            pts = [p for p in result.points if p["parameter"] == parameter and p.get("mechanism", label) == label]
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
        for k, name in enumerate(dict.fromkeys(b["bound"] for b in result.bounds if b["parameter"] == parameter)):
            rows = [b for b in result.bounds if b["parameter"] == parameter and b["bound"] == name]
            rows = [b for b in rows if b["users"] >= 1]  # a bound below one user says nothing
            if rows:
                ax.loglog([b["value"] for b in rows], [b["users"] for b in rows], "--", color="0.35",
                          dashes=(2 + 2 * k, 2), lw=1.2, label=f"lower bound, {rows[0]['label']}")
        ax.set_title("fitted slopes: " + "\n".join(titles) if titles else parameter, fontsize=7)
        ax.set_xticks(first["values"], [f"{v:g}" for v in first["values"]])
        ax.minorticks_off()
        ax.set_xlabel(parameter)
        if parameter == "population.ratings_per_user" and "n_items" in result.scenario.population.model_fields:
            n = result.scenario.population.n_items  # the information regimes read better as w / N
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
    fig.savefig(path, dpi=110)
    plt.close(fig)
