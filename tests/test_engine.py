"""The protocol engine: one round loop for every protocol, multi-round state, noise, outputs, recording."""
from dataclasses import dataclass

import numpy as np
import pytest

from recaudit.mechanisms import GaussianNoise, MaxSense, Mechanism, UserBatch, WorldInfo
from recaudit.simulator.churn import Churn, simulate
from recaudit.simulator.engine import Inserted, MechanismRun, run_protocol, spread_ticks
from recaudit.simulator.learning import learning_curve, serve
from recaudit.simulator.population import SBMPopulation
from recaudit.simulator.transcript import Recorder, others_view, target_view, watched_messages

POP = SBMPopulation(n_items=20, user_cluster_weights=[0.5, 0.5], item_cluster_weights=[0.5, 0.5],
                    like_probability=[[0.9, 0.3], [0.6, 0.1]], ratings_per_user=5)


@dataclass
class NoisyLikeCount(Mechanism):
    """A toy central protocol: users report like counts, the server publishes a noisy running total.

    Every round each user reports how many items it likes; the server sums the
    round's reports and adds N(0, sigma^2) once per round (``end_round``);
    each user carries the number of rounds it answered; its personal output
    is its own count minus the published mean.
    """

    sigma: float = 1.0
    kind = "noisy_like_count"  # not registered: a test fixture
    claim_model = "central"
    claim_delta = 1e-5

    @property
    def noise(self):
        return GaussianNoise(self.sigma, sensitivity=float(POP.ratings_per_user))

    def privacy_event(self, answers=1):
        return self.noise.event(answers)

    def init_state(self, world):
        return {"round_sum": 0.0, "total": 0.0, "reports": 0, "rounds": 0}

    def broadcast(self, state):
        return state["total"] / max(state["reports"], 1)

    def make_queries(self, n_users, rng, state, rated=None):
        return np.zeros((n_users, 1))

    def init_carried(self, n_users):
        return np.zeros(n_users, dtype=np.int64)

    def respond(self, users, queries, published, carried, rng):
        return users.liked.sum(axis=1, keepdims=True).astype(float), carried + 1

    def aggregate(self, state, queries, messages):
        state["round_sum"] += float(messages.sum())
        state["reports"] += len(messages)
        return state

    def end_round(self, state, rng):
        state["total"] += state["round_sum"] + float(self.noise((), rng))
        state["round_sum"] = 0.0
        state["rounds"] += 1
        return state

    def publish(self, state):
        return np.array([state["total"]])

    def personal_output(self, users, carried, state):
        mean = state["total"] / max(state["reports"], 1)
        return np.column_stack([users.liked.sum(axis=1) - mean, carried])


def churn(**kw):
    return Churn(**({"arrival_rate": 40.0, "mean_lifetime": 2.0, "horizon": 3.0, "query_interval": 0.5,
                     "release_interval": 1.0} | kw))


def catalogue(seed=0):
    return POP.catalogue(np.random.default_rng(seed))


def canaries(n, liked=True):
    rated = np.zeros((n, POP.n_items), bool)
    rated[:, :5] = True
    return UserBatch.from_masks(rated, rated.copy() if liked else np.zeros_like(rated))


