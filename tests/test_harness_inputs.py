"""Issue 34.6: the harness reads only what its docs accept, says what it got, and tells of every run that
cannot be reproduced.

Each test audits small mechanisms (2,000 runs per world) with fixed seeds.
"""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pytest

from recaudit.audits.harness import NotReproducibleWarning, assert_dp, run_audit

TRIALS = 2_000


class Objects:
    """Outputs that carry no information: a fresh Python object per run (their text holds their address)."""

    claim = (1.0, 0.0)
    neighbours = (0, 1)

    def sample(self, value, n, rng):
        out = np.empty(n, dtype=object)
        out[:] = [object() for _ in range(n)]
        return out


class Laplace:
    """A Laplace count with sensitivity 1 at ε = 1; ``shape`` reshapes each world's outputs."""

    claim = (1.0, 0.0)
    neighbours = (0, 1)

    def __init__(self, shape=None, as_objects=False):
        self.shape, self.as_objects = shape, as_objects

    def sample(self, value, n, rng):
        out = value + rng.laplace(0.0, 1.0, (n,) + (self.shape or ()))
        return out.astype(object) if self.as_objects else out


@pytest.mark.filterwarnings("ignore::recaudit.audits.harness.NotReproducibleWarning")  # fresh objects differ
def test_an_object_array_of_arbitrary_objects_is_refused_not_audited():
    # on the code before this rule the objects' text (their addresses) told the worlds apart: a false 'violated'
    with pytest.raises(ValueError, match=r"world 0: .*the output is an object array of shape \(2000,\) holding "
                                         r"objects of type object; need numbers"):
        run_audit(Objects(), trials=TRIALS, seed=1)


def test_an_object_array_of_numbers_is_audited_as_the_numbers():
    as_objects = run_audit(Laplace((3,), as_objects=True), trials=TRIALS, seed=2)
    as_floats = run_audit(Laplace((3,)), trials=TRIALS, seed=2)
    assert as_objects.bound.epsilon_lb == as_floats.bound.epsilon_lb
    assert (as_objects.bound.false_pos, as_objects.bound.false_neg) == (as_floats.bound.false_pos,
                                                                        as_floats.bound.false_neg)


def test_outputs_of_more_than_two_axes_are_refused():
    with pytest.raises(ValueError, match=r"is an array of shape \(2000, 2, 2\); need one output per run on axis 0 "
                                         r"as \(2000,\) \(scalars\) or \(2000, d\)"):
        run_audit(Laplace((2, 2)), trials=TRIALS, seed=3)
    assert run_audit(Laplace((4,)), trials=TRIALS, seed=3).trials == TRIALS  # (n, d) is read


def test_a_refused_output_is_described_as_what_it_is():
    class Dicts(Laplace):
        def sample(self, value, n, rng):
            return [{"x": float(v)} for v in super().sample(value, n, rng)]

    with pytest.raises(ValueError) as refused:
        run_audit(Dicts(), trials=TRIALS, seed=4)
    assert f"returned a list of {TRIALS} objects of type dict;" in str(refused.value)
    assert "numbers" not in str(refused.value).split(";")[0]


def test_a_mechanism_that_ignores_rng_is_reported_on_every_audit(tmp_path):
    from recaudit.audits.harness_report import write_audit_report

    class Unseeded(Laplace):  # meets its claim, but draws from a generator of its own
        def sample(self, value, n, rng):
            return value + np.random.default_rng().laplace(0.0, 1.0, n)

    with pytest.warns(NotReproducibleWarning, match="Unseeded: NOT REPRODUCIBLE: the same seed gave different"):
        assert_dp(Unseeded(), trials=TRIALS, alpha=1e-6, seed=5)  # passes, and says so all the same
    with pytest.warns(NotReproducibleWarning):
        run = run_audit(Unseeded(), trials=TRIALS, seed=5)
    write_audit_report(run, tmp_path)
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["reproducible"] is False and "different outputs" in report["not_reproducible_because"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", NotReproducibleWarning)  # a seeded mechanism: no warning
        assert run_audit(Laplace(), trials=TRIALS, seed=5).reproducible


@pytest.mark.parametrize("epsilon", [math.inf])
def test_a_claim_no_audit_can_test_is_refused(epsilon):
    with pytest.raises(ValueError, match="claim: ε = .* promises nothing an audit can test"):
        run_audit(Laplace(), claim=(epsilon, 0.0), trials=TRIALS, seed=6)
