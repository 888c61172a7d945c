"""The words and numbers of reports: Markdown escaping, the bound and verdict sentences, report.md."""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ..utility import utility_summary
from . import plots
from .bound_words import (MODEL_WORDS, estimate_cell, estimate_text, method_text, optimal_cell,  # noqa: F401
                          uninformative_reason)


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
    and more runs would show more (the estimate's flag, ``recaudit.audits.stats.estimators.at_ceiling``)."""
    if "at_ceiling" in test:
        return bool(test["at_ceiling"])
    ceiling = test.get("ceiling")
    return ceiling is not None and test["epsilon_lb"] >= ceiling * (1 - 1e-9) and ceiling > 0


CEILING_NOTE = "at least the ceiling — more runs would show more"


def bound_text(test: dict, digits: int = 3) -> str:
    """``ε ≥ 1.23 at 95 % confidence (ceiling 10.2)``, flagged when the bound is at its ceiling; a Gaussian-DP
    bound's ceiling says it is the conversion of the largest μ the runs could show, not a count's limit."""
    ceiling = "unbounded" if test["ceiling"] is None else f"{test['ceiling']:.{digits}g}"
    if test.get("bound_method", test.get("method")) == "gdp" and test.get("mu_ceiling") is not None:
        ceiling += (f", the Gaussian-DP ε of μ = {test['mu_ceiling']:.{digits}g}, the most these runs could show "
                    "under the Gaussian curve the mechanism guarantees")
    note = f": {CEILING_NOTE}" if at_ceiling(test) else ""
    return f"ε ≥ {test['epsilon_lb']:.{digits}g} at {confidence_text(test['confidence'])} confidence " \
           f"(ceiling {ceiling}{note})"


def summary_line(report: dict) -> str:
    """The one line ``recaudit run`` prints: claim, strongest bound, verdict, utility."""
    audit, claim = report["audit"], report["claim"]
    name = " ".join(str(report["scenario"]["name"]).splitlines())  # a name cannot forge a line of output
    said = "no privacy claim, measured leakage" if claim["epsilon"] is None else \
        f"claim ε={claim_epsilon(claim['epsilon'])} (δ={claim_delta(claim['delta'])});"
    ceiling = "unbounded" if audit["ceiling"] is None else f"{audit['ceiling']:.4g}"
    note = f": {CEILING_NOTE}" if at_ceiling(audit) else ""
    power = ("; uninformative" if audit.get("uninformative") else "") + (
        f"; optimal test {audit['optimal_epsilon_lb']:.4f}" if audit.get("optimal_epsilon_lb") is not None else "") + (
        f"; {MODEL_WORDS.get(audit['valid_for'], 'model')} estimate {audit['epsilon_estimate']:.4f}, not a bound"
        if audit.get("epsilon_estimate") is not None else "")
    return (f"{name}: {said} ε_LB={audit['epsilon_lb']:.4f} at {confidence_text(audit['confidence'])} confidence "
            f"(ceiling {ceiling}{note}{power}); verdict {report['verdict']}; {utility_summary(report['utility'])}")


def claim_epsilon(epsilon) -> str:
    """A claim's ε for people, to 4 significant digits (an accountant's 2.00002 reads 2; report.json keeps every
    digit); ``none`` for a claim that promises nothing (its ε is null in JSON)."""
    return "none" if epsilon is None else f"{epsilon:.4g}"


def claim_delta(delta) -> str:
    """A claim's δ for people, to 4 significant digits (report.json keeps every digit)."""
    return f"{delta:.4g}"


#: p-values below this print as ``< 1e-10``: the computed value is only an upper bound down there (p-values are
#: floored at ``stats.pvalues.P_FLOOR``, Holm multiplies them), and no test's α is anywhere near it
P_SHOWN_FLOOR = 1e-10


def p_text(p) -> str:
    """A p-value for people: 4 significant digits, ``< 1e-10`` below that, ``n/a`` when there is none."""
    if p is None:
        return "n/a"
    return f"< {P_SHOWN_FLOOR:.0e}" if p < P_SHOWN_FLOOR else f"{p:.4g}"


def verdict_sentence(report: dict) -> str:
    """The verdict in one sentence: the claim, the strongest bound at its confidence and ceiling, the verdict.

    Beside the bound, what the optimal test would show at this budget if the
    claim were tight; an uninformative strongest test is named as such, never
    as evidence.
    """
    claim, audit = report["claim"], report["audit"]
    delta = f", δ = {claim_delta(claim['delta'])}" if claim["delta"] else ""
    tests = audit["tests_in_family"]
    best = "the best attack" if tests == 1 else f"the strongest of {tests} tests"
    if audit.get("uninformative"):
        shows = (f"{'its test is' if tests == 1 else f'the strongest of {tests} tests is'} uninformative "
                 f"({uninformative_reason(audit)}), so its ε_LB = {audit['epsilon_lb']:.3g} is no evidence about "
                 "the claim")
    else:
        shows = f"{best} shows {bound_text(audit)}"
    estimate = estimate_text(audit)
    shows += f" ({estimate})" if estimate else ""
    optimal = audit.get("optimal_epsilon_lb")
    power = (f"; the optimal test at this budget would show ε ≥ {optimal:.3g} if the claim were tight"
             if optimal is not None else "")
    reachable = audit.get("optimal_epsilon_lb_reachable")
    if reachable is not None:
        power += f" ({reachable:.3g} at the ε the audited pair can reach)"
    if report["verdict"] == "violated" and audit.get("valid_for") == "a Gaussian-DP mechanism" \
            and not audit.get("is_bound", True) and audit["epsilon_lb"] <= (claim["epsilon"] or 0):
        power += ("; the verdict tests the claim's Gaussian curve: μ_LB exceeds the claimed μ, which holds "
                  "whatever the mechanism's distribution")
    if report["verdict"] == "no_claim":
        return (f"{report['scenario']['mechanism']['kind']} makes no privacy claim; "
                + (shows if audit.get("uninformative") else f"{best} measures leakage {bound_text(audit)}")
                + ": no_claim.")
    scope = " (its private ratings replaced)" if claim.get("neighbouring") == "replace_private" else ""
    return (f"{report['scenario']['mechanism']['kind']} claims ε = {claim_epsilon(claim['epsilon'])}{delta} "
            f"{claim['model']} DP per {claim['unit']}{scope}; {shows}{power}: {report['verdict']}.")


def report_markdown(report: dict) -> str:
    """A short human summary of ``report``."""
    claim, audit, util = report["claim"], report["audit"], report["utility"]
    runs = (f"{audit['trials_per_world']:,} trials per world" if audit["trials_per_world"]
            else f"{audit['canaries']:,} canaries in one run")
    if audit.get("runs_per_world_used") is not None:
        runs = (f"{audit['runs_per_world_used']:,} of a budget of {audit['trials_per_world']:,} runs per world "
                "(sequential)")
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
        + (f"claim ({claim_epsilon(claim['epsilon'])}, {claim_delta(claim['delta'])})-DP, {claim['model']} model, "
           f"per {claim['unit']} ({claim['neighbouring']}), protecting the `{claim['view']}` view"
           if claim["epsilon"] is not None else "no privacy claim")
        + f"; {views_text(report)}"
        + (f"; the audited pair: {audit['pair']['note']}" if audit.get("pair") else "")
        + (f" ({claim['note']})" if claim.get("note") else ""),
        f"- strongest test: ε_LB = **{audit['epsilon_lb']:.4f}** at {confidence_text(audit['confidence'])} "
        f"confidence (ceiling {_fmt(audit['ceiling'])}"
        + (f": {CEILING_NOTE}" if at_ceiling(audit) else "") + f", tightness {_fmt(audit['tightness'])}), {runs} "
        f"(design `{audit['design']}`)" + (f" — **uninformative**: {uninformative_reason(audit)}"
                                           if audit.get("uninformative") else "")
        + (f"; {estimate_text(audit)}" if estimate_text(audit) else ""),
        (f"- power: the optimal test at this budget would show ε_LB = {_fmt(audit.get('optimal_epsilon_lb'))} "
         f"(tightness {_fmt(audit.get('optimal_tightness'))}) if the claim were exactly tight"
         + (f", and {audit['optimal_epsilon_lb_reachable']:.4g} if the mechanism were exactly as private as the "
            "audited pair reaches (ε_pair, below the claim)" if audit.get("optimal_epsilon_lb_reachable") is not None
            else "")
         if audit.get("optimal_epsilon_lb") is not None else "- power: no claim to be tight against"),
        f"- family of {audit['tests_in_family']} test(s) at family-wise α = {audit['family_alpha']:g}: "
        f"{audit['correction']}",
        f"- utility: {utility_summary(util)}" + (" at the last release" if utility_curve(util) and
                                                  not utility_summary(util).endswith("at the last release") else "")
        + (f" (reference: {md(util['reference'])})" if util.get("reference") and utility_measured(util) else ""),
        "",
        "## Tests",
        "",
        *markdown_table(report["tests"], TEST_COLUMNS),
    ]
    sequential = [line for line in map(sequential_sentence, report["tests"]) if line]
    if sequential:
        lines += ["", "Sequential audit (anytime-valid e-process; each test stops on its own, the audit when one "
                  "shows a violation or all have stopped):", ""] + [f"- {md(line)}" for line in sequential]
    reach = [line for line in map(reach_sentence, report["tests"]) if line]
    if reach:
        lines += ["", "Pair reach (white box: the ε the audited pair's largest difference implies, beside the claim):",
                  ""] + [f"- {md(line)}" for line in reach]
    lines += trainer_lines(report)
    lines += [
        "",
        "ε_LB is a lower bound on the mechanism's true ε, valid whatever its output distribution (or under a model "
        "the mechanism guarantees by construction); an *estimate* rests on a model the mechanism does not "
        "guarantee (its column says which) and is never a lower bound on the true ε. The ceiling is the largest "
        f"bound this many runs could show ({CEILING_NOTE} when a bound reaches it); optimal ε_LB is what the best "
        "test would show on the same runs if the claim were exactly tight (about its median), and, when the "
        "audited pair cannot reach the claim, at the ε it reaches. A test is *uninformative* when its cut calls "
        "every run one world (or its scores rank nothing), or its ceiling is 0 or below the claim: its ε_LB is no "
        "evidence about the claim. A verdict is `violated` when the Holm-adjusted p-value of \"the claim holds\" "
        "is below α (for Gaussian-DP estimators, of the claim's μ, which a μ lower bound tests for any mechanism).",
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
              f"{w['n_items']} items" + (f" in {w['n_item_clusters']} clusters" if w["n_item_clusters"] > 1 else "")
              + ".",
              "", f"Seed {report['seed']['root']}; schema version {report['schema_version']}.", ""]
    return "\n".join(lines)


