"""The record of a simulated run, the recorder that writes it, and the views a threat model cuts from it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

import numpy as np
from scipy import sparse

from recaudit.core.errors import ParameterError
from recaudit.mechanisms.claims import ViewKind  # noqa: F401  (one definition, re-exported)


@dataclass
class Release:
    """One release: what the server published (``mechanism.publish(state)``) at a time."""

    time: float
    users_seen: int  # distinct users who had answered at least once
    published: Any  # what mechanism.publish(state) returned: item labels, a covariance dict, a model


@dataclass
class Round:
    """One query round: its time and what the server broadcast before it."""

    time: float
    published: Any


@dataclass
class WatchedAnswers:
    """Every answer of the watched users (targets, canaries): one row per answer."""

    user: np.ndarray
    answer: np.ndarray  # 0 for a user's first answer, 1 for its second, ...
    time: np.ndarray
    queries: Any  # the mechanism's query rows, users on axis 0
    messages: np.ndarray

    @classmethod
    def concat(cls, parts: "list[WatchedAnswers]") -> "WatchedAnswers":
        return cls(np.concatenate([p.user for p in parts]), np.concatenate([p.answer for p in parts]),
                   np.concatenate([p.time for p in parts]), np.concatenate([p.queries for p in parts]),
                   stack_rows([p.messages for p in parts]))


@dataclass
class OutputPart:
    """Personal outputs of some users (rows follow ``users``), as the recorder collects them."""

    users: np.ndarray
    outputs: Any


@dataclass
class Transcript:
    """Time-ordered record of a run: users, answers, published states, releases, personal outputs.

    Users are indexed by arrival order (inserted users — targets, canaries —
    get ids too; ``inserted`` lists them). ``answer_time``/``answer_user``
    have one row per answered query. ``messages`` (aligned with those rows)
    is kept only when the recorder keeps every message; the watched users'
    messages and queries are always in ``watched``. ``rounds`` holds every
    broadcast, ``releases`` every published estimate; ``outputs`` maps user
    ids to personal outputs (watched users, or everyone when asked).
    ``held_out`` (users x items, when the population withholds ratings) holds
    each user's held-out ratings, for scoring predictions.
    """

    arrival: np.ndarray
    departure: np.ndarray
    user_cluster: np.ndarray
    answer_time: np.ndarray
    answer_user: np.ndarray
    messages: np.ndarray | None
    releases: list[Release]
    rounds: list[Round] = field(default_factory=list)
    watched: WatchedAnswers | None = None
    output_user: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    outputs: np.ndarray | None = None
    inserted: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    held_out: sparse.csr_array | None = None
    #: the mechanism's noisy statistics at the last release (``Mechanism.statistics``), when recorded
    statistics: dict | None = None

    @property
    def n_users(self) -> int:
        return self.arrival.size

    @property
    def n_answered_users(self) -> int:
        users = self.answer_user
        if users.size and users.min() >= 0:  # ids are small non-negative integers: count without sorting
            return int(np.count_nonzero(np.bincount(users)))
        return int(np.unique(users).size)

    def present_at(self, time: float) -> np.ndarray:
        """Ids of the users present at ``time``."""
        return np.flatnonzero((self.arrival <= time) & (time < self.departure))


class Recorder:
    """Decides what a run keeps: published states always; messages and outputs of watched users.

    ``watch`` lists background user ids to watch (inserted users are always
    watched). ``messages="all"`` also keeps every user's messages (small
    worlds, tests); ``outputs="all"`` every user's personal output (the
    joint-DP ``others`` view); ``answers=False`` drops the per-answer log
    (learning curves over millions of users); ``watched=False`` drops the watched users' answers too (a run
    whose views read no message); ``statistics=True`` keeps the mechanism's noisy statistics at each release
    (the white-box view). The answer log is kept as each batch's time and 32-bit user ids (4 bytes an answer,
    not 16) and expanded in :meth:`transcript`, once the users' rows are gone.
    """

    def __init__(self, watch=(), messages: Literal["all", "watched"] = "watched",
                 outputs: Literal["all", "watched"] = "watched", answers: bool = True, statistics: bool = False,
                 watched: bool = True):
        self.watch = set(int(u) for u in watch)
        self.keep_all_messages, self.keep_all_outputs, self.keep_answers = messages == "all", outputs == "all", answers
        self.keep_watched = watched
        self.answer_time: list[tuple[float, int]] = []  # (time, answers) of each batch
        self.answer_user: list[np.ndarray] = []
        self.messages: list[np.ndarray] = []
        self.watched: list[WatchedAnswers] = []
        self.output_parts: list[OutputPart] = []
        self.held_out_parts: list[tuple[np.ndarray, sparse.csr_array]] = []
        self.rounds: list[Round] = []
        self.releases: list[Release] = []
        self.keep_statistics, self.statistics = statistics, None

    def is_watched(self, ids: np.ndarray, inserted: np.ndarray) -> np.ndarray:
        mask = inserted.copy()
        if self.watch:
            mask |= np.isin(ids, np.fromiter(self.watch, np.int64))
        return mask

    def answers(self, now: float, ids: np.ndarray, answer: np.ndarray, watched: np.ndarray, queries, messages,
                take) -> None:
        if self.keep_answers:
            self.answer_time.append((now, ids.size))
            self.answer_user.append(ids.astype(np.int32) if ids.size == 0 or ids.max() < 2 ** 31 else ids.copy())
        if self.keep_all_messages:
            self.messages.append(messages)
        if self.keep_watched and watched.any():
            rows = np.flatnonzero(watched)
            self.watched.append(WatchedAnswers(ids[rows], answer[rows], np.full(rows.size, now), take(queries, rows),
                                               messages[rows]))

    def outputs(self, ids: np.ndarray, outputs: np.ndarray | None, watched: np.ndarray) -> None:
        if outputs is None:
            return
        keep = np.ones(ids.size, bool) if self.keep_all_outputs else watched
        if keep.any():
            self.output_parts.append(OutputPart(ids[keep], outputs[keep]))

    def held_out(self, ids: np.ndarray, ratings: sparse.csr_array) -> None:
        """Users' held-out ratings (rows follow ``ids``), kept for scoring."""
        self.held_out_parts.append((ids, sparse.coo_array(ratings)))

    def _held_out_table(self, n_users: int) -> sparse.csr_array | None:
        if not self.held_out_parts:
            return None
        rows = np.concatenate([ids[part.row] for ids, part in self.held_out_parts])
        cols = np.concatenate([part.col for _, part in self.held_out_parts])
        values = np.concatenate([part.data for _, part in self.held_out_parts])
        return sparse.csr_array((values, (rows, cols)), shape=(n_users, self.held_out_parts[0][1].shape[1]))

    def transcript(self, arrival, departure, cluster, inserted: np.ndarray) -> Transcript:
        """The run's record, handed over: the recorder lets go of its parts once they are joined (a caller that
        keeps the recorder does not hold the log twice)."""
        def cat(parts, dtype):
            return np.concatenate(parts) if parts else np.zeros(0, dtype)

        watched = WatchedAnswers.concat(self.watched) if self.watched else None
        outputs = None
        output_user = np.zeros(0, np.int64)
        if self.output_parts:
            output_user = cat([p.users for p in self.output_parts], np.int64)
            outputs = stack_rows([p.outputs for p in self.output_parts])
        record = Transcript(arrival=arrival, departure=departure, user_cluster=cluster,
                            answer_time=np.repeat([t for t, _ in self.answer_time], [n for _, n in self.answer_time]
                                                  ).astype(float),
                            answer_user=cat(self.answer_user, np.int64).astype(np.int64, copy=False),
                            messages=stack_rows(self.messages) if self.keep_all_messages and self.messages
                            else (np.zeros((0, 1), bool) if self.keep_all_messages else None),
                            releases=self.releases, rounds=self.rounds, watched=watched,
                            output_user=output_user, outputs=outputs, inserted=inserted,
                            held_out=self._held_out_table(arrival.size), statistics=self.statistics)
        for parts in (self.answer_time, self.answer_user, self.messages, self.watched, self.output_parts,
                      self.held_out_parts):
            parts.clear()
        return record


