"""Power figures, one-run guess plans, the Gaussian fit, and every estimator on null scores.

Statistical assertions use fixed seeds and state their false-failure probability.
"""
import json
import math

import numpy as np
import pytest
from scipy import stats

from recaudit.audits.calibration import ideal_canary_scores
from recaudit.audits.stats.estimators import ESTIMATORS
from recaudit.audits.stats.gauss_fit import claim_p_value, gauss_fit_audit
from recaudit.audits.stats.gdp import gdp_epsilon, gdp_mu
from recaudit.audits.stats.power import optimal_pairs_bound, plan_guesses
from recaudit.audits.stats.rates import epsilon_lower_bound
from recaudit.mechanisms import PrivacyClaim
from recaudit.mechanisms.reference import GaussianCount, LaplaceCount

GAUSSIAN = GaussianCount.from_epsilon(1.0, 1e-5).claim
PURE = PrivacyClaim(1.0, 0.0)


def _estimator(name):
    if name == "bonferroni":
        return ESTIMATORS[name](score_range=(-4.0, 4.0))
    if name in ("explicit", "gdp-explicit"):
        return ESTIMATORS[name](threshold_value=0.0)
    return ESTIMATORS[name]()


def _null(name, rng, n):
    """Scores of two identical worlds in the estimator's input shape."""
    if ESTIMATORS[name].input == "canaries":
        return rng.normal(size=n), rng.integers(0, 2, n)
    return rng.normal(size=(2, n)), None


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_every_estimator_gives_zero_on_null_scores(name):
    """Two identical worlds: constant scores give exactly 0 (flagged uninformative); random ones rarely more.

    Each bound exceeds 0 on null scores with probability ≤ alpha = 0.05, so
    over 30 independent null audits more than ``binom.isf(1e-6, 30, 0.05)``
    positive bounds happen with probability ≤ 1e-6 (one auditing library
    reported a GDP estimate of 3.5 on null scores).
    """
    est = _estimator(name)
    claim = GAUSSIAN
    flat, worlds = (np.zeros(400), np.arange(400) % 2) if est.input == "canaries" else (np.zeros((2, 400)), None)
    constant = est.estimate(flat, worlds, claim, 0.05)
    assert constant.epsilon_lb == 0.0 and constant.uninformative
    rng = np.random.default_rng(2024)
    positive = sum(est.estimate(*_null(name, rng, 1_000), claim, 0.05).epsilon_lb > 0 for _ in range(30))
    assert positive <= stats.binom.isf(1e-6, 30, 0.05)


def test_optimal_pairs_bound_is_the_median_of_the_best_fixed_test():
    """The figure is the bound at the expected counts of the best test: simulated medians agree (±3 %).

    Independent recomputation: draw the counts of fixed tests on the claim's
    curve (binomial, 2,001 audits per cut) and take the best median bound.
    """
    rng = np.random.default_rng(5)
    n = 20_000
    curve = lambda a: stats.norm.cdf(stats.norm.isf(a) - GAUSSIAN.gaussian_mu)  # noqa: E731
    best = 0.0
    for a in np.geomspace(1e-3, 0.5, 30):
        fp, fn = rng.binomial(n, a, 2_001), rng.binomial(n, curve(a), 2_001)
        best = max(best, float(np.median(epsilon_lower_bound(fp, n, fn, n, 0.05, GAUSSIAN.delta))))
    assert optimal_pairs_bound(n, n, GAUSSIAN, 0.05) == pytest.approx(best, rel=0.03)
    # a pure claim's tightest curve: randomized response, which every cut at FPR 1/(1+e^ε) reaches
    q = 1 / (1 + math.e)
    assert optimal_pairs_bound(n, n, PURE, 0.05) >= float(epsilon_lower_bound(q * n, n, q * n, n, 0.05)) - 1e-9
    assert optimal_pairs_bound(n, n, PrivacyClaim.none(), 0.05) is None


