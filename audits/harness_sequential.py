"""``run_audit(..., sequential=True)``: batches of both worlds fed to the anytime-valid test until it stops.

The statistics are :mod:`recaudit.audits.stats.sequential`; this module draws and scores the batches.
"""
from __future__ import annotations

import numpy as np

from recaudit.core.errors import ParameterError
from recaudit.attacks.learned import output_table
from recaudit.mechanisms import PrivacyClaim

from .blackbox import _hand_scores
from .stats.rates import BoundResult
from .stats.sequential import SequentialResult, SequentialTest, next_batch

__all__ = ["called_one_world", "sequential_bound", "sequential_line"]


def called_one_world(bound: BoundResult) -> bool:
    """The counted runs were all called one world by their cuts (an ε_LB of 0 from them says nothing)."""
    called_one = bound.false_pos + bound.n_pos - bound.false_neg
    return bound.n_neg + bound.n_pos > 0 and called_one in (0, bound.n_neg + bound.n_pos)


def sequential_line(bound: SequentialResult) -> str:
    """The assertion message's line on a sequential audit: runs drawn, why it stopped, the claim's e-value."""
    return (f"  sequential: {bound.runs} of {bound.budget} runs per world drawn (first batch {bound.batch}); "
            f"stopped: {bound.explanation}; e-value of the claim {bound.e_value:.4g} (1/α = {1 / bound.alpha:.4g})")


def sequential_bound(mechanism, claimed: PrivacyClaim, pair, budget: int, alpha: float, world_seeds, score,
                     attack, method: str, batch: int) -> tuple[SequentialResult, str]:
    """Batches of both worlds (world ``w``'s runs from one generator, seed child ``w``), scored and fed to the
    test until it stops; each batch permuted (child 2) before its runs are paired. Returns the bound and the
    attack's name (``score``: a hand-written score, ``identity``: the scalar output)."""
    batch = int(batch)
    if method != "clopper-pearson":
        raise ParameterError("method", f"sequential audits use an e-process; method={method!r} is for the fixed design")
    scorer = score if score is not None else (getattr(mechanism, "score", None) if attack == "auto" else None)
    if batch < 1 or budget < 2 * batch:
        raise ParameterError("batch",
                             f"a sequential audit needs batch >= 1 and trials >= 2 batches (trials = {budget}, "
                         f"batch = {batch})")
    if scorer is None and attack not in ("auto", "identity"):
        raise ParameterError("score",
                             "sequential audits score each batch as it comes: pass score= (or give the mechanism "
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
                    raise ParameterError("score", "sequential audits need one number per run: pass score= (or give the "
                                     "mechanism .score); learned attacks need the fixed design")
                scores.append(table.values[:, 0])
        test.update(scores[0], scores[1], permute)
    return test.result(), "score" if scorer is not None else "identity"