@dataclass(frozen=True)
class Column:
    """One column of a report table: its header, the row's value (None: nothing to show, ``n/a``) and how the
    value reads; ``num`` right-aligns it, ``code`` sets it as an identifier (HTML ``<code>``), ``user`` marks
    text a user chose (escaped in Markdown; HTML escapes everything), ``nowrap`` keeps a short cell on one line
    (``< 1e-10`` is not cut after its hyphen)."""

    header: str
    value: Callable[[dict], object]
    text: Callable[[object], str] = str
    num: bool = False
    code: bool = False
    user: bool = False
    nowrap: bool = False

    def cell(self, row: dict) -> str:
        value = self.value(row)
        return "n/a" if value is None else self.text(value)


def shown_columns(rows: list[dict], columns: list[Column]) -> list[Column]:
    """``columns`` without those that are empty (``n/a``) in every row: a column of n/a says nothing."""
    return [c for c in columns if any(c.value(r) is not None for r in rows)]


def markdown_table(rows: list[dict], columns: list[Column]) -> list[str]:
    """The Markdown lines of a table of ``rows`` (columns empty in every row left out; user strings escaped)."""
    columns = shown_columns(rows, columns)
    return ["| " + " | ".join(c.header for c in columns) + " |",
            "|" + "".join("---:|" if c.num else "---|" for c in columns)] + [
        "| " + " | ".join(md(c.cell(r)) if c.user else c.cell(r) for c in columns) + " |" for r in rows]


