"""Audit reports: report.json (machines), report.md (people), trials.csv, accuracy.png."""
from __future__ import annotations

import json
import os
import tempfile
from importlib import metadata
from pathlib import Path

import numpy as np

from .runner import AuditResult

SCHEMA_VERSION = 1
PACKAGES = ("recaudit", "numpy", "scipy", "simpy", "pandas", "statsmodels", "pydantic", "pyyaml")
WALL_CLOCK_FIELDS = ("timing",)


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def report_dict(result: AuditResult) -> dict:
    """The JSON report. Everything except ``timing`` is a function of scenario and seed."""
    bound = result.bound.to_dict()
    claim = result.claim
    scenario = result.scenario
    return {
        "schema_version": SCHEMA_VERSION,
        "scenario": scenario.model_dump(mode="json"),
        "seed": {"root": scenario.seed, "entropy": str(np.random.SeedSequence(scenario.seed).entropy)},
        "packages": {name: _version(name) for name in PACKAGES},
        "claim": claim.to_dict(),
        "audit": {
            "attack": scenario.attack.kind,
            "view": claim.view,
            "trials_per_world": scenario.audit.trials,
            "counts": {k: bound[k] for k in ("false_pos", "n_neg", "false_neg", "n_pos")},
            "epsilon_lb": bound["epsilon_lb"],
            "alpha": bound["alpha"],
            "confidence": 1.0 - bound["alpha"],
            "ceiling": bound["ceiling"],
            "method": bound["method"],
            "threshold_strategy": bound["strategy"],
            "threshold": bound["threshold"],
            "direction": bound["direction"],
            "tightness": bound["epsilon_lb"] / claim.epsilon if claim.epsilon > 0 else None,
            "target": {"differing_bits": result.pair.differing_bits,
                       "sketch_world0": result.pair.sketches[0].astype(int).tolist(),
                       "sketch_world1": result.pair.sketches[1].astype(int).tolist()},
        },
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
    c = audit["counts"]
    lines = [
        f"# Audit: {report['scenario']['name']}",
        "",
        f"**Verdict: {report['verdict']}** — the claim is "
        + ("contradicted: the mechanism is provably less private than it says."
           if report["verdict"] == "violated" else
           "not contradicted by this audit (an audit can never prove privacy)."),
        "",
        "| | |",
        "|---|---|",
        f"| mechanism | `{report['scenario']['mechanism']['kind']}` |",
        f"| claim | ({claim['epsilon']:g}, {claim['delta']:g})-DP, {claim['model']} model, per {claim['unit']} "
        f"({claim['neighbouring']}), protects the `{claim['view']}` view |",
        f"| empirical ε lower bound | **{audit['epsilon_lb']:.4f}** at {audit['confidence']:.0%} confidence |",
        f"| ceiling (largest bound {audit['trials_per_world']:,} trials/world could show) | {audit['ceiling']:.4f} |",
        f"| tightness ε_LB / ε | {_fmt(audit['tightness'])} |",
        f"| attack / method / threshold | `{audit['attack']}` / {audit['method']} / {audit['threshold_strategy']} "
        f"(t = {audit['threshold']}, direction {audit['direction']:+d}) |",
        f"| evaluation counts | FP {c['false_pos']}/{c['n_neg']}, FN {c['false_neg']}/{c['n_pos']} |",
        f"| target sketch bits differing between worlds | {audit['target']['differing_bits']} |",
        f"| utility: {util['metric']} at the last release | {_fmt(util['final_accuracy'])} |",
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


def _atomic_text(path: Path, text: str) -> None:
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False, encoding="utf-8") as f:
        f.write(text)
    os.replace(f.name, path)


def write_reports(result: AuditResult, out_dir: Path) -> dict:
    """Write every report file into ``out_dir`` and return the JSON report."""
    import pandas as pd

    out_dir.mkdir(parents=True, exist_ok=True)
    report = report_dict(result)
    _atomic_text(out_dir / "report.json", json.dumps(report, indent=2) + "\n")
    _atomic_text(out_dir / "report.md", report_markdown(report))
    scores0, scores1 = result.scores
    n_sel0 = scores0.size - result.bound.n_neg
    n_sel1 = scores1.size - result.bound.n_pos
    frame = pd.DataFrame({
        "trial": np.concatenate([np.arange(scores0.size), np.arange(scores1.size)]),
        "world": np.repeat([0, 1], [scores0.size, scores1.size]),
        "part": np.concatenate([np.where(np.arange(scores0.size) < n_sel0, "selection", "evaluation"),
                                np.where(np.arange(scores1.size) < n_sel1, "selection", "evaluation")]),
        "score": np.concatenate([scores0, scores1]),
    })
    tmp = out_dir / "trials.csv.tmp"
    frame.to_csv(tmp, index=False)
    os.replace(tmp, out_dir / "trials.csv")
    _plot_accuracy(report, out_dir / "accuracy.png")
    return report


def _plot_accuracy(report: dict, path: Path) -> None:
    curve = [p for p in report["utility"]["curve"] if p["accuracy"] is not None]
    if not curve:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot([p["users_seen"] for p in curve], [p["accuracy"] for p in curve], marker="o")
    ax.set_xlabel("users seen by the server")
    ax.set_ylabel("item clustering accuracy")
    ax.set_ylim(0, 1.02)
    ax.set_title(f"{report['scenario']['name']}: {report['scenario']['mechanism']['kind']}, "
                 f"ε = {report['claim']['epsilon']:g}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
