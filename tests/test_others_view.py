"""The others' view attack (issue 32): other users' predictions of a canary's items, in one training run."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from recaudit.attacks.others_view import OthersViewAttack
from recaudit.audits.trainer_audit import audit_trainer
from recaudit.mechanisms import UserBatch, als
from recaudit.mechanisms.dp_als import DPALS
from recaudit.simulator.targets import TargetPair
from recaudit.simulator.transcript import OthersView, Release, ReleasesView

from .test_trainers import small


def test_non_private_als_is_violated_by_what_other_users_see():
    """Isolated canaries' items get trained factors only when the canary is in: other users' predictions of them
    spread, a left-out canary's (zero factors) do not."""
    result = audit_trainer(als.fit, small({"epsilon": 1.0, "delta": 1e-5}, attack=[{"kind": "others_view"}]))
    assert result.trainer["attacks"]["others_view"]["auc"] > 0.95
    assert result.verdict == "violated"


def test_a_trainer_ignoring_its_data_is_consistent_under_the_others_view():
    # false failure ≤ α = 1e-3: the factors, so every probe's predictions, are independent of membership
    result = audit_trainer(als.fit_ignoring_data, small({"epsilon": 0.5, "delta": 1e-5}, alpha=1e-3,
                                                        attack=[{"kind": "others_view"}], options={"factors": 8}))
    assert result.verdict == "consistent"


def _world(seed=3, users=30, items=12):
    rng = np.random.default_rng(seed)
    others = sparse.random(users, items, density=0.4, format="csr", random_state=seed,
                           data_rvs=lambda n: rng.integers(1, 6, n).astype(float))
    canaries = sparse.csr_array(([4.0, 2.0, 5.0], [10, 11, 3], [0, 2, 3]), shape=(2, items))
    batch = UserBatch(canaries, sparse.csr_array(canaries > 0))
    return others, TargetPair(batch, batch)


def test_spread_is_the_probes_prediction_spread_averaged_over_each_canarys_items():
    others, pair = _world()
    model = als.fit(others, np.random.default_rng(1), factors=4, iterations=3)
    view = OthersView(releases=((Release(0.0, 30, model),),), rounds=((),), audited=np.arange(2), others=others)
    scores = OthersViewAttack(probes=20).scores(None, pair, view)
    predicted = np.array([[model.predict(others[p:p + 1], np.array([[j]]))[0, 0] for j in range(12)]
                          for p in range(20)])  # one probe and one item at a time: the reference
    spread = predicted.std(axis=0)
    np.testing.assert_allclose(scores, [(spread[10] + spread[11]) / 2, spread[3]], rtol=1e-10)


class _RecommendOnly:
    """A model that publishes item factors and top-k lists, no predictions."""

    def __init__(self, factors):
        self.item_factors = factors

    def recommend(self, histories, k):
        return np.tile(np.arange(k), (histories.shape[0], 1))  # everyone gets items 0..k-1


def test_without_predict_the_score_is_exposure_in_the_probes_lists():
    others, pair = _world()
    view = OthersView(releases=((Release(0.0, 30, _RecommendOnly(np.ones((12, 2)))),),), rounds=((),),
                      audited=np.arange(2), others=others)
    scores = OthersViewAttack(probes=25, k=4).scores(None, pair, view)
    np.testing.assert_allclose(scores, [0.0, 25.0])  # items 10, 11 in no list; item 3 in all 25


def test_refusals_and_missing_others():
    attack = OthersViewAttack()
    assert "not dp_als's releases" in attack.refusal(DPALS(epsilon=1.0), "releases")
    others, pair = _world()
    model = als.fit(others, np.random.default_rng(1), factors=2, iterations=1)
    bare = ReleasesView(releases=((Release(0.0, 30, model),),), rounds=((),), audited=np.arange(2))
    with pytest.raises(ValueError, match="no other users"):
        attack.scores(None, pair, bare)
