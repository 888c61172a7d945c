"""What a mechanism's own work costs, stated from its parameters for the cost estimate (``audits.io.limits``)."""
from __future__ import annotations

from dataclasses import dataclass

#: a small numpy call's fixed cost in ``RoundCost.operations`` (~3 µs), for work done in Python loops
CALL_OPERATIONS = 3e3


@dataclass(frozen=True)
class RoundCost:
    """A mechanism's own work in one round, beyond the engine's (the cost estimate, ``audits.io.limits``, adds it).

    ``operations``: arithmetic per round (products, eigen-solves, noise draws), ``once``: before the first
    (e.g. fitting a public panel); ``state_bytes``: the server's state and its temporaries at their largest;
    ``user_bytes``: what the protocol keeps per user to the end.
    """

    operations: float = 0.0
    once: float = 0.0
    state_bytes: float = 0.0
    user_bytes: float = 0.0