def html_table(rows: list[dict], columns: list[Column]) -> dict:
    """What the HTML templates need for a table of ``rows``: the columns shown and each row's cells (text, to
    be autoescaped) with the row's verdict as its class."""
    columns = shown_columns(rows, columns)
    return {"columns": columns, "rows": [(r.get("verdict", ""), [c.cell(r) for c in columns]) for r in rows]}


def _verdict_cell(row: dict) -> str:
    return row["verdict"] + (" (uninformative)" if row.get("uninformative") else "")


#: the columns of a report's table of tests (Markdown and HTML alike)
TEST_COLUMNS = [
    Column("test", lambda t: t["name"], user=True),
    Column("claim ε", lambda t: claim_epsilon(t["claim"]["epsilon"]), num=True),
    Column("ε_LB (bound)", lambda t: epsilon_cell(t), num=True),
    Column("estimate (not a bound)", lambda t: estimate_cell(t), num=True),
    Column("optimal ε_LB", lambda t: None if t.get("optimal_epsilon_lb") is None else optimal_cell(t), num=True),
    Column("confidence", lambda t: t["confidence"], confidence_text, num=True),
    Column("ceiling", lambda t: t["ceiling"], _fmt, num=True),
    Column("method", lambda t: method_text(t)),
    Column("threshold", lambda t: t["threshold_strategy"]),
    Column("tightness", lambda t: t["tightness"], _fmt, num=True),
    Column("counts", lambda t: counts_text(t["counts"])),
    Column("p-value", lambda t: t.get("p_value"), p_text, num=True, nowrap=True),
    Column("Holm p", lambda t: t.get("holm_adjusted_p_value"), p_text, num=True, nowrap=True),
    Column("verdict", _verdict_cell),
]


