"""Scores in, ε out: the registered estimators on scores a user made elsewhere (``ra.estimate``,
``recaudit estimate FILE``).

Two designs, told apart by the labels given with the scores:

* ``members`` — one run: each score is a canary's, its label 1 when the canary was in the run and 0 when it
  was out (each in independently with probability ½). The estimators whose ``input`` is ``canaries`` (the
  one-run ones) apply.
* ``worlds`` — many runs: each score is one run's, its label the neighbouring world (0 or 1) the run came
  from. The estimators whose ``input`` is ``pairs`` apply; each world's scores are taken in the order given
  (the split estimators choose their test on the first part of each world and count the rest, as a
  scenario's report does, so the order must not depend on the scores).

Every bound is at confidence ``1 - alpha`` on its own; a reader who takes the largest of several must
split alpha over them (run with ``alpha / k``). What each assumes is its class's ``valid_for``
(exactly ``any mechanism`` when it holds whatever the scores' distributions).
Without ``estimators`` every one registered for the design runs, except those that cannot: an estimator that
needs settings fixed before the scores are seen (a threshold grid, one threshold), a claim it cannot judge
(the Gaussian-DP ones need the claim's ``mu``; δ = 0 stops those that convert at δ) or more data are
listed in ``skipped`` with the reason; named ones that cannot run are an error.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from recaudit.core.errors import BadInput
from recaudit.core.files import read_bytes
from recaudit.mechanisms import PrivacyClaim

from .stats.estimators import ESTIMATORS, Estimate, Estimator, EstimatorError

#: the label column of each design, and the estimators' ``input`` it feeds
DESIGNS = {"member": "canaries", "world": "pairs"}
#: said beside several bounds on the same scores
ALPHA_NOTE = "each bound holds at confidence 1 - alpha on its own; to use the largest of k, run with alpha / k"


class EstimateInputError(BadInput, ValueError):
    """Scores, labels, a claim or an estimator that ``estimate`` cannot take (one line, exit 2)."""


@dataclass(frozen=True)
class EstimatorResult:
    """One estimator's answer: its bound and what the bound assumes."""

    estimator: str
    method: str
    threshold_rule: str | None
    valid_for: str
    estimate: Estimate

    @property
    def epsilon_lb(self) -> float:
        return self.estimate.epsilon_lb

    @property
    def ceiling(self) -> float:
        return self.estimate.ceiling

    @property
    def uninformative(self) -> bool:
        return bool(self.estimate.uninformative)

    @property
    def p_value(self) -> float:
        return float(self.estimate.p_value)

    def to_dict(self) -> dict:
        """``estimator``, ``epsilon_lb``, ``ceiling``, ``uninformative``, ``valid_for``, ``p_value`` (of "the
        claim holds"), ``optimal_epsilon_lb`` and the bound's own record (``bound``: counts, threshold, μ...)."""
        return {"estimator": self.estimator, "epsilon_lb": self.epsilon_lb, "ceiling": self.ceiling,
                "uninformative": self.uninformative, "valid_for": self.valid_for, "method": self.method,
                "threshold_rule": self.threshold_rule, "alpha": self.estimate.alpha, "p_value": self.p_value,
                "optimal_epsilon_lb": self.estimate.optimal, "bound": self.estimate.bound.to_dict(),
                # epsilon_lb is always a bound; a model's figure the scores do not guarantee is an estimate
                "is_bound": self.estimate.is_bound, "epsilon_estimate": self.estimate.epsilon_estimate,
                "bound_method": self.estimate.bound_method, "at_ceiling": self.estimate.at_ceiling}


