"""Adapters that make other libraries' DP mechanisms auditable by :mod:`recaudit.audits.harness`.

The harness audits any object with ``sample(value, n, rng)``. Libraries expose
one draw per call and seed in their own way (a ``Generator``, a
``RandomState``, an int, or not at all), so :func:`from_callable` wraps a
draw function: it calls it ``n`` times in chunks, each chunk seeded from the
audit's generator in the library's own currency. :func:`from_opendp` reads
the claim from an OpenDP measurement's privacy map and output measure;
:func:`from_diffprivlib` from a diffprivlib mechanism's ε, δ and noise.
Unseedable libraries (``seeding=None``) are audited all the same, and the
run records that the seed does not reproduce it.

Neighbouring datasets: :func:`add_remove` and :func:`replace_one` build a
pair of datasets (lists or arrays of records) and name the relation, which
reports show next to the claim: auditing an add/remove mechanism with
replace-one neighbours is a different (and stronger) question.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import numpy as np

from recaudit.core.errors import ParameterError
from recaudit.mechanisms.claims import PrivacyClaim
from recaudit.mechanisms.conversions import from_zcdp

Seeding = Literal["generator", "random_state", "int"] | None
SEEDINGS = ("generator", "random_state", "int", None)
#: draws per chunk: each chunk gets one fresh library seed from the audit's generator
CHUNK = 4096


class Neighbours(tuple):
    """A pair ``(d0, d1)`` of datasets with the neighbouring relation that built it (shown in reports)."""

    relation: str

    def __new__(cls, d0, d1, relation: str):
        pair = super().__new__(cls, (d0, d1))
        pair.relation = relation
        return pair

    def __getnewargs__(self):
        return (self[0], self[1], self.relation)


def _like(dataset, records: list):
    """``records`` in the container type of ``dataset`` (an array stays an array)."""
    if isinstance(dataset, np.ndarray):
        return np.asarray(records, dtype=dataset.dtype)
    return type(dataset)(records) if isinstance(dataset, (list, tuple)) else records


def add_remove(dataset, record) -> Neighbours:
    """``(dataset, dataset + [record])``: add/remove-one-record neighbours (unbounded DP)."""
    records = list(dataset)
    return Neighbours(_like(dataset, records), _like(dataset, records + [record]), "add/remove one record")


def replace_one(dataset, index: int, record) -> Neighbours:
    """``(dataset, dataset with record ``index`` replaced by ``record``)``: replace-one neighbours (bounded DP)."""
    records = list(dataset)
    if not -len(records) <= index < len(records):
        raise ParameterError("index", f"index {index} is outside a dataset of {len(records)} records")
    other = list(records)
    other[index] = record
    return Neighbours(_like(dataset, records), _like(dataset, other), "replace one record")


@dataclass
class LibraryMechanism:
    """A library's draw function as a harness mechanism: ``sample(value, n, rng)``, ``claim``, ``neighbours``.

    ``seeding`` says what ``draw`` takes after the value: ``"generator"`` (a
    numpy ``Generator``), ``"random_state"`` (a legacy ``RandomState``),
    ``"int"`` (a fresh 32-bit seed per draw) or None (nothing: the library
    draws its own randomness, so runs are not reproducible). With
    ``vectorised`` the draw takes ``(value, n, seed)`` and returns ``n``
    outputs at once.
    """

    draw: Callable
    claim: PrivacyClaim
    neighbours: tuple | None = None
    seeding: Seeding = "generator"
    vectorised: bool = False
    library: str = ""
    chunk: int = CHUNK
    #: why the run may not reproduce from its seed (None: the library is seeded from it)
    not_reproducible: str | None = field(default=None)

    def __post_init__(self) -> None:
        if self.seeding not in SEEDINGS:
            raise ParameterError("seeding", f"seeding must be one of {SEEDINGS}, got {self.seeding!r}")
        if self.seeding is None and self.not_reproducible is None:
            self.not_reproducible = (f"{self.library or 'the library'} cannot be seeded: it draws its own "
                                     "randomness, so the same seed gives a different run")

    def _seed(self, rng: np.random.Generator):
        if self.seeding == "generator":
            return np.random.default_rng(rng.integers(2**63))
        if self.seeding == "random_state":
            return np.random.RandomState(int(rng.integers(2**32)))
        if self.seeding == "int":
            return int(rng.integers(2**32))
        return None

    def _chunk(self, value, n: int, rng: np.random.Generator) -> list:
        if self.seeding is None:
            return [self.draw(value) for _ in range(n)]
        if self.seeding == "int":
            return [self.draw(value, int(s)) for s in rng.integers(2**32, size=n)]
        seed = self._seed(rng)
        return [self.draw(value, seed) for _ in range(n)]

    def sample(self, value, n: int, rng: np.random.Generator):
        """``n`` independent draws on ``value``: chunks of ``chunk`` draws, each seeded from ``rng``."""
        if self.vectorised:
            parts = []
            for start in range(0, n, self.chunk):
                size = min(self.chunk, n - start)
                seed = self._seed(rng)
                parts.append(np.asarray(self.draw(value, size) if self.seeding is None
                                        else self.draw(value, size, seed)))
            return np.concatenate(parts)
        out: list = []
        for start in range(0, n, self.chunk):
            out.extend(self._chunk(value, min(self.chunk, n - start), rng))
        return _stack(out)


def _stack(draws: list):
    """Draws as one array: numbers → float (or int) array, vectors → (n, d), strings → an array of strings
    (labels), anything else → object array."""
    first = draws[0] if draws else 0.0
    if isinstance(first, (str, bytes)) and all(isinstance(d, type(first)) for d in draws):
        return np.array(draws)
    if isinstance(first, (str, bytes)) or not np.ndim(first) and not isinstance(first, (int, float, np.number)):
        out = np.empty(len(draws), dtype=object)
        out[:] = draws
        return out
    return np.asarray(draws)


def from_callable(draw: Callable, claim, neighbours=None, seeding: Seeding = "generator", *,
                  vectorised: bool = False, library: str = "", chunk: int = CHUNK) -> LibraryMechanism:
    """Wrap ``draw(value, seed)`` (one output per call) as a harness mechanism; see :class:`LibraryMechanism`.

    ``claim``: a :class:`PrivacyClaim` (e.g. from :mod:`recaudit.mechanisms.conversions`),
    an ε, or an ``(ε, δ)`` pair.
    """
    return LibraryMechanism(draw, _as_claim(claim), neighbours, seeding, vectorised, library, chunk)


def _as_claim(claim) -> PrivacyClaim:
    if isinstance(claim, PrivacyClaim):
        return claim
    if isinstance(claim, (tuple, list)):
        epsilon, delta = (float(x) for x in claim)
        return PrivacyClaim(epsilon=epsilon, delta=delta, model="central")
    return PrivacyClaim(epsilon=float(claim), delta=0.0, model="central")


# --------------------------------------------------------------------------
# OpenDP


def opendp_claim(measurement, d_in, delta: float | None = None, *, gaussian: bool = False) -> PrivacyClaim:
    """The claim of an OpenDP measurement at input distance ``d_in``, read from its map and output measure.

    ``MaxDivergence`` → pure ε; ``ZeroConcentratedDivergence`` → ρ-zCDP
    converted at ``delta``: with ``gaussian=True`` (continuous Gaussian noise,
    e.g. ``make_gaussian`` on floats) exactly through μ = √(2ρ), which GDP
    estimators use; otherwise through Rényi DP, valid for any zCDP measurement
    (OpenDP does not say which noise a measurement adds, so the caller says
    it); ``Approximate(MaxDivergence)`` → (ε, δ);
    ``SmoothedMaxDivergence`` → its privacy profile's ε at ``delta``.
    """
    measure = str(measurement.output_measure)
    loss = measurement.map(d_in)
    if measure.startswith("MaxDivergence"):
        return PrivacyClaim(float(loss), 0.0, "central", conversion=f"OpenDP {measure}: ε = map({d_in!r})")
    if measure.startswith("ZeroConcentratedDivergence"):
        if delta is None:
            raise ParameterError("delta", "the measurement is ρ-zCDP: give delta= to convert it to (ε, δ)")
        return from_zcdp(float(loss), delta, gaussian=gaussian)
    if measure.startswith("Approximate(MaxDivergence"):
        epsilon, approx_delta = (float(x) for x in loss)
        return PrivacyClaim(epsilon, approx_delta, "central", conversion=f"OpenDP {measure}: (ε, δ) = map({d_in!r})")
    if measure.startswith("SmoothedMaxDivergence"):
        if delta is None:
            raise ParameterError("delta", "the measurement has a privacy profile: give delta= to read ε at it")
        return PrivacyClaim(float(loss.epsilon(delta)), float(delta), "central",
                            conversion=f"OpenDP {measure}: ε at δ from the privacy profile of map({d_in!r})")
    raise ParameterError("measurement", f"no conversion from OpenDP's {measure} to an (ε, δ) claim")


def from_opendp(measurement, d_in, neighbours=None, delta: float | None = None, *, gaussian: bool = False,
                sampler=None) -> LibraryMechanism:
    """An OpenDP measurement as a harness mechanism, its claim read by :func:`opendp_claim`.

    OpenDP cannot be seeded, so the run is recorded as not reproducible.
    ``sampler`` (optional) is a measurement on a *vector* of the same values
    whose coordinates are independent draws of ``measurement`` (e.g. the same
    noise on a ``vector_domain``): the audit then draws a whole chunk in one
    call, several times faster. It is used for sampling only; the claim is
    always ``measurement``'s.
    """
    claim = opendp_claim(measurement, d_in, delta, gaussian=gaussian)
    if sampler is not None:
        return LibraryMechanism(lambda value, n: np.asarray(sampler([value] * n)), claim, neighbours, None,
                                vectorised=True, library="OpenDP")
    return LibraryMechanism(measurement, claim, neighbours, None, library="OpenDP")


# --------------------------------------------------------------------------
# diffprivlib


def diffprivlib_compatibility() -> None:
    """Let diffprivlib 0.6 import with scikit-learn ≥ 1.7 (it imports two names the new ``sklearn.tree._tree`` lacks).

    Adds ``DOUBLE``/``DTYPE`` (float64/float32, their old values) only when
    they are missing; a no-op otherwise.
    """
    from sklearn.tree import _tree

    for name, dtype in (("DOUBLE", np.float64), ("DTYPE", np.float32)):
        if not hasattr(_tree, name):
            setattr(_tree, name, dtype)


def diffprivlib_claim(mechanism) -> PrivacyClaim:
    """ε, δ of a diffprivlib mechanism as configured; Gaussian ones also carry μ = sensitivity / σ.

    μ is the mechanism's exact trade-off curve (what GDP estimators test): for
    ``GaussianAnalytic`` its ε at δ equals the configured ε; the classic
    ``Gaussian`` calibration is looser, so its tightness stays below 1.
    """
    epsilon, delta = float(mechanism.epsilon), float(getattr(mechanism, "delta", 0.0))
    scale = getattr(mechanism, "_scale", None)
    if "Gaussian" in type(mechanism).__name__ and scale and delta > 0:
        mu = float(mechanism.sensitivity) / float(scale)
        return PrivacyClaim(epsilon, delta, "central", gaussian_mu=mu,
                            conversion=f"diffprivlib {type(mechanism).__name__}: (ε, δ) as configured; "
                                       f"μ = sensitivity / σ = {mu:.6g}")
    return PrivacyClaim(epsilon, delta, "central")


def from_diffprivlib(mechanism, neighbours=None) -> LibraryMechanism:
    """A diffprivlib mechanism (``randomise(value)``) as a harness mechanism, seeded per chunk.

    Each chunk draws from a copy of the mechanism whose ``RandomState`` comes
    from the audit's seed (diffprivlib takes a ``RandomState`` or an int, not a
    ``Generator``; unseeded it uses the system's CSPRNG).
    """
    import copy

    def draw(value, random_state):
        if draw.state is not random_state:  # a new chunk: a copy drawing from the chunk's RandomState
            draw.mechanism = copy.copy(mechanism)
            draw.mechanism._rng = random_state  # where diffprivlib 0.6 keeps check_random_state(random_state)
            draw.state = random_state
        return draw.mechanism.randomise(value)

    draw.state = None
    return LibraryMechanism(draw, diffprivlib_claim(mechanism), neighbours, "random_state",
                            library="diffprivlib")
