"""Runs a scenario: the world, the audit design's scores, the estimators' bounds, the verdict.

The data path: ``language.scenario`` builds the parts; ``recaudit.simulator.engine`` runs the
world (with the design's canaries in it, if any); the design
(``recaudit.audits.designs``) produces attack scores, in blocks over an executor
with progress saved by ``store``; the estimator (``recaudit.audits.stats.estimators``)
turns each test's scores into an :class:`Estimate`; Holm's correction gives
the verdicts; ``reports.report`` writes them.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

from recaudit.attacks import ATTACKS
from recaudit.mechanisms import MECHANISMS, PrivacyClaim
from recaudit.core.errors import BadInput
from recaudit.simulator.engine import run_protocol
from recaudit.simulator.targets import TargetPair
from recaudit.audits.designs.pairs import pair_relation, policy_for
from recaudit.simulator.populations import POPULATIONS
from recaudit.simulator.ratings import ratings_limit
from recaudit.simulator.seeds import child_seed, stream
from recaudit.simulator.transcript import Recorder

from .designs import DESIGNS, AuditJob
from .designs.base import CANARIES, TargetScores, saved_scores
from .designs.trainer_canaries import train_once, trainer_summary, trainer_utility, trainer_world
from .designs.trainer_churn import retrain_under_churn
from .executors import open_executor
from .language.limits import GIB
from .language.scenario import Scenario, build, build_estimator, build_schedule, trainer_users
from .progress_log import beating
from .store import Progress, hold_folder, remove_owned
from .stats.coded import CodedScores
from .stats.pvalues import holm_adjust
from .stats.reach import gaussian_by_construction, pair_reach, sampling_of, statistic_laws  # noqa: F401
from .stats.sequential import SequentialRule
from .stats.estimators import Estimate
from .utility import measure_utility, presence_timeline, recording_needs


class ScoredTest(NamedTuple):
    """One test before it is judged: the target's pair, one attack's scores (and canaries' worlds)."""

    pair: TargetPair
    scores: np.ndarray
    worlds: np.ndarray | None
    attack: str


@dataclass
class TestOutcome:
    """One test of the claim: a target, an attack, its estimate and its corrected verdict."""

    target: int
    attack: str
    pair: TargetPair
    estimate: Estimate
    #: (2, trials) for distinguishing (coded when few-valued); (canaries,) for one-run
    scores: "np.ndarray | CodedScores"
    worlds: np.ndarray | None = None  # one-run: each canary's world
    adjusted_p_value: float = float("nan")
    verdict: str = ""
    #: how far the pair really moves the white-box statistics (``recaudit.audits.stats.reach``), when measured
    reach: dict | None = None

    __test__ = False  # not a pytest class

    @property
    def bound(self):
        """The underlying statistical result (``BoundResult`` or ``OneRunResult``)."""
        return self.estimate.bound

    @property
    def p_value(self) -> float:
        return self.estimate.p_value

    @property
    def name(self) -> str:
        return f"target {self.target} / {self.attack}" if self.worlds is None else f"canaries / {self.attack}"


@dataclass
class AuditResult:
    """Everything a report needs from one run."""

    scenario: Scenario
    claim: PrivacyClaim
    design: str
    tests: list[TestOutcome]
    verdict: str
    utility: dict
    world: dict
    timing: dict = field(default_factory=dict)
    packages: dict | None = None  # the versions that ran it, when rebuilt from a run folder (None: these)
    started: float | None = None  # when the command that ran it started (epoch seconds); None when rebuilt
    #: the audited pair's relation to the claim (``recaudit.audits.designs.pairs.pair_relation``); None: not recorded
    pair: dict | None = None
    #: a trainer's audit: its canaries, AUC and TPR at low FPR per attack, ε_LB per estimator, training time
    trainer: dict | None = None

    @property
    def strongest(self) -> TestOutcome:
        """The test with the largest epsilon lower bound."""
        return max(self.tests, key=lambda t: t.estimate.epsilon_lb)


def run_scenario(scenario: Scenario, out_dir: Path | None = None, resume: bool = False,
                 executor_type: str | None = None, workers: int | None = None,
                 report: Callable[[str], None] = lambda _: None, started: float | None = None) -> AuditResult:
    """Simulate the world, audit the mechanism's claim, measure utility.

    ``out_dir`` (held exclusively for the run) receives each trial block as it
    finishes; the executor is reached before any simulation, so a bad address
    or folder fails at once. ``started``: when the command began (its timing
    counts from there; default now).
    """
    ex = scenario.executor
    started = time.time() if started is None else started
    with beating(report), hold_folder(out_dir), open_executor(executor_type or ex.type, workers or ex.workers,
                                         ex.address, ex.max_in_flight) as executor:
        return _run(scenario, out_dir, resume, executor_type or ex.type, executor, report, started)


def audit_job(scenario: Scenario) -> tuple[AuditJob, object, np.random.SeedSequence]:
    """The scenario's audit job (parts built, seeds derived), its neighbour policy and the world's seed."""
    root = np.random.SeedSequence(scenario.seed)
    with ratings_limit(scenario.limits.ratings_gb * GIB):
        population = build(scenario.population, POPULATIONS, getattr(scenario, "_base_dir", None))
    mechanism = build(scenario.mechanism, MECHANISMS)
    attack_configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    churn = build_schedule(scenario, mechanism, population)
    catalogue = population.catalogue(stream(root, "catalogue"))
    cfg = scenario.audit
    claim = mechanism.claim_for(churn.queries_per_user)
    policy = policy_for(claim, mechanism, cfg.pair)
    world_seed = child_seed(root, "world")
    entropy = int.from_bytes(child_seed(root, "audit").generate_state(4).tobytes(), "little")
    world_entropy = int.from_bytes(world_seed.generate_state(4).tobytes(), "little")
    view = cfg.view or claim.view
    stop_rule = None
    if getattr(cfg, "sequential", False):  # every test at alpha / tests, as judge() bounds them
        stop_rule = SequentialRule(claim.epsilon if claim.promises else 0.0, claim.delta,
                                   cfg.alpha / (cfg.targets * len(attack_configs)), cfg.trials, cfg.block_size)
    job = AuditJob(mechanism, population, catalogue, churn, tuple(build(c, ATTACKS) for c in attack_configs),
                   claim, view, churn.queries_per_user, entropy, world_entropy, cfg.insert_tick or 1,
                   tuple(getattr(c, "view", None) or view for c in attack_configs), stop_rule)
    return job, policy, world_seed


def measure_world(scenario: Scenario) -> dict:
    """The scenario's world alone, no audit and no canaries: its utility (``recaudit.audits.utility``)."""
    job, _, world_seed = audit_job(scenario)
    recorder = Recorder(answers=False, **recording_needs(job.mechanism, job.population, job.view))
    transcript = run_protocol(job.mechanism, job.population, job.catalogue, job.churn, world_seed, recorder=recorder)
    return measure_utility(job.mechanism, job.population, job.catalogue, transcript)


def _run(scenario: Scenario, out_dir: Path | None, resume: bool, executor_type: str, executor,
         report: Callable[[str], None], started: float) -> AuditResult:
    begun = time.time()
    mechanism = build(scenario.mechanism, MECHANISMS, getattr(scenario, "_base_dir", None))
    if getattr(mechanism, "trains", False):
        if getattr(scenario, "_fit", None) is not None:  # a trainer given from Python as the function itself
            mechanism._function = scenario._fit
        return _run_trainer(scenario, mechanism, out_dir, report, started)
    job, policy, world_seed = audit_job(scenario)
    mechanism, population, catalogue, churn, claim = job.mechanism, job.population, job.catalogue, job.churn, job.claim
    attack_configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    cfg = scenario.audit
    design = DESIGNS[cfg.design_name]()
    estimator = build_estimator(cfg)

    inserted = design.inserts(job, policy, cfg.trials)
    report(f"simulating the world until t={churn.horizon:g}"
           + (f" with {len(inserted)} canaries in it" if inserted is not None else ""))
    recorder = _ProgressRecorder(report, churn.horizon, **recording_needs(mechanism, population, job.view),
                                 statistics="statistics" in job.attack_views, watched="messages" in job.attack_views)
    transcript = run_protocol(mechanism, population, catalogue, churn, world_seed, recorder=recorder,
                              inserted=inserted)
    utility = measure_utility(mechanism, population, catalogue, transcript)
    world_seconds = time.time() - begun

    progress = Progress(out_dir / "progress" if out_dir else None, {"fingerprint": scenario.fingerprint()}, resume,
                        warn=report)
    if out_dir and not resume:  # the folder's old report no longer matches its score store
        remove_owned(out_dir / "report.json")
    report(f"design {design.kind}: {cfg.trials} {'canaries' if design.produces == 'canaries' else 'trials per world'}"
           f" ({executor_type})")
    output = design.scores(job, policy, cfg.targets, cfg.trials, cfg.block_size, transcript, executor,
                           progress, report)
    audit_seconds = time.time() - begun - world_seconds

    labels = [attack_label(c) for c in attack_configs]
    reach = [None if run.reach is None else run.reach[a] for run in output.runs for a in range(len(attack_configs))]
    laws = statistic_laws(mechanism)
    holds = [gaussian_by_construction(laws, () if run.reach is None else run.reach)
             for run in output.runs for _ in attack_configs]
    tests = judge([ScoredTest(pair, run.scores[a], run.worlds, labels[a])
                   for pair, run in zip(output.pairs, output.runs) for a in range(len(attack_configs))],
                  estimator, claim, cfg.alpha, holds)
    for test, measured in zip(tests, reach):
        if measured is not None and len(laws) == 1:
            test.reach = pair_reach(next(iter(laws)), measured, claim, test.estimate.epsilon_lb, sampling_of(mechanism))
    verdict = overall_verdict(tests, claim)

    world = {"users_arrived": int(transcript.n_users), "users_answered": int(transcript.n_answered_users),
             "answers": int(transcript.answer_user.size), "canaries": int(transcript.inserted.size),
             "releases": len(transcript.releases), "n_items": catalogue.n_items,
             "n_item_clusters": catalogue.n_item_clusters,
             "horizon": float(churn.horizon), "timeline": presence_timeline(transcript, churn.horizon),
             "release_times": [float(r.time) for r in transcript.releases]}
    if scenario.panel is not None:  # a cohort answering rounds: its presence over time is one step, not drawn
        world = {k: v for k, v in world.items() if k != "timeline"} | {"panel_rounds": int(churn.rounds)}
    timing = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "world_seconds": round(world_seconds, 3), "audit_seconds": round(audit_seconds, 3),
              "total_seconds": round(time.time() - started, 3)}
    return AuditResult(scenario, claim, design.kind, tests, verdict, utility, world, timing, started=started,
                       pair=pair_relation(claim, policy))


