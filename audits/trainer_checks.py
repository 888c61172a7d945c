"""The conformance checks of a trainer (a mechanism with ``trains``): it has no rounds and a typed-in claim, so
instead of the engine's checks its small test scenario is audited from one training run
(``recaudit.audits.checks.mechanism_checks`` yields these for it)."""
from __future__ import annotations

import functools
from typing import Callable, Iterator

import numpy as np
import yaml

from recaudit.mechanisms import Mechanism
from recaudit.mechanisms import checks as without_world

from .language.scenario import Scenario
from .runner import AuditResult, run_scenario
from .trainer_audit import trainer_scenario


@functools.lru_cache(maxsize=None)
def scenario_of(cls: type[Mechanism]) -> Scenario:
    """``cls``'s test scenario, validated as a file's."""
    data = {"name": f"check-{cls.kind}", "seed": 1} | yaml.safe_load(yaml.safe_dump(cls.test_scenario))
    return trainer_scenario(data["mechanism"]["fit"], data)


@functools.lru_cache(maxsize=None)
def trained(cls: type[Mechanism]) -> AuditResult:
    """The audit of ``cls``'s test scenario (one training run), once per class."""
    return run_scenario(scenario_of(cls))


def check_trainer_scenario_validates(cls: type[Mechanism]) -> None:
    """The class's test scenario loads like a user's."""
    scenario_of(cls)


def check_trainer_scores_every_canary(cls: type[Mechanism]) -> None:
    """A trainer's test audit trains once and gives one finite score per canary, with a bound."""
    result, m = trained(cls), scenario_of(cls).audit.trials
    assert result.design == "one_run" and result.trainer is not None
    for test in result.tests:
        assert np.shape(test.scores) == (m,) and np.all(np.isfinite(test.scores)), np.shape(test.scores)
        assert 0.0 <= test.estimate.epsilon_lb <= test.estimate.ceiling


def check_trainer_same_seed_same_scores(cls: type[Mechanism]) -> None:
    """Two audits of the same seed score every canary the same (the trainer's coins come from its rng)."""
    again = run_scenario(scenario_of(cls))
    for first, second in zip(trained(cls).tests, again.tests):
        assert np.array_equal(first.scores, second.scores) and np.array_equal(first.worlds, second.worlds), \
            f"{cls.kind}: the same seed gave other canary scores"


TRAINER_CHECKS: tuple[Callable, ...] = (without_world.check_registered, without_world.check_builds_from_test_params,
                                        check_trainer_scenario_validates, check_trainer_scores_every_canary,
                                        check_trainer_same_seed_same_scores)


def trainer_checks(cls: type[Mechanism]) -> Iterator[Callable]:
    yield from TRAINER_CHECKS
