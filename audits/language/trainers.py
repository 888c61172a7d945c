"""A trainer's scenario (``mechanism: {kind: trainer}``, docs/guide/trainers.md): the checks that need the whole
scenario, and the users it trains on."""
from __future__ import annotations

from recaudit.attacks import ATTACKS
from recaudit.mechanisms import ParameterError
from recaudit.simulator.populations import POPULATIONS

from ..designs.trainer_churn import UNUSED_CHURN
from ..stats.estimators import EstimatorError
from .sections import build, build_estimator


def trainer_defaults(data):
    """A trainer is audited from one training run: by default design one_run, method one-run, attack fold_in."""
    if not (isinstance(data, dict) and isinstance(data.get("mechanism"), dict)
            and data["mechanism"].get("kind") == "trainer"):
        return data
    if "audit" not in data or isinstance(data.get("audit"), dict):
        data = data | {"audit": {"design": "one_run", "method": "one-run"} | (data.get("audit") or {})}
    return data if "attack" in data else data | {"attack": {"kind": "fold_in"}}


def trainer_users(scenario, population) -> int:
    """The users a trainer trains on: ``panel.n_users``, else all of a finite population's."""
    size = population.size() if hasattr(population, "size") else None
    n_users = scenario.panel.n_users if scenario.panel is not None else None
    if n_users is None:
        if size is None:
            raise ParameterError("panel" if scenario.panel is None else "panel.n_users",
                                 f"population {scenario.population.kind!r} has no fixed size: give "
                                                  "panel: {n_users: N}, the users the trainer trains on")
        return int(size)
    if size is not None and n_users > size:
        raise ParameterError("panel.n_users", f"{n_users} users asked for, the population has {size}")
    return int(n_users)


def check_trainer(scenario, mechanism, base_dir) -> None:
    """A trainer's scenario: one_run canaries over a population it trains on once, attacks that read a model."""
    for name in ("sweep", "grid"):
        if name in scenario.model_fields_set and getattr(scenario, name) is not None:
            raise ParameterError(name, f"a trainer's audit is one training run (or one per release under churn): "
                                       f"leave {name} out")
    audit = scenario.audit
    if "churn" in scenario.model_fields_set:  # retraining at every release (recaudit.audits.designs.trainer_churn)
        for name in UNUSED_CHURN:
            if name in scenario.churn.model_fields_set:
                raise ParameterError(f"churn.{name}", "a trainer's churn reads horizon, mean_lifetime and "
                                                      "release_interval only (the population's users arrive by the "
                                                      "horizon; a trainer asks no queries)")
        if audit.reference_runs:
            raise ParameterError("audit.reference_runs", "reference runs calibrate one training run: not with churn")
    if audit.design_name != "one_run":
        raise ParameterError("audit.design", f"a trainer is audited from one training run with canaries: design "
                                             f"one_run (got {audit.design_name})")
    try:
        mechanism.function  # imported now: a bad module or name fails before any work
    except ParameterError as exc:
        raise ParameterError(f"mechanism.{exc.field}", str(exc)) from None
    try:
        build_estimator(audit).require(mechanism.claim)
    except EstimatorError as exc:
        raise ParameterError("audit", f"{exc.field}: {exc}") from None
    configs = scenario.attack if isinstance(scenario.attack, list) else [scenario.attack]
    for i, config in enumerate(configs):
        reason = build(config, ATTACKS).refusal(mechanism, getattr(config, "view", None) or audit.view or "releases")
        if reason is not None and ATTACKS[config.kind].reads_model:
            raise ParameterError("attack" if not isinstance(scenario.attack, list) else f"attack.{i}", reason)
        if not ATTACKS[config.kind].reads_model:
            trainer_attacks = ", ".join(k for k, a in ATTACKS.items() if a.reads_model)
            where = "attack" if not isinstance(scenario.attack, list) else f"attack.{i}"
            raise ParameterError(where, f"attack {config.kind} does not score a trained model; a trainer's: "
                                        f"{trainer_attacks}")
    population = build(scenario.population, POPULATIONS, base_dir)
    users = trainer_users(scenario, population)
    if audit.canary == "resampled" and audit.trials >= users:
        raise ParameterError("audit.canaries", f"{audit.trials} resampled canaries asked for; the trainer's "
                                               f"population has {users} users (canaries are some of them)")