def _run_trainer(scenario: Scenario, mechanism, out_dir: Path | None, report: Callable[[str], None],
                 started: float) -> AuditResult:
    """A trainer's audit: canaries in one training run, every canary scored, the one-run estimators' bounds."""
    begun = time.time()
    root = np.random.SeedSequence(scenario.seed)
    with ratings_limit(scenario.limits.ratings_gb * GIB):
        population = build(scenario.population, POPULATIONS, getattr(scenario, "_base_dir", None))
    catalogue = population.catalogue(stream(root, "catalogue"))
    cfg = scenario.audit
    claim = mechanism.claim
    attack_configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    view = cfg.view or "releases"
    entropy = int.from_bytes(child_seed(root, "audit").generate_state(4).tobytes(), "little")
    job = AuditJob(mechanism, population, catalogue, None, tuple(build(c, ATTACKS) for c in attack_configs), claim,
                   view, 1, entropy, entropy, 1, tuple(getattr(c, "view", None) or view for c in attack_configs))
    fit_name = getattr(mechanism, "fit_name", mechanism.kind)
    users, churn = trainer_users(scenario, population), scenario.churn if "churn" in scenario.model_fields_set else None
    report(f"design one_run: {cfg.trials} {cfg.canary} canaries in "
           f"{'one training run' if churn is None else 'a training run at every release'} of {fit_name}")
    run = (train_once(job, users, cfg.trials, cfg.canary, cfg.canary_ratings, report, cfg.reference_runs)
           if churn is None else retrain_under_churn(job, churn, users, cfg.trials, cfg.canary, cfg.canary_ratings,
                                                     report))
    labels = [attack_label(c) for c in attack_configs]
    if run.calibrated is not None:  # each attack's calibrated scores are one more test
        run.scores, labels = np.concatenate([run.scores, run.calibrated]), labels + [f"{a} (calibrated)"
                                                                                     for a in labels]
    progress = Progress(out_dir / "progress" if out_dir else None, {"fingerprint": scenario.fingerprint()}, False,
                        warn=report)
    worlds = run.canaries.worlds
    progress.save_arrays(CANARIES, TargetScores(run.scores, worlds).to_arrays())
    pair = run.canaries.pair()
    estimator = build_estimator(cfg)
    tests = judge([ScoredTest(pair, run.scores[a], worlds, labels[a]) for a in range(len(labels))], estimator,
                  claim, cfg.alpha)
    verdict = overall_verdict(tests, claim)
    audit_seconds = time.time() - begun
    world = trainer_world(run, catalogue, 0.0 if churn is None else churn.horizon)
    timing = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "world_seconds": round(run.build_seconds, 3), "audit_seconds": round(audit_seconds, 3),
              "total_seconds": round(time.time() - started, 3)}
    summary = trainer_summary(run, labels, claim, cfg.alpha, len(tests), cfg.canary, cfg.canary_ratings,
                              audit_seconds)
    return AuditResult(scenario, claim, "one_run", tests, verdict, trainer_utility(run), world, timing,
                       started=started, trainer=summary | {"fit": fit_name})


