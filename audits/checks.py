"""The conformance checks that run things: mechanisms in their scenarios, attacks, estimators, designs.

``recaudit.mechanisms.checks`` holds the mechanism checks that need no world; the ones
here build each class's small ``test_scenario`` through the scenario loader and
run it through the engine or the audit, the path a user's scenario takes.
``tests/test_conformance.py`` runs every check over every registered entry
(``MECHANISMS``, ``ATTACKS``, ``ESTIMATORS``, ``DESIGNS``, ``POPULATIONS``).
"""
from __future__ import annotations

import dataclasses
import functools
import json
import typing
from typing import Any, Callable, Iterator, Literal

import numpy as np
import pydantic
import yaml
from annotated_types import Ge, Gt, Le, Lt

from recaudit.attacks import ATTACKS
from recaudit.attacks import checks as attacks_suite
from recaudit.attacks.checks import yield_checks as attack_checks_without_run
from recaudit.mechanisms import MECHANISMS, Mechanism, PrivacyClaim
from recaudit.mechanisms.accounting import GaussianRelease, account
from recaudit.mechanisms.checks import yield_checks as mechanism_checks_without_world
from recaudit.simulator.checks import params as population_checks_without_scenario_params
from recaudit.simulator.checks import yield_checks as population_checks_without_scenario
from recaudit.simulator.churn import Churn
from recaudit.simulator.engine import run_protocol
from recaudit.simulator.populations import POPULATIONS
from recaudit.simulator.seeds import stream
from recaudit.simulator.transcript import Recorder, Transcript

from .designs import DESIGNS, Design, DesignError
from .record_equality import rows, same  # noqa: F401  (the checks' helpers)
from .language.sections import PopulationConfig
from .language.scenario import AuditConfig, Scenario, build, build_estimator, build_schedule, scenario_from_data
from .language.yamlio import ScenarioError
from .runner import run_scenario
from .stats.estimators import ESTIMATORS, Estimator, EstimatorError, estimator_for
from .trainer_checks import trainer_checks

Check = Callable[[type], None]


# ---------------------------------------------------------------- a class's small scenario


def scenario_data(cls: type[Mechanism], **audit) -> dict:
    """``cls``'s test scenario as scenario data (name and seed filled in; ``audit`` overrides its audit)."""
    data = {"name": f"check-{cls.kind}", "seed": 1} | yaml.safe_load(yaml.safe_dump(cls.test_scenario))
    data["mechanism"] = {"kind": cls.kind} | data["mechanism"]
    data["audit"] = data.get("audit", {}) | audit
    return data


def load(data: dict) -> Scenario:
    """Scenario data through the validation a user's file takes (a bad one raises its ``ScenarioError``)."""
    return scenario_from_data(data, f"{data.get('name', 'scenario')} (data)")


def transcript(scenario: Scenario, seed: int = 0, ticks: int | None = None) -> Transcript:
    """One run of the scenario's world, recording every message, query and personal output.

    ``ticks`` cuts a churn schedule to that many query ticks.
    """
    population = build(scenario.population, POPULATIONS)
    mechanism = build(scenario.mechanism, MECHANISMS)
    schedule = build_schedule(scenario, mechanism, population)
    if ticks is not None and isinstance(schedule, Churn):
        span = ticks * schedule.query_interval
        schedule = dataclasses.replace(schedule, horizon=span, release_interval=min(schedule.release_interval, span))
    root = np.random.SeedSequence(seed)
    catalogue = population.catalogue(stream(root, "catalogue"))
    recorder = Recorder(watch=range(100_000), messages="all", outputs="all")
    return run_protocol(mechanism, population, catalogue, schedule, root, recorder=recorder)


# ---------------------------------------------------------------- mechanisms in their world


@functools.lru_cache(maxsize=None)
def world_of(cls: type[Mechanism]) -> Scenario:
    """``cls``'s test scenario, loaded once per class (the checks only read it)."""
    return load(scenario_data(cls))


def check_scenario_validates(cls: type[Mechanism]) -> None:
    """The class's test scenario loads like a user's file."""
    world_of(cls)