def stack_rows(parts: list):
    """Concatenate per-user rows on axis 0: arrays, sparse matrices, or a type with ``concat`` (low-rank rows)."""
    if parts and sparse.issparse(parts[0]):
        return sparse.vstack(parts, format="csr")
    if parts and hasattr(type(parts[0]), "concat"):
        return type(parts[0]).concat(parts)
    return np.concatenate(parts)


@dataclass(frozen=True, kw_only=True)
class View:
    """What an adversary sees under one threat model, for a batch of runs (or canaries): one class per kind.

    Per-run fields have runs on axis 0. ``view_class(kind)`` gives a kind's class; ``kind`` is its tag.
    """

    kind: ClassVar[ViewKind]
    #: canaries: the audited users' ids in the one run this view is cut from (None: one row per run)
    audited: np.ndarray | None = None
    #: when the audited users arrived (public, as in Calandrino et al.'s differencing): per run an array of
    #: the run's audited users' arrival times (canaries: one array, in ``audited`` order); None if not cut
    arrival: Any = None

    def __len__(self) -> int:
        return len(self.audited) if self.audited is not None else self._runs()

    def _runs(self) -> int:
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class MessagesView(View):
    """An untrusted server's view: each run's target messages and public queries, one row per run.

    ``queries`` has one entry per answer; an entry with a single row applies to every run (local replay
    fixes the target's query).
    """

    kind: ClassVar[ViewKind] = "messages"
    messages: np.ndarray
    queries: tuple = ()

    def _runs(self) -> int:
        return len(self.messages)


