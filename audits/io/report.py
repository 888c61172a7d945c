"""Audit reports: report.json (machines), report.md and report.html (people), accuracy.png; trials.csv on request.

``report.json`` follows the JSON Schema in ``report.schema.json`` (version
``SCHEMA_VERSION``); it is strict JSON: a number that is infinite or
undefined is written as ``null``. Every string a user chose (scenario name,
kinds, paths) is escaped in Markdown (:func:`md`) and HTML (Jinja2 autoescaping).
"""
from __future__ import annotations

import base64
import math
import re
import resource
import time
from importlib import metadata, resources
from pathlib import Path

import numpy as np

from ..utility import utility_summary
from . import plots
from .store import write_bytes, write_json, write_text

SCHEMA_VERSION = 2  # 2: summary, utility.reference, world.timeline; non-finite numbers are null
SCHEMA_FILE = "report.schema.json"
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
        if bound.get("mu_lb") is not None:
            d["mu_lb"], d["mu_ceiling"] = bound["mu_lb"], bound["mu_ceiling"]
    elif "mu_hat" in bound:  # Gaussian fit of canary scores
        d["counts"] = {"m": bound["n_out"] + bound["n_in"], "n_in": bound["n_in"], "n_out": bound["n_out"]}
        d.update({k: bound[k] for k in ("mu_hat", "mu_lb", "model_rejected")})
        d["model_check_p_value"] = bound["check_p_value"]
    else:
        d["counts"] = {k: bound[k] for k in ("r", "v", "m", "k_pos", "k_neg")}
    if getattr(test, "reach", None) is not None:
        d["pair_reach"] = test.reach
    return d


def reach_sentence(test: dict) -> str | None:
    """One line on the audited pair's reach against the claim (white-box tests), or None."""
    r = test.get("pair_reach")
    if not r or r.get("epsilon_pair") is None:
        return None
    how = (f"μ_pair = {r['mu_pair']:.4g} (claim's μ {_fmt(r.get('mu_claim'))})" if r["law"] == "gaussian"
           else "Laplace, pure ε")
    loose = (f"; the claim is loose by {r['looseness']:.3g}x for this pair" if r.get("looseness") and
             r["looseness"] > 1.05 else "")
    return (f"{test['name']}: the pair reaches ε = {r['epsilon_pair']:.4g} ({how}) against the claimed "
            f"{claim_epsilon(test['claim']['epsilon'])}{loose}; ε_LB / ε_pair = {_fmt(r.get('tightness_vs_pair'))}")


def accounting_note(scenario) -> dict:
    """``requested_epsilon`` and a ``note`` when the accountant's ε for one answer exceeds the mechanism's ε."""
    from mechanisms import MECHANISMS
    from mechanisms.accounting import DEFAULT_VALUE_DISCRETIZATION

    config = scenario.model_dump(mode="json")["mechanism"]  # also a run folder's recorded scenario
    requested = config.get("epsilon")
    accounted = (MECHANISMS[config["kind"]](**{k: v for k, v in config.items() if k != "kind"}).claim.epsilon
                 if requested is not None else None)
    if accounted is None or accounted <= requested * (1 + 1e-6):
        return {}
    why = ("the accountant (dp-accounting) rounds every privacy loss up to its grid (2^-33 for randomized "
           "response, 2^-17 otherwise), so an ε below one step is accounted as a step"
           if accounted - requested <= DEFAULT_VALUE_DISCRETIZATION else
           "the accountant finds a larger ε for one answer than the mechanism's parameter")
    return {"requested_epsilon": requested,
            "note": f"requested ε = {requested:g} per answer is accounted as {accounted:.3g}: {why}; the audit "
                    "tests the accounted claim (it is the larger, so the conservative one)"}


def counts_text(counts: dict) -> str:
    """A test's counts for people."""
    if "false_pos" in counts:
        return f"FP {counts['false_pos']}/{counts['n_neg']}, FN {counts['false_neg']}/{counts['n_pos']}"
    if "n_in" in counts:
        return f"{counts['m']} canary scores fitted ({counts['n_in']} in, {counts['n_out']} out)"
    return f"{counts['v']}/{counts['r']} guesses right of {counts['m']}"


