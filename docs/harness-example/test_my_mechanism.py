"""Example: auditing your own mechanism with recaudit's pytest plugin.

Copy this file into your test suite. It needs recaudit installed (the plugin
is registered through the ``pytest11`` entry point; without it, run pytest
with ``-p recaudit.audits.pytest_plugin``). The ``dp_audit`` fixture runs your
mechanism many times on two neighbouring datasets, bounds ε from below at
confidence 1 − alpha, and compares that bound with the claim. Each test gets
a fixed seed derived from its node id, so a failure reproduces exactly and
is never "retry until green".
"""
import numpy as np
import pytest

from recaudit.mechanisms.base import PrivacyClaim


class NoisySum:
    """Sum of values clipped to [0, 1] plus Laplace noise of scale 1/ε: ε-DP per user."""

    def __init__(self, epsilon: float, noise_multiplier: float = 1.0):
        self.epsilon = epsilon
        self.noise_multiplier = noise_multiplier  # 1.0 is correct; < 1 is a bug
        # neighbouring datasets: the same three users, one of them changes 0 -> 1
        self.neighbours = ((0.3, 0.9, 0.0), (0.3, 0.9, 1.0))

    @property
    def claim(self) -> PrivacyClaim:
        return PrivacyClaim(epsilon=self.epsilon, delta=0.0, model="central", unit="user")

    def sample(self, dataset, n: int, rng: np.random.Generator) -> np.ndarray:
        """n independent releases on one dataset, vectorised (no loop over runs)."""
        total = float(np.clip(dataset, 0.0, 1.0).sum())
        scale = self.noise_multiplier / self.epsilon
        return total + rng.laplace(0.0, scale, size=n)

    # Optional: the attack. Without it the output itself is the score, which
    # is already optimal here (the likelihood ratio increases with the sum).
    def score(self, outputs: np.ndarray) -> np.ndarray:
        return outputs


@pytest.mark.dp
def test_noisy_sum_meets_its_claim(dp_audit):
    # False-failure probability ≤ alpha = 1e-6: for an ε-DP mechanism the
    # bound exceeds ε with probability ≤ alpha (the test is chosen on half
    # of the runs and counted on the other half).
    dp_audit.assert_dp(NoisySum(epsilon=1.0), trials=100_000, alpha=1e-6)


@pytest.mark.dp
def test_noisy_sum_with_half_the_noise_is_caught(dp_audit):
    # Half the noise makes the mechanism 2ε-DP while it claims ε. With
    # 100 000 runs per world the bound lands near 1.9 (ceiling ≈ 8.1; its
    # spread over seeds is about 0.01), so it exceeds the claimed 1.0 by ~90
    # standard deviations: failing to flag it has probability far below 1e-9
    # (and the seed is fixed, so the outcome never changes between runs). A flagged violation is wrong with
    # probability ≤ alpha = 1e-6.
    result = dp_audit.assert_not_dp(NoisySum(epsilon=1.0, noise_multiplier=0.5), trials=100_000, alpha=1e-6)
    assert result.epsilon_lb > 1.0
