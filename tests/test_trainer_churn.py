"""Retraining under churn (issue 32): a trainer refitted at every release on the users present, the continual
view audited with each canary's score averaged over the releases it was present at."""
from __future__ import annotations

import numpy as np
import pytest

from recaudit.audits.language.yamlio import ScenarioError
from recaudit.audits.trainer_audit import audit_trainer
from recaudit.mechanisms import als

from .test_trainers import small

CHURN = {"horizon": 10.0, "mean_lifetime": 4.0, "release_interval": 2.0}


def test_non_private_als_retrained_at_every_release_is_violated():
    result = audit_trainer(als.fit, small({"epsilon": 1.0, "delta": 1e-5}, churn=CHURN,
                                          attack=[{"kind": "fold_in"}, {"kind": "others_view"}]))
    continual = result.trainer["continual"]
    assert continual["releases"] == 5 and continual["release_times"] == [2.0, 4.0, 6.0, 8.0, 10.0]
    assert result.world["training_runs"] == 5
    assert result.trainer["canaries"]["m"] + continual["unscored_canaries"] == 300
    assert result.verdict == "violated"
    assert result.trainer["attacks"]["fold_in"]["auc"] > 0.95


def test_a_trainer_ignoring_its_data_under_churn_is_consistent():
    # false failure ≤ α = 1e-3: every release's factors are independent of every canary's membership
    result = audit_trainer(als.fit_ignoring_data, small({"epsilon": 0.5, "delta": 1e-5}, alpha=1e-3, churn=CHURN,
                                                        options={"factors": 8}))
    assert result.verdict == "consistent"


SEEN: list = []


def recording_fit(ratings, rng):
    """Records every training matrix it is given (and ignores the data otherwise)."""
    SEEN.append(ratings.copy())
    return als.fit_ignoring_data(ratings, rng, factors=4)


def test_each_release_trains_on_the_users_present_and_never_on_a_left_out_canary():
    SEEN.clear()
    result = audit_trainer(recording_fit, small({"epsilon": 1.0}, churn=CHURN, canaries=200, options={}))
    trained = SEEN[-5:]  # the seed check's two small fits come first
    assert [m.shape[0] for m in trained] == result.trainer["continual"]["training_users"]
    reserved = result.trainer["canaries"]["reserved_items"]
    n_items = trained[0].shape[1]
    own_items = np.zeros(n_items, int)  # in how many releases' matrices each item is rated
    for matrix in trained:
        own_items[np.unique(matrix.indices)] += 1
    # every canary rates 2 reserved items of its own (the last columns): a member's appear in the matrices of the
    # releases it was present at, a non-member's in none; the scored canaries are those present at some release,
    # so the canaries whose items appear are exactly the scored members
    appeared = own_items[n_items - reserved:].reshape(-1, 2)
    assert (appeared[:, 0] == appeared[:, 1]).all()
    assert np.count_nonzero(appeared[:, 0]) == result.trainer["canaries"]["members"] > 0


def test_same_seed_same_continual_scores():
    first = audit_trainer(als.fit, small({"epsilon": 1.0}, churn=CHURN, canaries=100))
    second = audit_trainer(als.fit, small({"epsilon": 1.0}, churn=CHURN, canaries=100))
    np.testing.assert_array_equal(first.tests[0].scores, second.tests[0].scores)


@pytest.mark.parametrize("change, field", [
    ({"churn": CHURN | {"arrival_rate": 5.0}}, "churn.arrival_rate"),
    ({"churn": CHURN | {"query_interval": 1.0}}, "churn.query_interval"),
    ({"churn": CHURN, "audit": {"canaries": 300, "reference_runs": 2}}, "audit.reference_runs"),
])
def test_settings_a_trainers_churn_does_not_read_are_refused(change, field):
    with pytest.raises(ScenarioError, match=field.replace(".", r"\.")):
        audit_trainer(als.fit, small({"epsilon": 1.0}) | change)