def test_plan_depends_on_the_claim_only_and_prefers_fewer_guesses_for_stronger_signal():
    k1, e1 = plan_guesses(10_000, GaussianCount.from_epsilon(1.0).claim, 0.05, "fdp-one-run")
    k4, e4 = plan_guesses(10_000, GaussianCount.from_epsilon(4.0).claim, 0.05, "fdp-one-run")
    assert 0 < k4 < k1 <= 5_000 and 0 < e1 < 1.0 and 0 < e4 < 4.0
    k, e = plan_guesses(100, GAUSSIAN, 0.05, "one-run")  # too few canaries to show anything: a quarter per side
    assert (k, e) == (25, 0.0)
    assert plan_guesses(1_000, PURE, 0.05, "one-run")[0] == 500  # randomized response: guess every canary


def test_planned_guesses_beat_the_old_fixed_fractions():
    """Median over 15 runs of m = 4,000 Gaussian canaries at ε = 4: the plan beats 10 % and 25 % per side
    (the recursion's bound, which the plan maximises)."""
    mech = GaussianCount.from_epsilon(4.0)
    rows = []
    for child in np.random.SeedSequence(11).spawn(15):
        s, b = ideal_canary_scores(mech, 4_000, np.random.default_rng(child))
        rows.append([ESTIMATORS["fdp-one-run"](guess_fraction=f, analysis="recursion").estimate(s, b, mech.claim,
                                                                                               0.05).epsilon_lb
                     for f in (None, 0.1, 0.25)])
    planned, tenth, quarter = np.median(rows, axis=0)
    assert planned > tenth and planned > quarter


def test_gauss_fit_matches_the_large_sample_interval_and_its_p_value():
    """μ_LB from the noncentral t agrees with the normal approximation ``d̂ − z·√(1/n₀ + 1/n₁ + d̂²/2N)``."""
    rng = np.random.default_rng(3)
    mu = GAUSSIAN.gaussian_mu * 3
    b = rng.integers(0, 2, 20_000)
    s = 5.0 + 2.0 * (rng.normal(size=b.size) + mu * b)  # location and scale do not matter
    res = gauss_fit_audit(s, b, 0.05, 1e-5)
    n0, n1 = res.n_out, res.n_in
    approx = res.mu_hat - stats.norm.isf(0.05) * math.sqrt(1 / n0 + 1 / n1 + res.mu_hat ** 2 / (2 * (n0 + n1)))
    assert res.mu_lb == pytest.approx(approx, rel=0.01) and not res.model_rejected
    assert res.epsilon_lb == pytest.approx(gdp_epsilon(res.mu_lb, 1e-5))
    for eps in (0.5 * res.epsilon_lb, 1.5 * res.epsilon_lb):  # p < alpha exactly when the bound exceeds ε
        assert (claim_p_value(res, eps) < 0.05) == (res.epsilon_lb > eps)


def test_gauss_fit_refuses_scores_that_are_not_gaussian():
    """Laplace canaries (ε = 1): the normality check rejects them at 0.01 (its p-value here is below 1e-20): no
    estimate; the bound, the p-value and the power are the one-run bound's on the same canaries."""
    mech = LaplaceCount(1.0)
    s, b = ideal_canary_scores(mech, 10_000, np.random.default_rng(9))
    claim = PrivacyClaim(1.0, 1e-5)
    est = ESTIMATORS["gauss-fit"]().estimate(s, b, claim, 0.05)
    one_run = ESTIMATORS["one-run"]().estimate(s, b, claim, 0.05)
    assert est.bound.model_rejected and est.bound.epsilon_lb == 0.0 and not est.is_bound
    assert (est.epsilon_lb, est.ceiling, est.p_value, est.optimal) == (
        one_run.epsilon_lb, one_run.ceiling, one_run.p_value, one_run.optimal)
    assert est.to_dict()["bound_method"] == "one-run" and est.to_dict()["valid_for"] == "Gaussian scores"
    with pytest.raises(ValueError, match="delta"):
        ESTIMATORS["gauss-fit"]().require(PURE)


def test_uninformative_cut_is_flagged():
    """A split whose selection runs favour the trivial cut (every run world 0) is uninformative; a real one is not."""
    rng = np.random.default_rng(1)
    informative = ESTIMATORS["split"]().estimate(np.stack([rng.normal(size=4_000), rng.normal(2, 1, 4_000)]),
                                                  None, PURE, 0.05)
    assert informative.epsilon_lb > 0 and not informative.uninformative
    assert informative.optimal == pytest.approx(optimal_pairs_bound(2_000, 2_000, PURE, informative.alpha))
    trivial = ESTIMATORS["explicit"](threshold_value=math.inf).estimate(rng.normal(size=(2, 100)), None, PURE, 0.05)
    assert trivial.epsilon_lb == 0.0 and trivial.uninformative
    assert gdp_mu(gdp_epsilon(0.7, 1e-5), 1e-5) == pytest.approx(0.7, rel=1e-9)


