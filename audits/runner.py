"""Runs a scenario: the world for utility, then the distinguishing trials for the audit."""
from __future__ import annotations

import json
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
from simulator.neighbours import TargetPair, local_target_pair, target_messages_view
from simulator.population import POPULATIONS
from simulator.seeds import child_seed, stream

from .estimators import BoundResult, split_epsilon_bound
from .executors import open_executor
from .scenario import Scenario, build, build_churn
from .utility import accuracy_curve


@dataclass
class AuditResult:
    """Everything a report needs from one run."""

    scenario: Scenario
    claim: PrivacyClaim
    bound: BoundResult
    verdict: str
    pair: TargetPair
    scores: tuple[np.ndarray, np.ndarray]
    utility: dict
    world: dict
    timing: dict


def composed_claim(claim: PrivacyClaim, queries: int) -> PrivacyClaim:
    """Basic composition over the ``queries`` a user answers while present."""
    return replace(claim, epsilon=claim.epsilon * queries, delta=min(claim.delta * queries, 1.0 - 1e-12)) \
        if queries > 1 else claim


def trial_block(mechanism: LocalMechanism, attack: DistinguishingAttack, pair: TargetPair,
                entropy: int, block: int, size: int) -> np.ndarray:
    """Scores of ``size`` trials in each world for one block: shape (2, size).

    Block ``b`` of world ``w`` draws from the stream ("trials", b, w) of the
    root seed, so the scores do not depend on which worker runs the block.
    """
    root = np.random.SeedSequence(entropy)
    return np.stack([
        attack.scores(mechanism, pair, target_messages_view(mechanism, pair, world, size,
                                                            stream(root, "trials", block, world)))
        for world in (0, 1)
    ])


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
                raise RuntimeError(f"{directory}: saved progress belongs to another scenario or seed "
                                   f"({previous} != {fingerprint}); remove it or run without --resume")
        else:
            for old in directory.glob("block-*.npy"):
                old.unlink()
            _atomic_write(stamp, json.dumps({"fingerprint": fingerprint}).encode())

    def _path(self, block: int) -> Path:
        return self.directory / f"block-{block:06d}.npy"

    def load(self, block: int) -> np.ndarray | None:
        if self.directory is None or not self._path(block).exists():
            return None
        return np.load(self._path(block))

    def save(self, block: int, scores: np.ndarray) -> None:
        if self.directory is not None:
            with tempfile.NamedTemporaryFile(dir=self.directory, suffix=".tmp", delete=False) as handle:
                np.save(handle, scores)
            os.replace(handle.name, self._path(block))


def _atomic_write(path: Path, data: bytes) -> None:
    with tempfile.NamedTemporaryFile(dir=path.parent, suffix=".tmp", delete=False) as handle:
        handle.write(data)
    os.replace(handle.name, path)


def run_trials(mechanism: LocalMechanism, attack: DistinguishingAttack, pair: TargetPair, trials: int,
               block_size: int, root: np.random.SeedSequence, executor: Executor, progress: Progress,
               report: Callable[[str], None] = lambda _: None) -> tuple[np.ndarray, np.ndarray]:
    """Scores of ``trials`` runs per world, in blocks spread over ``executor``."""
    sizes = [min(block_size, trials - start) for start in range(0, trials, block_size)]
    entropy = child_seed(root, "audit").generate_state(4)
    entropy = int.from_bytes(entropy.tobytes(), "little")
    results: dict[int, np.ndarray] = {}
    futures = {}
    for block, size in enumerate(sizes):
        saved = progress.load(block)
        if saved is not None and saved.shape == (2, size):
            results[block] = saved
        else:
            futures[block] = executor.submit(trial_block, mechanism, attack, pair, entropy, block, size)
    if len(results):
        report(f"resumed {len(results)} of {len(sizes)} trial blocks")
    for block, future in futures.items():
        results[block] = future.result()
        progress.save(block, results[block])
        report(f"trial block {block + 1}/{len(sizes)} done")
    scores = np.concatenate([results[b] for b in range(len(sizes))], axis=1)
    return scores[0], scores[1]


def run_scenario(scenario: Scenario, out_dir: Path | None = None, resume: bool = False,
                 executor_kind: str | None = None, workers: int | None = None,
                 report: Callable[[str], None] = lambda _: None) -> AuditResult:
    """Simulate the world, audit the mechanism's claim, measure utility."""
    started = time.time()
    base_dir = getattr(scenario, "_base_dir", None)
    root = np.random.SeedSequence(scenario.seed)
    population = build(scenario.population, POPULATIONS, base_dir)
    mechanism = build(scenario.mechanism, MECHANISMS)
    attack = build(scenario.attack, ATTACKS)
    churn = build_churn(scenario.churn)
    catalogue = population.catalogue(stream(root, "catalogue"))

    report(f"simulating the world until t={churn.horizon:g}")
    transcript = simulate(population, catalogue, mechanism, churn, child_seed(root, "world"))
    curve = accuracy_curve(transcript, catalogue.item_labels)
    world_seconds = time.time() - started

    claim = composed_claim(mechanism.claim, churn.queries_per_user)
    cfg = scenario.audit
    pair = local_target_pair(population, catalogue, mechanism, churn.queries_per_user,
                             stream(root, "target"), cfg.target_candidates)
    if pair.differing_bits == 0:
        report("warning: no candidate target's sketch differs between the worlds; the audit has no power")
    progress = Progress(out_dir / "progress" if out_dir else None, scenario.fingerprint(), resume)
    ex = scenario.executor
    with open_executor(executor_kind or ex.kind, workers or ex.workers, ex.address) as executor:
        report(f"running {cfg.trials} trials per world ({executor_kind or ex.kind})")
        scores = run_trials(mechanism, attack, pair, cfg.trials, cfg.block_size, root, executor, progress, report)
    bound = split_epsilon_bound(scores[0], scores[1], alpha=cfg.alpha, delta=claim.delta,
                                selection_fraction=cfg.selection_fraction)
    verdict = "violated" if bound.epsilon_lb > claim.epsilon else "consistent"
    final = curve[-1] if curve else {"accuracy": None}
    utility = {"metric": "item clustering accuracy", "final_accuracy": final["accuracy"], "curve": curve}
    world = {"users_arrived": int(transcript.n_users), "users_answered": int(transcript.n_answered_users),
             "messages": int(transcript.messages.shape[0]), "releases": len(transcript.releases),
             "n_items": catalogue.n_items, "n_item_clusters": catalogue.n_item_clusters}
    timing = {"started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "world_seconds": round(world_seconds, 3), "total_seconds": round(time.time() - started, 3)}
    return AuditResult(scenario, claim, bound, verdict, pair, scores, utility, world, timing)