def views_text(report: dict) -> str:
    """Which view each attack read (the scenario's ``audit.view``, or an attack's own ``view``), in words."""
    attacks = report["scenario"].get("attack")
    attacks = attacks if isinstance(attacks, list) else [attacks] if attacks else []
    default = report["audit"]["view"]
    views = [(a.get("kind", "?"), a.get("view") or default) for a in attacks if isinstance(a, dict)]
    if not views or len({v for _, v in views}) == 1:
        return f"the attacks read the `{views[0][1] if views else default}` view"
    return "the attacks read " + ", ".join(f"`{v}` ({md(k)})" for k, v in views)


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
    if world.get("training_runs") is not None:
        return (f"one training run on {world['users_arrived']:,} users and {world['answers']:,} ratings "
                f"({world['canaries']:,} canaries each in with probability ½)")
    if world.get("panel_rounds") is not None:
        return (f"a panel: every user present from the start, {world['panel_rounds']} round(s) of answers, "
                f"{world['releases']} release(s) after the last round")
    churn = report["scenario"].get("churn") or {}
    every = f" (every {churn['release_interval']:g})" if churn.get("release_interval") else ""
    return f"users arriving and leaving until t = {world.get('horizon', 0):g}, {world['releases']} releases{every}"


def trainer_lines(report: dict) -> list[str]:
    """The trainer section of a report (``report["trainer"]``): the canaries, AUC and TPR at low FPR per attack,
    ε_LB per one-run estimator with what it assumes, the claim, training time and the audit's overhead."""
    t = report.get("trainer")
    if not t:
        return []
    c, claim = t["canaries"], report["claim"]
    how = (f"isolated: each rates {c['ratings_per_canary']} item(s) of its own ({c['reserved_items']:,} reserved "
           "items no one else rates)" if c["kind"] == "isolated" else
           f"resampled: real users of the population's {c['population_users']:,}")
    cont = t.get("continual")
    trained = (f"retrained at each of {cont['releases']} releases (t = "
               f"{', '.join(f'{x:g}' for x in cont['release_times'])}) on the users present "
               f"({', '.join(f'{u:,}' for u in cont['training_users'])}; the last" if cont else "trained once on")
    lines = ["", "## Trainer audit", "",
             f"- trainer `{md(t.get('fit', '?'))}`, {trained} {c['training_users']:,} users"
             f"{', ' if cont else ' ('}{c['training_ratings']:,} ratings) in {t['train_seconds']:.3g} s; the whole "
             "audit took "
             f"{t['audit_seconds']:.3g} s ({_fmt(t['overhead'])}x the training run; seed check "
             f"{t['seed_check_seconds']:.3g} s, data {t['data_seconds']:.3g} s, attacks {t['attack_seconds']:.3g} s)",
             f"- canaries: {c['m']:,} {how}; {c['members']:,} in by a fair coin"
             + (f"; each scored by its mean over the releases it was present at ({cont['unscored_canaries']:,} "
                "present at none left out)" if cont else ""),
             "- claim: " + (f"({claim['epsilon']:g}, {claim['delta']:g})-DP, {claim['model']}, per {claim['unit']} "
                            f"({claim['neighbouring']})" if claim["epsilon"] is not None else
                            "none: ε_LB is a measurement"),
             "", "| attack | AUC | TPR at 1 % FPR | TPR at 0.1 % FPR |", "|---|---:|---:|---:|"]
    for name, r in t["attacks"].items():
        lines.append(f"| {md(name)} | {_fmt(r['auc'])} | {_fmt(r['tpr_at_fpr_0.01'])} | "
                     f"{_fmt(r['tpr_at_fpr_0.001'])} |")
    lines += ["", "AUC and TPR are point estimates (as membership-inference papers report them); ε_LB is the bound. "
                  f"ε_LB per one-run estimator (each at α = {t['alpha_per_test']:.3g}):", "",
              "| estimator | assumes | " + " | ".join(md(a) for a in t["attacks"]) + " |",
              "|---|---|" + "---:|" * len(t["attacks"])]
    for e in t["estimators"]:
        kind = "" if e["bound"] else f" (its model's figure an estimate; bound: {e.get('bound_method', 'one-run')})"
        guess = e.get("epsilon_estimate") or {}
        lines.append(f"| {e['estimator']}{kind} | {md(e['assumes'])} | "
                     + " | ".join(_fmt(e["epsilon_lb"][a]) + (" (uninformative)" if e["uninformative"][a] else "")
                                  + (f"; estimate {guess[a]:.4g}" if guess.get(a) is not None else "")
                                  for a in t["attacks"]) + " |")
    return lines


