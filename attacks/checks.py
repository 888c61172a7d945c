"""The attack conformance suite: the checks every registered attack must pass (``yield_checks``).

``tests/test_conformance.py`` runs them over all of ``ATTACKS``; the check
that scores a real run of the attack's ``test_mechanism`` is in
``recaudit.audits.checks`` (it runs an audit).
"""
from __future__ import annotations

import typing
from typing import Callable, Iterator

import numpy as np

from recaudit.mechanisms import MECHANISMS
from recaudit.mechanisms.claims import ViewKind
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import view_class

from .base import ATTACKS, Attack, AttackError


def instance(cls: type[Attack]) -> Attack:
    """The class built from its test parameters."""
    return cls(**cls.test_params)


def mechanism_block(cls: type[Attack]) -> dict | None:
    """The mechanism block the attack is tested on: its kind's test parameters, overridden by the attack's."""
    named = cls.test_mechanism
    if named is None:
        return None
    block = {"kind": named} if isinstance(named, str) else dict(named)
    return {"kind": block["kind"]} | MECHANISMS[block["kind"]].test_params() | block


def check_registered(cls: type[Attack]) -> None:
    """Registered once, by its kind; builds from its test parameters."""
    assert cls.kind and ATTACKS[cls.kind] is cls, f"{cls.__name__} is not registered as {cls.kind!r}"
    instance(cls)


def check_reads_known_views(cls: type[Attack]) -> None:
    """Names at least one view, each a ``ViewKind``; its test mechanism (if any) is registered."""
    assert cls.views and set(cls.views) <= set(typing.get_args(ViewKind)), f"{cls.kind} views {cls.views}"
    block = mechanism_block(cls)
    assert block is None or block["kind"] in MECHANISMS


def check_fits_only_when_it_learns(cls: type[Attack]) -> None:
    """An attack overrides ``fit`` exactly when it says it learns (``requires_fit``)."""
    assert (cls.fit is not Attack.fit) == cls.requires_fit, f"{cls.kind}: requires_fit = {cls.requires_fit}"


def _empty_view(kind: str):
    """A view of ``kind`` with its required fields filled with placeholders (one row)."""
    required = {"messages": {"messages": np.zeros((1, 1))}, "target": {"target": [np.zeros(1)]},
                "statistics": {"statistics": {}}}
    return view_class(kind)(**required.get(kind, {}))


def check_refuses_other_views(cls: type[Attack]) -> None:
    """Given a view it does not read, ``refusal`` says so and scoring raises :class:`AttackError` (bad input,
    one clear message), not any other error."""
    others = [kind for kind in typing.get_args(ViewKind) if kind not in cls.views]
    attack = instance(cls)
    block = mechanism_block(cls)
    mechanism = None if block is None else MECHANISMS[block["kind"]](**{k: v for k, v in block.items() if k != "kind"})
    for kind in others:
        assert attack.refusal(mechanism, kind) is not None, f"{cls.kind}: refusal() accepts the {kind!r} view"
        view = _empty_view(kind)
        try:
            attack.scores(mechanism, TargetPair.__new__(TargetPair), view)
        except AttackError:
            continue
        raise AssertionError(f"{cls.kind} scored a {kind!r} view it does not read")


CHECKS: tuple[Callable[[type[Attack]], None], ...] = (check_registered, check_reads_known_views,
                                                       check_fits_only_when_it_learns, check_refuses_other_views)


def yield_checks(cls: type[Attack]) -> Iterator[Callable[[type[Attack]], None]]:
    """Every check an attack class must pass without running an audit (call each with the class)."""
    yield from CHECKS
