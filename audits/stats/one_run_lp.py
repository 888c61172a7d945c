"""f-DP one-run bound from every test the per-canary guarantee allows (a linear programme).

Mahloujifar, Melis, Chaudhuri (ICML 2025) bound the tail of ``V`` (right
guesses out of ``r`` on ``m`` canaries) through one family of tests: for
canary ``j``, "guess ``j`` and at least ``i`` of the *other* guesses are
right". Every set ``B`` of counts gives such a test — "guess ``j`` and the
others' right count lies in ``B``" — a function of the output and the other
canaries' bits, so μ-GDP with respect to canary ``j`` bounds it. Averaged over
canaries and both guess directions (``g`` convex, Jensen), with ``p_v = P[V = v]``:

    Σ_{v∈B} (r − v)·p_v ≥ m·g( Σ_{v−1∈B} v·p_v / m ),   g(x) = Φ(Φ⁻¹(x) − μ),

for every ``B`` (the recursion uses ``B = {≥ i}`` only). A tangent of ``g`` at
slope ``s`` turns one ``B`` into a linear constraint, and the worst ``B`` for a
slope is pointwise: ``Σ_v min(0, (r − v)·p_v − s·(v + 1)·p_{v+1}) ≥ −m·g*(s)``
(``g*`` the convex conjugate). Finitely many tangents keep fewer constraints
than the guarantee implies, so the feasible laws are a superset of the true
ones: ``max P[V ≥ v]`` over them (a linear programme, scipy's HiGHS) is a
valid bound on the tail, and μ-GDP is rejected when it is below alpha.

At m = 10⁴, 2·395 guesses, 505 right: the recursion rejects μ ≤ 0.164, this
programme μ ≤ 0.169 (about 3 % more ε at the claim's δ), ~0.5 s CPU per programme.
"""
from __future__ import annotations

import functools
import math

import numpy as np
from scipy import optimize, sparse
from scipy.special import ndtr, ndtri

from .one_run import _check_alpha, _check_counts, fdp_one_run_mu_lower_bound

__all__ = ["TANGENTS", "MAX_GUESSES", "max_tail", "tail_bound", "lp_mu_lower_bound"]

#: tangent points of g per programme (more only tightens, and costs time)
TANGENTS = 12
#: most guesses the programme is solved for; above, the recursion alone (a programme takes seconds there, and
#: five to eight make an estimate; a programme that fails counts as no rejection, so the bound stays valid)
MAX_GUESSES = 1_000


def _tangent_points(r: int, v: int, m: int, alpha: float) -> np.ndarray:
    """``z`` of the tangents ``x = Φ(z)``, from a quarter of the right-guess mass a rejection starts with
    (``alpha·v/m``) to the most there is (``r/m``).

    Any choice keeps the bound valid (each tangent only adds a constraint the
    guarantee implies), including one that depends on the observed ``v``.
    """
    lo = float(ndtri(alpha * max(v, 1) / (4.0 * m)))
    return np.linspace(lo, float(ndtri(min(r / m, 1.0 - 1e-12))), TANGENTS)


def _window(r: int, v: int) -> int:
    """Lowest count kept in the programme: ``v − 6√r``. Dropping the constraint terms of lower counts (each
    ``≤ 0``) only loosens the programme, so the bound stays valid; their mass becomes one free lump."""
    return max(0, v - int(math.ceil(6.0 * math.sqrt(r))))