def _strongest(tests: list[dict]) -> dict:
    """The test with the largest ε_LB; among equals an informative one (an uninformative 0 is no evidence)."""
    return max(tests, key=lambda t: (t["epsilon_lb"], not t["uninformative"]))


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
            "design": result.design,
            "trials_per_world": scenario.audit.trials if result.design != "one_run" else None,
            "canaries": scenario.audit.trials if result.design == "one_run" else None,
            "family_alpha": scenario.audit.alpha,
            "tests_in_family": len(tests),
            "correction": "Holm step-down on the verdicts; every bound at alpha / tests (simultaneous)",
            # the strongest test, for readers who want one number
            **{k: strongest[k] for k in ("name", "attack", "epsilon_lb", "alpha", "confidence", "ceiling", "method",
                                         "threshold_strategy", "tightness", "counts", "optimal_epsilon_lb",
                                         "optimal_tightness", "uninformative")},
        },
        "tests": tests,
        "verdict": result.verdict,
        "utility": result.utility,
        "world": result.world,
        "timing": result.timing,
    }
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


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


_MD_SPECIAL = re.compile(r"[\\`*_{}\[\]()#+!|~<>&]")
_MD_ENTITIES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}


def md(text) -> str:
    """``text`` safe inside one Markdown line or table cell: line breaks become spaces, markup characters are
    backslash-escaped and ``< > &`` become entities (so no raw HTML tag survives, whatever the renderer)."""
    return _MD_SPECIAL.sub(lambda m: _MD_ENTITIES.get(m.group(), "\\" + m.group()),
                           " ".join(str(text).splitlines()))


def confidence_text(confidence: float) -> str:
    """A confidence as people read it, worded the same everywhere (stdout, Markdown, HTML, plots): ``97.5 %``."""
    return f"{100 * confidence:.4g} %"


def at_ceiling(test: dict) -> bool:
    """Whether a test's (or the audit's strongest) bound sits at its ceiling: the leakage is at least that,
    and more runs would show more."""
    ceiling = test.get("ceiling")
    return ceiling is not None and test["epsilon_lb"] >= ceiling * (1 - 1e-9) and ceiling > 0


CEILING_NOTE = "at least the ceiling — more runs would show more"


def bound_text(test: dict, digits: int = 3) -> str:
    """``ε ≥ 1.23 at 95 % confidence (ceiling 10.2)``, flagged when the bound is at its ceiling."""
    ceiling = "unbounded" if test["ceiling"] is None else f"{test['ceiling']:.{digits}g}"
    note = f": {CEILING_NOTE}" if at_ceiling(test) else ""
    return f"ε ≥ {test['epsilon_lb']:.{digits}g} at {confidence_text(test['confidence'])} confidence " \
           f"(ceiling {ceiling}{note})"


def summary_line(report: dict) -> str:
    """The one line ``recaudit run`` prints: claim, strongest bound, verdict, utility."""
    audit, claim = report["audit"], report["claim"]
    name = " ".join(str(report["scenario"]["name"]).splitlines())  # a name cannot forge a line of output
    said = "no privacy claim, measured leakage" if claim["epsilon"] is None else \
        f"claim ε={claim['epsilon']:g} (δ={claim['delta']:g});"
    ceiling = "unbounded" if audit["ceiling"] is None else f"{audit['ceiling']:.4g}"
    note = f": {CEILING_NOTE}" if at_ceiling(audit) else ""
    power = ("; uninformative" if audit.get("uninformative") else "") + (
        f"; optimal test {audit['optimal_epsilon_lb']:.4f}" if audit.get("optimal_epsilon_lb") is not None else "")
    return (f"{name}: {said} ε_LB={audit['epsilon_lb']:.4f} at {confidence_text(audit['confidence'])} confidence "
            f"(ceiling {ceiling}{note}{power}); verdict {report['verdict']}; {utility_summary(report['utility'])}")


def claim_epsilon(epsilon) -> str:
    """A claim's ε for people: ``none`` for a claim that promises nothing (its ε is null in JSON)."""
    return "none" if epsilon is None else f"{epsilon:g}"