def attack_label(config) -> str:
    """An attack's name in the report: its kind, and the view it reads when the scenario sets one."""
    view = getattr(config, "view", None)
    return config.kind if view is None else f"{config.kind} ({view})"


def judge(runs: list[ScoredTest], estimator, claim: PrivacyClaim, alpha: float,
          model_holds: list[bool] | None = None) -> list[TestOutcome]:
    """Bound every test at alpha / tests and give Holm-corrected verdicts.

    ``model_holds[i]``: test ``i``'s scores guarantee the estimator's assumption (``gaussian_by_construction``).

    Targets are numbered by the order their pairs first appear. A claim that
    promises nothing (``PrivacyClaim.none()``) gets the verdict ``no_claim``:
    its ε_LB is measured leakage, and its p-values are those of "no leakage
    at all" (ε = 0), Holm-corrected alike.
    """
    alpha_each = alpha / len(runs)  # simultaneous bounds: every printed epsilon holds jointly at 1 - alpha
    measured = claim if claim.promises else dataclasses.replace(claim, epsilon=0.0)
    targets: dict[int, int] = {}
    tests = []
    model_holds = model_holds or [False] * len(runs)
    for (pair, scores, worlds, attack), holds in zip(runs, model_holds):
        target = targets.setdefault(id(pair), len(targets))
        tests.append(TestOutcome(target, attack, pair,
                                 estimator.estimate(scores, worlds, measured, alpha_each, model_holds=holds),
                                 scores, worlds))
    reject, adjusted = holm_adjust([t.p_value for t in tests], alpha)
    for test, rej, adj in zip(tests, reject, adjusted):
        test.adjusted_p_value = float(adj)
        test.verdict = ("violated" if rej else "consistent") if claim.promises else NO_CLAIM
    return tests


