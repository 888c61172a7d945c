"""``local_replay``: one run = one release of the target's sketches (local claims only).

Under a local protocol the target's messages depend only on its own row, its
public queries and its coins; other users' messages are independent of the
target's world. So one run of the whole protocol, seen through the
``messages`` view, is exactly one release of the target's true sketches
under its queries: exact, and cheap. The queries are drawn once before the
trials (they are public and independent of private data) and the neighbour
policy builds the worst-case pair for them. This path skips the simulated
world, so it is valid only for local claims of one-round local randomizers.
Queries that read the rated set (``queries_read_rated``) are not public: they
are drawn per run from the world's row, and belong to the view.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from recaudit.mechanisms import UserBatch
from recaudit.simulator.targets import is_local, sketches_under
from recaudit.simulator.seeds import child_seed, stream
from recaudit.simulator.transcript import MessagesView, View

from ..stats.coded import CodedScores, one_table
from .base import Design, DesignError, DesignOutput, block_sizes, blocks_per_unit, fit_attacks
from .sequential_blocks import run_blocks


def replay(mechanism, pair, worlds: np.ndarray, rng: np.random.Generator) -> View:
    """The target's messages over runs, run ``r`` in world ``worlds[r]``."""
    worlds = np.asarray(worlds, dtype=np.int64)
    if getattr(mechanism, "queries_read_rated", False):
        # the query depends on the world's private row: draw it per run, then sketch under it
        pick = worlds[:, None].astype(bool)
        rows = UserBatch.from_masks(np.where(pick, pair.rows1.rated, pair.rows0.rated),
                                    np.where(pick, pair.rows1.liked, pair.rows0.liked))
        queries = tuple(mechanism.make_queries(len(worlds), rng, pair.query_state, rows.rated)
                        for _ in pair.queries)
        messages = mechanism.release(sketches_under(mechanism, rows, queries), rng)
        return MessagesView(messages=messages, queries=queries)
    if worlds.size and worlds.strides[0] == 0:  # one world for every run (a broadcast): its sketch, not a gather
        sketches = np.broadcast_to(pair.sketches[worlds[0]], worlds.shape + pair.sketches.shape[1:])
    else:
        sketches = pair.sketches[worlds]
    return MessagesView(messages=mechanism.release(sketches, rng), queries=pair.queries)


def replay_span(job, pair, target: int, first: int, sizes: tuple[int, ...]) -> dict:
    """Scores (attacks, 2, runs) of blocks ``first``, ``first + 1``, ... of ``sizes`` replayed runs per world, block
    ``index``'s runs in world ``w`` from stream ("trials", target, index, w): a block's runs and scores do not
    depend on the blocks run beside it.

    Attacks that score from a table of every message give coded scores (one byte a run, ``CodedScores``), every
    run of the span looked up at once.
    """
    parent = child_seed(job.root(), "trials", target)  # the streams ("trials", target, index, world) are its children
    worlds = {(world, size): np.broadcast_to(np.int64(world), size) for world in (0, 1) for size in set(sizes)}
    views = [[replay(job.mechanism, pair, worlds[world, size], stream(parent, index, world))
              for index, size in enumerate(sizes, first)] for world in (0, 1)]
    blocks = [v for world in views for v in world]
    both = MessagesView(messages=np.concatenate([v.messages for v in blocks]), queries=blocks[0].queries)
    tables = [a.score_table(job.mechanism, pair, both) for a in job.attacks]
    coded = [None if t is None else CodedScores.from_table(*t) for t in tables]
    if all(c is not None for c in coded) and (coded := one_table(coded)) is not None:
        return {"scores": CodedScores(np.stack([c.codes.reshape(2, sum(sizes)) for c in coded]), coded[0].values)}
    return {"scores": np.stack([[np.concatenate([a.scores(job.mechanism, pair, v) for v in world]) for world in views]
                                for a in job.attacks])}


@dataclass(frozen=True)
class LocalReplay(Design, kind="local_replay"):
    """One replayed release of the target per trial; valid only for local claims."""

    valid_models: ClassVar[tuple[str, ...]] = ("local",)

    def check(self, mechanism, claim, churn, trials) -> None:
        super().check(mechanism, claim, churn, trials)
        if not is_local(mechanism):
            raise DesignError(f"design local_replay replays a one-round local randomizer; {mechanism.kind} "
                              f"is not one (use full_runs or one_run)")

    def scores(self, job, policy, targets, trials, block_size, world, executor, progress, report):
        pairs = [policy.worst_case_pair(job.mechanism, job.population, job.catalogue, job.answers,
                                        stream(job.root(), "target", t)) for t in range(targets)]
        for t, pair in enumerate(pairs):
            if pair.differing_bits < pair.sketches.shape[1]:
                report(f"warning: target {t} differs in {pair.differing_bits} of {pair.sketches.shape[1]} "
                       f"sketch bits between its worlds; its test can show little more than that share of epsilon")
        if any(a.requires_fit for a in job.attacks):
            job = _fitted(job, pairs[0], trials)
        per_unit = blocks_per_unit(len(block_sizes(trials, block_size)))
        return DesignOutput(pairs, run_blocks(replay_span, job, pairs, trials, block_size, executor, progress,
                                              report, per_unit, spans=True))


def _fitted(job, pair, trials):
    from dataclasses import replace

    def sample(world, seed):
        return replay(job.mechanism, pair, np.broadcast_to(np.int64(world), trials), np.random.default_rng(seed))

    return replace(job, attacks=fit_attacks(job, pair, sample))