def verdict_sentence(report: dict) -> str:
    """The verdict in one sentence: the claim, the strongest bound at its confidence and ceiling, the verdict.

    Beside the bound, what the optimal test would show at this budget if the
    claim were tight; an uninformative strongest test is named as such, never
    as evidence.
    """
    claim, audit = report["claim"], report["audit"]
    delta = f", δ = {claim['delta']:g}" if claim["delta"] else ""
    tests = audit["tests_in_family"]
    best = "the best attack" if tests == 1 else f"the strongest of {tests} tests"
    if audit.get("uninformative"):
        shows = (f"{'its test is' if tests == 1 else f'all {tests} tests are'} uninformative (the best cut calls "
                 f"every run one world, or the scores rank nothing), so ε_LB = 0 is no evidence about the claim")
    else:
        shows = f"{best} shows {bound_text(audit)}"
    optimal = audit.get("optimal_epsilon_lb")
    power = (f"; the optimal test at this budget would show ε ≥ {optimal:.3g} if the claim were tight"
             if optimal is not None else "")
    if report["verdict"] == "no_claim":
        return (f"{report['scenario']['mechanism']['kind']} makes no privacy claim; "
                + (shows if audit.get("uninformative") else f"{best} measures leakage {bound_text(audit)}")
                + ": no_claim.")
    scope = " (its private ratings replaced)" if claim.get("neighbouring") == "replace_private" else ""
    return (f"{report['scenario']['mechanism']['kind']} claims ε = {claim['epsilon']:g}{delta} {claim['model']} DP "
            f"per {claim['unit']}{scope}; {shows}{power}: {report['verdict']}.")


def report_markdown(report: dict) -> str:
    """A short human summary of ``report``."""
    claim, audit, util = report["claim"], report["audit"], report["utility"]
    runs = (f"{audit['trials_per_world']:,} trials per world" if audit["trials_per_world"]
            else f"{audit['canaries']:,} canaries in one run")
    lines = [
        f"# Audit: {md(report['scenario']['name'])}",
        "",
        md(report["summary"]),
        "",
        f"**Verdict: {report['verdict']}** — "
        + ("the mechanism claims nothing: ε_LB is the leakage measured, and the p-values test \"no leakage "
           "at all\" (ε = 0)." if report["verdict"] == "no_claim" else
           "the claim is contradicted: the mechanism is provably less private than it says."
           if report["verdict"] == "violated" else
           "the claim is not contradicted by this audit (an audit can never prove privacy)."),
        "",
        *([md(report["scenario"]["description"]), ""] if report["scenario"].get("description") else []),
        f"- mechanism {md(report['scenario']['mechanism']['kind'])}; "
        + (f"claim ({claim['epsilon']:g}, {claim['delta']:g})-DP, {claim['model']} model, per {claim['unit']} "
           f"({claim['neighbouring']}), protecting the `{claim['view']}` view"
           if claim["epsilon"] is not None else "no privacy claim")
        + f"; the attacks read the `{audit['view']}` view"
        + (f" ({claim['note']})" if claim.get("note") else ""),
        f"- strongest test: ε_LB = **{audit['epsilon_lb']:.4f}** at {confidence_text(audit['confidence'])} "
        f"confidence (ceiling {_fmt(audit['ceiling'])}"
        + (f": {CEILING_NOTE}" if at_ceiling(audit) else "") + f", tightness {_fmt(audit['tightness'])}), {runs} "
        f"(design `{audit['design']}`)" + (" — **uninformative**" if audit.get("uninformative") else ""),
        f"- power: the optimal test at this budget would show ε_LB = {_fmt(audit.get('optimal_epsilon_lb'))} "
        f"(tightness {_fmt(audit.get('optimal_tightness'))}) if the claim were exactly tight",
        f"- family of {audit['tests_in_family']} test(s) at family-wise α = {audit['family_alpha']:g}: "
        f"{audit['correction']}",
        f"- utility: {utility_summary(util)}" + (" at the last release" if utility_curve(util) else "")
        + (f" (reference: {md(util['reference'])})" if util.get("reference") and utility_measured(util) else ""),
        "",
        "## Tests",
        "",
        "| test | claim ε | ε_LB | optimal ε_LB | confidence | ceiling | method | threshold | tightness | counts | "
        "Holm p | verdict |",
        "|---|---:|---:|---:|---:|---:|---|---|---:|---|---:|---|",
    ]
    for t in report["tests"]:
        verdict = t["verdict"] + (" (uninformative)" if t.get("uninformative") else "")
        lines.append(f"| {md(t['name'])} | {claim_epsilon(t['claim']['epsilon'])} | {epsilon_cell(t)} | "
                     f"{_fmt(t.get('optimal_epsilon_lb'))} | {confidence_text(t['confidence'])} | "
                     f"{_fmt(t['ceiling'])} | {t['method']} | {t['threshold_strategy']} | {_fmt(t['tightness'])} | "
                     f"{counts_text(t['counts'])} | {_fmt(t['holm_adjusted_p_value'])} | {verdict} |")
    reach = [line for line in map(reach_sentence, report["tests"]) if line]
    if reach:
        lines += ["", "Pair reach (white box: the ε the audited pair's largest difference implies, beside the claim):",
                  ""] + [f"- {md(line)}" for line in reach]
    lines += [
        "",
        "ε_LB is a lower bound on the mechanism's true ε; the ceiling is the largest bound this many runs could "
        f"show ({CEILING_NOTE} when a bound reaches it); optimal ε_LB is what the best test would show on the "
        "same runs if the claim were exactly tight (about its median). An *uninformative* test's cut calls every "
        "run one world (or its scores rank nothing): its ε_LB = 0 is no evidence. A verdict is `violated` when "
        "the Holm-adjusted p-value of \"the claim holds\" is below α.",
        "",
    ]
    curve = utility_curve(util)
    if curve:
        lines += ["## Utility over time", "", f"| time | users seen | {md(util['metric'])} |", "|---:|---:|---:|"]
        lines += [f"| {p['time']:g} | {p['users_seen']:,} | {_fmt(value)} |" for p, value in curve]
        lines.append("")
    w = report["world"]
    lines += [f"World: {md(population_text(report['scenario']['population']))}; {w['users_arrived']:,} users "
              f"arrived, {w['users_answered']:,} answered; {schedule_text(report)}; "
              f"{w['n_items']} items" + (f" in {w['n_item_clusters']} clusters" if w["n_item_clusters"] > 1 else "") + ".",
              "", f"Seed {report['seed']['root']}; schema version {report['schema_version']}.", ""]
    return "\n".join(lines)


