"""Adapters for other libraries' mechanisms, claims in other currencies, and library-audit reports.

Statistical assertions: every ``assert_dp`` here fails falsely with
probability ≤ its alpha (1e-6); every ratio asserted of an ε_LB holds with
the fixed seed given (deterministic) and was chosen from the closed-form
optimum, not tuned.
"""
import json
import math

import numpy as np
import pytest
from scipy import stats

from recaudit.audits import adapters, harness
from recaudit.audits.harness_report import write_audit_report
from recaudit.mechanisms.conversions import from_gdp, from_renyi, from_zcdp


# --------------------------------------------------------------------------
# claims in other currencies, against closed forms


def gdp_delta_closed_form(epsilon: float, mu: float) -> float:
    """δ(ε) of μ-GDP (Dong, Roth, Su 2022, Cor. 2.13), computed here independently with scipy."""
    return stats.norm.cdf(-epsilon / mu + mu / 2) - math.exp(epsilon) * stats.norm.cdf(-epsilon / mu - mu / 2)


@pytest.mark.parametrize("mu, delta", [(0.3, 1e-5), (1.0, 1e-6), (2.5, 1e-3)])
def test_gdp_claim_sits_on_the_gaussian_curve(mu, delta):
    claim = from_gdp(mu, delta)
    assert claim.gaussian_mu == mu and "GDP" in claim.conversion
    assert gdp_delta_closed_form(claim.epsilon, mu) == pytest.approx(delta, rel=1e-6)


def test_zcdp_conversions_order_as_theory_says():
    rho, delta = 0.5, 1e-5
    gaussian, generic = from_zcdp(rho, delta, gaussian=True), from_zcdp(rho, delta)
    assert gaussian.gaussian_mu == pytest.approx(math.sqrt(2 * rho))
    assert generic.gaussian_mu is None and "Rényi" in generic.conversion
    bun_steinke = rho + 2 * math.sqrt(rho * math.log(1 / delta))  # the classic valid conversion
    assert gaussian.epsilon < generic.epsilon < bun_steinke


def test_renyi_conversion_is_at_least_as_tight_as_the_classic_one():
    order, eps_order, delta = 8.0, 0.7, 1e-6
    classic = eps_order + math.log(1 / delta) / (order - 1)  # Mironov 2017, Prop. 3
    assert 0 < from_renyi(order, eps_order, delta).epsilon <= classic


@pytest.mark.parametrize("bad", [dict(rho=0.0, delta=1e-5), dict(rho=1.0, delta=0.0), dict(rho=math.inf, delta=0.1)])
def test_conversions_refuse_bad_parameters(bad):
    with pytest.raises(ValueError):
        from_zcdp(**bad)


# --------------------------------------------------------------------------
# from_callable: seeding modes and the determinism probe


def laplace_draw(epsilon):
    return {
        "generator": lambda value, rng: value + rng.laplace(0.0, 1.0 / epsilon),
        "random_state": lambda value, rs: value + rs.laplace(0.0, 1.0 / epsilon),
        "int": lambda value, seed: value + np.random.default_rng(seed).laplace(0.0, 1.0 / epsilon),
    }


@pytest.mark.parametrize("seeding", ["generator", "random_state", "int"])
def test_seeded_library_reproduces_and_meets_its_claim(seeding):
    mech = adapters.from_callable(laplace_draw(1.0)[seeding], 1.0, (0.0, 1.0), seeding=seeding, chunk=1000)
    a = harness.run_audit(mech, trials=20_000, alpha=1e-6, seed=3)
    b = harness.run_audit(mech, trials=20_000, alpha=1e-6, seed=3)
    assert a.reproducible and a.bound == b.bound
    assert 0.5 < a.bound.epsilon_lb <= 1.0  # a pure-ε Laplace: tight cut in the tails, not violated


def test_unseedable_library_is_recorded_as_not_reproducible():
    rng = np.random.default_rng()  # the library's own, unseeded randomness
    mech = adapters.from_callable(lambda value: value + rng.laplace(0.0, 1.0), 1.0, (0.0, 1.0), seeding=None,
                                  library="somelib")
    run = harness.run_audit(mech, trials=2_000, alpha=1e-3, seed=1)
    assert not run.reproducible and "somelib cannot be seeded" in run.not_reproducible
    assert "NOT REPRODUCIBLE" in harness.format_bound(run)