@dataclass(frozen=True, kw_only=True)
class ReleasesView(View):
    """The central-DP view: published states (``releases``: estimates; ``rounds``: broadcasts) per run."""

    kind: ClassVar[ViewKind] = "releases"
    releases: tuple = ()
    rounds: tuple = ()

    def _runs(self) -> int:
        return len(self.releases)


@dataclass(frozen=True, kw_only=True)
class OthersView(ReleasesView):
    """The joint-DP view: the releases plus every other user's personal output (``others``, per run)."""

    kind: ClassVar[ViewKind] = "others"
    others: Any = None


@dataclass(frozen=True, kw_only=True)
class StatisticsView(OthersView):
    """White box: the mechanism's noisy statistics (a dict of arrays, runs on axis 0) beside the releases and
    every personal output."""

    kind: ClassVar[ViewKind] = "statistics"
    statistics: dict

    def _runs(self) -> int:
        return len(next(iter(self.statistics.values()))) if self.statistics else len(self.releases)


@dataclass(frozen=True, kw_only=True)
class TargetView(View):
    """The target's own personal output, one per run (joint DP says nothing about it: a negative control)."""

    kind: ClassVar[ViewKind] = "target"
    target: Any

    def _runs(self) -> int:
        return len(self.target)


VIEW_CLASSES: dict[str, type[View]] = {cls.kind: cls for cls in (MessagesView, ReleasesView, OthersView,
                                                                   StatisticsView, TargetView)}


def view_class(kind: ViewKind) -> type[View]:
    """The class of the views of ``kind``."""
    return VIEW_CLASSES[kind]


def watched_messages(transcript: Transcript, users: np.ndarray, answers: int) -> View:
    """The ``messages`` view of ``users`` (one row each): their ``answers`` answers, bits concatenated.

    Every user must have answered exactly ``answers`` queries.
    """
    w = transcript.watched
    users = np.asarray(users, dtype=np.int64)
    if w is None:
        raise ValueError("the run recorded no watched user")
    order = np.lexsort((w.user, w.answer))  # by answer, then user
    parts, queries = [], []
    for a in range(answers):
        rows = order[w.answer[order] == a]
        pos = {int(u): i for i, u in enumerate(w.user[rows])}
        missing = [int(u) for u in users if int(u) not in pos]
        if missing:
            raise ParameterError("churn.horizon",
                                 f"{len(missing)} watched user(s) did not give answer {a + 1} of {answers} "
                             f"(e.g. user {missing[0]}): the horizon is too short for them")
        pick = rows[[pos[int(u)] for u in users]]
        parts.append(w.messages[pick])
        queries.append(w.queries[pick])
    return MessagesView(messages=np.concatenate(parts, axis=1), queries=tuple(queries))


