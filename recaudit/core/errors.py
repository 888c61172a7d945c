"""The one error hierarchy: every error recaudit raises on purpose is a :class:`RecauditError`.

:class:`BadInput` means the user's input or environment is wrong (a scenario,
a parameter, a file, a folder, an executor): the command line prints it in
one line and exits 2, before any work where it can. :class:`InternalError`
means a contract inside recaudit broke: a bug (exit 3, with a traceback).
Each subclass also keeps the builtin base it had (``ValueError``,
``RuntimeError``), so ``except ValueError`` still catches it.
This module is the lowest layer, so every package can raise these.
"""
from __future__ import annotations


class RecauditError(Exception):
    """Base of every error recaudit raises on purpose."""


class BadInput(RecauditError):
    """The user's input or environment is wrong (exit 2)."""


class InternalError(RecauditError):
    """A contract inside recaudit broke: a bug, never the user's input (exit 3)."""


class ParameterError(BadInput, ValueError):
    """A bad parameter value; ``field`` (a name or dotted path) says where, so errors can point at it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field