def test_a_multi_round_protocol_runs_with_carried_state_noise_and_personal_outputs():
    cfg = churn(queries_per_user=3)
    inserted = Inserted(canaries(2), np.array([1, 2]))
    tr = run_protocol(NoisyLikeCount(), POP, catalogue(), cfg, np.random.SeedSequence(1),
                      recorder=Recorder(outputs="all"), inserted=inserted)
    # one broadcast per query round (ticks 0.5 .. 3.0), recorded before the round
    assert [r.time for r in tr.rounds] == [0.5, 1.0, 1.5, 2.0, 2.5, 3.0]
    assert tr.rounds[0].published == 0.0
    # the inserted users are watched: three answers each, their like count (5) every time
    view = watched_messages(tr, tr.inserted, answers=3)
    np.testing.assert_array_equal(view.messages, np.full((2, 3), 5.0))
    # every user's personal output is recorded; its carried state counted its answers
    out = dict(zip(tr.output_user.tolist(), tr.outputs[:, 1].tolist()))
    answered = np.bincount(tr.answer_user, minlength=tr.n_users)
    assert set(np.flatnonzero(answered)) <= set(out) and all(out[u] == answered[u] for u in out)
    assert out[int(tr.inserted[0])] == 3
    # joint-DP views: everyone else's outputs, and the target's own
    others = others_view(tr, int(tr.inserted[0]))
    assert int(tr.inserted[0]) not in others.others[0] and others.others[0].size == tr.output_user.size - 1
    assert target_view(tr, int(tr.inserted[0])).target.shape == (1, 2)


def test_server_noise_comes_from_its_own_stream_once_per_round():
    cfg = churn()
    world = np.random.SeedSequence(2)
    a = run_protocol(NoisyLikeCount(sigma=10.0), POP, catalogue(), cfg, world, np.random.SeedSequence(7))
    b = run_protocol(NoisyLikeCount(sigma=10.0), POP, catalogue(), cfg, world, np.random.SeedSequence(8))
    c = run_protocol(NoisyLikeCount(sigma=0.0), POP, catalogue(), cfg, world, np.random.SeedSequence(7),
                     Recorder(messages="all"))
    # new coins, same world: the same users arrive at the same times
    np.testing.assert_array_equal(a.arrival, b.arrival)
    np.testing.assert_array_equal(a.answer_user, b.answer_user)
    assert a.releases[-1].published[0] != b.releases[-1].published[0]
    # without noise the total is the exact sum of like counts of every answer
    assert c.releases[-1].published[0] == pytest.approx(float(c.messages.sum()))
    noise = a.releases[-1].published[0] - c.releases[-1].published[0]
    rounds = len(a.rounds)
    # the sum of `rounds` N(0, 100) draws: 6 standard deviations, false failure < 2e-9
    assert abs(noise) < 6 * 10.0 * np.sqrt(rounds) and noise != 0.0


def test_the_recorder_keeps_watched_messages_only_unless_asked():
    cfg = churn()
    seed = np.random.SeedSequence(3)
    tr = run_protocol(MaxSense(epsilon=1.0), POP, catalogue(), cfg, seed, recorder=Recorder(watch=[0, 1]))
    assert tr.messages is None
    assert set(np.unique(tr.watched.user)) <= {0, 1}
    full = run_protocol(MaxSense(epsilon=1.0), POP, catalogue(), cfg, seed, recorder=Recorder(messages="all"))
    assert full.messages.shape[0] == full.answer_user.size
    for user in np.unique(tr.watched.user):
        np.testing.assert_array_equal(tr.watched.messages[tr.watched.user == user],
                                      full.messages[full.answer_user == user])


def test_inserted_users_spread_over_the_rounds_and_answer_their_quota():
    cfg = churn(queries_per_user=2, horizon=5.0)
    ticks = spread_ticks(50, cfg, answers=2)
    assert ticks.min() == 1 and ticks.max() == 9  # 10 rounds, the last arrivals still answer twice
    tr = run_protocol(MaxSense(epsilon=1.0), POP, catalogue(), cfg, np.random.SeedSequence(4),
                      inserted=Inserted(canaries(50), ticks))
    assert tr.inserted.size == 50
    assert np.all(np.bincount(tr.watched.user, minlength=tr.n_users)[tr.inserted] == 2)
    assert watched_messages(tr, tr.inserted, 2).messages.shape == (50, 2)
    with pytest.raises(ValueError, match="horizon"):
        spread_ticks(5, churn(horizon=1.0), answers=3)


