"""The likelihood-ratio test on an audited user's released messages (Neyman–Pearson optimal)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recaudit.mechanisms import LocalMechanism
from recaudit.simulator.targets import sketches_under

from .base import Attack


#: the score of a query impossible in one world (an infinite log-likelihood ratio, kept finite)
QUERY_CAP = 1e3
#: messages of at most this many bits under one fixed query are scored from a table of every possible message
TABLE_BITS = 8


def message_table(mechanism, messages: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(codes, table)``: boolean ``messages`` (runs, bits) as byte codes, and the score of each of the 2^bits
    possible messages, so that the runs' scores are ``table[codes]``.

    Each message is scored alone, so the table holds the very numbers the per-run formula gives (tested), at
    one byte of work per run instead of two likelihoods in float64.
    """
    bits = messages.shape[1]
    every = np.unpackbits(np.arange(2 ** bits, dtype=np.uint8)[:, None], axis=1, bitorder="little")[:, :bits]
    every = every.astype(bool)
    table = (mechanism.message_log_likelihood(every, np.broadcast_to(s1, every.shape))
             - mechanism.message_log_likelihood(every, np.broadcast_to(s0, every.shape)))
    return message_codes(messages), table


def message_codes(messages: np.ndarray) -> np.ndarray:
    """Boolean messages (runs, bits <= 8) as bytes: bit ``j`` of a run's code is its message's bit ``j``."""
    if messages.shape[1] == 1:
        return messages[:, 0].view(np.uint8)
    return np.packbits(messages, axis=1, bitorder="little")[:, 0]


@dataclass
class LikelihoodRatioAttack(Attack, kind="likelihood_ratio"):
    """Score = log P(messages | world 1) − log P(messages | world 0).

    Uses the mechanism's *published* randomizer and the user's true sketches
    in both worlds under each run's public queries; for a known randomizer
    this is the most powerful test, so the audit's bound is as tight as the
    trial count allows. Reads the ``messages`` view of local mechanisms.
    When the queries read the rated set, the query is evidence too: the score
    adds ``log P(queries | world-1 row) − log P(queries | world-0 row)``
    (``query_log_likelihood``), an impossible query counting as ±QUERY_CAP
    so that scores stay finite.
    """

    views = ("messages",)
    reads = (LocalMechanism,)
    reads_text = "a local randomizer's messages (a LocalMechanism)"

    def scores(self, mechanism, pair, view) -> np.ndarray:
        self.check_view(view, mechanism)
        tabled = self.score_table(mechanism, pair, view)
        if tabled is not None:
            codes, table = tabled
            return table[codes]
        messages = view.messages
        if pair.sketches is not None and all(q.shape[0] == 1 for q in view.queries):
            s0, s1 = pair.sketches  # local replay: one fixed query for every run
        else:
            runs = np.arange(len(messages)) if len(pair) == len(messages) else np.zeros(len(messages), np.int64)
            s0 = sketches_under(mechanism, pair.rows0.take(runs), view.queries)
            s1 = sketches_under(mechanism, pair.rows1.take(runs), view.queries)
        s0 = np.broadcast_to(s0, messages.shape)
        s1 = np.broadcast_to(s1, messages.shape)
        score = mechanism.message_log_likelihood(messages, s1) - mechanism.message_log_likelihood(messages, s0)
        if getattr(mechanism, "queries_read_rated", False):
            runs = np.arange(len(messages)) if len(pair) == len(messages) else np.zeros(len(messages), np.int64)
            for q in view.queries:
                if q.shape[0] != len(messages):
                    q = mechanism.take_queries(q, np.zeros(len(messages), dtype=np.int64))
                ll0 = mechanism.query_log_likelihood(q, pair.rows0.rated[runs])
                ll1 = mechanism.query_log_likelihood(q, pair.rows1.rated[runs])
                with np.errstate(invalid="ignore"):
                    score = score + np.clip(np.nan_to_num(ll1 - ll0, nan=0.0), -QUERY_CAP, QUERY_CAP)
        return score

    def score_table(self, mechanism, pair, view) -> tuple[np.ndarray, np.ndarray] | None:
        """Messages of at most ``TABLE_BITS`` bits under one fixed query (local replay): scored from a table of
        every possible message (:func:`message_table`)."""
        messages = view.messages if view.kind == "messages" else None
        if (messages is None or not isinstance(mechanism, LocalMechanism) or pair.sketches is None
                or not all(q.shape[0] == 1 for q in view.queries) or messages.dtype != bool or messages.ndim != 2
                or messages.shape[1] > TABLE_BITS or getattr(mechanism, "queries_read_rated", False)):
            return None
        s0, s1 = pair.sketches
        key = (repr(mechanism), s0.tobytes(), s1.tobytes(), messages.shape[1])
        cached = self.__dict__.get("_table")  # an audit asks with every block: the table of its last pair
        if cached is None or cached[0] != key:
            self.__dict__["_table"] = cached = (key, message_table(mechanism, messages[:0], s0, s1)[1])
        return message_codes(messages), cached[1]
