"""Neighbouring worlds for an audit, built by a policy the claim chooses (its ``unit`` and ``neighbouring``).

A :class:`TargetPair` holds the rows one or more audited users have in world
0 and in world 1. Policies build them two ways:

* ``worst_case_pair`` — for a local-replay audit: the target's public
  queries are drawn first (they do not depend on private data), then the two
  rows are built for *those* queries so that the target's sketches differ in
  as many bits as the claim's unit allows. A pair that differs in no bit
  cannot show anything: that is an error, never a silent ``consistent``.
  When the mechanism's queries read the rated set (``queries_read_rated``)
  the query is not public: a user-level pair then differs in its rated set
  too, and the replay draws the query per run from each world's row.
* ``rows_for_runs`` — for designs that run the protocol (full runs,
  canaries): the rows are fixed before the run, which draws the queries.
"""
from __future__ import annotations

import numpy as np
from scipy import sparse

from recaudit.mechanisms import Mechanism, PrivacyClaim, UserBatch
from recaudit.simulator.population import Catalogue
from recaudit.simulator.targets import TargetPair

from .neighbours import (
    LikesReplace,
    NeighbourPolicy,
    PairError,
    RatingReplace,
    UserReplace,
)


class UserSupportReplace(UserReplace):
    """User-level, replace-one, for mechanisms that aggregate second moments of rows (matrix completion).

    World 0's target rates ``w`` items, world 1's target ``w`` other items
    (disjoint when the catalogue allows), every rating at the largest
    magnitude of the population's domain (``population.max_rating``, default
    1): the replacement that moves ``Σ A_iᵀA_i`` most. Flipping likes would
    leave such statistics unchanged.
    """

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the disjoint-support pair is for designs that run the protocol (full_runs, one_run)")

    def rows_for_runs(self, population, catalogue, n, rng):
        w, n_items = catalogue.ratings_per_user, catalogue.n_items
        value = float(getattr(population, "max_rating", 1.0))
        order = np.argsort(rng.random((n, n_items)), axis=1)
        first, second = order[:, :w], order[:, w:2 * w] if 2 * w <= n_items else order[:, n_items - w:]
        users = np.repeat(np.arange(n), w)

        def rows(items):
            values = np.full(users.size, value)
            return UserBatch.from_coo(users, items.ravel(), values, values > 0, (n, n_items))

        return TargetPair(rows(first), rows(second))


class StarPatternReplace(UserReplace):
    """User-level, replace-one, for star ratings: the same rated set, the same multiset of values, other pairs.

    World 1's target rates its (population-drawn) items at the lowest or
    highest level, half each at random; world 0's holds the same values
    shuffled over the same items. Every single rating's distribution is the
    same in both worlds (the marginal over a random rated item), while the
    pairwise products ``(r_i − mid)(r_j − mid)`` differ: the pair that separates
    first-order from second-order leakage (Xin–Jaakkola, docs/families/xin-jaakkola.md).
    Levels come from the population's ``n_stars`` (1..S), else 1..5.
    """

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the star-pattern pair is for designs that run the protocol (full_runs, one_run)")

    def rows_for_runs(self, population, catalogue, n, rng):
        _, users = population.sample_users(n, catalogue, rng)
        top = float(getattr(population, "n_stars", 5))
        r = users.ratings.tocoo()
        order = np.lexsort((rng.random(r.nnz), r.row))
        rows, cols = r.row[order], r.col[order]
        high = rng.random(r.nnz) < 0.5
        values1 = np.where(high, top, 1.0)
        # world 0: the same values, shuffled within each user's rated items
        shuffle = np.lexsort((rng.random(r.nnz), rows))
        values0 = values1[shuffle]

        def batch(values):
            return UserBatch.from_coo(rows, cols, values, values >= top, users.ratings.shape)

        return TargetPair(batch(values0), batch(values1))


