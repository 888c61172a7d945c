"""``audit.sequential``: a design's blocks run in order and stopped as soon as every test has decided.

Designs run their blocks through :func:`run_blocks` here: :func:`recaudit.audits.designs.base.run_blocks` for
the fixed design, :func:`sequential_blocks` when the job carries a stop rule
(``recaudit.audits.stats.sequential.SequentialRule``).
"""
from __future__ import annotations

from concurrent.futures import Executor
from typing import Callable

import numpy as np

from recaudit.simulator.targets import TargetPair

from ..executors import as_finished
from . import base
from .base import AuditJob, TargetScores, _Joined, _restore, block_name, block_sizes, unit_identity

__all__ = ["run_blocks", "sequential_blocks"]


def run_blocks(block: Callable, job: AuditJob, pairs: list[TargetPair], trials: int, block_size: int,
               executor: Executor, progress, report: Callable[[str], None], per_unit: int = 1,
               spans: bool = False) -> list[TargetScores]:
    """:func:`recaudit.audits.designs.base.run_blocks`, or :func:`sequential_blocks` for ``audit.sequential``."""
    if getattr(job, "stop_rule", None) is not None:
        return sequential_blocks(block, job, pairs, trials, block_size, executor, progress, report, spans)
    return base.run_blocks(block, job, pairs, trials, block_size, executor, progress, report, per_unit, spans)


def sequential_blocks(block: Callable, job: AuditJob, pairs: list[TargetPair], trials: int, block_size: int,
                       executor: Executor, progress, report: Callable[[str], None],
                       spans: bool = False) -> list[TargetScores]:
    """:func:`run_blocks` for ``audit.sequential``: blocks in index order (every target's block ``i`` before any
    block ``i + 1``), each test's :class:`SequentialTest` fed the blocks as they complete a prefix, and no block
    started once every test has stopped or one shows a violation. Returns the scores of the prefix the tests
    read, which is what the store keeps (one block per unit); blocks finished beyond it are dropped — the stop
    is decided on the prefix alone, so a replay of the saved blocks makes the same stop.
    """
    sizes = block_sizes(trials, block_size)
    joined = _Joined(len(pairs), sizes)
    attacks = len(job.attacks)
    tests = [[job.stop_rule.test() for _ in range(attacks)] for _ in pairs]
    done_blocks = [set() for _ in pairs]
    prefix = 0
    restored = 0
    for index in range(len(sizes)):  # resume: the saved prefix
        if any(_restore(progress, joined, t, index, index + 1, job.entropy) for t in range(len(pairs))):
            break
        restored = index + 1
    sent = executor.share(job) if hasattr(executor, "share") else job  # a pool or cluster: once per worker
    todo = [((t, i, i + 1), block, (sent, pair, t, i, (sizes[i],) if spans else sizes[i]))
            for i in range(restored, len(sizes)) for t, pair in enumerate(pairs)]
    if restored:
        report(f"resumed {restored} of {len(sizes)} blocks per target")
    for t in range(len(pairs)):
        done_blocks[t].update(range(restored))

    def advance() -> bool:
        """Feed the tests every block now complete for all targets; True when the audit should stop."""
        nonlocal prefix
        while prefix < len(sizes) and all(prefix in d for d in done_blocks):
            for t in range(len(pairs)):
                if prefix >= restored:  # the prefix is what the store keeps: a replay of it stops here too
                    progress.save_arrays(block_name(t, prefix), joined.part(t, prefix, prefix + 1),
                                         unit_identity(t, prefix, prefix + 1, joined.runs(prefix, prefix + 1),
                                                       job.entropy))
                part = joined.part(t, prefix, prefix + 1)["scores"]
                for a in range(attacks):
                    if tests[t][a].reason is None:
                        runs = np.asarray(part[a], dtype=float)
                        tests[t][a].update(runs[0], runs[1])
            prefix += 1
            flat = [x for row in tests for x in row]
            if any(x.reason == "violation" for x in flat) or all(x.reason is not None for x in flat):
                return True
        return False

    stopped = advance()
    tick = getattr(report, "progress", None)
    if not stopped:
        finished = as_finished(executor, todo)
        try:
            for (target, index, _), result in finished:
                if index < prefix or target >= len(pairs):
                    continue
                joined.add(target, index, result)
                done_blocks[target].add(index)
                if tick is not None:
                    tick("trial blocks", sum(map(len, done_blocks)), len(sizes) * len(pairs))
                if advance():
                    stopped = True
                    break
        finally:
            finished.close()  # cancels the blocks still pending
    runs = joined.runs(0, prefix)
    flat = [x for row in tests for x in row]
    reasons = sorted({x.reason or "budget" for x in flat})
    report(f"sequential audit stopped after {runs} of {trials} runs per world ({', '.join(reasons)})")
    return [TargetScores.of({k: v[..., :runs] for k, v in joined.arrays[t].items()}) for t in range(len(pairs))]
