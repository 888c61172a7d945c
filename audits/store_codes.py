"""How the store (``recaudit.audits.store``) lays out a unit's arrays: few-valued floats as byte codes into a
table of their values, two-valued ones as packed bits; decoded bit for bit on load."""
from __future__ import annotations

import numpy as np

from .stats.coded import CodedScores, is_code_table

__all__ = ["CodedScores", "coded", "decoded", "encoded"]

_VALUES = "@values"  # suffix of a coded array's table of distinct values
_BITS, _SHAPE = "@bits", "@shape"  # suffixes of the codes of a table of two values (or one), packed, and their shape


def coded(array: np.ndarray, limit: int = 255) -> tuple[np.ndarray, np.ndarray] | None:
    """(uint8 codes, distinct values) that give back ``array`` bit for bit, or None.

    Scores of discrete outputs take a handful of values: stored as codes a block is 8 times smaller, so
    checksumming and writing it cost less than computing it. The distinct values are read off an evenly
    strided sample and then checked against every element (bit patterns, so -0.0 and NaNs survive).
    """
    if array.dtype.kind != "f" or array.size < 1024:
        return None
    flat = array.reshape(-1)
    values = np.unique(flat[::max(1, flat.size // 512)])
    if values.size > limit:
        return None
    if values.size <= 8:  # a few comparisons beat a binary search per element
        codes = np.zeros(flat.size, np.uint8)
        for value in values[1:]:
            codes += flat >= value
    else:
        codes = np.minimum(np.searchsorted(values, flat), values.size - 1)
    bits = f"i{array.itemsize}"
    if not np.array_equal(values[codes].view(bits), flat.view(bits)):
        return None
    return codes.astype(np.uint8).reshape(array.shape), values


def encoded(arrays: dict) -> dict[str, np.ndarray]:
    out = {}
    for name, array in arrays.items():
        pair = (array.codes, array.values) if isinstance(array, CodedScores) else coded(np.asarray(array))
        if pair is None:
            out[name] = array
        elif pair[1].size <= 2:  # codes of two values are bits: eight to a byte
            out |= {name + _BITS: np.packbits(pair[0].reshape(-1), bitorder="little"),
                    name + _SHAPE: np.array(pair[0].shape, np.int64), name + _VALUES: pair[1]}
        else:
            out |= {name: pair[0], name + _VALUES: pair[1]}
    return out


def decoded(arrays: dict[str, np.ndarray], keep_codes: tuple[str, ...] = ()) -> dict:
    """The arrays as saved; coded ones decoded, except those named in ``keep_codes`` whose table is a
    :class:`CodedScores` table (ascending, no NaN): those stay coded."""
    out = {}
    for key, array in arrays.items():
        if key.endswith(_BITS):
            name, shape = key[:-len(_BITS)], tuple(arrays[key[:-len(_BITS)] + _SHAPE])
            array = np.unpackbits(array, count=int(np.prod(shape)), bitorder="little").reshape(shape)
        elif key.endswith((_VALUES, _SHAPE)):
            continue
        else:
            name = key
        values = arrays.get(name + _VALUES)
        if values is None:
            out[name] = array
        elif name in keep_codes and array.dtype == np.uint8 and is_code_table(values):
            out[name] = CodedScores(array, values)
        else:
            out[name] = values[array]
    return out
