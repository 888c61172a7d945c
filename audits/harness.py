"""Test-suite assertions for differential privacy: ``assert_dp`` and ``assert_not_dp``.

Runs a mechanism many times on each of two neighbouring dataset values,
scores the outputs with an attack, and turns the scores into an ε lower
bound (docs/statistics.md, "The distinguishing game"): :func:`recaudit.audits.stats.bounds.split_epsilon_bound`
(Clopper–Pearson, any mechanism) or :func:`recaudit.audits.stats.gdp.split_gdp_bound`
(Gaussian DP, for Gaussian-like mechanisms). The claim is *violated* when
ε_LB > ε_claimed; this is wrongly concluded for a mechanism that meets its
claim with probability ≤ ``alpha``. So:

* ``assert_dp`` fails falsely (on a correct mechanism) with probability ≤ alpha;
* ``assert_not_dp`` succeeds only if the trials suffice to *show* the
  violation; its failure probability on a broken mechanism is a power
  question (more trials, a better ``score``), and impossible to pass when
  the ceiling — the bound at perfect separation — is not above the claim.

A mechanism here is a :class:`SampledMechanism`: any object with
``sample(value, n, rng)`` returning ``n`` independent outputs on the dataset ``value``: an array of shape ``(n,)``
(scalars), ``(n, d)`` (vectors, indices) or a tuple/dict of such arrays
(mixed outputs). Optional attributes ``claim`` (a
:class:`recaudit.mechanisms.base.PrivacyClaim`, or anything with ``epsilon`` and
``delta``), ``neighbours`` (a pair of dataset values) and
``score(outputs) -> array`` fill in what the call leaves out. Without a
hand-written score, scalar outputs are their own score and other outputs are
scored by a learned attack (:mod:`recaudit.attacks.learned`) fitted on selection runs
only. Randomness: ``np.random.SeedSequence(seed).spawn(4)``: world 0, world 1,
the permutation of each world's runs before splitting, the attack's fit; so
a fixed seed reproduces the audit exactly.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Protocol, runtime_checkable

import numpy as np

from recaudit.core.errors import ParameterError
from recaudit.attacks.learned import OutputAttack, output_table
from recaudit.mechanisms import PrivacyClaim

from .stats.rates import BoundResult, epsilon_lower_bound
from .stats.gdp import gdp_epsilon, gdp_mu_lower_bound, heldout_gdp_bound
from .stats.bounds import heldout_epsilon_bound
from .stats.estimators import ESTIMATORS, GaussianDP, pairs_estimate
from .stats.sequential import SequentialResult
from .harness_sequential import called_one_world, sequential_bound, sequential_line
from .harness_pairs import PATTERNS, NeighbourCandidates, candidate_pairs
from .stats.pvalues import holm_adjust, p_value_from_bound
from .blackbox import (FIT_FRACTION, LEARNED, PROBE_DRAWS, _encode_categories, _hand_scores,  # noqa: F401
                       _learned_scores, _probe, _split_sizes, NotReproducibleWarning)

__all__ = ["SampledMechanism", "METHODS", "ATTACK_CHOICES", "AuditRun", "NeighbourCandidates", "NeighbourSearch",
           "PATTERNS",
           "as_seed_sequence", "candidate_pairs", "run_audit", "search_neighbours", "assert_dp",
           "assert_not_dp", "format_bound"]

@runtime_checkable
class SampledMechanism(Protocol):
    """What the harness audits: a black box that samples outputs on a dataset value (duck-typed).

    Not :class:`recaudit.mechanisms.base.Mechanism`, the round protocol that scenarios simulate. Optional
    attributes ``claim``, ``neighbours`` and ``score(outputs)`` fill in what a call leaves out.
    """

    def sample(self, value: Any, n: int, rng: np.random.Generator) -> Any:
        """``n`` independent outputs on ``value``: an array with ``n`` rows, or a tuple/dict of such."""
        ...


#: ``method=``: the registered estimators that bound a split of paired runs
METHODS = tuple(cls.method for cls in ESTIMATORS.values() if cls.input == "pairs" and cls.threshold_rule == "split")
#: ``attack=``: ``auto`` (hand-written score if any, the output itself for scalars, else learned),
#: ``identity`` (the scalar output) or a learned attack's name (``LEARNED``).
ATTACK_CHOICES = ("auto", "identity", *LEARNED)


@dataclass(frozen=True)
class AuditRun:
    """One audit: the bound, the claim it was compared with, and how it was run."""

    bound: BoundResult
    claimed_epsilon: float
    claimed_delta: float
    trials: int
    seed: Any
    neighbours: tuple
    attack: str = "score"
    p_value: float | None = None
    #: None when the seed reproduces the run; else why it does not (an unseedable library, a probe that differed)
    not_reproducible: str | None = None
    #: the neighbouring relation of the pair (``recaudit.audits.adapters.add_remove`` / ``replace_one`` name theirs)
    neighbouring: str = "as given"
    #: how the claim's (ε, δ) was derived, when it was stated in another currency (zCDP, Rényi, GDP)
    conversion: str | None = None
    #: the ε_LB the optimal test would reach on these counted runs if the claim were exactly tight (None: no claim)
    optimal: float | None = None
    #: the chosen cut calls every counted run one world: its ε_LB of 0 is no evidence of privacy
    uninformative: bool = False

    @property
    def reproducible(self) -> bool:
        return self.not_reproducible is None

    @property
    def sequential(self) -> bool:  # drawn in batches, stopped by an anytime-valid test
        return isinstance(self.bound, SequentialResult)

    @property
    def violated(self) -> bool:
        return self.bound.violated if self.sequential else self.bound.epsilon_lb > self.claimed_epsilon

    def epsilon_curve(self, deltas) -> np.ndarray:
        """ε_LB at each δ from the one fixed test's counts (Clopper–Pearson).

        The rate bounds are the only random quantities and ε(δ) is a fixed
        function of them, so the whole curve holds at once with confidence 1 − α.
        """
        b = self.bound
        return np.atleast_1d(epsilon_lower_bound(b.false_pos, b.n_neg, b.false_neg, b.n_pos, b.alpha,
                                                 np.asarray(deltas, dtype=float)))


def _resolve_claim(mechanism, claim) -> PrivacyClaim:
    claim = claim if claim is not None else getattr(mechanism, "claim", None)
    if claim is None:
        raise ParameterError("claim", "no claim: pass claim=... or give the mechanism a .claim")
    if isinstance(claim, PrivacyClaim):
        resolved = claim
    elif isinstance(claim, (tuple, list)):
        epsilon, delta = (float(x) for x in claim)
        resolved = PrivacyClaim(epsilon=epsilon, delta=delta, model="central")
    else:
        resolved = PrivacyClaim(epsilon=float(claim.epsilon), delta=float(getattr(claim, "delta", 0.0)),
                                model="central", gaussian_mu=getattr(claim, "gaussian_mu", None))
    if not math.isfinite(resolved.epsilon):  # (a negative or NaN ε: PrivacyClaim refuses it)
        raise ParameterError("claim", f"claim: ε = {resolved.epsilon} promises nothing an audit can test (no ε_LB "
                                      "exceeds it); claim a finite ε >= 0")
    return resolved


def _resolve_neighbours(mechanism, neighbours) -> tuple:
    neighbours = neighbours if neighbours is not None else getattr(mechanism, "neighbours", None)
    if isinstance(neighbours, NeighbourCandidates):
        return neighbours
    if neighbours is None or len(neighbours) != 2:
        raise ParameterError("neighbours",
                             "need a neighbouring pair: pass neighbours=(d0, d1) or give the mechanism .neighbours "
                         "(or a NeighbourCandidates family, see candidate_pairs)")
    return neighbours if hasattr(neighbours, "relation") else tuple(neighbours)


def as_seed_sequence(seed) -> np.random.SeedSequence:
    """A fresh SeedSequence for ``seed`` (a copy if one is given, so reuse reproduces)."""
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=seed.spawn_key, pool_size=seed.pool_size)
    return np.random.SeedSequence(seed)


def _check_attack(attack, score) -> None:
    if isinstance(attack, OutputAttack):
        return
    if attack not in ATTACK_CHOICES:
        raise ParameterError("attack",
                             f"attack must be one of {ATTACK_CHOICES} or a recaudit.attacks.learned.OutputAttack, "
                         f"got {attack!r}")
    if score is not None and attack != "auto":
        raise ParameterError("score", f"pass either score= (a hand-written attack) or attack={attack!r}, not both")


def run_audit(
    mechanism: SampledMechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
    attack: str | OutputAttack = "auto",
    selection_fraction: float = 0.5,
    sequential: bool = False, batch: int = 100, progress: bool | None = None,
) -> AuditRun:
    """Sample both worlds, score them, and bound ε; no verdict is asserted.

    ``progress``: log the estimate and each step (a stderr handler when logging is not set up); by default
    when the probe's pace says the audit takes over 30 s.

    ``sequential=True``: ``trials`` is a budget, runs come in batches from ``batch`` until an anytime-valid
    test decides (:mod:`.harness_sequential`; docs/statistics.md, "Sequential audits").

    ``claim`` may be a PrivacyClaim-like object or an ``(epsilon, delta)``
    pair. ``trials`` runs per world. Each world's runs are permuted with a
    seeded generator, then ``selection_fraction`` of them choose the test
    (DP-Sniper's rare-event cuts under the simultaneous criterion) and the
    rest are counted. The score: ``score=`` or the mechanism's ``.score``
    if given; else ``attack``: ``"auto"`` uses the output itself when it is
    one number per run, the ``histogram`` attack for small discrete outputs,
    and otherwise the better of ``logistic`` and ``sparse_boosted``
    on the selection runs left after fitting (:func:`_learned_scores`); a
    learned attack is fitted on the first ``FIT_FRACTION`` of the selection
    runs only. ``seed``: anything
    ``np.random.SeedSequence`` accepts, or a SeedSequence (children: world
    0, world 1, the permutation, the attack's fit). ``ra.audit`` is this function.

    >>> import recaudit as ra
    >>> from recaudit.mechanisms.reference import LaplaceCount      # a count plus Laplace(1/ε) noise
    >>> run = ra.audit(LaplaceCount(1.0), trials=20_000, seed=1)
    >>> run.violated, round(run.bound.epsilon_lb, 3), round(run.bound.ceiling, 3)
    (False, 0.957, 7.182)
    """
    if method not in METHODS:
        raise ParameterError("method", f"method must be one of {METHODS}, got {method!r}")
    _check_attack(attack, score)
    claimed = _resolve_claim(mechanism, claim)
    if method == "gdp":
        GaussianDP().require(claimed)
    pair = _resolve_neighbours(mechanism, neighbours)
    if isinstance(pair, NeighbourCandidates):
        raise ParameterError("neighbours",
                             "run_audit takes one neighbouring pair; audit a NeighbourCandidates family with "
                         "search_neighbours (or assert_dp / assert_not_dp)")
    trials = int(trials)
    root = as_seed_sequence(seed)
    world_seeds = root.spawn(4)
    not_reproducible, step = _probe(mechanism, pair[0], trials, root.spawn(1)[0], progress)
    if sequential:
        bound, name = sequential_bound(mechanism, claimed, pair, trials, alpha, world_seeds, score, attack, method,
                                       batch)
        return AuditRun(bound, claimed.epsilon, claimed.delta, trials, seed, pair, name, bound.p_value,
                        not_reproducible,
                        getattr(pair, "relation", "as given"), claimed.conversion, None, called_one_world(bound))
    outputs = []
    for world, (value, ss) in enumerate(zip(pair, world_seeds[:2])):
        outputs.append(mechanism.sample(value, trials, np.random.default_rng(ss)))
        step(f"world {world}: {trials:,} draws")
    outputs = _encode_categories(outputs)
    permute = np.random.default_rng(world_seeds[2])
    orders = [permute.permutation(trials) for _ in range(2)]
    scorer = score if score is not None else (getattr(mechanism, "score", None) if attack == "auto" else None)
    if scorer is not None:
        scores = [_hand_scores(out, scorer, trials, w)[order] for w, (out, order) in enumerate(zip(outputs, orders))]
        k = _split_sizes(trials, selection_fraction)
        sel, evaluation, name = [s[:k] for s in scores], [s[k:] for s in scores], "score"
    else:
        tables = [output_table(out, trials, f"world {w}: mechanism.sample({_short(value, 60)}, {trials}, rng)",
                               max_ndim=2).take(order)
                  for w, (out, value, order) in enumerate(zip(outputs, pair, orders))]
        if attack == "identity" or (attack == "auto" and tables[0].is_scalar and not tables[0].discrete.all()):
            if not tables[0].is_scalar:
                raise ParameterError("attack", f"attack='identity' needs one number per trial; the outputs have "
                                 f"{tables[0].values.shape[1]} columns")
            k = _split_sizes(trials, selection_fraction)
            sel = [t.values[:k, 0] for t in tables]
            evaluation = [t.values[k:, 0] for t in tables]
            name = "identity"
        else:
            sel, evaluation, name = _learned_scores(attack, tables, selection_fraction, world_seeds[3], alpha,
                                                    claimed.delta)
    bound_of = heldout_gdp_bound if method == "gdp" else heldout_epsilon_bound
    bound = bound_of(sel[0], sel[1], evaluation[0], evaluation[1], alpha, claimed.delta, candidates="rare-event")
    step(f"scored ({name}) and bounded: ε_LB = {bound.epsilon_lb:.4g}")
    # the harness's gdp figure is documented as resting on the user's Gaussian model (assert_dp, run_audit):
    # its power figure is that model's too
    power = pairs_estimate(bound, _p_value(bound, claimed.epsilon), claimed, model_holds=method == "gdp")
    return AuditRun(bound, claimed.epsilon, claimed.delta, trials, seed, pair, name, power.p_value,
                    not_reproducible, getattr(pair, "relation", "as given"), claimed.conversion, power.optimal,
                    power.uninformative)


def _p_value(bound: BoundResult, claimed_epsilon: float) -> float:
    """p-value of "the claim holds" from the counted runs of the (fixed) chosen test."""
    counts = (bound.false_pos, bound.n_neg, bound.false_neg, bound.n_pos)
    if bound.method == "gdp":
        return p_value_from_bound(lambda a: float(gdp_epsilon(gdp_mu_lower_bound(*counts, a), bound.delta)),
                                  claimed_epsilon)
    return p_value_from_bound(lambda a: float(epsilon_lower_bound(*counts, a, bound.delta)), claimed_epsilon)


# --------------------------------------------------------------------------
# neighbour search


@dataclass(frozen=True)
class NeighbourSearch:
    """Every candidate pair's audit (bounds at alpha/K), Holm-adjusted p-values, and the worst pair."""

    runs: tuple
    adjusted_p: np.ndarray
    alpha: float

    @property
    def violated(self) -> bool:
        """Holm rejects "the claim holds" for some pair (⇔ some pair's ε_LB at alpha/K exceeds the claim)."""
        return bool(np.any(self.adjusted_p < self.alpha))

    @property
    def worst(self) -> AuditRun:
        """The pair with the smallest adjusted p-value (ties: the largest ε_LB)."""
        return min(self.runs, key=lambda r: (self.adjusted_p[self.runs.index(r)], -r.bound.epsilon_lb))


def search_neighbours(mechanism: SampledMechanism, candidates=None, claim=None, trials: int = 100_000,
                      alpha: float = 1e-3,
                      seed=0, **kwargs) -> NeighbourSearch:
    """Audit every pair of ``candidates`` (default: the mechanism's ``.neighbours``) as one family.

    Each pair is audited with :func:`run_audit` at ``alpha/K`` on its own
    spawned seed; its p-value comes from its counted runs and Holm's
    correction (statsmodels) controls the family-wise error at ``alpha``: a
    correct mechanism is flagged with probability ≤ alpha however many pairs.
    """
    candidates = candidates if candidates is not None else getattr(mechanism, "neighbours", None)
    candidates = candidates if isinstance(candidates, NeighbourCandidates) else NeighbourCandidates(candidates)
    seeds = as_seed_sequence(seed).spawn(len(candidates))
    level = alpha / len(candidates)
    runs = tuple(run_audit(mechanism, claim, pair, trials, level, s, **kwargs) for pair, s in zip(candidates, seeds))
    _, adjusted = holm_adjust([r.p_value for r in runs], alpha)
    return NeighbourSearch(runs, adjusted, float(alpha))


def format_bound(run: AuditRun) -> str:
    """The audit's figures, one per line, for assertion messages."""
    b = run.bound
    lines = [
        f"  ε_LB = {b.epsilon_lb:.4g} at confidence 1 − α, α = {b.alpha:g}",
        f"  ceiling = {b.ceiling:.4g} (the largest ε_LB " + (f"a budget of {b.budget} runs per world can show)"
                                                           if run.sequential else
                                                           f"{b.n_neg} + {b.n_pos} counted trials can show)"),
        f"  claimed ε = {run.claimed_epsilon:.4g}, δ = {run.claimed_delta:g}",
        f"  counts: FP = {b.false_pos}/{b.n_neg}, FN = {b.false_neg}/{b.n_pos} "
        f"(threshold {b.threshold:.6g}, direction {b.direction:+d}, {b.threshold_rule})",
    ]
    if b.mu_lb is not None:
        lines.append(f"  μ_LB = {b.mu_lb:.4g} (μ ceiling {b.mu_ceiling:.4g})")
    if run.optimal is not None:
        lines.append(f"  power: the optimal test would show ε_LB = {run.optimal:.4g} on these runs if the claim "
                     f"were exactly tight")
    lines += [sequential_line(b)] if run.sequential else []
    if run.uninformative:
        lines.append("  UNINFORMATIVE: the cut calls every counted run one world; ε_LB = 0 is no evidence")
    if run.conversion:
        lines.append(f"  claim converted: {run.conversion}")
    lines.append(f"  method = {b.method}, attack = {run.attack}, trials = {run.trials} per world, "
                 f"neighbours ({run.neighbouring}) = {_short(run.neighbours)}, seed = {run.seed!r}")
    if not run.reproducible:
        lines.append(f"  NOT REPRODUCIBLE: {run.not_reproducible}")
    return "\n".join(lines)


def _short(value, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _family_note(search: NeighbourSearch) -> str:
    k = len(search.runs)
    return (f"  worst of {k} candidate pairs (Holm over the family; each bound at α/{k}); "
            f"Holm-adjusted p = {float(min(search.adjusted_p)):.3g}")


def _audit(mechanism, claim, neighbours, trials, alpha, seed, kwargs) -> tuple[AuditRun, str]:
    pair = _resolve_neighbours(mechanism, neighbours)
    if isinstance(pair, NeighbourCandidates):
        search = search_neighbours(mechanism, pair, claim, trials, alpha, seed, **kwargs)
        return search.worst, "\n" + _family_note(search)
    return run_audit(mechanism, claim, pair, trials, alpha, seed, **kwargs), ""


def assert_dp(
    mechanism: SampledMechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
    attack: str | OutputAttack = "auto",
    selection_fraction: float = 0.5,
    sequential: bool = False, batch: int = 100,
) -> BoundResult:
    """Fail if the audit shows the claim violated (ε_LB > ε_claimed); else return the bound.

    For a mechanism that meets its claim this fails with probability ≤ alpha
    (for ``method="gdp"``: if its trade-off curve is Gaussian; the claim must
    carry ``gaussian_mu``). ``neighbours`` may be a :class:`NeighbourCandidates`
    family (:func:`candidate_pairs`): then every pair is audited, Holm
    controls alpha over them, and the worst pair is reported. Passing never
    proves privacy: it only means these trials found no violation.

    >>> import recaudit as ra
    >>> from recaudit.mechanisms.reference import LaplaceCount
    >>> ra.assert_dp(LaplaceCount(1.0), trials=20_000, seed=1).epsilon_lb <= 1.0
    True
    """
    run, note = _audit(mechanism, claim, neighbours, trials, alpha, seed,
                       dict(score=score, method=method, attack=attack, selection_fraction=selection_fraction,
                            sequential=sequential, batch=batch))
    if run.violated:
        raise AssertionError(
            f"privacy claim violated: ε_LB = {run.bound.epsilon_lb:.4g} > claimed ε = "
            f"{run.claimed_epsilon:.4g}\n{format_bound(run)}{note}"
        )
    return run.bound


def assert_not_dp(
    mechanism: SampledMechanism,
    claim=None,
    neighbours=None,
    trials: int = 100_000,
    alpha: float = 1e-3,
    seed=0,
    score: Callable | None = None,
    method: str = "clopper-pearson",
    attack: str | OutputAttack = "auto",
    selection_fraction: float = 0.5,
    sequential: bool = False, batch: int = 100,
) -> BoundResult:
    """Fail unless the audit shows the claim violated; return the bound when it does.

    The violation, when shown, is wrong with probability ≤ alpha. When it is
    not shown the message says whether the ceiling was even above the claim:
    if not, no outcome of this many trials could have shown it.

    >>> import recaudit as ra
    >>> from recaudit.mechanisms.reference import LaplaceCountWrongScale   # half the noise: 2ε-DP, claims ε
    >>> ra.assert_not_dp(LaplaceCountWrongScale(1.0), trials=20_000, seed=1).epsilon_lb > 1.0
    True
    """
    run, note = _audit(mechanism, claim, neighbours, trials, alpha, seed,
                       dict(score=score, method=method, attack=attack, selection_fraction=selection_fraction,
                            sequential=sequential, batch=batch))
    if not run.violated:
        b = run.bound
        if run.sequential:
            hint = f"the sequential audit stopped after {b.runs} of {b.budget} runs per world: {b.explanation}"
        elif b.ceiling <= run.claimed_epsilon:
            hint = (f"the ceiling {b.ceiling:.4g} ≤ claimed ε = {run.claimed_epsilon:.4g}: this test cannot "
                    f"succeed with {run.trials} trials per world at α = {b.alpha:g}; use more trials")
        else:
            hint = (f"the ceiling {b.ceiling:.4g} > claimed ε, so more trials or a stronger attack "
                    f"might still show a violation")
        raise AssertionError(
            f"privacy claim not shown violated: ε_LB = {b.epsilon_lb:.4g} ≤ claimed ε = "
            f"{run.claimed_epsilon:.4g}; {hint}\n{format_bound(run)}{note}"
        )
    return run.bound
