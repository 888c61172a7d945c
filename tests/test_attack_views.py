"""Every registered attack against every registered mechanism's views: refused at validate time, or it runs.

An attack says what it reads (``Attack.refusal``: its views, the mechanisms it knows) and a design what it
gives (``Design.attack_refusal``); the scenario language asks both when a scenario is validated, so a
scenario that validates never ends in "internal error, exit 3" for an attack that cannot read its input.

The validate matrix (every mechanism's test scenario x every attack x every view kind: the 506 where the
attack reads the view through the validators ``recaudit validate`` runs, the others by ``refusal``) is
fast: ~1.5 s of CPU. Running each combination
that validates costs ~29 s of CPU (56 audits of the mechanisms' small test worlds, 100 trials a world:
SP2's 2 s and McSherry-Mironov's per-user claim 1.2 s the largest), so those rows are slow: one row per
(mechanism, view), every attack that validates scored in the same audit.
"""
from __future__ import annotations

import subprocess
import sys
import typing

import pytest
import yaml
from pydantic import ValidationError

from recaudit.attacks import ATTACKS
from recaudit.audits.checks import scenario_data
from recaudit.audits.language.scenario import Scenario
from recaudit.audits.runner import run_scenario
from recaudit.mechanisms import MECHANISMS
from recaudit.mechanisms.claims import ViewKind

VIEWS = typing.get_args(ViewKind)


def _data(mechanism: str, view: str, attacks: list[str]) -> dict:
    data = scenario_data(MECHANISMS[mechanism])
    data["audit"]["view"] = view
    data["attack"] = [{"kind": kind} | ATTACKS[kind].test_params for kind in attacks]
    return data


def _validates(data: dict) -> bool:
    """True: valid; False: refused as bad input (exit 2). Anything else propagates: the exit 3 looked for."""
    try:
        Scenario.model_validate(data)
    except ValidationError:
        return False
    return True


def _matrix() -> dict[tuple[str, str], list[str]]:
    """(mechanism, view) -> the attacks whose scenario validates.

    A view the attack does not read is refused by ``Attack.refusal`` itself (asserted here, for every
    mechanism); the views it reads go through the scenario validators.
    """
    valid: dict[tuple[str, str], list[str]] = {}
    for mechanism, mcls in MECHANISMS.items():
        instance = mcls(**mcls.test_params())
        for view in VIEWS:
            for attack, acls in ATTACKS.items():
                if view not in acls.views:
                    assert acls(**acls.test_params).refusal(instance, view) is not None, (attack, view)
                elif _validates(_data(mechanism, view, [attack])):
                    valid.setdefault((mechanism, view), []).append(attack)
    return valid


def test_every_attack_on_every_view_validates_or_is_refused():
    valid = _matrix()
    # each attack validates on the view and mechanism it is tested on, so the refusals are not blanket ones
    for kind, cls in ATTACKS.items():
        named = cls.test_mechanism
        if named is not None:
            mechanism = named if isinstance(named, str) else named["kind"]
            assert any(kind in valid.get((mechanism, view), ()) for view in cls.views), kind
    assert sum(map(len, valid.values())) >= 100


def test_the_refusal_names_attack_and_audit_view(tmp_path):
    """The issue's case: known_noise on the continual tree, the claim's releases view: exit 2, one line."""
    data = scenario_data(MECHANISMS["continual_covariance_tree"])
    data["audit"].pop("view", None)
    data["attack"] = {"kind": "known_noise"}
    path = tmp_path / "tree.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "recaudit", "validate", str(path)], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr
    line, = done.stderr.strip().splitlines()
    assert "attack: known_noise reads the statistics view, not 'releases'" in line and "audit.view" in line
    assert "set audit.view: statistics" in line


def test_a_design_that_cannot_fit_refuses_a_learning_attack_at_validate_time():
    data = _data("xin_jaakkola_laplace", "messages", ["logistic"])  # its test scenario: one_run
    with pytest.raises(ValidationError, match="design one_run cannot fit a learning attack"):
        Scenario.model_validate(data)


def _slow_rows():
    return [pytest.param(m, v, a, id=f"{m}-{v}") for (m, v), a in _matrix().items()]


@pytest.mark.slow
@pytest.mark.parametrize("mechanism, view, attacks", _slow_rows() if "slow" in " ".join(sys.argv) else [])
def test_what_validates_runs(mechanism, view, attacks):
    """One small audit per (mechanism, view) with every attack that validated: it finishes with a verdict."""
    data = _data(mechanism, view, attacks)
    one_run = data["audit"].get("method") in ("one-run", "fdp-one-run", "gauss-fit")
    data["audit"] |= {"trials": 200 if one_run else 100, "block_size": 100}
    result = run_scenario(Scenario.model_validate(data))
    assert result.verdict in ("consistent", "violated", "no_claim")
    assert len(result.tests) == len(attacks) * data["audit"].get("targets", 1)
