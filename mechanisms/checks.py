"""The mechanism conformance suite: the checks every registered mechanism must pass.

The scikit-learn ``parametrize_with_checks`` / river ``yield_checks`` pattern:
:func:`yield_checks` gives every check for a mechanism class and
``tests/test_conformance.py`` runs them over all of ``MECHANISMS``, so a
new mechanism is done when they pass. The checks here need no world; the ones
that run the protocol (one engine tick, same seed ⇒ same transcript, users on
axis 0, its scenario, its negative control's audit) are in ``recaudit.audits.checks``.

A mechanism's test parameters are its class's ``test_scenario["mechanism"]``
(``Mechanism.test_params()``), in a small world where each check takes well under a second.
"""
from __future__ import annotations

import math
from typing import Callable, Iterator

from .accounting import account
from .base import MECHANISMS, BitRandomizer, GaussianNoise, LaplaceNoise, Mechanism
from .claims import PrivacyClaim


def instance(cls: type[Mechanism]) -> Mechanism:
    """The class built from its test parameters."""
    return cls(**cls.test_params())


def check_registered(cls: type[Mechanism]) -> None:
    """Registered once, by its kind; its test scenario names no other kind."""
    assert cls.kind and MECHANISMS[cls.kind] is cls, f"{cls.__name__} is not registered as {cls.kind!r}"
    assert cls.test_scenario["mechanism"].get("kind", cls.kind) == cls.kind


def check_builds_from_test_params(cls: type[Mechanism]) -> None:
    """Builds from its test parameters; ``dump_config`` gives them back and rebuilds the same mechanism."""
    mechanism = instance(cls)
    config = mechanism.dump_config()
    assert config["kind"] == cls.kind
    for name, value in cls.test_params().items():
        assert config[name] == value, f"dump_config()[{name!r}] = {config[name]!r}, built with {value!r}"
    assert cls(**{k: v for k, v in config.items() if k != "kind"}).dump_config() == config


def check_claim_from_privacy_events(cls: type[Mechanism]) -> None:
    """The claim is the accountant's on the mechanism's privacy events, never typed in.

    A mechanism without events claims nothing (``PrivacyClaim.none()``) or a
    structural ε = 0 (nothing derived from what it protects is released).
    Answering more queries never claims less.
    """
    mechanism = instance(cls)
    claims = []
    for answers in (1, 2):
        claim = mechanism.claim_for(answers)
        event = mechanism.privacy_event(answers)
        if event is None:
            assert not claim.promises or claim.epsilon == 0.0, (
                f"{cls.kind} has no privacy event but claims ε = {claim.epsilon}: a claim must come from events")
        elif claim.promises:
            derived = account(event, mechanism.claim_delta, model=mechanism.claim_model, unit=mechanism.claim_unit,
                              neighbouring=mechanism.claim_neighbouring, value_discretization=mechanism.accounting_grid)
            assert claim == derived, f"{cls.kind}.claim_for({answers}) = {claim}, its events give {derived}"
        claims.append(claim)
    assert claims[1].epsilon >= claims[0].epsilon
    assert isinstance(mechanism.claim, PrivacyClaim)
    answers = getattr(mechanism, "iterations", 1)
    assert mechanism.claim in (claims[0], mechanism.claim_for(answers)), "claim is not one of claim_for's"


def check_spends_what_it_publishes(cls: type[Mechanism]) -> None:
    """A mechanism's coins spend the budget its claim is computed from (negative controls and baselines that
    claim nothing excepted)."""
    mechanism = instance(cls)
    if cls.negative_control or not mechanism.claim.promises:
        return
    for name in ("randomizer", "noise"):
        part = getattr(mechanism, name, None)
        if isinstance(part, BitRandomizer):
            assert part.spent_epsilon == part.epsilon, f"{cls.kind} publishes ε = {part.epsilon} per bit, " \
                                                       f"spends {part.spent_epsilon}"
        if isinstance(part, GaussianNoise):
            assert part.spent == part.sigma, f"{cls.kind} publishes σ = {part.sigma}, draws σ = {part.spent}"
        if isinstance(part, LaplaceNoise):
            assert part.spent == part.scale, f"{cls.kind} publishes b = {part.scale}, draws b = {part.spent}"


def check_claim_is_finite(cls: type[Mechanism]) -> None:
    """A claim that promises something promises a finite ε with δ in [0, 1)."""
    claim = instance(cls).claim
    if claim.promises:
        assert math.isfinite(claim.epsilon) and 0.0 <= claim.delta < 1.0


CHECKS: tuple[Callable[[type[Mechanism]], None], ...] = (
    check_registered, check_builds_from_test_params, check_claim_from_privacy_events, check_spends_what_it_publishes,
    check_claim_is_finite)


def yield_checks(cls: type[Mechanism]) -> Iterator[Callable[[type[Mechanism]], None]]:
    """Every check a mechanism class must pass (call each with the class)."""
    yield from CHECKS
