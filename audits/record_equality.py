"""Deep equality of run records and their row counts: the helpers the conformance checks compare runs with."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from scipy import sparse


def same(a: Any, b: Any) -> bool:
    """Deep equality of run records: arrays (NaN equal to NaN), sparse matrices, dataclasses, containers."""
    if type(a) is not type(b):
        return False
    if sparse.issparse(a):
        return a.shape == b.shape and (a != b).nnz == 0
    if isinstance(a, np.ndarray):
        return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc")
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if hasattr(a, "__dict__"):
        return same(vars(a), vars(b))
    return bool(a == b)


def rows(x: Any) -> int:
    """Rows on axis 0 (arrays, sparse matrices, row types with ``len``)."""
    return x.shape[0] if hasattr(x, "shape") else len(x)