def epsilon_cell(test: dict) -> str:
    """A test's ε_LB for a table cell: ``≥ 3.98 (at the ceiling)`` when it is at its ceiling."""
    return f"≥ {test['epsilon_lb']:.4f} (at the ceiling)" if at_ceiling(test) else f"{test['epsilon_lb']:.4f}"


def utility_curve(utility: dict) -> list[tuple[dict, float]]:
    """The utility of every release that has one, as (point, value); empty when no release is scored."""
    key = plots.curve_value(utility)
    return [(p, p[key]) for p in utility.get("curve", []) if p.get(key) is not None]


def utility_measured(utility: dict) -> bool:
    return bool(utility_curve(utility)) or utility.get("rmse") is not None \
        or utility.get("final_accuracy") is not None


def schedule_text(report: dict) -> str:
    """How the world ran, in words: the panel's rounds and its one release, or churn's releases."""
    world = report["world"]
    if world.get("panel_rounds") is not None:
        return (f"a panel: every user present from the start, {world['panel_rounds']} round(s) of answers, "
                f"{world['releases']} release(s) after the last round")
    churn = report["scenario"].get("churn") or {}
    every = f" (every {churn['release_interval']:g})" if churn.get("release_interval") else ""
    return f"users arriving and leaving until t = {world.get('horizon', 0):g}, {world['releases']} releases{every}"


