"""Named, reproducible random streams spawned from one root SeedSequence."""
from __future__ import annotations

import zlib

import numpy as np


def _key(part: int | str) -> int:
    if isinstance(part, str):
        return zlib.crc32(part.encode("utf-8"))
    if part < 0:
        raise ValueError("stream keys must be non-negative")
    return int(part)


def child_seed(root: np.random.SeedSequence, *parts: int | str) -> np.random.SeedSequence:
    """The sub-sequence of ``root`` named by ``parts`` (e.g. ``"trial", 7, "attack"``).

    Same root and parts give the same stream on any machine and executor;
    different parts give independent streams.
    """
    return np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + tuple(_key(p) for p in parts))


def stream(root: np.random.SeedSequence, *parts: int | str) -> np.random.Generator:
    """A Generator on the named sub-stream of ``root``."""
    return np.random.default_rng(child_seed(root, *parts))
