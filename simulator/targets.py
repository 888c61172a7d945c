"""The rows audited users have in two neighbouring worlds (:class:`TargetPair`), and their true sketch bits.

The policies that build the pairs for a claim's neighbouring relation live with the audit designs
(:mod:`recaudit.audits.designs.pairs`); attacks read the pairs they build.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from recaudit.mechanisms import LocalMechanism, Mechanism, UserBatch


@dataclass(frozen=True)
class TargetPair:
    """Rows of ``n`` audited users in world 0 (``rows0``) and world 1 (``rows1``).

    For a local-replay target, ``queries`` are its public queries (one entry
    per answer, one row each), fixed before the trials, and ``sketches[b]``
    its true sketch bits in world ``b`` (all answers concatenated).
    """

    rows0: UserBatch
    rows1: UserBatch
    queries: tuple[Any, ...] = ()
    sketches: np.ndarray | None = None  # (2, n_bits) for a local-replay target
    query_state: Any = None  # the server state the queries were drawn under (to draw more)

    def __len__(self) -> int:
        return len(self.rows0)

    def rows(self, world: int) -> UserBatch:
        return self.rows1 if world else self.rows0

    @property
    def differing_bits(self) -> int | None:
        if self.sketches is None:
            return None
        return int(np.count_nonzero(self.sketches[0] != self.sketches[1]))


def sketches_under(mechanism: LocalMechanism, rows: UserBatch, queries: tuple[Any, ...]) -> np.ndarray:
    """True sketch bits of ``rows`` under every answer's queries, concatenated: (n_rows, n_bits).

    A query entry with one row applies to every row.
    """
    parts = []
    for q in queries:
        if len(rows) != q.shape[0]:
            q = mechanism.take_queries(q, np.zeros(len(rows), dtype=np.int64))
        parts.append(mechanism.sketch(rows, q))
    return np.concatenate(parts, axis=1)



def is_local(mechanism: Mechanism) -> bool:
    """Whether the mechanism is a one-round local randomizer (local replay is valid for it)."""
    return isinstance(mechanism, LocalMechanism)
