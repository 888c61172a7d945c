"""Bernoulli masks from raw words against NumPy's own float32 uniforms (the reference they must equal)."""
import numpy as np
import pytest

from recaudit.mechanisms.uniform_draws import float32_uniform_below


@pytest.mark.parametrize("p", [0.1, 1 / 3, np.float64(0.1), np.float32(0.3), 0.5, 1.0, 2.0, 0.0, -1.0, 1e-9,
                               1 - 1e-9, float("nan")])
@pytest.mark.parametrize("shape", [(300, 200), (7, 4), (1, 100), (5, 3), (0, 10)])
def test_mask_and_stream_equal_numpy_float32_uniforms(p, shape):
    for seed in range(3):
        numpy_rng, raw_rng = np.random.default_rng(seed), np.random.default_rng(seed)
        for _ in range(3):  # odd shapes leave half a word pending: the next mask then falls back, still equal
            expected = numpy_rng.random(shape, dtype=np.float32) < p
            got = float32_uniform_below(raw_rng, shape, p)
            assert got.shape == expected.shape and got.dtype == bool and np.array_equal(got, expected)
        assert numpy_rng.random(5).tobytes() == raw_rng.random(5).tobytes()  # the stream goes on alike


def test_other_generators_draw_numpys_way():
    numpy_rng, other = (np.random.Generator(np.random.MT19937(4)) for _ in range(2))
    assert np.array_equal(float32_uniform_below(other, (10, 10), 0.3), numpy_rng.random((10, 10),
                                                                                        dtype=np.float32) < 0.3)