#: the verdict of an audit of a mechanism that claims nothing: its ε_LB is measured leakage
NO_CLAIM = "no_claim"


def overall_verdict(tests: list[TestOutcome], claim: PrivacyClaim) -> str:
    """``violated`` when any test is, ``no_claim`` for a claim that promises nothing, else ``consistent``."""
    if not claim.promises:
        return NO_CLAIM
    return "violated" if any(t.verdict == "violated" for t in tests) else "consistent"


class _ProgressRecorder(Recorder):
    """The default recorder, telling a ``report`` that has ``progress`` how far the simulated clock is."""

    def __init__(self, report: Callable, horizon: float, **recorder_options):
        super().__init__(**recorder_options)
        self._tick, self._horizon = getattr(report, "progress", None), horizon

    def answers(self, now: float, *args, **kwargs) -> None:
        super().answers(now, *args, **kwargs)
        if self._tick is not None:
            self._tick("simulation (clock)", min(now, self._horizon), self._horizon)


class RunFolderError(BadInput, ValueError):
    """A run folder cannot be turned back into reports (missing or foreign files)."""


def result_from_run_dir(run_dir: Path) -> AuditResult:
    """The :class:`AuditResult` a run folder records, its tests re-estimated from the saved scores.

    ``report.json`` gives the scenario, claim, world, utility, timing and
    package versions of the run; the score store (``progress/``: the trial
    blocks, or the canaries, checksummed) every attack score. A folder written
    before the store kept only ``trials.csv``: it is read instead. Bounds,
    p-values and verdicts are recomputed from the scores, so the rebuilt
    reports equal the originals (apart from ``timing``) exactly when the
    scores and the estimators are unchanged.
    """
    from .reports.report import SCHEMA_VERSION
    from .language.scenario import AuditConfig

    run_dir = Path(run_dir)
    try:
        old = json.loads((run_dir / "report.json").read_text())
    except FileNotFoundError:
        raise RunFolderError(f"{run_dir}: not a run folder (report.json is missing)") from None
    version = old.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunFolderError(f"{run_dir}/report.json: schema_version {version!r}; this recaudit reads "
                             f"{SCHEMA_VERSION}")
    # the parts that judge the scores; the population is not rebuilt (its data may live elsewhere)
    audit = AuditConfig.model_validate(old["scenario"]["audit"])
    scenario = _RecordedScenario(old["scenario"], audit)
    claim_data = {k: v for k, v in old["claim"].items() if k != "view"}
    if claim_data.get("epsilon") is None:  # a claim of nothing (its infinite ε is written as null)
        claim_data["epsilon"] = float("inf")
    claim = PrivacyClaim(**claim_data)
    estimator = build_estimator(audit)
    canaries = estimator.input == "canaries"
    store = Progress.saved(run_dir / "progress")
    saved = saved_scores(store, "canaries" if canaries else "pairs", 1 if canaries else audit.targets,
                         audit.trials, audit.block_size, prefix=bool(getattr(audit, "sequential", False)))
    if saved is not None:
        per_target = len(old["tests"]) // len(saved)
        scores = [(run.scores[i % per_target], run.worlds) for run in saved for i in range(per_target)]
    elif (run_dir / "trials.csv").exists():
        scores = _scores_from_csv(run_dir, old["tests"], audit.trials, canaries)
    else:
        raise RunFolderError(f"{run_dir}: no saved scores (progress/ is missing or incomplete); "
                             "rerun the scenario into it with --resume")
    if len(scores) != len(old["tests"]):
        raise RunFolderError(f"{run_dir}: the saved scores hold {len(scores)} tests, report.json "
                             f"{len(old['tests'])}")
    pairs: dict = {}
    runs = [ScoredTest(pairs.setdefault(t["target"], _RecordedPair(t["target"], t.get("target_sketches"))), s,
                       worlds, t["attack"]) for t, (s, worlds) in zip(old["tests"], scores)]
    tests = judge(runs, estimator, claim, audit.alpha, [bool(t.get("model_holds")) for t in old["tests"]])
    for test, recorded in zip(tests, old["tests"]):
        test.reach = recorded.get("pair_reach")
    verdict = overall_verdict(tests, claim)
    timing = dict(old.get("timing", {}))
    timing["report_rebuilt_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return AuditResult(scenario, claim, old["audit"]["design"], tests, verdict, old["utility"], old["world"],
                       timing, packages=old["packages"], trainer=old.get("trainer"), pair=old["audit"].get("pair"))


