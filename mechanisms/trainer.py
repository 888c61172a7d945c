"""A trainer as a mechanism: the user's own recommender, audited from one training run (docs/guide/trainers.md).

A scenario names it ``mechanism: {kind: trainer, fit: "package.module:function", claim: {epsilon: 1.0, delta:
1.0e-5}}``; Python passes the function itself (``Trainer(fit=my_fit, claim={...})``). ``function(ratings, rng)``
gets a ``scipy.sparse.csr_matrix`` (users x items, float ratings) and a ``numpy.random.Generator`` and returns a
model exposing at least ``item_factors`` (items x r, finite), optionally ``recommend(histories, k)`` and
``predict(histories, items)``. The claim is the vendor's, typed in (there is no accountant to derive it from):
without one the audit measures ε_LB and promises nothing.

Any mechanism that trains a model in one call can be audited the same way: give it ``trains = True`` and a
``train(ratings, rng)`` returning a model with ``item_factors`` (``recaudit.audits.trainer_audit``).
"""
from __future__ import annotations

import importlib
import math
import os
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
from scipy import sparse

from recaudit.core.errors import BadInput, InternalError, ParameterError

from .base import Mechanism
from .claims import PrivacyClaim

#: the claim's fields a scenario may give, with their defaults (user level, central DP, add/remove: the
#: one-run design includes or leaves out each canary)
CLAIM_DEFAULTS: dict[str, Any] = {"delta": 0.0, "model": "central", "unit": "user", "neighbouring": "add_remove"}
CLAIM_FIELDS = ("epsilon", "delta", "model", "unit", "neighbouring", "gaussian_mu")


class TrainerError(BadInput, ValueError):
    """The trainer broke its contract (a missing attribute, a wrong shape, NaN factors, an exception in fit).

    ``trainer_traceback``: the trainer's own frames when ``fit`` raised (the command line prints them once,
    under the error's line, marked as the trainer's).
    """

    def __init__(self, message: str, trainer_traceback: str | None = None):
        super().__init__(message)
        self.trainer_traceback = trainer_traceback


def load_function(spec: str, folder: Path | None = None) -> Callable:
    """The function ``package.module:function`` names, imported as Python would with ``folder`` (the scenario
    file's) and ``PYTHONPATH`` on the path. Any failure is one :class:`ParameterError` naming ``fit``."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise ParameterError("fit", f"{spec!r} is not 'package.module:function'")
    extra = [str(Path(folder).resolve())] if folder is not None else []
    extra += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    added = [p for p in extra if p not in sys.path]
    sys.path[:0] = added
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # the trainer's module itself may raise anything while importing
        where = f" (looked in {', '.join(extra)} and the installed packages)" if isinstance(exc, ImportError) else ""
        raise ParameterError("fit", f"cannot import {module_name}: {type(exc).__name__}: {exc}{where}") from None
    finally:
        for p in added:
            sys.path.remove(p)
    function = getattr(module, name, None)
    if not callable(function):
        raise ParameterError("fit", f"{module_name} has no function {name!r}")
    return function


def _trainer_traceback(exc: BaseException) -> str:
    """The trainer's own frames of ``exc``'s traceback (recaudit's frames above them dropped)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f"{os.sep}recaudit{os.sep}" not in f.filename
           and f"{os.sep}mechanisms{os.sep}trainer.py" not in f.filename] or frames
    lines = traceback.format_list(own) + traceback.format_exception_only(type(exc), exc)
    return "".join(lines).rstrip()