def population_text(population: dict) -> str:
    """One line naming the population (its kind, and the file for real data)."""
    if population.get("path") is not None:
        return f"{population['kind']} from {population['path']}"
    return str(population["kind"])


def reach_sentence(test: dict) -> str | None:
    """One line on the audited pair's reach against the claim (white-box tests), or None."""
    r = test.get("pair_reach")
    if not r or r.get("epsilon_pair") is None:
        return None
    how = (f"μ_pair = {r['mu_pair']:.4g} (claim's μ {_fmt(r.get('mu_claim'))})" if r["law"] == "gaussian"
           else f"at most μ = {r['mu_step']:.4g} per step, sampled at q = {r['sampling_rate']:g} over "
                f"{r['steps']} steps" if r["law"] == "subsampled_gaussian" else "Laplace, pure ε")
    loose = (f"; the claim is loose by {r['looseness']:.3g}x for this pair" if r.get("looseness") and
             r["looseness"] > 1.05 else "")
    return (f"{test['name']}: the pair reaches ε = {r['epsilon_pair']:.4g} ({how}) against the claimed "
            f"{claim_epsilon(test['claim']['epsilon'])}{loose}; ε_LB / ε_pair = {_fmt(r.get('tightness_vs_pair'))}")


def sequential_sentence(test: dict) -> str | None:
    """One line on a sequential test: the runs it drew and why it stopped, or None for the fixed design."""
    q = test.get("sequential")
    if not q:
        return None
    return (f"{test['name']}: {q['runs_per_world']:,} of {q['budget']:,} runs per world (the first "
            f"{q['first_batch']:,} only chose the cut); stopped — {q['explanation']}; the claim's e-value "
            f"{q['e_value']:.4g} (largest {q['max_e_value']:.4g}; 1/α = {1 / test['alpha']:.4g})")


def accounting_note(scenario) -> dict:
    """``requested_epsilon`` and a ``note`` when the accountant's ε for one answer exceeds the mechanism's ε."""
    from recaudit.mechanisms import MECHANISMS
    from recaudit.mechanisms.accounting import DEFAULT_VALUE_DISCRETIZATION

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