def releases_view(transcript: Transcript, audited: np.ndarray | None = None) -> View:
    """The central-DP view: the published states only (and the ``audited`` users' public arrival times)."""
    arrival = None if audited is None else transcript.arrival[np.asarray(audited, dtype=np.int64)]
    return ReleasesView(releases=tuple(transcript.releases), rounds=tuple(transcript.rounds), arrival=arrival)


def statistics_view(transcript: Transcript, audited: np.ndarray) -> View:
    """The white-box view: the noisy statistics (one run: runs axis of 1), the releases, every personal output."""
    if transcript.statistics is None:
        raise ValueError("the run recorded no statistics (its mechanism models none, or the recorder dropped them)")
    view = others_view(transcript, int(audited[0]))
    return StatisticsView(releases=view.releases, rounds=view.rounds, others=view.others,
                          statistics={k: np.asarray(v)[None] for k, v in transcript.statistics.items()},
                          arrival=transcript.arrival[np.asarray(audited, dtype=np.int64)])


def others_view(transcript: Transcript, target: int) -> View:
    """The joint-DP view: releases plus every other user's personal output."""
    keep = transcript.output_user != target
    outputs = None if transcript.outputs is None else transcript.outputs[keep]
    return OthersView(releases=tuple(transcript.releases), rounds=tuple(transcript.rounds),
                      others=(transcript.output_user[keep], outputs))


def target_view(transcript: Transcript, target: int) -> View:
    """The target's own personal output (joint DP says nothing about it: a negative control)."""
    rows = transcript.output_user == target
    return TargetView(target=None if transcript.outputs is None else transcript.outputs[rows])


def rows_of(users: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Positions in ``users`` (distinct ids) of each id in ``wanted``; every one must be there."""
    order = np.argsort(users, kind="stable")
    at = np.minimum(np.searchsorted(users[order], wanted), max(users.size - 1, 0))
    rows = order[at] if users.size else at
    missing = users.size == 0 or not np.array_equal(users[rows], wanted)
    if missing:
        raise ParameterError("churn.horizon", "some audited users left no personal output in the run (the horizon "
                             "ends before they finish?)")
    return rows


def canary_view(transcript: Transcript, kind: ViewKind, canaries: np.ndarray) -> View:
    """The ``releases``, ``others`` or ``target`` view of one run holding many audited canaries.

    Every canary's score comes from the same run: ``releases`` as published,
    ``others`` with every personal output (an attack leaves out the canary's
    own), ``target`` with the canaries' own outputs in ``canaries`` order.
    """
    canaries = np.asarray(canaries, dtype=np.int64)
    if kind == "statistics":
        view = statistics_view(transcript, canaries)
        return StatisticsView(releases=(view.releases,), rounds=(view.rounds,),
                              others=[(transcript.output_user, transcript.outputs)], statistics=view.statistics,
                              audited=canaries, arrival=(view.arrival,))
    if kind == "target":
        if transcript.outputs is None:
            raise ValueError("the run recorded no personal output")
        return TargetView(target=[transcript.outputs[rows_of(transcript.output_user, canaries)]], audited=canaries)
    if kind not in ("releases", "others"):
        raise ValueError(f"no canary view of kind {kind!r}")
    published = dict(releases=(tuple(transcript.releases),), rounds=(tuple(transcript.rounds),), audited=canaries,
                     arrival=(transcript.arrival[canaries],))
    if kind == "others":
        return OthersView(others=[(transcript.output_user, transcript.outputs)], **published)
    return ReleasesView(**published)
