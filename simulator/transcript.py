"""The record of a simulated run, and the views a threat model cuts from it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Release:
    """One published state: the server's item clustering at a time."""

    time: float
    users_seen: int
    item_labels: np.ndarray


@dataclass
class Transcript:
    """Time-ordered record of a run: users, queries answered, messages, releases.

    Users are indexed by arrival order. ``answers`` holds one row per answered
    query: the time, the user, and the released message bits. Queries are kept
    only for users listed in ``watched`` (dense sensing vectors for every user
    of a large run would not fit in memory).
    """

    arrival: np.ndarray
    departure: np.ndarray
    user_cluster: np.ndarray
    answer_time: np.ndarray
    answer_user: np.ndarray
    messages: np.ndarray
    releases: list[Release]
    watched_queries: dict[int, Any] = field(default_factory=dict)

    @property
    def n_users(self) -> int:
        return self.arrival.size

    @property
    def n_answered_users(self) -> int:
        answered = np.zeros(self.n_users, dtype=bool)
        answered[self.answer_user] = True
        return int(answered.sum())

    def present_at(self, time: float) -> np.ndarray:
        """Ids of the users present at ``time``."""
        return np.flatnonzero((self.arrival <= time) & (time < self.departure))


@dataclass(frozen=True)
class View:
    """What an adversary sees under one threat model.

    ``kind`` is ``messages`` (an untrusted server: the target's released
    messages and public queries), ``releases`` (published states only),
    ``others`` or ``target``. ``messages`` has one row per trial or query.
    """

    kind: str
    messages: np.ndarray | None = None
    queries: Any = None
    releases: tuple[Release, ...] = ()


def messages_view(transcript: Transcript, user: int) -> View:
    """The local-DP view of one user: its released messages and its queries."""
    rows = transcript.answer_user == user
    return View("messages", messages=transcript.messages[rows], queries=transcript.watched_queries.get(user))


def releases_view(transcript: Transcript) -> View:
    """The central-DP view: the published states only."""
    return View("releases", releases=tuple(transcript.releases))
