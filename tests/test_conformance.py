"""The conformance suites over every registered part (the scikit-learn ``parametrize_with_checks`` pattern).

Each registered mechanism, attack, estimator, design and population runs every check of
its suite (``recaudit.mechanisms.checks``, ``recaudit.attacks.checks``, ``recaudit.audits.checks``);
a new part is done when its rows pass. The slow rows (``-m slow``) audit every
negative control (its audit must say "violated": each states its power below)
and measure estimators' coverage. The last tests show that the suites catch
what they are for: a deliberately wrong claim and a sampler that ignores the
run's seed fail them.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from recaudit.attacks import ATTACKS
from recaudit.audits import checks
from recaudit.audits.designs import DESIGNS
from recaudit.audits.stats.estimators import ESTIMATORS
from recaudit.mechanisms import MECHANISMS, MaxSense
from recaudit.mechanisms import checks as mechanism_checks
from recaudit.mechanisms.claims import PrivacyClaim
from recaudit.simulator import checks as population_checks
from recaudit.simulator.population import SBMPopulation
from recaudit.simulator.populations import POPULATIONS


#: every registry and its suite
SUITES = (("mechanism", MECHANISMS, checks.mechanism_checks), ("attack", ATTACKS, checks.attack_checks),
          ("estimator", ESTIMATORS, checks.estimator_checks), ("design", DESIGNS, checks.design_checks),
          ("population", POPULATIONS, checks.population_checks))


def _rows(slow: bool = False):
    return [pytest.param(cls, check, id=f"{part}-{kind}-{check.__name__.removeprefix('check_')}")
            for part, registry, suite in SUITES for kind, cls in registry.items() for check in suite(cls, slow=slow)]


@pytest.mark.parametrize("cls, check", _rows())
def test_conforms(cls, check):
    check(cls)


@pytest.mark.slow
@pytest.mark.parametrize("cls, check", _rows(slow=True))
def test_conforms_slow(cls, check):
    """The rows that must be slow: each mechanism whose own test scenario re-runs the whole protocol per trial
    (full_runs, batched_runs: 3.8-13.4 s of CPU each, measured; ``checks.own_audit_is_slow``) is audited by
    it and says "violated" (negative controls), "no_claim" or "consistent"; each estimator covers the truth
    on known mechanisms. The cheap mechanisms' own audits (local replay, one run: <= 0.3 s) are default rows.

    A false "consistent" of a twin is a power failure: the twins leak at least twice their claimed ε (or
    without bound). A correct mechanism's row fails falsely with probability <= 1e-3 (audited at that α);
    the coverage rows with probability <= 1e-6 each (stated in the check).
    """
    check(cls)


# ---------------------------------------------------------------- the suites catch bad parts


class _WrongClaim(MaxSense):
    """Types its claim in (half the accountant's ε) instead of deriving it from its privacy events."""

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        return PrivacyClaim(epsilon=0.5 * self.epsilon * answers)


class _Unseeded(MaxSense):
    """Draws its randomizer's coins from fresh entropy, not from the run's ``randomizer`` stream."""

    def release(self, sketches, rng):
        return super().release(sketches, np.random.default_rng())


def _failures(cls) -> list[str]:
    failed = []
    for check in checks.mechanism_checks(cls):
        try:
            check(cls)
        except AssertionError:
            failed.append(check.__name__)
    return failed


def test_a_typed_in_claim_fails_the_suite(monkeypatch):
    monkeypatch.setitem(MECHANISMS, "maxsense", _WrongClaim)
    # its own audit says "violated" too: the claim of half the accountant's ε is below what it spends
    assert _failures(_WrongClaim) == ["check_claim_from_privacy_events", "check_own_scenario_verdict"]
    with pytest.raises(AssertionError, match="its events give"):
        mechanism_checks.check_claim_from_privacy_events(_WrongClaim)


def test_a_sampler_ignoring_the_seed_fails_the_suite(monkeypatch):
    monkeypatch.setitem(MECHANISMS, "maxsense", _Unseeded)
    assert _failures(_Unseeded) == ["check_same_seed_same_transcript"]


def test_the_correct_mechanism_passes_where_the_fixtures_fail():
    assert _failures(MaxSense) == []


@dataclasses.dataclass
class _UnseededPopulation(SBMPopulation):
    """Draws its users' likes from fresh entropy, not from the run's ``users`` stream."""

    def sample_users(self, n_users, catalogue, rng):
        return super().sample_users(n_users, catalogue, np.random.default_rng())


def test_a_population_ignoring_the_seed_fails_the_suite(monkeypatch):
    monkeypatch.setitem(POPULATIONS, "sbm", _UnseededPopulation)
    with pytest.raises(AssertionError, match="same seed gave other"):
        population_checks.check_population_same_seed_same_users(_UnseededPopulation)
    population_checks.check_population_same_seed_same_users(SBMPopulation)
