"""The design contract: how an audit produces attack scores, and the block machinery designs share.

A design decides what one audit run is (one replayed release, one whole
protocol run, one canary inside the world's run), which claims it is valid
for, and where its runs' randomness comes from. It produces either
``pairs`` (scores of runs in world 0 and world 1, for the distinguishing
estimators) or ``canaries`` (one score per canary and its secret world, for
the one-run estimators).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Literal

import numpy as np

from recaudit.mechanisms import PrivacyClaim, Mechanism
from recaudit.core.registry import Registry
from recaudit.core.errors import BadInput
from recaudit.simulator.engine import Inserted
from recaudit.simulator.targets import TargetPair
from recaudit.audits.designs.pairs import NeighbourPolicy
from recaudit.simulator.seeds import child_seed
from recaudit.simulator.transcript import (MessagesView, Transcript, View, others_view, releases_view, statistics_view,
                                           target_view,
                                  watched_messages)

from ..executors import as_finished
from ..stats.coded import CodedScores, one_table


class DesignError(BadInput, ValueError):
    """The design cannot audit this mechanism or claim."""


@dataclass(frozen=True)
class AuditJob:
    """What every block of an audit needs; picklable, so executors can ship it."""

    mechanism: Mechanism
    population: Any
    catalogue: Any
    churn: Any
    attacks: tuple
    claim: PrivacyClaim
    view: str
    answers: int  # queries each user answers (the claim composes over them)
    entropy: int  # of the audit's root stream: blocks draw from named children of it
    world_entropy: int  # of the world's stream: designs that re-run the protocol keep the world
    insert_tick: int = 1  # full_runs: the query tick (1, 2, ...) at which the target arrives
    #: the view each attack reads (empty: every attack reads ``view``)
    views: tuple = ()
    #: ``audit.sequential``: the rule that stops the blocks early (``recaudit.audits.stats.sequential.SequentialRule``)
    stop_rule: Any = None

    @property
    def attack_views(self) -> tuple:
        return self.views or (self.view,) * len(self.attacks)

    def root(self, *parts) -> np.random.SeedSequence:
        return child_seed(np.random.SeedSequence(self.entropy), *parts)

    def world_seed(self) -> np.random.SeedSequence:
        return np.random.SeedSequence(self.world_entropy)


@dataclass
class TargetScores:
    """One target's scores, attacks on axis 0: ``(attacks, 2, trials)`` for pairs, ``(attacks, canaries)`` with
    each canary's ``worlds`` for canaries. Saved blocks are its arrays (``to_arrays`` / ``of``)."""

    scores: "np.ndarray | CodedScores"
    worlds: np.ndarray | None = None
    reach: np.ndarray | None = None  # per attack, what it measured of the target's reach (None: nothing)

    @classmethod
    def of(cls, arrays: dict[str, np.ndarray]) -> "TargetScores":
        return cls(arrays["scores"], arrays.get("worlds"), arrays.get("reach"))

    def to_arrays(self) -> dict[str, np.ndarray]:
        optional = {"worlds": self.worlds, "reach": self.reach}
        return {"scores": self.scores} | {k: v for k, v in optional.items() if v is not None}


@dataclass
class DesignOutput:
    """Scores of every test target, in the order of ``pairs``."""

    pairs: list[TargetPair]
    runs: list[TargetScores]


#: every registered design, by kind (a scenario's ``audit.design``)
DESIGNS: Registry = Registry("design")


