"""Each claim audited under its own neighbouring relation (issue 31): McSherry–Mironov's add/remove-one-rating pair.

McSherry–Mironov claims per-rating add/remove (the paper's relation); its noise is calibrated to the larger of
the add/remove and the value-change sensitivities, so a value-change pair (``single_flip``) tests the claim too
but is labelled a weaker relation. The reach figures are arithmetic on the mechanism's shares and sensitivities.
"""
import numpy as np
import pytest
import yaml

from recaudit.audits.designs.pairs import (PAIR_POLICIES, AddRating, PairError, SingleFlip, TwoItemsReplace,
                                          pair_relation, policy_for)
from recaudit.audits.language.scenario import load_scenario
from recaudit.audits.runner import run_scenario
from recaudit.mechanisms import MECHANISMS
from recaudit.simulator.populations import RankOneMatrix

MM = dict(epsilon=2.0, min_rating=-1.0, max_rating=1.0, rank=2)


def test_mcsherry_mironov_claims_add_remove_per_rating_and_audits_it_by_default():
    mm = MECHANISMS["mcsherry_mironov"](**MM)
    claim = mm.claim
    assert (claim.unit, claim.neighbouring) == ("rating", "add_remove")
    own = policy_for(claim, mm)
    assert isinstance(own, AddRating) and pair_relation(claim, own)["own"]
    weaker = policy_for(claim, mm, "single_flip")  # one rating's value changes: covered by the calibration
    assert isinstance(weaker, SingleFlip)
    relation = pair_relation(claim, weaker)
    assert not relation["own"] and "weaker relation" in relation["note"]
    with pytest.raises(PairError, match="user/replace"):
        policy_for(claim, mm, "single_item")
    twin = MECHANISMS["mcsherry_mironov_per_user_claim"](**MM)
    assert (twin.claim.unit, twin.claim.neighbouring) == ("user", "replace")
    with pytest.raises(PairError):
        policy_for(twin.claim, twin, "single_flip")


def test_the_add_rating_pair_differs_by_one_rating():
    population = RankOneMatrix(n_users=10, n_items=8, ratings_per_user=4, test_fraction=0.0, canary_items=4)
    catalogue = population.catalogue(np.random.default_rng(1))
    pair = AddRating().rows_for_runs(population, catalogue, 2, np.random.default_rng(2))
    r0, r1 = pair.rows0.ratings.toarray(), pair.rows1.ratings.toarray()
    assert ((r0 != 0).sum(axis=1) == 1).all() and ((r1 != 0).sum(axis=1) == 2).all()
    assert (r1[r0 != 0] == r0[r0 != 0]).all()  # world 1 is world 0 plus one rating
    assert set(np.unique(r1[r1 != 0])) == {-1.0, 1.0}


def _tight_world(tmp_path, pair=None, trials=2_000):
    data = yaml.safe_load(open("scenarios/tight-mcsherry-mironov.yaml"))
    data["audit"].update(trials=trials, block_size=trials)
    data["executor"] = {"type": "serial"}
    if pair:
        data["audit"]["pair"] = pair
    path = tmp_path / f"mm-{pair or 'own'}.yaml"
    path.write_text(yaml.safe_dump(data))
    return run_scenario(load_scenario(path))


def test_add_rating_reaches_what_the_calibration_allows_and_more_than_a_value_change(tmp_path):
    # ε/θ shares: MSum 0.095 x (1 of 2), MCount 0.095, Cov 0.395 x (1.5 of 8) at most, Wgt 0.395 x (1.5 of 3):
    # 0.414 θ = 0.828 at θ = ε = 2 (GSum and GCount, 0.02 θ, are left to the attack's nuisance)
    own, flip = _tight_world(tmp_path), _tight_world(tmp_path, "single_flip")
    reach = own.tests[0].reach
    assert reach["law"] == "laplace" and 0.75 < reach["epsilon_pair"] <= 2 * (0.0475 + 0.095 + 0.395 * 1.5 / 8
                                                                               + 0.395 * 0.5) + 1e-9
    assert flip.tests[0].reach["epsilon_pair"] < 0.4 < reach["epsilon_pair"]
    assert own.pair["own"] and not flip.pair["own"]
    # validity, not power: ε_LB above the pair's reach happens with probability <= alpha = 0.05
    assert own.tests[0].estimate.epsilon_lb <= reach["epsilon_pair"]


def test_two_items_pair_puts_each_world_on_two_canary_items_of_its_own():
    population = RankOneMatrix(n_users=10, n_items=8, ratings_per_user=4, test_fraction=0.0, canary_items=4)
    catalogue = population.catalogue(np.random.default_rng(1))
    pair = PAIR_POLICIES["two_items"].rows_for_runs(population, catalogue, 1, np.random.default_rng(2))
    assert isinstance(PAIR_POLICIES["two_items"], TwoItemsReplace)
    r0, r1 = (set(np.flatnonzero(r.ratings.toarray()[0])) for r in (pair.rows0, pair.rows1))
    assert len(r0) == len(r1) == 2 and not r0 & r1
    assert r0 | r1 == set(int(i) for i in population.canary_item_ids())
