"""The epsilon-DP bit release (randomized response) and its de-biasing."""
from __future__ import annotations

import numpy as np


def keep_probability(epsilon: float | np.ndarray) -> float | np.ndarray:
    """P(output = true bit) = e^eps / (1 + e^eps)."""
    return 1.0 / (1.0 + np.exp(-np.asarray(epsilon, dtype=float)))


def randomized_response(bits: np.ndarray, epsilon: float | np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Release each bit truthfully with probability e^eps/(1+e^eps), else flipped.

    ``epsilon`` broadcasts against ``bits`` (one budget per bit column allowed).
    """
    bits = np.asarray(bits, dtype=bool)
    flip = rng.random(bits.shape) >= keep_probability(epsilon)
    return bits ^ flip


def log_likelihood(messages: np.ndarray, bits: np.ndarray, epsilon: float | np.ndarray) -> np.ndarray:
    """Per-row log P(messages | bits) under randomized response with ``epsilon``."""
    eps = np.asarray(epsilon, dtype=float)  # per bit column at most: the logs are taken once per column
    agree = np.asarray(messages, dtype=bool) == np.asarray(bits, dtype=bool)
    log_keep = -np.logaddexp(0.0, -eps)
    log_flip = -np.logaddexp(0.0, eps)
    if np.ndim(log_keep) == 0:  # one budget: look the terms up (twice as fast as np.where on two scalars)
        return np.array([log_flip, log_keep])[agree.view(np.uint8)].sum(axis=-1)
    return np.where(agree, log_keep, log_flip).sum(axis=-1)


def debias(released_mean: float | np.ndarray, epsilon: float) -> float | np.ndarray:
    """Unbiased estimate of the true mean: ((1 + e^eps) * mean - 1) / (e^eps - 1)."""
    e = np.exp(epsilon)
    return ((1.0 + e) * np.asarray(released_mean) - 1.0) / (e - 1.0)