def population_text(population: dict) -> str:
    """One line naming the population (its kind, and the file for real data)."""
    if population.get("path") is not None:
        return f"{population['kind']} from {population['path']}"
    return str(population["kind"])


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
    _plot_accuracy(report, out_dir / "accuracy.png")
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
    """Every trial's score as CSV (``test,trial,world,part,score``), on request (``--csv``, ``recaudit export``)."""
    import pandas as pd

    names = list(dict.fromkeys(t.name for t in tests))
    parts = ["selection", "evaluation", "canary"]
    columns: dict[str, list] = {"test": [], "trial": [], "world": [], "part": [], "score": []}

    def add(test, world, part, score):
        n = score.size
        for key, value in (("test", np.full(n, names.index(test.name))), ("trial", np.arange(n)),
                           ("world", world), ("part", part), ("score", score)):
            columns[key].append(value)

    for test in tests:
        if test.worlds is not None:  # one-run canaries
            add(test, test.worlds, np.full(test.scores.size, 2), test.scores)
            continue
        n = test.scores.shape[1]
        n_sel = [n - test.bound.n_neg, n - test.bound.n_pos] if test.bound.strategy == "split" else [0, 0]
        for world in (0, 1):
            add(test, np.full(n, world), (np.arange(n) >= n_sel[world]).astype(np.int64), test.scores[world])
    merged = {key: np.concatenate(value) for key, value in columns.items()}
    table = pd.DataFrame({"test": pd.Categorical.from_codes(merged["test"], names), "trial": merged["trial"],
                          "world": merged["world"], "part": pd.Categorical.from_codes(merged["part"], parts),
                          "score": merged["score"]})
    write_bytes(path, table.to_csv(index=False).encode())


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
                 f"ε = {claim_epsilon(report['claim']['epsilon'])}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


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


# ---------------------------------------------------------------- HTML

MAX_ROC_CURVES = 6


def _environment():
    """The Jinja2 environment of the report templates; autoescaping is on for every template."""
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(resources.files(__package__) / "templates")),
                              autoescape=True, undefined=jinja2.StrictUndefined, keep_trailing_newline=True,
                              trim_blocks=True, lstrip_blocks=True)


def render_html(template: str, **context) -> str:
    """Render one of the package's HTML templates (every value autoescaped)."""
    env = _environment()
    env.filters["num"] = _fmt
    env.filters["confidence"] = confidence_text
    env.filters["bound"] = epsilon_cell
    env.filters["counts"] = counts_text
    return env.get_template(template).render(**context)


def figure(title: str, png: bytes | None, caption: str) -> dict | None:
    """A figure for a template: the PNG embedded as a data URI."""
    if png is None:
        return None
    return {"title": title, "caption": caption, "src": "data:image/png;base64," + base64.b64encode(png).decode()}


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
        figure("Attack ROC", plots.roc_figure(roc_curves(report, tests), claim),
               f"Each test's true against false positive rate over all its runs ({shown} strongest of "
               f"{len(report['tests'])} tests), log–log. "
               + (f"No ({claim['epsilon']:g}, {claim['delta']:g})-DP mechanism can put a point above the black "
                  "boundary; points that do, beyond sampling error, contradict the claim. " if claimed else
                  "The mechanism claims nothing (no claimed boundary). ")
               + "Dashed: the boundary at each test's ε_LB."),
        None if not claimed else figure("ε lower bounds against the claim",
               plots.epsilon_figure([{"label": t["name"], "claim": t["claim"]["epsilon"],
                                      "epsilon_lb": t["epsilon_lb"], "ceiling": t["ceiling"],
                                      "confidence": t["confidence"], "verdict": t["verdict"]}
                                     for t in report["tests"]], "ε_LB per test"),
               "Each test's lower bound (dot) with its one-sided interval [ε_LB, ∞) drawn up to the ceiling "
               "(the largest bound these runs could show). Above the diagonal: the claim is exceeded."),
        figure("The world over time", plots.timeline_figure(report["world"], report["utility"]),
               "Users present in the churn world and the server's releases (grey lines)"
               + (f", with the {report['utility']['metric']} of each release." if utility_curve(report["utility"])
                  else ".")),
    ]
    return [f for f in figures if f is not None]


def report_html(report: dict, tests) -> str:
    """The self-contained HTML report of one run (figures embedded)."""
    return render_html("report.html", report=report, figures=report_figures(report, tests),
                       population=population_text(report["scenario"]["population"]),
                       utility=utility_summary(report["utility"]), curve=utility_curve(report["utility"]),
                       measured=utility_measured(report["utility"]), schedule=schedule_text(report),
                       ceiling_note=CEILING_NOTE, reach=[line for line in map(reach_sentence, report["tests"]) if line])


def schema() -> dict:
    """The published JSON Schema of ``report.json``."""
    import json

    return json.loads((resources.files(__package__) / SCHEMA_FILE).read_text())
