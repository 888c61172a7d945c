import numpy as np
import pytest

from recaudit.mechanisms import bit_release


def test_keep_probability_formula():
    assert bit_release.keep_probability(0.0) == pytest.approx(0.5)
    assert bit_release.keep_probability(np.log(3.0)) == pytest.approx(0.75)


def test_randomized_response_flip_rate():
    rng = np.random.default_rng(1)
    n, eps = 400_000, 1.0
    out = bit_release.randomized_response(np.ones(n, bool), eps, rng)
    p = bit_release.keep_probability(eps)
    # 6 standard errors: false-failure probability < 2e-9
    assert abs(out.mean() - p) < 6 * np.sqrt(p * (1 - p) / n)


def test_per_column_budgets_broadcast():
    rng = np.random.default_rng(2)
    out = bit_release.randomized_response(np.zeros((200_000, 2), bool), np.array([0.0, 5.0]), rng)
    flips = out.mean(axis=0)
    assert abs(flips[0] - 0.5) < 0.01 and flips[1] < 0.01


def test_debias_is_unbiased():
    rng = np.random.default_rng(3)
    truth = rng.random(300_000) < 0.3
    released = bit_release.randomized_response(truth, 0.5, rng)
    est = bit_release.debias(released.mean(), 0.5)
    assert est == pytest.approx(truth.mean(), abs=0.02)  # ~8 standard errors at this n


def test_log_likelihood_matches_direct_formula():
    msgs = np.array([[1, 0], [0, 0]], bool)
    bits = np.array([[1, 1], [1, 0]], bool)
    eps = 1.3
    keep = np.exp(eps) / (1 + np.exp(eps))
    expected = [np.log(keep) + np.log(1 - keep), np.log(1 - keep) + np.log(keep)]
    np.testing.assert_allclose(bit_release.log_likelihood(msgs, bits, eps), expected)


def test_likelihood_ratio_table_gives_the_per_run_scores():
    # messages of up to 8 bits under one fixed query are scored from a table of every possible message:
    # the very numbers the per-run formula gives, byte for byte
    from recaudit.attacks.likelihood_ratio import message_table
    from recaudit.mechanisms import MaxSense

    mechanism, rng = MaxSense(epsilon=0.7), np.random.default_rng(3)
    for bits in range(1, 9):
        s0, s1 = rng.random(bits) < 0.5, rng.random(bits) < 0.5
        messages = rng.random((3000, bits)) < 0.5
        per_run = (mechanism.message_log_likelihood(messages, np.broadcast_to(s1, messages.shape))
                   - mechanism.message_log_likelihood(messages, np.broadcast_to(s0, messages.shape)))
        codes, table = message_table(mechanism, messages, s0, s1)
        assert table[codes].tobytes() == per_run.tobytes()


def test_likelihood_ratio_score_table_follows_the_mechanism_and_the_pair():
    # the attack keeps its last table: another budget or another pair must not reuse it
    from types import SimpleNamespace

    from recaudit.attacks.likelihood_ratio import LikelihoodRatioAttack
    from recaudit.mechanisms import MaxSense
    from recaudit.simulator.transcript import MessagesView

    attack, rng = LikelihoodRatioAttack(), np.random.default_rng(4)
    view = MessagesView(messages=rng.random((500, 3)) < 0.5, queries=(np.zeros((1, 3)),))
    for epsilon, sketches in [(0.5, [[0, 0, 1], [1, 0, 1]]), (2.0, [[0, 0, 1], [1, 0, 1]]),
                              (2.0, [[1, 1, 1], [0, 0, 0]]), (0.5, [[0, 0, 1], [1, 0, 1]])]:
        mechanism, s0, s1 = MaxSense(epsilon=epsilon), *np.array(sketches, bool)
        codes, table = attack.score_table(mechanism, SimpleNamespace(sketches=np.stack([s0, s1])), view)
        expected = (mechanism.message_log_likelihood(view.messages, np.broadcast_to(s1, view.messages.shape))
                    - mechanism.message_log_likelihood(view.messages, np.broadcast_to(s0, view.messages.shape)))
        assert table[codes].tobytes() == expected.tobytes()