def bad_values(hint: Any) -> Iterator[tuple[Any, str]]:
    """A value breaking each constraint a field's type declares (bounds, choices), with the constraint."""
    if typing.get_origin(hint) is Literal:
        yield "not-a-choice", "a choice"
    for bound in getattr(hint, "__metadata__", ()):
        if isinstance(bound, Gt):
            yield bound.gt, repr(bound)
        elif isinstance(bound, Lt):
            yield bound.lt, repr(bound)
        elif isinstance(bound, Ge):
            yield bound.ge - 1, repr(bound)
        elif isinstance(bound, Le):
            yield bound.le + 1, repr(bound)
    if typing.get_origin(hint) is typing.Union:  # X | None: the constraints of X
        for arg in typing.get_args(hint):
            yield from bad_values(arg)


def check_bad_parameter_names_its_field(cls: type[Mechanism]) -> None:
    """Every declared constraint, broken, gives the loader's one-line error naming ``mechanism.<field>``."""
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in dataclasses.fields(cls):
        for value, constraint in (bad_values(hints.get(field.name)) if field.init else ()):
            data = scenario_data(cls)
            data["mechanism"][field.name] = value
            try:
                load(data)
            except ScenarioError as exc:
                assert f"mechanism.{field.name}" in str(exc), f"{field.name} = {value!r}: {exc}"
            else:
                raise AssertionError(f"{cls.kind}: {field.name} = {value!r} breaks {constraint} but loads")


def check_one_tick_runs(cls: type[Mechanism]) -> None:
    """One engine tick of the test world runs and publishes."""
    run = transcript(world_of(cls), ticks=1)
    assert run.rounds and run.releases, "one tick gave no round or no release"


@functools.lru_cache(maxsize=None)
def recorded(cls: type[Mechanism]) -> Transcript:
    """The recorded run of ``cls``'s test scenario (once per class: the checks only read it)."""
    return transcript(world_of(cls))


def check_same_seed_same_transcript(cls: type[Mechanism]) -> None:
    """Two runs of the same seed record the same transcript (every message, query and output)."""
    first, second = recorded(cls), transcript(world_of(cls))
    for f in dataclasses.fields(Transcript):
        assert same(getattr(first, f.name), getattr(second, f.name)), \
            f"{cls.kind}: the same seed gave another transcript.{f.name} (randomness outside the run's streams?)"


def check_users_on_axis_0(cls: type[Mechanism]) -> None:
    """Messages, queries and personal outputs have one row per user (answer) on axis 0."""
    run = recorded(cls)
    assert run.answer_user.size > 0, "the test world gave no answer: enlarge it"
    assert rows(run.messages) == run.answer_user.size, "messages are not one row per answer"
    w = run.watched
    assert w is not None and rows(w.messages) == w.user.size and rows(w.queries) == w.user.size
    if run.outputs is not None:
        assert rows(run.outputs) == run.output_user.size, "personal outputs are not one row per user"


#: the level a correct mechanism's own audit is run at: it says "violated" with probability <= this
CORRECT_ALPHA = 1e-3


def own_audit_is_slow(cls: type[Mechanism]) -> bool:
    """Whether ``cls``'s own test scenario must be a slow row: its design re-runs the whole protocol per trial
    (``full_runs``, ``batched_runs``). Measured (2026-11-28, one core): those audits cost 3.8 s (private
    projected gradient) to 13.4 s (McSherry–Mironov's per-user twin) of CPU each, 1,000 protocol runs per
    world; local replay and one-run audits cost <= 0.3 s and run in the default suite."""
    return cls.test_scenario.get("audit", {}).get("design") in ("full_runs", "batched_runs")


def check_own_scenario_verdict(cls: type[Mechanism]) -> None:
    """The class's own test scenario, audited, says what the class is: ``violated`` for a negative control (a
    broken twin; power: each twin leaks at least twice its claimed ε or without bound, and its test scenario
    is sized to show it), ``no_claim`` for a baseline that claims nothing, else ``consistent``.

    A correct mechanism is audited at ``audit.alpha = CORRECT_ALPHA`` (1e-3), so its row fails falsely with
    probability <= 1e-3 at a random seed (the bound's validity; the seeds are fixed, so the outcome is too).
    """
    scenario = world_of(cls)
    promises = build(scenario.mechanism, MECHANISMS).claim.promises
    if not cls.negative_control and promises:
        scenario = scenario.model_copy(update={"audit": scenario.audit.model_copy(update={"alpha": CORRECT_ALPHA})})
    result = run_scenario(scenario)
    expected = "violated" if cls.negative_control else "consistent" if promises else "no_claim"
    strongest = result.strongest.estimate.epsilon_lb
    assert result.verdict == expected, f"{cls.kind}: {result.verdict}, ε_LB {strongest:.3g} vs claimed " \
                                       f"{result.claim.epsilon:.3g}"