def max_tail(r: int, v: int, m: int, mu: float, alpha: float) -> float:
    """``max P[V ≥ v]`` over laws of ``V`` meeting the tangent constraints of μ-GDP (see the module docstring).

    Variables: ``p_L..p_r``, a lump for the counts below ``L`` and ``t_{k,u} ≤ 0``
    per tangent ``k`` and count ``u``, with ``t_{k,u} ≤ ((r − u)·p_u − s_k·(u + 1)·p_{u+1})/r``
    and ``Σ_u t_{k,u} ≥ −(m/r)·g*(s_k)`` (divided by r: HiGHS reports numerical trouble on the raw rows).
    """
    z = _tangent_points(r, v, m, alpha)
    x, slope = ndtr(z), np.exp(mu * z - mu * mu / 2.0)
    conjugate = slope * x - ndtr(z - mu)
    low = _window(r, v)
    u = np.arange(low, r + 1)
    n, tangents = u.size, z.size
    k = np.repeat(np.arange(tangents), n)
    col = np.tile(np.arange(n), tangents)  # p_u's column
    row = np.arange(tangents * n)
    t_col = n + 1 + row  # after p_L..p_r and the lump
    up = col < n - 1
    a_ub = sparse.csr_matrix(
        (np.r_[np.ones(row.size), -(r - u[col]) / r, slope[k[up]] * (u[col[up]] + 1) / r, -np.ones(row.size)],
         (np.r_[row, row, row[up], row.size + k], np.r_[t_col, col, col[up] + 1, t_col])),
        shape=(row.size + tangents, n + 1 + row.size))
    c = np.zeros(a_ub.shape[1])
    c[v - low:n] = -1.0
    problem = dict(A_ub=a_ub, b_ub=np.r_[np.zeros(row.size), m / r * conjugate],
                   A_eq=np.r_[np.ones(n + 1), np.zeros(row.size)][None], b_eq=[1.0],
                   bounds=[(0, None)] * (n + 1) + [(None, 0)] * row.size)
    res = optimize.linprog(c, method="highs", **problem)
    if res.status == 4:  # HiGHS's presolve reports numerical trouble on some programmes; without it they solve
        res = optimize.linprog(c, method="highs", options={"presolve": False}, **problem)
    if res.status != 0:
        raise RuntimeError(f"one-run programme failed: {res.message}")
    return float(-res.fun)


def _gap(r: int, v: int, m: int, mu: float, alpha: float) -> float:
    """``max_tail − alpha`` (negative: rejected); a solver failure counts as not rejected (+0)."""
    try:
        return max_tail(r, v, m, mu, alpha) - alpha
    except RuntimeError:
        return 0.0


def tail_bound(r: int, v: int, m: int, mu: float, alpha: float) -> float:
    """The programme's bound on ``P[V ≥ v]`` under μ-GDP: a p-value of "the mechanism is μ-GDP" (1 if unsolved).

    ``alpha`` only places the tangents; below alpha exactly when
    :func:`lp_mu_lower_bound` at alpha exceeds μ.
    """
    if v == 0 or r > MAX_GUESSES:
        return 1.0
    try:
        return min(1.0, max_tail(r, v, m, mu, alpha))
    except RuntimeError:
        return 1.0


@functools.lru_cache(maxsize=1024)  # (an estimate asks for its ceiling, lp_mu_lower_bound(r, r, m), every time)
def lp_mu_lower_bound(r: int, v: int, m: int, alpha: float, rtol: float = 1e-3) -> float:
    """Largest μ rejected (0 if none), to ``rtol``; the lower end of the bracket, so still rejected.

    A μ is rejected when the programme's or the recursion's tail bound is
    below alpha: both bound the same ``P[V ≥ v]``, so their minimum does, and
    the test keeps level alpha. Rejection shrinks as μ grows (a larger μ lowers
    ``g``), so the recursion's μ bound starts the bracket and regula falsi
    (Illinois) on ``max_tail − alpha`` narrows it above.
    """
    r, v, m = _check_counts(r, v, m)
    alpha = _check_alpha(alpha)
    lo = fdp_one_run_mu_lower_bound(r, v, m, alpha)
    if v == 0 or r > MAX_GUESSES or not math.isfinite(lo):
        return lo
    if 2 * v <= r and alpha < 0.5:
        # chance-level guesses or worse reject no μ >= 0: V ~ Binomial(r, ½) (a mechanism ignoring its input, so
        # μ-GDP) meets every constraint and has P[V >= v] >= ½ > alpha; no programme needs solving to say so
        return lo
    f_lo = _gap(r, v, m, lo, alpha)
    if f_lo >= 0:
        return lo
    hi = max(1.1 * lo, 0.05)
    f_hi = _gap(r, v, m, hi, alpha)
    while f_hi < 0:
        lo, f_lo, hi = hi, f_hi, 2.0 * hi
        f_hi = _gap(r, v, m, hi, alpha)
    side = 0
    while hi - lo > rtol * hi:
        mid = hi - f_hi * (hi - lo) / (f_hi - f_lo)
        mid = min(max(mid, lo + 0.02 * (hi - lo)), hi - 0.02 * (hi - lo))
        f_mid = _gap(r, v, m, mid, alpha)
        if f_mid < 0:
            lo, f_lo = mid, f_mid
            f_hi, side = (f_hi / 2.0 if side == -1 else f_hi), -1
        else:
            hi, f_hi = mid, f_mid
            f_lo, side = (f_lo / 2.0 if side == 1 else f_lo), 1
    return lo
