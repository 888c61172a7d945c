"""What a mechanism's own work costs, stated from its parameters for the cost estimate
(``recaudit.audits.language.limits``)."""
from __future__ import annotations

from dataclasses import dataclass

#: a small numpy call's fixed cost in ``RoundCost.operations`` (~3 µs), for work done in Python loops
CALL_OPERATIONS = 3e3


@dataclass(frozen=True)
class RoundCost:
    """A mechanism's own work in one round, beyond the engine's (the cost estimate,
    ``recaudit.audits.language.limits``, adds it).

    ``operations``: arithmetic per round (products, eigen-solves, noise draws), ``once``: before the first
    (e.g. fitting a public panel); ``held_user_operations``: per round and per user the server has heard from
    so far (a server retraining on everything it holds); ``user_operations``: once per user (its personal
    output); ``state_bytes``: the server's state and its temporaries at their largest;
    ``user_bytes``: what the protocol keeps per user to the end; ``run_bytes``: what one run of a batched
    block (``panel_runs``) holds at its peak, the statistics the attack scores included; ``release_bytes``: what
    one release holds (``full_runs`` keeps every release of every run in a block for the attacks).
    """

    operations: float = 0.0
    once: float = 0.0
    held_user_operations: float = 0.0
    user_operations: float = 0.0
    state_bytes: float = 0.0
    user_bytes: float = 0.0
    run_bytes: float = 0.0
    release_bytes: float = 0.0
