"""Reconstruction audits: how much of a user's private data an attack recovers, against the public prior.

Every result compares the attack's per-user accuracy with the best guess
from public information alone (the prior: e.g. each item's majority sign or
most frequent level among public users) on the same users and items, and
tests "the attack is no better than the prior" with an exact one-sided test:

* users (the default): a sign test over users — ``binomtest(wins, wins + losses,
  ½, alternative="greater")``, a user counting as a win when the attack's
  accuracy on it beats the prior's (ties dropped); valid when users are
  independent;
* bits (:func:`mcnemar`): the exact McNemar test over discordant guesses
  (attack right/prior wrong vs the reverse), for one database of independent bits.

The p-value and the test's name go into every result.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import sparse, stats

from recaudit.core.errors import ParameterError
from recaudit.attacks.base import PublicKnowledge
from recaudit.attacks.dinur_nissim import lp_reconstruct
from recaudit.attacks.laplace_posterior import LaplacePosteriorAttack
from recaudit.attacks.pmc_sign import PmcSignAttack
from recaudit.attacks.pmd_coordinate import PmdCoordinateAttack
from recaudit.attacks.pmd_pairwise import PmdPairwiseAttack

SIGN_TEST = "exact one-sided sign test over users (scipy.stats.binomtest, ties dropped)"
MCNEMAR = "exact one-sided McNemar test over discordant guesses (scipy.stats.binomtest)"


@dataclass
class ReconstructionResult:
    """An attack's accuracy against the prior's, with the test of "no better than the prior"."""

    attack: str
    target: str  # what is reconstructed
    units: int  # users (sign test) or bits (McNemar)
    attack_accuracy: float
    prior_accuracy: float
    wins: int
    losses: int
    test: str
    p_value: float

    def to_dict(self) -> dict:
        return {k: (float(v) if isinstance(v, (np.floating, float)) else v) for k, v in asdict(self).items()}


def versus_prior(attack: str, target: str, attack_accuracy: np.ndarray, prior_accuracy: np.ndarray,
                 weights: np.ndarray | None = None) -> ReconstructionResult:
    """Sign test over users of per-user accuracies (pooled accuracies weighted by ``weights``, e.g. items)."""
    a, p = np.asarray(attack_accuracy, float), np.asarray(prior_accuracy, float)
    if a.shape != p.shape or a.size == 0:
        raise ParameterError("prior",
                             "versus_prior: needs one attack and one prior accuracy per user (at least one user)")
    w = np.ones_like(a) if weights is None else np.asarray(weights, float)
    wins, losses = int(np.sum(a > p + 1e-12)), int(np.sum(a < p - 1e-12))
    p_value = stats.binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue if wins + losses else 1.0
    return ReconstructionResult(attack, target, int(a.size), float(np.average(a, weights=w)),
                                float(np.average(p, weights=w)), wins, losses, SIGN_TEST, float(p_value))


def mcnemar(attack: str, target: str, attack_correct: np.ndarray, prior_correct: np.ndarray) -> ReconstructionResult:
    """Exact McNemar over bits: is the attack right more often where the two disagree?"""
    a, p = np.asarray(attack_correct, bool).ravel(), np.asarray(prior_correct, bool).ravel()
    wins, losses = int(np.sum(a & ~p)), int(np.sum(~a & p))
    p_value = stats.binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue if wins + losses else 1.0
    return ReconstructionResult(attack, target, int(a.size), float(a.mean()), float(p.mean()), wins, losses,
                                MCNEMAR, float(p_value))


# ---------------------------------------------------------------------- priors from public users


def public_sign_prior(public: sparse.csr_array, mu: np.ndarray) -> np.ndarray:
    """Each item's majority ``sign(r − μ)`` among public users (+1 on ties and unrated items)."""
    public = sparse.csr_array(public)
    s = np.sign(public.data - mu[public.indices])
    votes = np.bincount(public.indices, s, minlength=public.shape[1])
    return np.where(votes >= 0, 1.0, -1.0)


def public_level_mode(public: sparse.csr_array, levels: np.ndarray) -> np.ndarray:
    """Each item's most frequent level among public users (the prior's best single guess)."""
    from recaudit.attacks.laplace_posterior import level_prior

    return np.asarray(levels, float)[np.argmax(level_prior(public, np.asarray(levels, float), 0.0 + 1e-9), axis=1)]


# ---------------------------------------------------------------------- the reconstructions


def _rated_dense(ratings: sparse.csr_array) -> tuple[np.ndarray, np.ndarray]:
    dense = sparse.csr_array(ratings).toarray()
    return dense, dense != 0


def pmc_sign(messages: np.ndarray, mu: np.ndarray, ratings: sparse.csr_array, prior_sign: np.ndarray,
             min_rated: int = 20) -> ReconstructionResult:
    """``sign(r − μ)`` on each user's rated items (ratings equal to μ left out), up to the global sign.

    The prior's guess gets the same global-sign freedom, so the comparison is fair.
    A guess of 0 (no information, e.g. a message of zeros) counts as half right.
    """
    dense, rated = _rated_dense(ratings)
    truth = np.where(rated, np.sign(dense - mu), 0.0)
    scored = truth != 0
    keep = scored.sum(axis=1) >= min_rated
    truth, scored = truth[keep], scored[keep]
    count = scored.sum(axis=1)

    def accuracy(guess):
        agree = np.sum(((guess == truth) + 0.5 * (guess == 0)) * scored, axis=1) / np.maximum(count, 1)
        return np.maximum(agree, 1 - agree)

    guess = PmcSignAttack().reconstruct(messages[keep], PublicKnowledge())
    return versus_prior("pmc_sign", f"sign(r - mu), up to global sign, users with >= {min_rated} rated",
                        accuracy(guess), accuracy(np.broadcast_to(prior_sign, truth.shape)), count)