class PrivateReplace(NeighbourPolicy):
    """User-level, private ratings replaced (``replace_private``): the public ratings stay, the private change.

    World 0's target is a user of the population (it keeps its public and
    private ratings; one with none private gets one private rating on an item
    it has not rated). World 1's target has the same public ratings and as
    many private ratings, with the same values, on other items it has not
    rated (disjoint from world 0's private items where the catalogue allows):
    which items a user rated privately and how is what SP2 promises to hide.
    """

    unit, neighbouring = "user", "replace_private"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the private-ratings pair is for designs that run the protocol (full_runs, one_run)")

    def rows_for_runs(self, population, catalogue, n, rng):
        _, users = population.sample_users(n, catalogue, rng)
        ratings, private = users.ratings.toarray(), users.private_mask.toarray()
        top = float(np.max(ratings, initial=1.0))
        rows0, rows1, priv0, priv1 = ratings.copy(), ratings.copy(), private.copy(), np.zeros_like(private)
        for u in range(n):
            if not priv0[u].any():
                free = np.flatnonzero(ratings[u] == 0)
                if free.size == 0:
                    raise PairError("a target rates every item: no item is left to rate privately")
                item = rng.choice(free)
                rows0[u, item], priv0[u, item] = top, True
                rows1[u, item] = top
            items0 = np.flatnonzero(priv0[u])
            public = (rows0[u] != 0) & ~priv0[u]
            others = np.flatnonzero((rows0[u] == 0) & ~public)
            if others.size < items0.size:  # too few unrated items: overlap world 0's private items
                others = np.r_[others, rng.permutation(items0)[: items0.size - others.size]]
            items1 = rng.choice(others, size=items0.size, replace=False)
            rows1[u, items0] = 0.0
            rows1[u, items1] = rows0[u, items0]
            priv1[u, items1] = True
        like = float(getattr(population, "like_threshold", 4.0))

        def batch(values, private_mask):
            b = UserBatch.from_masks(values != 0, values >= like, np.where(values != 0, values, 1.0))
            return b.with_private(sparse.csr_array(private_mask))

        return TargetPair(batch(rows0, priv0), batch(rows1, priv1))


def reserved_items(population, catalogue: Catalogue, n: int, per_user: int,
                   rng: np.random.Generator) -> np.ndarray:
    """(n, per_user) distinct items per audited user: the population's canary items (no user of the world
    rates them: each audited user's effect is isolated) when it has enough, else random distinct items."""
    reserved = np.asarray(getattr(population, "canary_item_ids", lambda: np.zeros(0, np.int64))(), np.int64)
    if reserved.size >= per_user:
        if reserved.size >= n * per_user:
            return reserved[:n * per_user].reshape(n, per_user)
        return np.stack([rng.choice(reserved, per_user, replace=False) for _ in range(n)])
    if catalogue.n_items < per_user:
        raise PairError(f"the catalogue has {catalogue.n_items} items; the pair needs {per_user} per user")
    return np.argsort(rng.random((n, catalogue.n_items)), axis=1)[:, :per_user]


class SingleItemReplace(UserReplace):
    """User-level, replace-one: world 0's target rates one item, world 1's another, at the largest magnitude.

    For mechanisms that add up second moments (``Σ x xᵀ`` noised on its upper triangle) this pair reaches
    the most an orthogonal pair of rows of norm ``L`` can move it: ``√2·L²``, in two diagonal entries. With a
    population that reserves ``canary_items`` the two items are rated by no one else, so the target's
    effect on the white-box statistics is isolated from everyone's (``reserved_items``).
    """

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the single-item pair is for designs that run the protocol")

    def rows_for_runs(self, population, catalogue, n, rng):
        items = reserved_items(population, catalogue, n, 2, rng)
        value = np.full(n, self.rating(population))

        def rows(column):
            return UserBatch.from_coo(np.arange(n), items[:, column], value, value > 0, (n, catalogue.n_items))

        return TargetPair(rows(0), rows(1))

    @staticmethod
    def rating(population) -> float:
        """The audited rows' rating: the largest magnitude of the population's domain."""
        return float(getattr(population, "max_rating", 1.0))


class TwoItemsReplace(SingleItemReplace):
    """User-level, replace-one: world 0's target rates two canary items, world 1's two others, at the largest
    magnitude (a row of norm ``L`` after clipping, spread over two items).

    For private Frank–Wolfe with a large step (``γ = (k/T)/λ̂′``, a large ``nuclear_scale``) a two-item row's
    residual ``A_i`` can overshoot towards ``2L`` in later rounds, which a one-item row cannot (its residual
    stays on its item's axis): the pair that reaches most of the analysis's ``4√2·L²`` found so far
    (docs/findings/tight-audits.md).
    """

    def rows_for_runs(self, population, catalogue, n, rng):
        items = reserved_items(population, catalogue, n, 4, rng)
        value = np.full(2 * n, float(getattr(population, "max_rating", 1.0)))
        users = np.repeat(np.arange(n), 2)

        def rows(columns):
            return UserBatch.from_coo(users, items[:, columns].ravel(), value, value > 0, (n, catalogue.n_items))

        return TargetPair(rows([0, 1]), rows([2, 3]))


