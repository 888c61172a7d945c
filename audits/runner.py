"""Runs a scenario: the world for utility, then the distinguishing trials for the audit."""
from __future__ import annotations

import json
import math
import os
import tempfile
import time
from concurrent.futures import Executor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import numpy as np

from attacks import ATTACKS, DistinguishingAttack
from mechanisms import MECHANISMS, LocalMechanism, PrivacyClaim
from simulator.churn import simulate
from simulator.neighbours import TargetPair, local_target_pair, runs_view
from simulator.population import POPULATIONS
from simulator.seeds import child_seed, stream

from .estimators import (BoundResult, bonferroni_epsilon_bound, epsilon_lower_bound, fixed_threshold_epsilon_bound,
                         gdp_epsilon, gdp_mu_lower_bound, holm_adjust, split_epsilon_bound, split_gdp_bound)
from .one_run import OneRunResult, default_guess_counts, one_run_audit, one_run_p_value
from .executors import open_executor
from .scenario import Scenario, build, build_churn
from .utility import accuracy_curve


@dataclass
class TestOutcome:
    """One test of the claim: a target, an attack, its bound and its corrected verdict."""

    target: int
    attack: str
    pair: TargetPair
    bound: BoundResult | OneRunResult
    p_value: float
    scores: np.ndarray  # (2, trials) for distinguishing; (trials,) for one-run
    worlds: np.ndarray | None = None  # one-run: each canary's world
    adjusted_p_value: float = float("nan")
    verdict: str = ""

    @property
    def name(self) -> str:
        return f"target {self.target} / {self.attack}"


@dataclass
class AuditResult:
    """Everything a report needs from one run."""

    scenario: Scenario
    claim: PrivacyClaim
    tests: list[TestOutcome]
    verdict: str
    utility: dict
    world: dict
    timing: dict

    @property
    def strongest(self) -> TestOutcome:
        """The test with the largest epsilon lower bound."""
        return max(self.tests, key=lambda t: t.bound.epsilon_lb)


def composed_claim(claim: PrivacyClaim, queries: int) -> PrivacyClaim:
    """Basic composition over the ``queries`` a user answers while present."""
    return replace(claim, epsilon=claim.epsilon * queries, delta=min(claim.delta * queries, 1.0 - 1e-12)) \
        if queries > 1 else claim


def trial_block(mechanism: LocalMechanism, attacks: list[DistinguishingAttack], pair: TargetPair,
                entropy: int, target: int, block: int, size: int, one_run: bool) -> dict[str, np.ndarray]:
    """Attack scores for one block of runs of one target.

    Distinguishing: ``scores`` of shape (attacks, 2, size), ``size`` runs per
    world. One-run: ``size`` canaries with random ``worlds`` and ``scores``
    of shape (attacks, size). Block ``b`` draws from the streams
    ("trials", target, b, ...) of the root seed, so results do not depend on
    which worker runs it.
    """
    root = np.random.SeedSequence(entropy)
    if one_run:
        worlds = stream(root, "canaries", target, block).integers(0, 2, size)
        view = runs_view(mechanism, pair, worlds, stream(root, "trials", target, block))
        return {"scores": np.stack([a.scores(mechanism, pair, view) for a in attacks]), "worlds": worlds}
    views = [runs_view(mechanism, pair, np.full(size, world), stream(root, "trials", target, block, world))
             for world in (0, 1)]
    return {"scores": np.stack([[a.scores(mechanism, pair, v) for v in views] for a in attacks])}


class ProgressMismatch(RuntimeError):
    """Saved progress in the output folder belongs to another scenario or seed."""


class Progress:
    """Finished trial blocks on disk, written atomically, keyed by the scenario's fingerprint."""

    def __init__(self, directory: Path | None, fingerprint: str, resume: bool):
        self.directory = directory
        if directory is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        stamp = directory / "fingerprint.json"
        if stamp.exists() and resume:
            previous = json.loads(stamp.read_text())["fingerprint"]
            if previous != fingerprint:
                raise ProgressMismatch(f"{directory}: saved progress belongs to another scenario or seed "
                                   f"({previous} != {fingerprint}); remove it or run without --resume")
        else:
            for old in directory.glob("block-*.npz"):
                old.unlink()
            _atomic_write(stamp, json.dumps({"fingerprint": fingerprint}).encode())

    def _path(self, target: int, block: int) -> Path:
        return self.directory / f"block-{target:03d}-{block:06d}.npz"

    def load(self, target: int, block: int) -> dict[str, np.ndarray] | None:
        if self.directory is None or not self._path(target, block).exists():
            return None
        with np.load(self._path(target, block)) as saved:
            return dict(saved)

    def save(self, target: int, block: int, arrays: dict[str, np.ndarray]) -> None:
        if self.directory is not None:
            with tempfile.NamedTemporaryFile(dir=self.directory, suffix=".tmp", delete=False) as handle:
                np.savez(handle, **arrays)
            os.replace(handle.name, self._path(target, block))