class Design(ABC):
    """How an audit gets its scores."""

    #: the registered name (``class X(Design, kind="x")`` sets it and registers X in ``DESIGNS``)
    kind: ClassVar[str] = ""
    produces: ClassVar[Literal["pairs", "canaries"]] = "pairs"
    #: the claim models the design is valid for (None: all)
    valid_models: ClassVar[tuple[str, ...] | None] = None
    #: the conformance suite (``recaudit.audits.checks``) runs the design on this mechanism's test scenario, with these
    #: audit settings and attacks (None: the scenario's)
    test_mechanism: ClassVar[str] = "maxsense"
    test_audit: ClassVar[dict] = {}
    test_attack: ClassVar[list | None] = None
    #: whether it can fit a learning attack (``Attack.requires_fit``) on runs it does not count
    fits_attacks: ClassVar[bool] = True
    #: the views it can give the attacks (None: every view)
    gives_views: ClassVar[tuple[str, ...] | None] = None

    def __init_subclass__(cls, kind: str | None = None, **kwargs):
        super().__init_subclass__(**kwargs)
        DESIGNS.add(cls, kind)

    def check(self, mechanism: Mechanism, claim: PrivacyClaim, churn, trials: int) -> None:
        """Raise :class:`DesignError` when this design cannot audit ``mechanism``'s ``claim``."""
        if self.valid_models is not None and claim.model not in self.valid_models:
            raise DesignError(f"design {self.kind} is valid only for {'/'.join(self.valid_models)} claims; "
                              f"{mechanism.kind} makes a {claim.model} claim")

    def attack_refusal(self, attack, view: str) -> str | None:
        """Why this design cannot give ``attack`` the ``view`` it reads (None: it can); the scenario language
        asks it at validate time."""
        if self.gives_views is not None and view not in self.gives_views:
            return f"design {self.kind} gives the {' or '.join(self.gives_views)} view only, not {view!r}"
        if attack.requires_fit and not self.fits_attacks:
            return f"design {self.kind} cannot fit a learning attack ({attack.kind})"
        return None

    def inserts(self, job: AuditJob, policy: NeighbourPolicy, trials: int) -> Inserted | None:
        """Users to place into the world's own run (canaries), or None."""
        return None

    @abstractmethod
    def scores(self, job: AuditJob, policy: NeighbourPolicy, targets: int, trials: int, block_size: int,
               world: Transcript, executor: Executor, progress, report: Callable[[str], None]) -> DesignOutput:
        """The attacks' scores for every target."""


# ---------------------------------------------------------------- views cut from a run


def view_of(transcript: Transcript, kind: str, users: np.ndarray, answers: int) -> View:
    """The view ``kind`` of the audited ``users`` (inserted into the run) cut from its transcript."""
    if kind == "messages":
        return watched_messages(transcript, users, answers)
    if kind == "releases":
        return releases_view(transcript, users)
    if kind == "statistics":
        return statistics_view(transcript, users)
    if kind == "others":
        return others_view(transcript, int(users[0]))
    return target_view(transcript, int(users[0]))


def stack_views(views: list[View]) -> View:
    """Per-run views of one kind as one view with runs on axis 0."""
    first = views[0]
    if first.kind == "messages":
        queries = tuple(np.concatenate([v.queries[a] for v in views]) for a in range(len(first.queries)))
        return MessagesView(messages=np.concatenate([v.messages for v in views]), queries=queries)
    fields: dict = {"arrival": None if first.arrival is None else tuple(v.arrival for v in views)}
    if first.kind == "target":
        fields["target"] = [v.target for v in views]
    else:
        fields.update(releases=tuple(v.releases for v in views), rounds=tuple(v.rounds for v in views))
    if first.kind in ("others", "statistics"):
        fields["others"] = [v.others for v in views]
    if first.kind == "statistics":
        fields["statistics"] = {k: np.concatenate([v.statistics[k] for v in views]) for k in first.statistics}
    return type(first)(**fields)


def attack_outputs(job: AuditJob, pair: TargetPair, views) -> dict[str, np.ndarray]:
    """Each attack's scores (attacks, 2, runs) on its view, and the pair's reach per run where an attack
    measures it (``reach``; NaN otherwise). ``views``: per view kind the two worlds' views, or one pair of
    views every attack reads."""
    scores, reach = [], []
    for attack, kind in zip(job.attacks, job.attack_views):
        pair_of_views = views[kind] if isinstance(views, dict) else views
        scores.append([attack.scores(job.mechanism, pair, v) for v in pair_of_views])
        measured = getattr(attack, "reach", None)
        runs = len(scores[-1][0])
        reach.append([np.broadcast_to(measured(job.mechanism, pair, v)[1], (runs,)) if measured else
                      np.full(runs, np.nan) for v in pair_of_views])
    return {"scores": np.array(scores, dtype=float), "reach": np.array(reach, dtype=float)}


# ---------------------------------------------------------------- blocks over an executor


def block_sizes(trials: int, block_size: int) -> list[int]:
    return [min(block_size, trials - start) for start in range(0, trials, block_size)]


def block_name(target: int, index: int) -> str:
    """The saved unit of one block of one target's trials (``Progress`` in the run folder's progress/)."""
    return f"block-{target:03d}-{index:06d}"


#: the arrays of a saved block kept coded when the store coded them (``Progress.load_arrays``)
SCORES = ("scores",)
#: the saved unit of a one-run design's canary scores
CANARIES = "canaries"


