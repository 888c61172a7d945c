"""Helpers shared by the local-DP mechanism tests: small worlds, feeding users, a quick audit."""
import numpy as np

from recaudit.attacks.likelihood_ratio import LikelihoodRatioAttack
from recaudit.audits.designs.local_replay import replay
from recaudit.audits.stats.bounds import split_epsilon_bound
from recaudit.simulator.learning import serve
from recaudit.audits.designs.pairs import policy_for
from recaudit.simulator.population import SBMPopulation


def sbm_population(n_items, w, b):
    """Two equal user clusters and two equal item clusters with like probabilities ``b``."""
    return SBMPopulation(n_items=n_items, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                         like_probability=[list(r) for r in b], ratings_per_user=w)


def feed(mechanism, population, catalogue, users, rng, batch=5_000):
    """The server's state after ``users`` fresh users each answered one query (through the engine)."""
    root = np.random.SeedSequence(int(rng.integers(2**63)))
    return serve(population, catalogue, mechanism, users, root, batch).state


def audit(mechanism, population, seed, trials=200_000, alpha=1e-6, policy=None):
    """The worst-case target pair and the split Clopper–Pearson bound of the LR attack on its replayed messages.

    The neighbour policy is the one the mechanism's claim chooses unless ``policy`` is given.
    """
    rng = np.random.default_rng(seed)
    catalogue = population.catalogue(rng)
    policy = policy or policy_for(mechanism.claim)
    pair = policy.worst_case_pair(mechanism, population, catalogue, 1, rng)
    attack = LikelihoodRatioAttack()
    scores = [attack.scores(mechanism, pair, replay(mechanism, pair, np.full(trials, w),
                                                    np.random.default_rng([seed, w])))
              for w in (0, 1)]
    return pair, split_epsilon_bound(scores[0], scores[1], alpha=alpha)