def _atomic_write(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)


def run_trials(mechanism: LocalMechanism, attacks: list[DistinguishingAttack], pairs: list[TargetPair],
               trials: int, block_size: int, one_run: bool, root: np.random.SeedSequence, executor: Executor,
               progress: Progress, report: Callable[[str], None] = lambda _: None) -> list[dict[str, np.ndarray]]:
    """Scores of ``trials`` runs (per world, or canaries) for every target, in blocks over ``executor``."""
    sizes = [min(block_size, trials - start) for start in range(0, trials, block_size)]
    entropy = int.from_bytes(child_seed(root, "audit").generate_state(4).tobytes(), "little")
    results: dict[tuple[int, int], dict] = {}
    futures = {}
    for target, pair in enumerate(pairs):
        for block, size in enumerate(sizes):
            saved = progress.load(target, block)
            if saved is not None and saved["scores"].shape[-1] == size:
                results[target, block] = saved
            else:
                futures[target, block] = executor.submit(trial_block, mechanism, attacks, pair, entropy, target,
                                                         block, size, one_run)
    if results:
        report(f"resumed {len(results)} of {len(sizes) * len(pairs)} trial blocks")
    for n, (key, future) in enumerate(futures.items(), 1):
        results[key] = future.result()
        progress.save(*key, results[key])
        report(f"trial block {n}/{len(futures)} done")
    merged = []
    for target in range(len(pairs)):
        blocks = [results[target, b] for b in range(len(sizes))]
        merged.append({k: np.concatenate([blk[k] for blk in blocks], axis=-1) for k in blocks[0]})
    return merged


def p_value_from_bound(bound_at: Callable[[float], float], epsilon_claim: float, tol: float = 1e-10) -> float:
    """Smallest level alpha at which ``bound_at(alpha) > epsilon_claim`` (bisection on ln alpha).

    Valid as the p-value of "the mechanism is epsilon_claim-DP" whenever the
    bound grows with alpha (its rejection regions are nested), as every
    bound here does once the test is fixed.
    """
    if bound_at(1.0 - 1e-12) <= epsilon_claim:
        return 1.0
    lo, hi = math.log(1e-300), math.log(1.0 - 1e-12)
    if bound_at(math.exp(lo)) > epsilon_claim:
        return 1e-300
    while hi - lo > tol * max(1.0, abs(lo)):
        mid = (lo + hi) / 2
        if bound_at(math.exp(mid)) > epsilon_claim:
            hi = mid
        else:
            lo = mid
    return math.exp(hi)


def bound_test(scores0: np.ndarray, scores1: np.ndarray, claim: PrivacyClaim, cfg, alpha: float
               ) -> tuple[BoundResult, float]:
    """The epsilon bound of one distinguishing test at level ``alpha``, and its p-value against the claim."""
    delta = claim.delta
    if cfg.method == "gdp":
        bound = split_gdp_bound(scores0, scores1, alpha, delta, cfg.selection_fraction)
        counts = (bound.false_pos, bound.n_neg, bound.false_neg, bound.n_pos)
        p = p_value_from_bound(lambda a: float(gdp_epsilon(gdp_mu_lower_bound(*counts, a), delta)), claim.epsilon)
        return bound, p
    if cfg.threshold == "bonferroni":
        def at(a: float) -> BoundResult:
            return bonferroni_epsilon_bound(scores0, scores1, a, delta, thresholds=cfg.thresholds,
                                            grid_size=cfg.grid_size, score_range=cfg.score_range)
        return at(alpha), p_value_from_bound(lambda a: at(a).epsilon_lb, claim.epsilon)
    if cfg.threshold == "explicit":
        bound = fixed_threshold_epsilon_bound(scores0, scores1, cfg.threshold_value, cfg.direction, alpha, delta)
    else:
        bound = split_epsilon_bound(scores0, scores1, alpha=alpha, delta=delta,
                                    selection_fraction=cfg.selection_fraction)
    counts = (bound.false_pos, bound.n_neg, bound.false_neg, bound.n_pos)
    return bound, p_value_from_bound(lambda a: float(epsilon_lower_bound(*counts, a, delta)), claim.epsilon)