def test_learning_curves_and_serving_use_the_engine_and_agree():
    cat = catalogue()
    root = np.random.SeedSequence(5)
    curve = list(learning_curve(POP, cat, MaxSense(epsilon=2.0), np.array([700, 4900]), root, batch_size=700))
    assert [u for u, _ in curve] == [700, 4900]
    run = serve(POP, cat, MaxSense(epsilon=2.0), 4900, root, batch_size=700)
    assert isinstance(run, MechanismRun) and run.users_seen == 4900
    np.testing.assert_array_equal(MaxSense(epsilon=2.0).publish(run.state), curve[-1][1])


def test_users_seen_counts_users_not_answers():
    tr = simulate(POP, catalogue(), MaxSense(epsilon=1.0), churn(queries_per_user=3, mean_lifetime=10.0),
                  np.random.SeedSequence(6))
    assert tr.releases[-1].users_seen == tr.n_answered_users < tr.answer_user.size


def test_cohorts_release_after_the_round_that_reaches_each_count():
    from recaudit.simulator.schedules import Cohorts

    schedule = Cohorts.every(50, 20, (0, 12, 40, 50))
    assert schedule.sizes == (20, 20, 10) and schedule.release_ticks == (0, 1, 2, 3)
    assert Cohorts.every(40, 20, (40,)).release_ticks == (2,) and Cohorts.every(40, 20).horizon == 2.0


def test_an_update_every_k_users_runs_through_the_engine_as_a_hand_written_loop_would():
    """Xin–Jaakkola's server, fed 20 users per round by ``Cohorts``, ends where a hand-written loop over the
    same users (each batch answers the model the previous batches updated) ends; the ``exact`` response's
    random sign cancels in the moments, so the two agree to rounding whatever the coins."""
    from recaudit.mechanisms.xin_jaakkola import XinJaakkola
    from recaudit.simulator.population import StarSBMPopulation
    from recaudit.simulator.populations import MatrixPopulation
    from recaudit.simulator.schedules import Cohorts

    pop = StarSBMPopulation(n_items=15, user_cluster_weights=[1, 1], item_cluster_weights=[1, 1],
                            star_probability=[[[0.1, 0.1, 0.2, 0.3, 0.3]] * 2, [[0.3, 0.3, 0.2, 0.1, 0.1]] * 2],
                            ratings_per_user=6)
    rng = np.random.default_rng(4)
    _, rows = pop.sample_users(130, pop.catalogue(rng), rng)
    public, private = rows.take(slice(0, 30)), rows.take(slice(30, 130))
    mech = XinJaakkola(response="exact", public_users=30, em_iterations=3)
    population = MatrixPopulation(rows, ordered=True)
    transcript = run_protocol(mech, population, population.catalogue(None), Cohorts.every(100, 20, (0, 40)),
                              np.random.SeedSequence(1), recorder=Recorder(messages="all", answers=False))
    assert [r.users_seen for r in transcript.releases] == [0, 40, 100]
    assert transcript.messages.shape == (100, 15)

    by_hand = XinJaakkola(response="exact", public_users=30, em_iterations=3)
    state = by_hand.init_public(by_hand.init_state(WorldInfo(15, 6, 2)), public)
    assert np.array_equal(transcript.releases[0].published.sigma, state.model.sigma)
    for start in range(0, 100, 20):
        batch = private.take(slice(start, start + 20))
        state = by_hand.aggregate(state, None, by_hand.messages(batch, state.model, np.random.default_rng(start)))
        if start + 20 == 40:
            assert np.allclose(transcript.releases[1].published.sigma, state.model.sigma)
    assert np.allclose(transcript.releases[-1].published.sigma, state.model.sigma)
    assert state.model.private_users == transcript.releases[-1].published.private_users == 50


