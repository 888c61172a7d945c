"""Helpers shared by the local-DP mechanism tests: small worlds, feeding users, a quick audit."""
import numpy as np

from attacks.likelihood_ratio import LikelihoodRatioAttack
from audits.estimators import split_epsilon_bound
from mechanisms import WorldInfo
from simulator.neighbours import local_target_pair, target_messages_view
from simulator.population import SBMPopulation


def sbm_population(n_items, w, b):
    """Two equal user clusters and two equal item clusters with like probabilities ``b``."""
    return SBMPopulation(n_items=n_items, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                         like_probability=[list(r) for r in b], ratings_per_user=w)


def feed(mechanism, population, catalogue, users, rng, batch=5_000):
    """The server's state after ``users`` fresh users each answered one query."""
    state = mechanism.init_state(WorldInfo(catalogue.n_items, catalogue.ratings_per_user, catalogue.n_item_clusters))
    for start in range(0, users, batch):
        _, rows = population.sample_users(min(batch, users - start), catalogue, rng)
        queries = mechanism.make_queries(len(rows), rng, state, rows.rated)
        state = mechanism.aggregate(state, queries, mechanism.release(mechanism.sketch(rows, queries), rng))
    return state


def audit(mechanism, population, seed, trials=200_000, alpha=1e-6):
    """The target pair and the split Clopper–Pearson bound of the LR attack on its messages."""
    rng = np.random.default_rng(seed)
    catalogue = population.catalogue(rng)
    pair = local_target_pair(population, catalogue, mechanism, 1, rng)
    attack = LikelihoodRatioAttack()
    scores = [attack.scores(mechanism, pair, target_messages_view(mechanism, pair, w, trials,
                                                                  np.random.default_rng([seed, w])))
              for w in (0, 1)]
    return pair, split_epsilon_bound(scores[0], scores[1], alpha=alpha)