def test_probe_catches_a_sampler_that_ignores_its_rng():
    hidden = np.random.default_rng()

    class IgnoresRng:
        claim, neighbours = (1.0, 0.0), (0.0, 1.0)

        def sample(self, value, n, rng):
            return value + hidden.laplace(0.0, 1.0, n)

    run = harness.run_audit(IgnoresRng(), trials=2_000, alpha=1e-3, seed=1)
    assert not run.reproducible and "same seed gave different outputs" in run.not_reproducible


def test_vectorised_draw_matches_the_chunked_contract():
    mech = adapters.from_callable(lambda value, n, rng: value + rng.laplace(0, 1, n), 1.0, (0.0, 1.0),
                                  vectorised=True, chunk=700)
    out = mech.sample(0.0, 2_000, np.random.default_rng(1))
    assert out.shape == (2_000,) and np.array_equal(out, mech.sample(0.0, 2_000, np.random.default_rng(1)))


# --------------------------------------------------------------------------
# categorical outputs and dataset neighbours


def test_string_outputs_are_encoded_the_same_in_both_worlds():
    """Randomized response over labels: the learned histogram attack reaches near ε with labels as outputs."""
    epsilon = 1.0
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))

    def draw(value, rng):
        return value if rng.random() < keep else {"yes": "no", "no": "yes"}[value]

    mech = adapters.from_callable(draw, epsilon, ("no", "yes"))
    run = harness.run_audit(mech, trials=50_000, alpha=1e-6, seed=5)
    assert run.attack == "histogram"
    # the optimal test (the label itself) at 25,000 counted runs per world reaches about 0.9 ε at alpha = 1e-6
    assert 0.8 * epsilon < run.bound.epsilon_lb <= epsilon


def test_dataset_neighbours_name_their_relation():
    grown = adapters.add_remove([0.2, 0.5], 1.0)
    assert grown == ([0.2, 0.5], [0.2, 0.5, 1.0]) and grown.relation == "add/remove one record"
    swapped = adapters.replace_one(np.array([0.2, 0.5]), 0, 1.0)
    assert swapped[1].tolist() == [1.0, 0.5] and swapped.relation == "replace one record"
    with pytest.raises(ValueError, match="outside"):
        adapters.replace_one([1], 3, 0)


def test_replace_one_audit_of_an_add_remove_counter_is_violated():
    """A histogram with Laplace(1/ε) per bin is ε-DP under add/remove (one bin moves by 1) but only 2ε-DP under
    replace-one (two bins move): the diffprivlib lesson, on a histogram written here."""
    epsilon = 1.0

    def histogram(data, rng):  # two bins, Laplace(1/ε) per bin: ε-DP under add/remove, 2ε under replace
        counts = np.bincount(np.asarray(data, int), minlength=2).astype(float)
        return counts + rng.laplace(0.0, 1.0 / epsilon, 2)

    mech = adapters.from_callable(histogram, epsilon, seeding="generator")
    assert harness.run_audit(mech, neighbours=adapters.add_remove([0, 1, 1], 0), trials=50_000, alpha=1e-6,
                             seed=2).bound.epsilon_lb <= epsilon
    violated = harness.run_audit(mech, neighbours=adapters.replace_one([0, 1, 1], 0, 1), trials=50_000,
                                 alpha=1e-6, seed=2)
    assert violated.violated and violated.neighbouring == "replace one record"


# --------------------------------------------------------------------------
# reports


def test_report_says_not_reproducible_everywhere_and_escapes_names(tmp_path):
    rng = np.random.default_rng()
    mech = adapters.from_callable(lambda d: sum(d) + rng.laplace(0.0, 1.0), 1.0, adapters.add_remove([0.0], 1.0),
                                  seeding=None, library="somelib")
    run = harness.run_audit(mech, trials=2_000, alpha=1e-3, seed=1)
    report = write_audit_report(run, tmp_path, title="<script>x</script> sum")
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["reproducible"] is False and saved["neighbouring"] == "add/remove one record"
    assert saved == json.loads(json.dumps(report))
    html, text = (tmp_path / "report.html").read_text(), (tmp_path / "report.md").read_text()
    assert "NOT REPRODUCIBLE" in html and "NOT REPRODUCIBLE" in text and "Not reproducible" in saved["summary"]
    assert "<script>" not in html and "<script>" not in text
