"""``run_audit(..., sequential=True)``: batches of both worlds fed to the anytime-valid test until it stops.

The statistics are :mod:`recaudit.audits.stats.sequential`; this module draws and scores the batches.
"""
from __future__ import annotations

import numpy as np

from recaudit.attacks.learned import output_table
from recaudit.mechanisms import PrivacyClaim

from .blackbox import _hand_scores
from .stats.rates import BoundResult
from .stats.sequential import SequentialResult, SequentialTest, next_batch

__all__ = ["called_one_world", "sequential_bound"]


def called_one_world(bound: BoundResult) -> bool:
    """The counted runs were all called one world by their cuts (an ε_LB of 0 from them says nothing)."""
    called_one = bound.false_pos + bound.n_pos - bound.false_neg
    return bound.n_neg + bound.n_pos > 0 and called_one in (0, bound.n_neg + bound.n_pos)


def sequential_bound(mechanism, claimed: PrivacyClaim, pair, budget: int, alpha: float, world_seeds, scorer,
                      attack, batch: int) -> SequentialResult:
    """Batches of both worlds (world ``w``'s runs from one generator, seed child ``w``), scored and fed to the
    test until it stops; each batch permuted (child 2) before its runs are paired."""
    if batch < 1 or budget < 2 * batch:
        raise ValueError(f"a sequential audit needs batch >= 1 and trials >= 2 batches (trials = {budget}, "
                         f"batch = {batch})")
    if scorer is None and attack not in ("auto", "identity"):
        raise ValueError("sequential audits score each batch as it comes: pass score= (or give the mechanism "
                         ".score), or audit scalar outputs; learned attacks need the fixed design")
    gens = [np.random.default_rng(s) for s in world_seeds[:2]]
    permute = np.random.default_rng(world_seeds[2])
    epsilon = claimed.epsilon if claimed.promises else 0.0
    test = SequentialTest(epsilon, claimed.delta, alpha, budget)
    while test.reason is None:
        n = min(next_batch(test.runs, batch), budget - test.runs)
        scores = []
        for w, (value, gen) in enumerate(zip(pair, gens)):
            out = mechanism.sample(value, n, gen)
            if scorer is not None:
                scores.append(_hand_scores(out, scorer, n, w))
            else:
                table = output_table(out, n, f"world {w}: mechanism.sample({value!r}, {n}, rng)")
                if not table.is_scalar:
                    raise ValueError("sequential audits need one number per run: pass score= (or give the "
                                     "mechanism .score); learned attacks need the fixed design")
                scores.append(table.values[:, 0])
        test.update(scores[0], scores[1], permute)
    return test.result()