def check_negative_control_is_flagged(cls: type[Mechanism]) -> None:
    """A negative control (a broken twin) is caught by its test scenario's audit."""
    if cls.negative_control:
        check_own_scenario_verdict(cls)


MECHANISM_CHECKS: tuple[Check, ...] = (check_scenario_validates, check_bad_parameter_names_its_field,
                                       check_one_tick_runs, check_same_seed_same_transcript, check_users_on_axis_0)


def mechanism_checks(cls: type[Mechanism], slow: bool = False) -> Iterator[Check]:
    """Every check of a mechanism class: ``recaudit.mechanisms.checks``' then those in its world (``slow``: its
    audit)."""
    if getattr(cls, "trains", False):  # a trainer: no rounds, a typed-in claim, one training run
        yield from () if slow else trainer_checks(cls)
        return
    if slow:
        if own_audit_is_slow(cls):
            yield check_own_scenario_verdict
        return
    yield from mechanism_checks_without_world(cls)
    yield from MECHANISM_CHECKS
    if not own_audit_is_slow(cls):
        yield check_own_scenario_verdict


# ---------------------------------------------------------------- attacks on a real run


def _real_run(cls: type) -> dict | None:
    """The small audit of ``cls`` on its test mechanism, as scenario data with the attack alone (None: no mechanism)."""
    block = attacks_suite.mechanism_block(cls)
    if block is None:
        return None
    mechanism = MECHANISMS[block["kind"]]
    data = scenario_data(mechanism)
    data["mechanism"] = block
    data["attack"] = [{"kind": cls.kind} | cls.test_params]
    one_run = estimator_for(data["audit"].get("method", "clopper-pearson"), "split").input == "canaries"
    data["audit"] |= {"trials": 200 if one_run else 100, "block_size": 100}
    view = mechanism(**{k: v for k, v in block.items() if k != "kind"}).claim.view
    if data["audit"].get("view", view) not in cls.views:
        data["audit"]["view"] = cls.views[0]
    return data


def _world_key(data: dict) -> str:
    return json.dumps({k: v for k, v in data.items() if k != "attack"}, sort_keys=True, default=str)


@functools.lru_cache(maxsize=4)
def _shared_scores(world: str, attacks: str) -> dict[str, np.ndarray]:
    """Every attack's scores from one audit of ``world`` (each full run scored by all of ``attacks``)."""
    data = json.loads(world) | {"attack": json.loads(attacks)}
    return {test.attack: test.scores for test in reversed(run_scenario(load(data)).tests)}  # the first target's


def check_attack_scores_a_real_run(cls: type) -> None:
    """On a small audit of its test mechanism, the attack gives one finite score per run (or canary).

    The registered attacks tested on the same world and view score the same runs of one audit (its
    runs cost the most); if that audit fails, the attack's own audit runs, so the error is its own.
    """
    data = _real_run(cls)
    if data is None:
        return
    world = _world_key(data)
    peers = [peer for other in ATTACKS.values() if (peer := _real_run(other)) and _world_key(peer) == world]
    try:
        scores = _shared_scores(world, json.dumps([peer["attack"][0] for peer in peers], default=str))[cls.kind]
    except Exception:
        scores = run_scenario(load(data)).tests[0].scores
    one_run = estimator_for(data["audit"].get("method", "clopper-pearson"), "split").input == "canaries"
    assert scores.shape == ((200,) if one_run else (2, 100)), scores.shape
    assert np.all(np.isfinite(scores)), f"{cls.kind} gave non-finite scores"


