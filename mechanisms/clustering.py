"""Clustering helpers the servers use to turn item statistics into item clusters."""
from __future__ import annotations

import numpy as np

_BLOCK_ENTRIES = 1 << 21  # entries of one block of the k-means cost table (16 MiB per float array)


def kmeans_1d(values: np.ndarray, k: int) -> np.ndarray:
    """Exact 1-D k-means (dynamic programming over sorted values).

    Returns labels ``0..k-1`` ordered by cluster mean. Deterministic: the
    optimum of the within-cluster sum of squares, found in O(k n^2) numpy work
    and O(n) memory beyond fixed-size blocks.
    """
    values = np.asarray(values, dtype=float)
    n = values.size
    k = max(1, min(k, n))
    order = np.argsort(values, kind="stable")
    x = values[order]
    s1 = np.concatenate([[0.0], np.cumsum(x)])
    s2 = np.concatenate([[0.0], np.cumsum(x * x)])

    # cost(i, j): squared error of one cluster holding x[i:j] (i < j); built a block of columns j
    # at a time, so memory is O(n * block), not O(n^2) (10,000 items would need GBs)
    i = np.arange(n + 1)[:, None]

    def cost(j: np.ndarray) -> np.ndarray:  # rows i < the block's last j + 1 only: later rows are all inf
        rows = i[:j[0, -1] + 1]
        size = np.maximum(j - rows, 1)
        c = (s2[j] - s2[rows]) - (s1[j] - s1[rows]) ** 2 / size
        return np.where(j > rows, np.maximum(c, 0.0), np.inf)

    block = max(1, _BLOCK_ENTRIES // (n + 1))
    columns = [np.arange(start, min(n + 1, start + block))[None, :] for start in range(0, n + 1, block)]
    ends = np.arange(n + 1)  # best[j]: one cluster covering x[:j], i.e. cost(0, j)
    best = np.where(ends > 0, np.maximum(s2 - s1 ** 2 / np.maximum(ends, 1), 0.0), np.inf)
    cuts = np.zeros((k, n + 1), dtype=np.int64)
    for layer in range(1, k):
        new_best = np.empty(n + 1)
        for j in columns:
            total = best[:j[0, -1] + 1, None] + cost(j)  # split x[:j] into x[:i] (layer clusters) + x[i:j]
            cut = np.argmin(total, axis=0)
            cuts[layer, j[0]] = cut
            new_best[j[0]] = total[cut, np.arange(j.size)]
        best = new_best

    sorted_labels = np.empty(n, dtype=np.int64)
    end = n
    for layer in range(k - 1, -1, -1):
        start = cuts[layer, end] if layer > 0 else 0
        sorted_labels[start:end] = layer
        end = start
    labels = np.empty(n, dtype=np.int64)
    labels[order] = sorted_labels
    return labels


def kmeans(points: np.ndarray, k: int, rng: np.random.Generator, restarts: int = 10,
           iterations: int = 100) -> np.ndarray:
    """Lloyd's k-means with k-means++ seeding and restarts; returns labels."""
    points = np.asarray(points, dtype=float)
    if points.ndim == 1:
        points = points[:, None]
    n = points.shape[0]
    best_labels, best_cost = np.zeros(n, dtype=np.int64), np.inf
    for _ in range(restarts):
        centres = points[[rng.integers(n)]]
        for _ in range(1, k):
            d2 = ((points[:, None, :] - centres[None]) ** 2).sum(-1).min(1)
            total = d2.sum()
            nxt = rng.integers(n) if total <= 0 else rng.choice(n, p=d2 / total)
            centres = np.vstack([centres, points[nxt]])
        for _ in range(iterations):
            d2 = ((points[:, None, :] - centres[None]) ** 2).sum(-1)
            labels = d2.argmin(1)
            new = np.array([points[labels == c].mean(0) if np.any(labels == c) else centres[c] for c in range(k)])
            if np.allclose(new, centres):
                break
            centres = new
        cost = d2[np.arange(n), labels].sum()
        if cost < best_cost:
            best_cost, best_labels = cost, labels
    return best_labels