def test_gauss_fit_test_in_a_report_validates_against_the_schema():
    """A gauss-fit test as report.json writes it, both kinds: Gaussian by construction (its fit is the bound:
    counts fitted, μ figures) and not (its fit an estimate in its own field, the bound the one-run guesses')."""
    import jsonschema

    from recaudit.audits.reports.report import _test_dict, counts_text, finite, schema
    from recaudit.audits.runner import TestOutcome

    mech = GaussianCount.from_epsilon(1.0)
    s, b = ideal_canary_scores(mech, 2_000, np.random.default_rng(4))
    root = schema()
    for holds in (True, False):
        outcome = TestOutcome(0, "identity", None, ESTIMATORS["gauss-fit"]().estimate(
            s, b, mech.claim, 0.05, model_holds=holds), s, b, adjusted_p_value=1.0, verdict="consistent")
        outcome.pair = type("Pair", (), {"differing_bits": None})()
        d = _test_dict(outcome, mech.claim)
        jsonschema.Draft202012Validator({**root["$defs"]["test"], "$defs": root["$defs"]}).validate(
            json.loads(json.dumps(finite(d), allow_nan=False)))
        assert d["counts"]["m"] == 2_000 and not d["uninformative"] and d["optimal_epsilon_lb"] > 0
        assert d["is_bound"] == holds and (d["epsilon_estimate"] is None) == holds
        assert counts_text(d["counts"]).startswith("2000 canary scores fitted" if holds else "")
        assert d["bound_method"] == ("gauss-fit" if holds else "one-run")


class _Constant:
    """Outputs 0 in both worlds: no test can tell them apart (the harness's null mechanism)."""

    claim = PrivacyClaim(epsilon=1.0, delta=0.0, model="central")
    neighbours = (0, 1)

    def sample(self, value, n, rng):
        return np.zeros(n)


def test_library_audit_reports_carry_power_and_never_present_an_uninformative_test_as_evidence(tmp_path):
    """Harness audits (``run_audit`` → ``write_audit_report``): the optimal test's figure and the uninformative
    flag in the AuditRun, stdout's ``format_bound``, report.json, report.md and report.html; the one-sentence
    summary of an uninformative audit says it is no evidence instead of "shows ε ≥ 0"."""
    from recaudit.audits.harness import format_bound, run_audit
    from recaudit.audits.harness_report import write_audit_report

    null = run_audit(_Constant(), trials=2_000, alpha=0.05, seed=0)
    assert null.bound.epsilon_lb == 0.0 and null.uninformative
    b = null.bound
    assert null.optimal == pytest.approx(optimal_pairs_bound(b.n_neg, b.n_pos, _Constant.claim, 0.05))
    assert "UNINFORMATIVE" in format_bound(null) and "optimal test" in format_bound(null)
    report = write_audit_report(null, tmp_path / "null", "null")
    assert report["uninformative"] and report["optimal_epsilon_lb"] == pytest.approx(null.optimal)
    assert "shows ε" not in report["summary"] and "no evidence" in report["summary"]
    saved = json.loads((tmp_path / "null" / "report.json").read_text())
    assert saved["uninformative"] is True and saved["optimal_tightness"] == pytest.approx(null.optimal)
    assert "UNINFORMATIVE" in (tmp_path / "null" / "report.md").read_text()
    assert "UNINFORMATIVE" in (tmp_path / "null" / "report.html").read_text()

    laplace = run_audit(LaplaceCount(1.0), trials=20_000, alpha=0.05, seed=0)  # a tight claim: a real test
    assert not laplace.uninformative and laplace.bound.epsilon_lb > 0 and 0 < laplace.optimal < 1.0
    report = write_audit_report(laplace, tmp_path / "laplace", "laplace")
    assert "shows ε ≥" in report["summary"] and "optimal test" in report["summary"]
    assert f"{laplace.optimal:.4g}" in (tmp_path / "laplace" / "report.html").read_text()