class _Joined:
    """Each target's blocks copied, as they arrive, into one array per key on the trial (last) axis.

    A finished block is freed as soon as it is copied: the scores are held once, not twice (blocks, then
    their concatenation), and ``np.concatenate`` on the last axis of 3-d arrays is several times slower.
    Coded scores stay coded (one byte a run) while their blocks share a table of at most 256 values.
    """

    def __init__(self, targets: int, sizes: list[int]):
        self.starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)])
        self.arrays: list[dict | None] = [None] * targets

    def runs(self, first: int, last: int) -> int:
        """Runs per world in blocks ``first`` .. ``last - 1``."""
        return int(self.starts[last] - self.starts[first])

    def add(self, target: int, index: int, block: dict, last: int | None = None) -> None:
        """Copy ``block``: the runs of block ``index`` (of blocks ``index`` .. ``last - 1``, a saved unit's)."""
        start, stop = self.starts[index], self.starts[index + 1 if last is None else last]
        if self.arrays[target] is None:
            total = int(self.starts[-1])
            self.arrays[target] = {k: CodedScores(np.zeros(v.shape[:-1] + (total,), np.uint8), v.values)
                                   if isinstance(v, CodedScores) else np.empty(v.shape[:-1] + (total,), v.dtype)
                                   for k, v in block.items()}
        joined = self.arrays[target]
        for key, value in block.items():
            into = joined[key]
            if isinstance(into, CodedScores):
                same = one_table([into, value]) if isinstance(value, CodedScores) else None
                if same is None:  # no one table for both: the floats from here on
                    into = joined[key] = np.asarray(into)
                else:
                    into, value = same
                    joined[key] = into
            if isinstance(into, CodedScores):
                into.codes[..., start:stop] = value.codes
            else:
                into[..., start:stop] = np.asarray(value)

    def part(self, target: int, first: int, last: int) -> dict:
        """The target's arrays over blocks ``first`` .. ``last - 1`` (views)."""
        span = (Ellipsis, slice(self.starts[first], self.starts[last]))
        return {key: value[span] for key, value in self.arrays[target].items()}

    def scores(self) -> list[TargetScores]:
        return [TargetScores.of(arrays) for arrays in self.arrays]


#: local replay saves a target's blocks in about this many units (``blocks_per_unit``): its blocks cost less
#: than a file's checksum, zip and atomic rename (0.5 ms), so 200 blocks of 50,000 runs are 20 files, not 200
SAVED_UNITS = 20