def check_model(model: Any, n_items: int) -> np.ndarray:
    """The model's ``item_factors`` as a float array (items x r), or a :class:`TrainerError` saying what is wrong."""
    if not hasattr(model, "item_factors"):
        raise TrainerError(f"the trainer returned a {type(model).__name__} without item_factors (the model must "
                           "expose item_factors, an items x r array)")
    try:
        factors = np.asarray(model.item_factors, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TrainerError(f"the trainer's item_factors is not a numeric array: {exc}") from None
    if factors.ndim != 2 or factors.shape[0] != n_items or factors.shape[1] < 1:
        raise TrainerError(f"the trainer's item_factors has shape {factors.shape}; expected ({n_items}, r): one "
                           f"row per item of the {n_items}-column ratings matrix")
    bad = ~np.isfinite(factors)
    if bad.any():
        rows = np.flatnonzero(bad.any(axis=1))
        raise TrainerError(f"the trainer's item_factors hold {int(bad.sum())} non-finite values (NaN or inf), in "
                           f"{rows.size} item rows (first: item {rows[0]})")
    for name in ("recommend", "predict"):
        if hasattr(model, name) and not callable(getattr(model, name)):
            raise TrainerError(f"the trainer's model has a {name} attribute that is not callable")
    return factors


def checked_claim(claim: dict | None) -> PrivacyClaim:
    """The claim a scenario types in (defaults: user level, central DP, add/remove), or no claim."""
    if claim is None:
        return PrivacyClaim.none()
    if not isinstance(claim, dict):
        raise ParameterError("claim", "must be a mapping such as {epsilon: 1.0, delta: 1.0e-5}")
    unknown = set(claim) - set(CLAIM_FIELDS)
    if unknown:
        raise ParameterError("claim", f"unknown field {sorted(unknown)[0]!r}; a claim has {', '.join(CLAIM_FIELDS)}")
    if "epsilon" not in claim:
        raise ParameterError("claim", "needs epsilon (leave claim out to measure ε_LB without a claim)")
    values = CLAIM_DEFAULTS | claim
    try:
        epsilon, delta = float(values["epsilon"]), float(values["delta"])
        mu = None if values.get("gaussian_mu") is None else float(values["gaussian_mu"])
    except (TypeError, ValueError):
        raise ParameterError("claim", "epsilon, delta and gaussian_mu must be numbers") from None
    if not (math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError("claim", f"epsilon must be a finite number > 0, got {values['epsilon']!r}")
    if not 0.0 <= delta < 1.0:
        raise ParameterError("claim", f"delta must be in [0, 1), got {values['delta']!r}")
    if mu is not None and not (math.isfinite(mu) and mu > 0):
        raise ParameterError("claim", f"gaussian_mu must be a finite number > 0, got {values['gaussian_mu']!r}")
    choices = {"model": ("central", "joint"), "unit": ("user",), "neighbouring": ("add_remove", "replace")}
    for name, allowed in choices.items():
        if values[name] not in allowed:
            raise ParameterError("claim", f"{name} must be one of {', '.join(allowed)} for a trainer, "
                                          f"got {values[name]!r}")
    return PrivacyClaim(epsilon, delta, model=values["model"], unit="user", neighbouring=values["neighbouring"],
                        gaussian_mu=mu)


class _ClaimField:
    """The ``claim`` field: set as a scenario types it (a mapping, or None), read as a :class:`PrivacyClaim`
    (as every mechanism's ``claim``); ``dump_config`` gives the mapping back."""

    def __get__(self, obj, owner=None):
        if obj is None:
            return None  # the dataclass default
        return obj._claim

    def __set__(self, obj, value) -> None:
        if isinstance(value, PrivacyClaim):
            value = None if not value.promises else {k: v for k, v in value.to_dict().items() if k in CLAIM_FIELDS}
        obj._claim_spec, obj._claim = value, checked_claim(value)


@dataclass
class Trainer(Mechanism, kind="trainer"):
    """The user's own recommender: ``fit(ratings, rng)`` trained once on the population, audited with canaries.

    ``fit``: ``"package.module:function"`` (imported with the scenario file's folder and PYTHONPATH on the
    path) or, from Python, the function. ``claim``: ``{epsilon, delta, model, neighbouring, gaussian_mu}``
    (defaults: δ = 0, central, add/remove, user level); without it ε_LB is a measurement. ``check_seed``:
    train twice on a small slice first to check that the same seed gives the same factors (a trainer that
    ignores ``rng`` cannot be audited reproducibly).
    """

    fit: str
    claim: dict | None = _ClaimField()  # type: ignore[assignment]
    #: keyword arguments passed to ``fit`` after ``ratings`` and ``rng`` (e.g. ``{factors: 32}``)
    options: dict = field(default_factory=dict)
    check_seed: bool = True
    #: where ``fit`` is imported from besides PYTHONPATH (a scenario's: its file's folder)
    folder: Path | None = None
    trains: ClassVar[bool] = True
    claim_model: ClassVar[str] = "central"
    test_scenario: ClassVar[dict[str, Any]] = {
        "population": {"kind": "sbm_stars", "n_items": 60, "ratings_per_user": 12, "user_cluster_weights": [0.5, 0.5],
                       "item_cluster_weights": [0.5, 0.5],
                       "star_probability": [[[0.1, 0.1, 0.2, 0.3, 0.3], [0.3, 0.3, 0.2, 0.1, 0.1]],
                                            [[0.2, 0.2, 0.2, 0.2, 0.2], [0.5, 0.2, 0.1, 0.1, 0.1]]]},
        "panel": {"n_users": 150},
        "mechanism": {"fit": "recaudit.mechanisms.als:fit", "claim": {"epsilon": 1.0},
                      "options": {"factors": 8, "iterations": 4}},
        "attack": {"kind": "fold_in"},
        "audit": {"design": "one_run", "method": "one-run", "trials": 200},
    }
    _function: Callable | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.fit, str):
            if ":" not in self.fit:
                raise ParameterError("fit", f"{self.fit!r} is not 'package.module:function'")
        elif not callable(self.fit):
            raise ParameterError("fit", "must be 'package.module:function' or a function fit(ratings, rng)")
        if not isinstance(self.options, dict) or not all(isinstance(k, str) for k in self.options):
            raise ParameterError("options", "must be a mapping of fit's keyword arguments")

    def dump_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "fit": self.fit_name, "claim": self._claim_spec, "options": self.options,
                "check_seed": self.check_seed, "folder": self.folder}

    # ---------------------------------------------------------------- the trainer contract

    @property
    def function(self) -> Callable:
        """The training function (imported on first use)."""
        if self._function is None:
            self._function = self.fit if callable(self.fit) else load_function(self.fit, self.folder)
        return self._function

    @property
    def fit_name(self) -> str:
        return self.fit if isinstance(self.fit, str) else f"{self.fit.__module__}:{self.fit.__qualname__}"

    def train(self, ratings: sparse.csr_matrix, rng: np.random.Generator) -> Any:
        """The model trained on ``ratings`` with the coins of ``rng``, its contract checked."""
        function = self.function
        try:
            model = function(ratings, rng, **self.options)
        except Exception as exc:  # the trainer's own failure: shown once, marked as the trainer's
            raise TrainerError(f"the trainer {self.fit_name} raised {type(exc).__name__}: {exc} (its traceback "
                               "follows)", _trainer_traceback(exc)) from None
        check_model(model, ratings.shape[1])
        return model

    def check_reproducible(self, ratings: sparse.csr_matrix, seed: np.random.SeedSequence, rows: int = 40,
                           items: int = 100) -> None:
        """Two fits on a small slice (the first ``rows`` users, their ``items`` most rated items) with the same
        seed must publish the same factors.

        Different seeds may give the same factors (a deterministic trainer is reproducible); the same seed
        giving other factors means the trainer draws from somewhere else than ``rng`` (global numpy state,
        fresh entropy): its audit could not be re-run, and says so.
        """
        small = sparse.csr_matrix(ratings[:rows])
        counts = np.asarray((small != 0).sum(axis=0)).ravel()
        small = sparse.csr_matrix(small[:, np.sort(np.argsort(-counts, kind="stable")[:items])])
        first, second = (check_model(self.train(small, np.random.default_rng(seed)), small.shape[1])
                         for _ in range(2))
        if not np.array_equal(first, second):
            raise TrainerError(f"the trainer {self.fit_name} is not reproducible: two fits with the same rng gave "
                               f"other item_factors (it draws randomness elsewhere than its rng argument: global "
                               f"numpy state, random, fresh entropy?); draw every coin from rng")

    # ---------------------------------------------------------------- the mechanism contract

    def claim_for(self, answers: int = 1) -> PrivacyClaim:
        """The typed-in claim (a trainer has no accountant: the claim is the vendor's), or no claim."""
        return self._claim

    def privacy_event(self, answers: int = 1):
        return None

    def init_state(self, world) -> Any:
        return None

    def _no_rounds(self, *args, **kwargs):
        raise InternalError("a trainer has no rounds: it is audited from one training run (design one_run)")

    make_queries = respond = aggregate = publish = _no_rounds