def pmd_pairwise(messages: np.ndarray, mu: np.ndarray, ratings: sparse.csr_array,
                 public_sigma: np.ndarray, smooth: bool = False) -> ReconstructionResult:
    """``sign((r_i − μ_i)(r_j − μ_j))`` over pairs of rated items; prior: ``sign(Σ_ij)`` of the public model.

    ``smooth``: the attack guesses from the candidate smoothed by the public ``Σ``
    (``PmdPairwiseAttack().reconstruct`` with the public ``covariance``), else from the raw candidate.

    Agreeing pairs are counted in closed form: with ``z_i = t_i g_i`` (truth
    and guess signs), pairs agree when ``z_i z_j = 1``: ``C(p, 2) + C(q, 2)``
    for ``p`` items with ``z = +1`` and ``q`` with ``z = −1``.
    """
    dense, rated = _rated_dense(ratings)
    truth = np.where(rated, np.sign(dense - mu), 0.0)
    n_valid = np.count_nonzero(truth, axis=1)
    pairs = n_valid * (n_valid - 1) / 2
    keep = pairs > 0
    truth, n_valid, pairs = truth[keep], n_valid[keep], pairs[keep]
    public = PublicKnowledge(item_means=mu, covariance=public_sigma if smooth else None)
    z = truth * np.sign(PmdPairwiseAttack().reconstruct(messages[keep], public))
    plus, minus = np.sum(z > 0, axis=1), np.sum(z < 0, axis=1)
    attack = (plus * (plus - 1) / 2 + minus * (minus - 1) / 2) / pairs
    s = np.sign(public_sigma)
    quad = np.einsum("ni,ij,nj->n", truth, s, truth) - np.einsum("ni,i->n", truth ** 2, np.diag(s))
    # Σ_{i<j} [s_ij t_i t_j = 1] = (#pairs + Σ_{i<j} s_ij t_i t_j)/2 when s_ij ≠ 0 (0 counts as half right)
    prior = (pairs + quad / 2) / (2 * pairs)
    name = "pmd_pairwise" + ("_smoothed" if smooth else "")
    return versus_prior(name, "sign((r_i - mu_i)(r_j - mu_j)) over rated pairs", attack, prior, pairs)


def pmd_coordinate(messages: np.ndarray, ratings: sparse.csr_array, prior_mode: np.ndarray) -> ReconstructionResult:
    """Each rated item's exact level guessed from its own released coordinate; prior: the item's public mode."""
    dense, rated = _rated_dense(ratings)
    count = rated.sum(axis=1)
    keep = count > 0
    guess = PmdCoordinateAttack().reconstruct(messages, PublicKnowledge())
    attack = np.sum((guess == dense) & rated, axis=1)[keep] / count[keep]
    prior = np.sum((prior_mode[None] == dense) & rated, axis=1)[keep] / count[keep]
    return versus_prior("pmd_coordinate", "each rated level from its own coordinate", attack, prior, count[keep])


def laplace_posterior(messages: np.ndarray, ratings: sparse.csr_array, prior: np.ndarray, levels: np.ndarray,
                      scale: float) -> ReconstructionResult:
    """Each rated item's level as the posterior mode given its noisy coordinate; prior: the prior's mode."""
    levels = np.asarray(levels, float)
    dense, rated = _rated_dense(ratings)
    count = rated.sum(axis=1)
    keep = count > 0
    guess = LaplacePosteriorAttack().reconstruct(messages, PublicKnowledge(prior=prior, levels=levels, scale=scale))
    prior_mode = levels[np.argmax(prior, axis=1)]
    attack = np.sum((guess == dense) & rated, axis=1)[keep] / count[keep]
    base = np.sum((prior_mode[None] == dense) & rated, axis=1)[keep] / count[keep]
    return versus_prior("laplace_posterior", "each rated level (posterior mode)", attack, base, count[keep])


def noisy_subset_sums(bits: np.ndarray, n_queries: int, noise_bound: float,
                      rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random subsets (each bit in w.p. ½) and their sums with noise uniform on ``[−E, E]``."""
    subsets = (rng.random((n_queries, bits.size)) < 0.5).astype(float)
    answers = subsets @ bits + rng.uniform(-noise_bound, noise_bound, n_queries)
    return subsets, answers


def dinur_nissim(bits: np.ndarray, n_queries: int, noise_bound: float, rng: np.random.Generator,
                 prior_rate: float | None = None) -> ReconstructionResult:
    """LP reconstruction of ``bits`` from noisy subset sums; prior: the majority bit (rate ``prior_rate``)."""
    bits = np.asarray(bits, float)
    subsets, answers = noisy_subset_sums(bits, n_queries, noise_bound, rng)
    guess = lp_reconstruct(subsets, answers)
    rate = bits.mean() if prior_rate is None else prior_rate
    prior_guess = np.full(bits.size, 1.0 if rate >= 0.5 else 0.0)
    return mcnemar("dinur_nissim", f"{bits.size} bits from {n_queries} sums, noise <= {noise_bound:g}",
                   guess == bits, prior_guess == bits)