@dataclass(frozen=True)
class Estimates:
    """Every estimator's answer on one set of scores (``results``) and those that could not run (``skipped``)."""

    design: str  # "member" (one run) or "world" (many runs)
    claim: PrivacyClaim
    alpha: float
    counts: dict[str, int]
    results: list[EstimatorResult]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def __iter__(self) -> Iterator[EstimatorResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, name: str | int) -> EstimatorResult:
        if isinstance(name, int):
            return self.results[name]
        for result in self.results:
            if result.estimator == name:
                return result
        raise KeyError(f"{name!r}: no result (ran: {', '.join(r.estimator for r in self.results) or 'none'})")

    def to_dict(self) -> dict:
        """The JSON of ``recaudit estimate --json``: ``estimates`` (one object per estimator), ``skipped``,
        the design, the claim, alpha and the counts. Infinite figures are written as null."""
        return _finite({"design": "one run (member)" if self.design == "member" else "many runs (world)",
                        "label": self.design, "claim": {"epsilon": self.claim.epsilon, "delta": self.claim.delta,
                                                        "mu": self.claim.gaussian_mu},
                        "alpha": self.alpha, "counts": self.counts,
                        "estimates": [r.to_dict() for r in self.results],
                        "skipped": [{"estimator": k, "reason": why} for k, why in self.skipped],
                        "note": ALPHA_NOTE})

    def table(self) -> str:
        """The estimates as a plain-text table, the skipped ones and the note below it."""
        c = self.claim
        mu = "" if c.gaussian_mu is None else f", mu = {c.gaussian_mu:g}"
        what = (f"{self.counts['in']} canaries in, {self.counts['out']} out (one run)" if self.design == "member"
                else f"{self.counts['world0']} runs in world 0, {self.counts['world1']} in world 1")
        head = ["estimator", "eps_lb", "ceiling", "p(claim)", "informative", "estimate (not a bound)", "valid for"]
        rows = [[r.estimator, f"{r.epsilon_lb:.4f}", f"{r.ceiling:.4f}", f"{r.p_value:.3g}",
                 "no" if r.uninformative else "yes",
                 "-" if r.estimate.epsilon_estimate is None else f"{r.estimate.epsilon_estimate:.4f}", r.valid_for]
                for r in self.results]
        widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
        lines = [f"{what}; claim eps = {c.epsilon:g}, delta = {c.delta:g}{mu}; alpha = {self.alpha:g}",
                 "  ".join(h.ljust(w) for h, w in zip(head, widths)).rstrip(),
                 *("  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in rows)]
        lines += [f"skipped {k}: {why}" for k, why in self.skipped]
        if len(self.results) > 1:
            lines.append(f"note: {ALPHA_NOTE}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        figures = ", ".join(f"{r.estimator}={r.epsilon_lb:.3f}" for r in self.results)
        return f"Estimates({self.design}: {figures or 'none'})"


def _finite(data):
    if isinstance(data, dict):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_finite(v) for v in data]
    if isinstance(data, np.generic):
        data = data.item()
    if isinstance(data, float) and not math.isfinite(data):
        return None
    return data


# ---------------------------------------------------------------- scores in, ε out


def estimate(scores, members=None, worlds=None, *, epsilon: float, delta: float = 0.0, estimators=None,
             alpha: float = 0.05, mu: float | None = None) -> Estimates:
    """ε lower bounds from scores and their labels against the claim (``epsilon``, ``delta``; ``mu``: the
    claim's μ-GDP, for the Gaussian-DP estimators). See the module's docstring."""
    if (members is None) == (worlds is None):
        raise EstimateInputError("give exactly one of members= (one run: each canary in or out) and worlds= "
                                 "(many runs: the world each run came from)")
    design = "member" if members is not None else "world"
    claim = _claim(epsilon, delta, mu)
    alpha = _number(alpha, "alpha")
    if not 0 < alpha < 1:
        raise EstimateInputError(f"alpha: must be between 0 and 1, got {alpha:g}")
    values, labels = _scores_and_labels(scores, members if design == "member" else worlds, design)
    chosen, skipped = _estimators(estimators, design, claim)
    if design == "member":
        data, worlds_arg = values, labels
        counts = {"in": int(labels.sum()), "out": int(labels.size - labels.sum())}
    else:
        data, worlds_arg = (values[labels == 0], values[labels == 1]), None
        counts = {"world0": int(data[0].size), "world1": int(data[1].size)}
    results = []
    for name, instance, named in chosen:
        try:
            result = instance.estimate(data, worlds_arg, claim, alpha)
        except (ValueError, EstimatorError) as exc:  # e.g. too few canaries for a fit
            if named:
                raise EstimateInputError(f"estimator {name}: {exc}") from None
            skipped.append((name, str(exc)))
            continue
        results.append(EstimatorResult(name, type(instance).method, type(instance).threshold_rule,
                                       type(instance).valid_for, result))
    return Estimates(design, claim, alpha, counts, results, skipped)


def _number(value, name: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise EstimateInputError(f"{name}: must be a number, got {value!r}") from None


def _claim(epsilon, delta, mu) -> PrivacyClaim:
    epsilon, delta = _number(epsilon, "epsilon"), _number(delta, "delta")
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise EstimateInputError(f"epsilon: must be a finite number >= 0, got {epsilon:g}")
    if not 0 <= delta < 1:
        raise EstimateInputError(f"delta: must be in [0, 1), got {delta:g}")
    if mu is not None:
        mu = _number(mu, "mu")
        if not (math.isfinite(mu) and mu > 0):
            raise EstimateInputError(f"mu: must be a finite number > 0, got {mu:g}")
    return PrivacyClaim(epsilon=epsilon, delta=delta, model="central", gaussian_mu=mu)


def _scores_and_labels(scores, labels, design: str) -> tuple[np.ndarray, np.ndarray]:
    """The scores as floats and the labels as 0/1 ints, checked; errors name the argument and the index."""
    try:
        values = np.asarray(scores, dtype=float)
    except (TypeError, ValueError):
        raise EstimateInputError("scores: must be numbers") from None
    raw = np.asarray(labels)
    name = "members" if design == "member" else "worlds"
    if values.ndim != 1 or raw.ndim != 1:
        raise EstimateInputError(f"scores and {name}: must be one-dimensional")
    if values.size != raw.size:
        raise EstimateInputError(f"scores and {name}: {values.size} scores, {raw.size} labels")
    if values.size == 0:
        raise EstimateInputError("scores: empty")
    nan = np.flatnonzero(np.isnan(values))
    if nan.size:
        raise EstimateInputError(f"scores[{nan[0]}]: NaN")
    if raw.dtype == bool:
        bits = raw.astype(np.int64)
    else:
        try:
            as_float = raw.astype(float)
        except (TypeError, ValueError):
            as_float = np.full(raw.size, np.nan)
        bad = np.flatnonzero(~np.isin(as_float, (0.0, 1.0)))
        if bad.size:
            raise EstimateInputError(f"{name}[{bad[0]}]: must be 0 or 1, got {_shown(raw[bad[0]])}")
        bits = as_float.astype(np.int64)
    _both_classes(bits, design, name)
    return values, bits


def _both_classes(bits: np.ndarray, design: str, name: str, where: str = "") -> None:
    for value in (0, 1):
        if not (bits == value).any():
            what = ("no canary was in the run" if value == 1 else "no canary was out of the run") \
                if design == "member" else f"no run came from world {value}"
            raise EstimateInputError(f"{where}{name}: no label is {value} ({what}): both classes are needed")


def applicable(design: str) -> list[str]:
    """The registered estimators of a design (``member`` or ``world``), by kind."""
    return [kind for kind, cls in ESTIMATORS.items() if cls.input == DESIGNS[design]]


def _estimators(estimators, design: str, claim: PrivacyClaim) -> tuple[list[tuple[str, Estimator, bool]], list]:
    """``(name, instance, named)`` of every estimator to run, and ``(name, reason)`` of those skipped."""
    named = estimators is not None
    if isinstance(estimators, (str, Estimator)):
        estimators = [estimators]
    wanted = applicable(design) if estimators is None else list(estimators)
    if named and not wanted:
        raise EstimateInputError("estimators: empty (None runs every one of the design)")
    chosen, skipped = [], []
    for item in wanted:
        if isinstance(item, Estimator):
            name, instance = type(item).kind, item
        else:
            name = str(item)
            if name not in ESTIMATORS:
                raise EstimateInputError(f"estimator {name!r}: unknown; registered: {', '.join(ESTIMATORS)}")
            try:
                instance = ESTIMATORS[name]()
            except EstimatorError as exc:  # settings that must be fixed before the scores are seen
                reason = (f"needs settings fixed before the scores are seen ({exc}); from Python, pass an "
                          f"instance: estimators=[{ESTIMATORS[name].__name__}({exc.field}=...)]")
                if named:
                    raise EstimateInputError(f"estimator {name}: {reason}") from None
                skipped.append((name, reason))
                continue
        if type(instance).input != DESIGNS[design]:
            other = next(d for d, kind in DESIGNS.items() if kind == type(instance).input)
            raise EstimateInputError(f"estimator {name}: reads {type(instance).input} (a {other} label), the "
                                     f"scores come with {design} labels; for these: {', '.join(applicable(design))}")
        refusal = instance.refusal(claim)
        if refusal is not None and claim.gaussian_mu is None and claim.delta > 0 \
                and instance.refusal(dataclasses.replace(claim, gaussian_mu=1.0)) is None:
            refusal = (f"needs the claim's Gaussian mu (mu=, --mu MU): it converts through a Gaussian trade-off "
                       f"curve ({type(instance).valid_for})")
        if refusal is not None:
            if named:
                raise EstimateInputError(f"estimator {name}: {refusal}")
            skipped.append((name, refusal))
            continue
        chosen.append((name, instance, named))
    return chosen, skipped


# ---------------------------------------------------------------- score files


def read_scores(path: str | os.PathLike, test: str | None = None) -> tuple[np.ndarray, np.ndarray, str]:
    """``(scores, labels, design)`` from a CSV or ``.npz`` file holding ``score`` and ``member`` or ``world``.

    Every problem is one :class:`EstimateInputError` line naming the file, the column and the 1-based data
    row (the header is not a row). A ``test`` column (a report's ``trials.csv``) holding several tests needs
    ``test`` to pick one; other columns are ignored.
    """
    path = Path(path)
    if path.suffix.lower() == ".npz":
        table = _read_npz(path)
    else:
        table = _read_csv(path)
    where = f"{path}: "
    if "test" in table:
        names = list(dict.fromkeys(table["test"]))
        if test is not None:
            if test not in names:
                raise EstimateInputError(f"{where}test: no row is test {test!r} (the file's: {', '.join(names)})")
            keep = np.asarray(table["test"]) == test
            table = {k: np.asarray(v)[keep] for k, v in table.items()}
        elif len(names) > 1:
            raise EstimateInputError(f"{where}test: the file holds {len(names)} tests ({', '.join(names)}); pick "
                                     "one with --test NAME")
    elif test is not None:
        raise EstimateInputError(f"{where}test: no such column (--test picks the rows of one test)")
    if "score" not in table:
        raise EstimateInputError(f"{where}score: no such column (the columns: {', '.join(table) or 'none'})")
    present = [c for c in DESIGNS if c in table]
    if not present:
        raise EstimateInputError(f"{where}member or world: no such column (member: one run, each canary in or "
                                 "out; world: many runs, the world each came from)")
    if len(present) > 1:
        raise EstimateInputError(f"{where}member and world: both present; a file holds one design")
    design = present[0]
    if len(table["score"]) == 0:
        raise EstimateInputError(f"{where}score: no data rows")
    scores = _numeric_column(table["score"], "score", where)
    labels = _numeric_column(table[design], design, where)
    bad = np.flatnonzero(~np.isin(labels, (0.0, 1.0)))
    if bad.size:
        raise EstimateInputError(f"{where}{design}, row {bad[0] + 1}: must be 0 or 1, got "
                                 f"{_shown(table[design][bad[0]])}")
    bits = labels.astype(np.int64)
    _both_classes(bits, design, design, where)
    return scores, bits, design


def _shown(value) -> str:
    text = str(value)
    return repr(text if len(text) <= 40 else text[:40] + "...")


def _numeric_column(values, column: str, where: str) -> np.ndarray:
    """A column as floats; the first cell that is not a number, or is NaN or empty, is named by its row."""
    import pandas as pd

    raw = np.asarray(values, dtype=object) if not np.issubdtype(np.asarray(values).dtype, np.number) \
        else np.asarray(values)
    if np.issubdtype(raw.dtype, np.number):
        numbers = raw.astype(float)
        missing = np.isnan(numbers)
        text_bad = np.zeros(raw.size, dtype=bool)
    else:
        text = pd.Series(raw, dtype=object).astype(str).str.strip()
        numbers = pd.to_numeric(text.where(text != "", None), errors="coerce").to_numpy(dtype=float)
        blank = (text == "").to_numpy()
        nan_words = text.str.lower().isin(["nan", "-nan", "+nan"]).to_numpy()
        text_bad = np.isnan(numbers) & ~blank & ~nan_words
        missing = blank | nan_words
    bad = np.flatnonzero(text_bad | missing)
    if bad.size:
        row = bad[0]
        cell = str(raw[row]).strip()
        why = f"{_shown(cell)} is not a number" if text_bad[row] else ("is NaN" if cell else "is empty")
        raise EstimateInputError(f"{where}{column}, row {row + 1}: {why}")
    return numbers


def _read_csv(path: Path) -> dict[str, Any]:
    import pandas as pd

    raw = read_bytes(path, EstimateInputError)
    try:
        raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise EstimateInputError(f"{path}: line {line}: not UTF-8 text (a CSV file with a header row is needed; "
                                 ".npz is read as numpy arrays)") from None
    if not raw.strip():
        raise EstimateInputError(f"{path}: the file is empty (a CSV file with a header row is needed)")
    import io

    try:
        frame = pd.read_csv(io.BytesIO(raw), keep_default_na=False, na_filter=False,  # numbers parsed by the C reader
                            skipinitialspace=True, encoding="utf-8-sig")
    except (pd.errors.ParserError, ValueError) as exc:
        raise EstimateInputError(f"{path}: not a CSV table ({' '.join(str(exc).split())})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    return {c: frame[c].to_numpy() for c in frame.columns}


def _read_npz(path: Path) -> dict[str, Any]:
    import zipfile

    try:
        with np.load(path, allow_pickle=False) as data:
            table = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise EstimateInputError(f"{path}: file not found") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise EstimateInputError(f"{path}: not a readable .npz file ({' '.join(str(exc).split())})") from None
    for name, array in table.items():
        if array.ndim != 1:
            raise EstimateInputError(f"{path}: {name}: must be one-dimensional, has shape {array.shape}")
    lengths = {name: array.size for name, array in table.items() if name in ("score", "member", "world", "test")}
    if len(set(lengths.values())) > 1:
        raise EstimateInputError(f"{path}: the arrays differ in length ({lengths})")
    return {k: (v.astype(str) if k == "test" else v) for k, v in table.items()}