class SingleItemAddRemove(NeighbourPolicy):
    """User-level, add/remove one: world 1's target rates one item at the largest magnitude, world 0's rates
    nothing (a user who sends nothing: absent).

    For mechanisms whose users add clipped contributions per rated item (DP-ALS, DP-SGD matrix factorisation)
    a target on one item at the rating bound reaches the claimed sensitivity when the claim counts one item
    per user; with the population's ``canary_items`` its effect is isolated (``reserved_items``).
    """

    unit, neighbouring = "user", "add_remove"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the single-item add/remove pair is for designs that run the protocol")

    def rows_for_runs(self, population, catalogue, n, rng):
        items = reserved_items(population, catalogue, n, 1, rng)[:, 0]
        value = np.full(n, self.rating(population))
        shape = (n, catalogue.n_items)
        none = np.zeros(0, np.int64)
        return TargetPair(UserBatch.from_coo(none, none, np.zeros(0), np.zeros(0, bool), shape),
                          UserBatch.from_coo(np.arange(n), items, value, value > 0, shape))

    rating = staticmethod(SingleItemReplace.rating)


class SaturatingSingleItem(SingleItemAddRemove):
    """User-level, add/remove one: world 1's target rates one item at a rating so large (``SATURATING_RATING``) that
    every quantity a mechanism clips saturates in every round, world 0's rates nothing.

    For DP-ALS the target's factor ``u = R v/(‖v‖² + λ)`` is solved from its unclipped rating: at the top of a
    small rating range it falls below the clip ``Γ_u`` whenever the published item factor ``v`` is large or near 0,
    so the pair's reach varies with each run's factors (a mixture, not a Gaussian privacy loss). At ``R = 10¹⁰⁰`` it
    falls below only if ``‖v‖ < Γ_u λ/R``, an event of probability below 10⁻⁹⁰ per round: the reach is the same in
    every run and the pair's privacy loss Gaussian (docs/families/dp-als-dp-sgd.md, "White box"). Only for
    mechanisms whose ratings are not on a star scale (a rating outside the scale is not a neighbouring data set).
    """

    needs_unbounded_ratings = True

    @staticmethod
    def rating(population) -> float:
        return SATURATING_RATING


#: the saturating pair's rating: large enough that a clipped factor solved from it saturates its clip
SATURATING_RATING = 1e100


class SingleFlip(RatingReplace):
    """Rating-level, replace-one: the target rates two items at the largest magnitude; one rating flips sign.

    World 1 rates both at ``+max``, world 0 the first at ``−max``: a sum moves by twice the magnitude (its
    whole range when ratings span ``[−max, max]``) and a product of the two centred ratings changes sign.
    On the population's ``canary_items`` (see :func:`reserved_items`) the effect is isolated.
    """

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the single-flip pair is for designs that run the protocol")

    def rows_for_runs(self, population, catalogue, n, rng):
        items = reserved_items(population, catalogue, n, 2, rng)
        top = float(getattr(population, "max_rating", 1.0))
        users = np.repeat(np.arange(n), 2)

        def rows(first):
            values = np.tile([first, top], n)
            return UserBatch.from_coo(users, items.ravel(), values, values > 0, (n, catalogue.n_items))

        return TargetPair(rows(-top), rows(top))


class AddRating(NeighbourPolicy):
    """Rating-level, add/remove one: world 1's target has one rating more than world 0's.

    Both worlds' target rates one item at the bottom of the scale (``population.min_rating``, else ``−max``);
    world 1's also rates a second item at the top (``population.max_rating``, default 1): opposite signs keep
    the user's offset near 0, so both centred ratings reach the clamp. One rating beside the added one is the
    most a weighted second-moment statistic moves (McSherry–Mironov's ``Wgt``, weights ``1/c``): its upper
    triangle gains the new row (``c + 1`` entries of ``1/(c + 1)``) and the old entries' weights fall from
    ``1/c`` to ``1/(c + 1)`` (``1/2`` in all), 1.5 in L1 for every ``c ≥ 1`` against 1 for ``c = 0``; ``Cov``
    alike; a sum moves by the rating, a count by one. On the population's ``canary_items`` the effect is
    isolated (``reserved_items``).
    """

    unit, neighbouring = "rating", "add_remove"

    def worst_case_pair(self, mechanism, population, catalogue, answers, rng):
        raise PairError("the add-one-rating pair is for designs that run the protocol")

    def rows_for_runs(self, population, catalogue, n, rng):
        items = reserved_items(population, catalogue, n, 2, rng)
        top = float(getattr(population, "max_rating", 1.0))
        bottom = float(getattr(population, "min_rating", -top))
        shape = (n, catalogue.n_items)
        low = np.full(n, bottom)
        values = np.tile([bottom, top], n)
        return TargetPair(UserBatch.from_coo(np.arange(n), items[:, 0], low, low > 0, shape),
                          UserBatch.from_coo(np.repeat(np.arange(n), 2), items.ravel(), values, values > 0, shape))