def run_scenario(scenario: Scenario, out_dir: Path | None = None, resume: bool = False,
                 executor_kind: str | None = None, workers: int | None = None,
                 report: Callable[[str], None] = lambda _: None) -> AuditResult:
    """Simulate the world, audit the mechanism's claim, measure utility."""
    started = time.time()
    base_dir = getattr(scenario, "_base_dir", None)
    root = np.random.SeedSequence(scenario.seed)
    population = build(scenario.population, POPULATIONS, base_dir)
    mechanism = build(scenario.mechanism, MECHANISMS)
    attack_configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    attacks = [build(cfg, ATTACKS) for cfg in attack_configs]
    churn = build_churn(scenario.churn)
    catalogue = population.catalogue(stream(root, "catalogue"))

    report(f"simulating the world until t={churn.horizon:g}")
    transcript = simulate(population, catalogue, mechanism, churn, child_seed(root, "world"))
    curve = accuracy_curve(transcript, catalogue.item_labels)
    world_seconds = time.time() - started

    claim = composed_claim(mechanism.claim, churn.queries_per_user)
    cfg = scenario.audit
    pairs = [local_target_pair(population, catalogue, mechanism, churn.queries_per_user,
                               stream(root, "target", t), cfg.target_candidates) for t in range(cfg.targets)]
    for t, pair in enumerate(pairs):
        if pair.differing_bits < pair.sketches.shape[1]:
            report(f"warning: target {t} differs in {pair.differing_bits} of {pair.sketches.shape[1]} sketch bits "
                   f"between its worlds; its test can show little more than that share of epsilon "
                   f"(raise audit.target_candidates)")
    progress = Progress(out_dir / "progress" if out_dir else None, scenario.fingerprint(), resume)
    one_run = cfg.method == "one-run"
    ex = scenario.executor
    with open_executor(executor_kind or ex.kind, workers or ex.workers, ex.address) as executor:
        report(f"running {cfg.trials} {'canaries' if one_run else 'trials per world'} for each of "
               f"{len(pairs)} target(s) ({executor_kind or ex.kind})")
        runs = run_trials(mechanism, attacks, pairs, cfg.trials, cfg.block_size, one_run, root, executor,
                          progress, report)

    family = len(pairs) * len(attacks)
    alpha_each = cfg.alpha / family  # simultaneous bounds: every printed epsilon holds jointly at 1 - alpha
    tests = []
    for t, (pair, run) in enumerate(zip(pairs, runs)):
        for a, attack_cfg in enumerate(attack_configs):
            if one_run:
                k_pos, k_neg = default_guess_counts(cfg.trials, cfg.guess_fraction)
                bound = one_run_audit(run["scores"][a], run["worlds"].astype(bool), k_pos, k_neg,
                                      alpha_each, claim.delta)
                p = one_run_p_value(bound.r, bound.v, claim.epsilon, claim.delta, bound.m)
                tests.append(TestOutcome(t, attack_cfg.kind, pair, bound, p, run["scores"][a], run["worlds"]))
            else:
                bound, p = bound_test(run["scores"][a, 0], run["scores"][a, 1], claim, cfg, alpha_each)
                tests.append(TestOutcome(t, attack_cfg.kind, pair, bound, p, run["scores"][a]))
    reject, adjusted = holm_adjust([t.p_value for t in tests], cfg.alpha)
    for test, rej, adj in zip(tests, reject, adjusted):
        test.adjusted_p_value, test.verdict = float(adj), "violated" if rej else "consistent"
    verdict = "violated" if any(t.verdict == "violated" for t in tests) else "consistent"

    final = curve[-1] if curve else {"accuracy": None}
    utility = {"metric": "item clustering accuracy", "final_accuracy": final["accuracy"], "curve": curve}
    world = {"users_arrived": int(transcript.n_users), "users_answered": int(transcript.n_answered_users),
             "messages": int(transcript.messages.shape[0]), "releases": len(transcript.releases),
             "n_items": catalogue.n_items, "n_item_clusters": catalogue.n_item_clusters}
    timing = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "world_seconds": round(world_seconds, 3), "total_seconds": round(time.time() - started, 3)}
    return AuditResult(scenario, claim, tests, verdict, utility, world, timing)
