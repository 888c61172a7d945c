"""Runs a scenario: the world, the audit design's scores, the estimators' bounds, the verdict.

The data path: ``io.scenario`` builds the parts; ``simulator.engine`` runs the
world (with the design's canaries in it, if any); the design
(``audits.designs``) produces attack scores, in blocks over an executor
with progress saved by ``io.store``; the estimator (``audits.stats.estimators``)
turns each test's scores into an :class:`Estimate`; Holm's correction gives
the verdicts; ``io.report`` writes them.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from attacks import ATTACKS
from mechanisms import MECHANISMS, PrivacyClaim
from simulator.engine import run_protocol
from simulator.neighbours import TargetPair, policy_for
from simulator.population import POPULATIONS
from simulator.seeds import child_seed, stream
from simulator.transcript import Recorder

from .designs import DESIGNS, AuditJob
from .executors import open_executor
from .io.scenario import Scenario, build, build_estimator, build_schedule
from .io.store import Progress, hold_folder
from .stats.bounds import holm_adjust
from .stats.estimators import Estimate
from .utility import accuracy_curve, completion_rmse


@dataclass
class TestOutcome:
    """One test of the claim: a target, an attack, its estimate and its corrected verdict."""

    target: int
    attack: str
    pair: TargetPair
    estimate: Estimate
    scores: np.ndarray  # (2, trials) for distinguishing; (canaries,) for one-run
    worlds: np.ndarray | None = None  # one-run: each canary's world
    adjusted_p_value: float = float("nan")
    verdict: str = ""

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

    @property
    def strongest(self) -> TestOutcome:
        """The test with the largest epsilon lower bound."""
        return max(self.tests, key=lambda t: t.estimate.epsilon_lb)


def run_scenario(scenario: Scenario, out_dir: Path | None = None, resume: bool = False,
                 executor_kind: str | None = None, workers: int | None = None,
                 report: Callable[[str], None] = lambda _: None) -> AuditResult:
    """Simulate the world, audit the mechanism's claim, measure utility.

    ``out_dir`` (held exclusively for the run) receives each trial block as it
    finishes; the executor is reached before any simulation, so a bad address
    or folder fails at once.
    """
    ex = scenario.executor
    with hold_folder(out_dir), open_executor(executor_kind or ex.kind, workers or ex.workers,
                                             ex.address) as executor:
        return _run(scenario, out_dir, resume, executor_kind or ex.kind, executor, report)


def _run(scenario: Scenario, out_dir: Path | None, resume: bool, executor_kind: str, executor,
         report: Callable[[str], None]) -> AuditResult:
    started = time.time()
    base_dir = getattr(scenario, "_base_dir", None)
    root = np.random.SeedSequence(scenario.seed)
    population = build(scenario.population, POPULATIONS, base_dir)
    mechanism = build(scenario.mechanism, MECHANISMS)
    attack_configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    churn = build_schedule(scenario, mechanism, population)
    catalogue = population.catalogue(stream(root, "catalogue"))
    cfg = scenario.audit
    claim = mechanism.claim_for(churn.queries_per_user)
    design = DESIGNS[cfg.design_name]()
    estimator = build_estimator(cfg)
    policy = policy_for(claim, mechanism)
    world_seed = child_seed(root, "world")
    entropy = int.from_bytes(child_seed(root, "audit").generate_state(4).tobytes(), "little")
    world_entropy = int.from_bytes(world_seed.generate_state(4).tobytes(), "little")
    job = AuditJob(mechanism, population, catalogue, churn, tuple(build(c, ATTACKS) for c in attack_configs),
                   claim, cfg.view or claim.view, churn.queries_per_user, entropy, world_entropy)

    inserted = design.inserts(job, policy, cfg.trials)
    matrix = getattr(population, "matrix", None)  # a panel with held-out ratings: utility is their RMSE
    report(f"simulating the world until t={churn.horizon:g}"
           + (f" with {len(inserted)} canaries in it" if inserted is not None else ""))
    keep_outputs = (matrix is not None and matrix.test is not None) or job.view == "others"
    recorder = Recorder(outputs="all" if keep_outputs else "watched")
    transcript = run_protocol(mechanism, population, catalogue, churn, world_seed, recorder=recorder,
                              inserted=inserted)
    curve = accuracy_curve(transcript, catalogue.item_labels)
    world_seconds = time.time() - started

    progress = Progress(out_dir / "progress" if out_dir else None, {"fingerprint": scenario.fingerprint()}, resume,
                        warn=report)
    report(f"design {design.name}: {cfg.trials} {'canaries' if design.produces == 'canaries' else 'trials per world'}"
           f" ({executor_kind})")
    output = design.scores(job, policy, cfg.targets, cfg.trials, cfg.block_size, transcript, executor,
                           progress, report)
    audit_seconds = time.time() - started - world_seconds

    family = len(output.runs) * len(attack_configs)
    alpha_each = cfg.alpha / family  # simultaneous bounds: every printed epsilon holds jointly at 1 - alpha
    tests = []
    for t, (pair, run) in enumerate(zip(output.pairs, output.runs)):
        worlds = run.get("worlds")
        for a, attack_cfg in enumerate(attack_configs):
            estimate = estimator.estimate(run["scores"][a], worlds, claim, alpha_each)
            tests.append(TestOutcome(t, attack_cfg.kind, pair, estimate, run["scores"][a], worlds))
    reject, adjusted = holm_adjust([t.p_value for t in tests], cfg.alpha)
    for test, rej, adj in zip(tests, reject, adjusted):
        test.adjusted_p_value, test.verdict = float(adj), "violated" if rej else "consistent"
    verdict = "violated" if any(t.verdict == "violated" for t in tests) else "consistent"

    final = curve[-1] if curve else {"accuracy": None}
    utility = {"metric": "item clustering accuracy", "final_accuracy": final["accuracy"], "curve": curve}
    if matrix is not None and matrix.test is not None and transcript.outputs is not None:
        utility = completion_rmse(transcript, matrix.test)
    world = {"users_arrived": int(transcript.n_users), "users_answered": int(transcript.n_answered_users),
             "answers": int(transcript.answer_user.size), "canaries": int(transcript.inserted.size),
             "releases": len(transcript.releases), "n_items": catalogue.n_items,
             "n_item_clusters": catalogue.n_item_clusters}
    timing = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "world_seconds": round(world_seconds, 3), "audit_seconds": round(audit_seconds, 3),
              "total_seconds": round(time.time() - started, 3)}
    return AuditResult(scenario, claim, design.name, tests, verdict, utility, world, timing)