POLICIES: dict[tuple[str, str], NeighbourPolicy] = {
    ("user", "replace"): UserReplace(),
    ("user", "replace_likes"): LikesReplace(),
    ("rating", "replace"): RatingReplace(),
    ("rating", "add_remove"): AddRating(),
}


#: pairs a mechanism may ask for (``Mechanism.audit_pair``), each within the neighbouring of its claim
PAIR_POLICIES: dict[str, NeighbourPolicy] = {"disjoint_support": UserSupportReplace(),
                                             "star_pattern": StarPatternReplace(),
                                             "private_replace": PrivateReplace(),
                                             "single_item": SingleItemReplace(),
                                             "two_items": TwoItemsReplace(),
                                             "single_item_add_remove": SingleItemAddRemove(),
                                             "single_item_add_remove_saturating": SaturatingSingleItem(),
                                             "single_flip": SingleFlip(),
                                             "add_rating": AddRating()}


def covered(mechanism) -> tuple[str, ...]:
    """Relations besides its claim's that a mechanism's calibration also covers at the claimed ε
    (``Mechanism.covered_neighbouring``; e.g. McSherry–Mironov's noise covers one rating's value changing)."""
    return tuple(getattr(mechanism, "covered_neighbouring", ()))


def pair_relation(claim: PrivacyClaim, policy: NeighbourPolicy) -> dict:
    """How the audited pair relates to the claim: its unit and neighbouring, and whether they are the claim's own.

    A pair of another relation the calibration covers (:func:`covered`) tests the claim too, but it is not the
    worst case of the claim's own relation: reports label it so (``own: false`` and a note)."""
    own = (policy.unit, policy.neighbouring) == (claim.unit, claim.neighbouring)
    note = (f"the claim's own relation ({claim.unit}/{claim.neighbouring})" if own else
            f"a weaker relation than the claim's: {policy.unit}/{policy.neighbouring}, which the calibration also "
            f"covers, instead of the claim's {claim.unit}/{claim.neighbouring}; its worst case can reach less")
    return {"policy": type(policy).__name__, "unit": policy.unit, "neighbouring": policy.neighbouring, "own": own,
            "note": note}


def policy_for(claim: PrivacyClaim, mechanism: Mechanism | None = None, pair: str | None = None) -> NeighbourPolicy:
    """The policy for the claim's unit and neighbouring; the error lists what exists.

    ``pair`` (an audit's choice), else the mechanism's ``audit_pair``, may name a
    policy of :data:`PAIR_POLICIES` that builds its worst pairs; it must cover
    the claim's unit and neighbouring.
    """
    special = pair or getattr(mechanism, "audit_pair", None)
    if special is not None:
        if special not in PAIR_POLICIES:
            raise PairError(f"no audit pair {special!r}; known: {', '.join(PAIR_POLICIES)}")
        policy = PAIR_POLICIES[special]
        if (policy.unit, policy.neighbouring) != (claim.unit, claim.neighbouring) \
                and not (policy.unit == claim.unit and policy.neighbouring in covered(mechanism)):
            raise PairError(f"audit pair {special!r} is {policy.unit}/{policy.neighbouring}; the claim is "
                             f"{claim.unit}/{claim.neighbouring}")
        if getattr(policy, "needs_unbounded_ratings", False) and getattr(mechanism, "max_rating", None) is not None:
            raise PairError(f"audit pair {special!r} rates an item at {SATURATING_RATING:g}, outside the mechanism's "
                            f"star scale (max_rating {mechanism.max_rating}): not a neighbouring data set")
        return policy
    try:
        return POLICIES[claim.unit, claim.neighbouring]
    except KeyError:
        known = ", ".join(f"{u}/{n}" for u, n in POLICIES)
        raise PairError(f"no neighbour policy for {claim.unit}-level {claim.neighbouring} claims; "
                         f"available: {known}") from None