def attack_checks(cls: type, slow: bool = False) -> Iterator[Check]:
    """Every check of an attack class: ``recaudit.attacks.checks``' then a scored run of its test mechanism."""
    if slow:
        return
    yield from attack_checks_without_run(cls)
    yield check_attack_scores_a_real_run


# ---------------------------------------------------------------- estimators

#: claims the estimators meet: pure ε-LDP (randomized response), μ-GDP (a Gaussian release), none
CLAIMS = {
    "pure": PrivacyClaim(1.0, 0.0),
    "gaussian": account(GaussianRelease(1.0), 1e-5, model="central"),
}


def estimator_instance(cls: type[Estimator]) -> Estimator:
    return cls(**cls.test_params)


def null_scores(cls: type[Estimator], rng: np.random.Generator | None, n: int = 2_000):
    """Scores that carry nothing: constant (``rng`` None) or i.i.d. in both worlds, as the estimator's input."""
    draw = (lambda size: np.zeros(size)) if rng is None else (lambda size: rng.normal(size=size))
    if cls.input == "canaries":
        worlds = np.arange(n) % 2 if rng is None else rng.integers(0, 2, n)
        return draw(n), worlds
    return draw((2, n)), None


def check_estimator_registered(cls: type[Estimator]) -> None:
    """Registered once; a scenario's ``audit.method`` / ``audit.threshold_rule`` name it; its settings load."""
    assert ESTIMATORS[cls.kind] is cls
    assert estimator_for(cls.method, cls.threshold_rule or "split") is cls
    audit = AuditConfig(method=cls.method, threshold_rule=cls.threshold_rule or "split", **cls.test_params,
                        trials=2_000, design=None)
    assert isinstance(build_estimator(audit), cls)


def check_refuses_through_supports(cls: type[Estimator]) -> None:
    """``supports(claim)`` decides: refused claims raise ``EstimatorError``, supported ones give a bound."""
    estimator = estimator_instance(cls)
    scores, worlds = null_scores(cls, np.random.default_rng(0))
    for name, claim in CLAIMS.items():
        if not estimator.supports(claim):
            for call in (lambda: estimator.require(claim), lambda: estimator.estimate(scores, worlds, claim, 0.05)):
                try:
                    call()
                except EstimatorError as exc:
                    assert exc.field == "method" and str(exc) == estimator.refusal(claim)
                else:
                    raise AssertionError(f"{cls.kind} refuses the {name} claim but judged it")
            continue
        estimate = estimator.estimate(scores, worlds, claim, 0.05)
        assert 0.0 <= estimate.epsilon_lb <= estimate.ceiling and 0.0 <= estimate.p_value <= 1.0
    assert any(estimator.supports(claim) for claim in CLAIMS.values())


def check_zero_on_null_scores(cls: type[Estimator]) -> None:
    """Scores that carry nothing give ε_LB = 0: constant ones always; i.i.d. ones (seeded) at α = 1e-6.

    The i.i.d. case fails falsely with probability ≤ 1e-6 per claim (the bound's validity at true ε = 0).
    """
    estimator = estimator_instance(cls)
    for rng in (None, np.random.default_rng(1)):
        scores, worlds = null_scores(cls, rng)
        for claim in CLAIMS.values():
            if estimator.supports(claim):
                estimate = estimator.estimate(scores, worlds, claim, 1e-6)
                assert estimate.epsilon_lb == 0.0, f"{cls.kind}: ε_LB {estimate.epsilon_lb} on null scores"


def known_scores(cls: type[Estimator], claim: PrivacyClaim, rng: np.random.Generator, n: int = 2_000):
    """Scores of a mechanism that meets ``claim`` exactly: randomized response at ε (pure claims), or a Gaussian
    of unit noise shifted by μ (Gaussian claims); as the estimator's input."""
    if cls.input == "canaries":
        worlds = rng.integers(0, 2, n)
    else:
        worlds = np.repeat([0, 1], n)
    if claim.gaussian_mu is not None:
        scores = worlds * claim.gaussian_mu + rng.normal(size=worlds.size)
    else:
        keep = rng.random(worlds.size) < np.exp(claim.epsilon) / (1 + np.exp(claim.epsilon))
        scores = np.where(keep, worlds, 1 - worlds).astype(float)
    return (scores, worlds) if cls.input == "canaries" else (scores.reshape(2, n), None)


