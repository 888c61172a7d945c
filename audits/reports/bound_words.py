"""How reports word the two kinds of figure (docs/statistics.md, "Two kinds of bound"): what an estimate
assumes, why a test is uninformative, and the table cells of estimates, optimal figures and methods."""
from __future__ import annotations


def _fmt(x) -> str:
    return "n/a" if x is None else f"{x:.4g}"


#: how a report names what an estimate's figure assumes (an estimator's ``valid_for``)
MODEL_WORDS = {"a Gaussian-DP mechanism": "under the Gaussian-DP model", "Gaussian scores": "under a Gaussian fit"}


def estimate_text(test: dict) -> str | None:
    """The estimator's own figure when it is not a bound, in words that never call it one (None: it is one)."""
    if test.get("model_rejected") and not test.get("is_bound", True):
        return "the Gaussian fit's model was rejected by its checks: no estimate"
    value = test.get("epsilon_estimate")
    if value is None:
        return None
    words = MODEL_WORDS.get(test.get("valid_for"), f"if the scores come from {test.get('valid_for')}")
    mu = f" (μ_LB {test['mu_lb']:.3g})" if test.get("mu_lb") is not None else ""
    return (f"estimate {words}: ε ≈ {value:.3g}{mu}, not a bound (the mechanism does not guarantee "
            f"{test.get('valid_for')})")


def uninformative_reason(test: dict) -> str:
    """Why a test is uninformative (the one rule: ``recaudit.audits.stats.estimate.uninformative``)."""
    ceiling, claim = test.get("ceiling"), (test.get("claim") or {}).get("epsilon")
    if ceiling is not None and not ceiling > 0:
        return "its ceiling is 0: no outcome of these runs could show any leakage"
    if ceiling is not None and claim is not None and ceiling < claim:
        return f"its ceiling {ceiling:.3g} is below the claimed ε: no outcome of these runs could contradict it"
    return "the best cut calls every run one world, or the scores rank nothing"


def estimate_cell(test: dict) -> str | None:
    """A test's model-based figure for a table cell: ``0.19 (Gaussian-DP model)``; None when it has none (its
    figure is a bound: the column is left out when no test has one)."""
    if test.get("model_rejected") and not test.get("is_bound", True):
        return "model rejected"
    value = test.get("epsilon_estimate")
    if value is None:
        return None
    return f"{value:.4g} ({MODEL_WORDS.get(test.get('valid_for'), 'model').split(' ', 1)[1]})"


def optimal_cell(test: dict) -> str:
    """The optimal test's figure, and at the reachable ε beside it when the pair cannot reach the claim."""
    reachable = test.get("optimal_epsilon_lb_reachable")
    return _fmt(test.get("optimal_epsilon_lb")) + (f" ({reachable:.4g} at ε_pair)" if reachable is not None else "")


def method_text(test: dict) -> str:
    """The estimator, and the method of its printed bound when they differ (an estimate's fallback)."""
    bound_method = test.get("bound_method", test["method"])
    return test["method"] if bound_method == test["method"] else f"{test['method']} (bound: {bound_method})"