def _scores_from_csv(run_dir: Path, tests: list[dict], trials: int, canaries: bool) -> list[tuple]:
    """Every test's (scores, worlds) from the ``trials.csv`` of a folder written before the score store."""
    import pandas as pd

    table = pd.read_csv(run_dir / "trials.csv")
    scores, row = [], 0
    for t in tests:
        n = trials if canaries else 2 * trials
        part = table.iloc[row:row + n]
        row += n
        if len(part) != n or (part["test"] != t["name"]).any():
            raise RunFolderError(f"{run_dir}/trials.csv: rows {row - n}..{row - 1} are not test {t['name']!r}")
        if canaries:  # the canaries' label: ``member`` (``world`` in files written before it was named so)
            scores.append((part["score"].to_numpy(), part["member" if "member" in part else "world"].to_numpy()))
        else:
            scores.append((np.stack([part.loc[part["world"] == w, "score"].to_numpy() for w in (0, 1)]), None))
    return scores


@dataclass
class _RecordedPair:
    """A target as a report records it: its number and, for local replay, its sketches in both worlds."""

    target: int
    sketches_record: dict | None

    @property
    def differing_bits(self):
        return None if self.sketches_record is None else self.sketches_record["differing_bits"]

    @property
    def sketches(self):
        rec = self.sketches_record
        return None if rec is None else np.array([rec["world0"], rec["world1"]])


@dataclass
class _RecordedScenario:
    """A scenario as a report records it (its population is not rebuilt: its data may live elsewhere)."""

    data: dict
    audit: object

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def seed(self) -> int:
        return self.data["seed"]

    def model_dump(self, mode: str = "json") -> dict:
        return self.data