def test_a_panel_and_the_canaries_joining_it_are_taken_in_one_go_as_the_two_admissions_would_be():
    """A matrix population's panel and the users inserted at the first tick are gathered into one set of arrays
    (no copy of the panel beside the joint one); the run equals the one that takes the panel, then adds them."""
    from recaudit.mechanisms.frank_wolfe import PrivateFrankWolfe
    from recaudit.simulator.populations import MatrixPopulation
    from recaudit.simulator.schedules import Panel

    class TakenThenJoined(MatrixPopulation):  # hides draw_sources: the engine samples, then concatenates
        draw_sources = None

        def sample_users(self, n_users, catalogue, rng):
            source = MatrixPopulation.draw_sources(self, n_users, rng)
            return source, self.rows.take(source)

    rng = np.random.default_rng(7)
    rows = UserBatch.from_masks(rng.random((60, 20)) < 0.3, rng.random((60, 20)) < 0.5,
                                np.where(rng.random((60, 20)) < 0.5, -1.0, 1.0))
    inserted = Inserted(UserBatch.from_masks(rng.random((5, 20)) < 0.3, np.zeros((5, 20), bool)),
                        np.array([1, 1, 1, 2, 1]))
    runs = []
    for kind in (MatrixPopulation, TakenThenJoined):
        population = kind(rows)
        mech = PrivateFrankWolfe(epsilon=1.0, iterations=3)
        runs.append(run_protocol(mech, population, population.catalogue(None), Panel(60, rounds=3, batch_size=16),
                                 np.random.SeedSequence(8), recorder=Recorder(outputs="all"), inserted=inserted))
    joined, apart = runs
    assert joined.inserted.tolist() == apart.inserted.tolist() == [60, 61, 62, 63, 64]
    for name in ("user_cluster", "answer_user", "answer_time", "output_user"):
        np.testing.assert_array_equal(getattr(joined, name), getattr(apart, name))
    np.testing.assert_array_equal(joined.outputs.coefficients, apart.outputs.coefficients)
    np.testing.assert_array_equal(joined.releases[-1].published["basis"], apart.releases[-1].published["basis"])


def test_the_answer_log_is_the_same_kept_compactly_and_watched_answers_can_be_left_out():
    cfg, seed = churn(queries_per_user=2), np.random.SeedSequence(9)
    inserted = Inserted(canaries(3), np.array([1, 2, 3]))
    full = run_protocol(MaxSense(epsilon=1.0), POP, catalogue(), cfg, seed, inserted=inserted)
    lean = run_protocol(MaxSense(epsilon=1.0), POP, catalogue(), cfg, seed, inserted=inserted,
                        recorder=Recorder(watched=False))
    assert full.watched is not None and lean.watched is None
    assert full.answer_user.dtype == np.int64 and full.answer_time.dtype == float
    # one time per answer, each the time of a query round; users by id
    assert full.answer_time.size == full.answer_user.size > 0
    assert set(np.unique(full.answer_time)) <= set(r.time for r in full.rounds)
    for name in ("answer_user", "answer_time"):
        np.testing.assert_array_equal(getattr(full, name), getattr(lean, name))


def test_a_finished_run_lets_go_of_the_rows_and_the_recorder_of_its_parts():
    """Once everyone is done, the active set holds no view of the rows (a zero-row slice would keep every row
    and carried state alive), and the recorder's parts are handed over to the transcript."""
    from recaudit.simulator.schedules import Panel

    rng = np.random.default_rng(10)
    rows = UserBatch.from_masks(rng.random((30, 20)) < 0.3, rng.random((30, 20)) < 0.5)
    recorder = Recorder(outputs="all")
    run = MechanismRun(NoisyLikeCount(), POP, catalogue(), Panel(30, rounds=2), np.random.SeedSequence(11), None,
                       recorder)
    run.admit(np.zeros(30), np.full(30, np.inf), np.zeros(30, np.int64), rows, 0.0)
    run.query_round(1.0)
    transcript = run.finish()
    assert len(run.active) == 0 and run.active.rows.ratings.data.base is None and run.active.carried.base is None
    assert transcript.answer_user.size == 30 and transcript.outputs.shape[0] == 30
    assert recorder.answer_user == recorder.output_parts == recorder.answer_time == []