def check_estimator_coverage(cls: type[Estimator], audits: int = 100, alpha: float = 0.05) -> None:
    """On mechanisms that meet their claim exactly, ε_LB exceeds the claimed ε in at most α of the audits.

    With ``audits`` independent audits the count is at most Binomial(audits, α); the check allows the
    count that such a binomial exceeds with probability <= 1e-6 (its false-failure probability per claim).
    """
    from scipy.stats import binom

    estimator = estimator_instance(cls)
    allowed = int(binom.ppf(1 - 1e-6, audits, alpha))
    for name, claim in CLAIMS.items():
        if not estimator.supports(claim):
            continue
        rng = np.random.default_rng([2026, audits])
        over = sum(estimator.estimate(*known_scores(cls, claim, rng), claim, alpha).epsilon_lb > claim.epsilon
                   for _ in range(audits))
        assert over <= allowed, f"{cls.kind}: ε_LB above the true ε in {over} of {audits} audits ({name} claim)"


def estimator_checks(cls: type[Estimator], slow: bool = False) -> Iterator[Check]:
    if slow:
        yield check_estimator_coverage
        return
    yield from (check_estimator_registered, check_refuses_through_supports, check_zero_on_null_scores)


# ---------------------------------------------------------------- designs


def check_design_registered(cls: type[Design]) -> None:
    """Registered once; produces pairs or canaries; an estimator takes its scores."""
    assert DESIGNS[cls.kind] is cls and cls.produces in ("pairs", "canaries")
    assert any(e.input == cls.produces for e in ESTIMATORS.values())


def check_design_refuses_other_models(cls: type[Design]) -> None:
    """A claim outside ``valid_models`` raises ``DesignError`` from ``check`` (before any work)."""
    mechanism = MECHANISMS["maxsense"](epsilon=1.0)
    for model in ("local", "central", "joint", "none"):
        if cls.valid_models is None or model in cls.valid_models:
            continue
        claim = PrivacyClaim(1.0, model=model) if model != "none" else PrivacyClaim.none()
        try:
            cls().check(mechanism, claim, None, 1_000)
        except DesignError:
            continue
        raise AssertionError(f"design {cls.kind} accepted a {model} claim")


def check_design_scores_a_real_run(cls: type[Design]) -> None:
    """On its test mechanism's world the design gives one score per trial of each world (or per canary)."""
    data = scenario_data(MECHANISMS[cls.test_mechanism], design=cls.kind, trials=200, block_size=100,
                         method="one-run" if cls.produces == "canaries" else "clopper-pearson", **cls.test_audit)
    if cls.test_attack is not None:
        data["attack"] = cls.test_attack
    result = run_scenario(load(data))
    assert result.design == cls.kind
    assert result.tests[0].scores.shape == ((200,) if cls.produces == "canaries" else (2, 200))


def design_checks(cls: type[Design], slow: bool = False) -> Iterator[Check]:
    if slow:
        return
    yield from (check_design_registered, check_design_refuses_other_models, check_design_scores_a_real_run)


# ---------------------------------------------------------------- populations


def check_population_constraints(cls: type) -> None:
    """Its test parameters load as a scenario's ``population`` block; every declared constraint, broken, is
    refused there naming the field."""
    adapter = pydantic.TypeAdapter(PopulationConfig)
    block = {"kind": cls.kind} | population_checks_without_scenario_params(cls)
    adapter.validate_python(block)
    hints = typing.get_type_hints(cls, include_extras=True)
    for field in dataclasses.fields(cls):
        for value, constraint in (bad_values(hints.get(field.name)) if field.init else ()):
            try:
                adapter.validate_python(block | {field.name: value})
            except pydantic.ValidationError as exc:
                assert any(field.name in e["loc"] for e in exc.errors()), f"{field.name} = {value!r}: {exc}"
            else:
                raise AssertionError(f"{cls.kind}: {field.name} = {value!r} breaks {constraint} but loads")


def population_checks(cls: type, slow: bool = False) -> Iterator[Check]:
    if slow:
        return
    yield from population_checks_without_scenario(cls)
    yield check_population_constraints
