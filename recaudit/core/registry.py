"""Registries of named parts: a class registers itself once, by its ``kind``, where it is defined."""
from __future__ import annotations

from typing import Any


class Registry(dict):
    """``kind`` → class, filled by ``register``; an unknown kind's error lists the valid ones."""

    def __init__(self, what: str):
        super().__init__()
        self.what = what

    def add(self, cls: type, kind: str | None) -> None:
        """Register ``cls`` as ``kind`` and set ``cls.kind`` (call from ``__init_subclass__``; None: abstract)."""
        if kind is None:
            return
        if kind in self and self[kind].__qualname__ != cls.__qualname__:
            raise TypeError(f"{self.what} kind {kind!r} is taken by {self[kind].__qualname__}")
        cls.kind = kind
        self[kind] = cls

    def __missing__(self, kind: Any):
        raise KeyError(f"unknown {self.what} {kind!r}; registered: {', '.join(sorted(self))}")