def blocks_per_unit(blocks: int) -> int:
    """Consecutive blocks saved as one unit when a target has ``blocks`` of them (1 up to ``2 * SAVED_UNITS - 1``)."""
    return max(1, blocks // SAVED_UNITS)


def unit_identity(target: int, first: int, last: int, runs: int, entropy: int | None = None) -> dict:
    """What a saved unit of blocks is (checked on load, inside its checksum): its target, its blocks
    ``first`` .. ``last - 1``, the runs per world they hold (both worlds, on the last axis), and the seed
    stream they drew from (the audit's entropy, children ``("trials", target, index, ...)``)."""
    identity = {"target": target, "blocks": [first, last], "runs": runs, "worlds": [0, 1]}
    if entropy is not None:
        identity["stream"] = {"entropy": str(entropy), "path": ["trials", target]}
    return identity


def _restore(progress, joined: _Joined, target: int, first: int, last: int, entropy: int | None = None) -> list[int]:
    """Blocks ``first`` .. ``last - 1`` of ``target`` from the store into ``joined``; the indices not restored.

    A unit is saved under its first block's name, and says which blocks it holds. A unit of one block that
    is not the whole range (a folder saved block by block: earlier versions, designs that do not group) is
    read block by block.
    """
    def identity(a: int, b: int) -> dict:
        return unit_identity(target, a, b, joined.runs(a, b), entropy)

    accepted = [identity(first, last)] + ([identity(first, first + 1)] if last > first + 1 else [])
    unit = progress.load_arrays(block_name(target, first), keep_codes=SCORES, identity=accepted)
    if unit is not None and unit["scores"].shape[-1] == joined.runs(first, last):
        joined.add(target, first, unit, last)
        return []
    missing = []
    for index in range(first, last):
        block = unit if index == first else progress.load_arrays(block_name(target, index), keep_codes=SCORES,
                                                                 identity=identity(index, index + 1))
        if block is not None and block["scores"].shape[-1] == joined.runs(index, index + 1):
            joined.add(target, index, block)
        else:
            missing.append(index)
    return missing


def _units(blocks: int, per_unit: int) -> list[tuple[int, int]]:
    return [(first, min(first + per_unit, blocks)) for first in range(0, blocks, per_unit)]


def saved_scores(progress, produces: str, targets: int, trials: int, block_size: int,
                 prefix: bool = False) -> list[TargetScores] | None:
    """Every target's scores as a finished run saved them in ``progress`` (the score store), or None.

    ``prefix``: a sequential audit's store, the blocks before its stop (None when it holds no block).

    None when a unit is missing, damaged or foreign (``progress`` warns for the last two).
    """
    if produces == "canaries":
        saved = progress.load_arrays(CANARIES)
        return None if saved is None or saved["scores"].shape[-1] != trials else [TargetScores.of(saved)]
    sizes = block_sizes(trials, block_size)
    joined = _Joined(targets, sizes)
    if prefix:  # a sequential audit's blocks, one per unit, up to where it stopped
        kept = 0
        while kept < len(sizes) and not any(_restore(progress, joined, t, kept, kept + 1) for t in range(targets)):
            kept += 1
        if kept == 0:
            return None
        runs = joined.runs(0, kept)
        return [TargetScores.of({k: v[..., :runs] for k, v in arrays.items()}) for arrays in joined.arrays]
    for target in range(targets):
        for first, last in _units(len(sizes), blocks_per_unit(len(sizes))):
            if _restore(progress, joined, target, first, last):
                return None
    return joined.scores()


def _spans(indices: list[int]) -> list[tuple[int, int]]:
    """Runs of consecutive ``indices`` (ascending) as ``(first, last)``, ``last`` excluded."""
    spans: list[tuple[int, int]] = []
    for index in indices:
        if spans and spans[-1][1] == index:
            spans[-1] = (spans[-1][0], index + 1)
        else:
            spans.append((index, index + 1))
    return spans


def run_blocks(block: Callable, job: AuditJob, pairs: list[TargetPair], trials: int, block_size: int,
               executor: Executor, progress, report: Callable[[str], None], per_unit: int = 1,
               spans: bool = False) -> list[TargetScores]:
    """``block(job, pair, target, index, size)`` for every block of every target, saved as they finish.

    The saved units are the run's score store (``recaudit report`` reads them back, :func:`saved_scores`):
    ``per_unit`` consecutive blocks each, saved when the last of them finishes. With ``spans``, one task runs
    the consecutive blocks of a unit still to do, ``block(job, pair, target, first, sizes)`` (their sizes in a
    tuple): its Python costs once a span, not once a block. A ``report`` with a ``progress(label, done,
    total)`` method is told of every finished task, counted in blocks.
    """
    sizes = block_sizes(trials, block_size)
    joined = _Joined(len(pairs), sizes)
    entropy = getattr(job, "entropy", None)  # the blocks' seed stream, in each saved unit's identity
    sent = executor.share(job) if hasattr(executor, "share") else job  # a pool or cluster: once per worker
    todo, waiting = [], {}
    for target, pair in enumerate(pairs):
        for first, last in _units(len(sizes), per_unit):
            missing = _restore(progress, joined, target, first, last, entropy)
            waiting[target, first] = len(missing)
            tasks = _spans(missing) if spans else [(index, index + 1) for index in missing]
            todo += [((target, a, b), block, (sent, pair, target, a, tuple(sizes[a:b]) if spans else sizes[a]))
                     for a, b in tasks]
    total = sum(waiting.values())
    if total < len(sizes) * len(pairs):
        report(f"resumed {len(sizes) * len(pairs) - total} of {len(sizes) * len(pairs)} trial blocks")
    done = 0
    for (target, index, end), result in as_finished(executor, todo):
        joined.add(target, index, result, end)
        first = index - index % per_unit
        waiting[target, first] -= end - index
        done += end - index
        if not waiting[target, first]:  # the unit's last block
            last = min(first + per_unit, len(sizes))
            progress.save_arrays(block_name(target, first), joined.part(target, first, last),
                                 unit_identity(target, first, last, joined.runs(first, last), entropy))
        tick = getattr(report, "progress", None)
        if tick is not None:
            tick("trial blocks", done, total)
        else:
            report(f"trial block {done}/{total} done")
    return joined.scores()


def fit_attacks(job: AuditJob, pair: TargetPair, sample: Callable[[int, np.random.SeedSequence], View]) -> tuple:
    """The job's attacks, those that learn fitted on ``sample(world, seed)`` runs from the ``train`` stream.

    The training runs come from their own stream, so the runs the estimators
    count are never seen by ``fit``.
    """
    if not any(a.requires_fit for a in job.attacks):
        return job.attacks
    views = [sample(world, job.root("train", world)) for world in (0, 1)]
    view = stack_views(views)
    worlds = np.repeat([0, 1], [len(views[0]), len(views[1])])
    for attack in job.attacks:
        if attack.requires_fit:
            attack.fit(job.mechanism, pair, view, worlds)
    return job.attacks
