"""Scores kept as byte codes into a table of their values: every figure taken from them equals the one the
floats they stand for give, bit for bit (estimates, ROC curves, the store, the join of blocks)."""
from __future__ import annotations

import numpy as np
import pytest

from recaudit.audits.checks import CLAIMS
from recaudit.audits.stats.coded import CodedScores, one_table
from recaudit.audits.stats.estimators import ESTIMATORS


def coded(rng, shape, values) -> CodedScores:
    """Random codes into ``values`` (ascending), each value with its own frequency (some may not occur)."""
    p = rng.dirichlet(np.ones(len(values)) * 0.5)
    return CodedScores(rng.choice(len(values), size=shape, p=p).astype(np.uint8), np.asarray(values, float))


def tables(rng):
    """Tables of 1 to 256 values, at several scales, one with a zero."""
    yield np.array([-0.7, 0.7])
    yield np.array([-2.0, 0.0, 1.5])
    for size in (1, 5, 9, 40, 256):
        yield np.unique(rng.normal(size=size) * rng.choice([1e-3, 1.0, 100.0]))


@pytest.mark.parametrize("kind", [k for k, cls in ESTIMATORS.items() if cls.input == "pairs"])
def test_every_pairs_estimator_judges_coded_scores_as_their_floats(kind):
    cls = ESTIMATORS[kind]
    estimator = cls(**cls.test_params)
    claim = next(c for c in CLAIMS.values() if estimator.supports(c))
    rng = np.random.default_rng(5)
    for values in tables(rng):
        for n in (3, 2_001, 40_000):
            scores = coded(rng, (2, n), values)
            floats = np.asarray(scores)
            assert estimator.estimate(scores, None, claim, 0.05).to_dict() == \
                estimator.estimate(floats, None, claim, 0.05).to_dict()


def test_coded_roc_curves_are_the_float_ones():
    from recaudit.audits.reports.plots import roc_curve

    rng = np.random.default_rng(6)
    for values in tables(rng):
        for n in (1, 500, 300_000):  # above ROC_SAMPLE the thresholds come from a strided sample
            neg, pos = coded(rng, n, values), coded(rng, n + 7, values)
            for direction in (1, -1):
                got, want = roc_curve(neg, pos, direction), roc_curve(np.asarray(neg), np.asarray(pos), direction)
                assert all(g.tobytes() == w.tobytes() for g, w in zip(got, want))


def test_tables_with_minus_zero_beside_zero_or_nan_are_not_coded():
    codes = np.array([0, 1, 1], np.uint8)
    assert CodedScores.from_table(codes, np.array([-0.0, 0.0])) is None
    assert CodedScores.from_table(codes, np.array([1.0, np.nan])) is None
    assert CodedScores.from_table(np.arange(3, dtype=np.uint8), np.array([2.0, -1.0, 2.0])).values.tolist() == [-1, 2]
    with pytest.raises(ValueError):
        CodedScores(codes, np.array([1.0, 1.0]))  # a table must be strictly ascending
    a, b = CodedScores(codes, np.array([0.0, 1.0])), CodedScores(codes, np.array([-0.0, 2.0]))
    assert one_table([a, b]) is None  # their union cannot keep both zeros


def test_scores_from_a_table_are_the_table_looked_up():
    rng = np.random.default_rng(7)
    for _ in range(50):
        table = rng.choice([-1.5, 0.25, 3.0, 7.0], size=rng.integers(1, 256))
        indices = rng.integers(0, table.size, 1000).astype(np.uint8)
        got = CodedScores.from_table(indices, table)
        assert np.asarray(got).tobytes() == table[indices].tobytes()


def test_coded_scores_of_other_tables_join_on_their_union():
    rng = np.random.default_rng(8)
    parts = [coded(rng, (1, 2, 100), v) for v in ([-1.0, 2.0], [0.5, 2.0, 9.0], [-1.0, 2.0])]
    joined = one_table(parts)
    assert all(j.values.tolist() == [-1.0, 0.5, 2.0, 9.0] for j in joined)
    assert all(np.asarray(j).tobytes() == np.asarray(p).tobytes() for j, p in zip(joined, parts))
    too_many = [coded(rng, 10, np.arange(200.0)), coded(rng, 10, np.arange(200.0) + 0.5)]
    assert one_table(too_many) is None


def test_blocks_join_coded_and_fall_back_to_floats():
    from recaudit.audits.designs.base import _Joined

    rng = np.random.default_rng(9)
    blocks = [{"scores": coded(rng, (1, 2, 50), np.arange(100.0) + k / 3)} for k in range(3)]
    blocks.append({"scores": rng.normal(size=(1, 2, 50))})  # a block whose scores were not coded
    for keep in (2, 3, 4):
        joined = _Joined(1, [50] * keep)
        for index, block in enumerate(blocks[:keep]):
            joined.add(0, index, block)
        scores = joined.scores()[0].scores
        assert isinstance(scores, CodedScores) == (keep == 2)  # the third table takes the union to 300 values
        want = np.concatenate([np.asarray(b["scores"]) for b in blocks[:keep]], axis=-1)
        assert np.asarray(scores).tobytes() == want.tobytes()


def test_the_store_keeps_coded_scores_coded_and_reads_blocks_it_coded_before(tmp_path):
    from recaudit.audits.store import Progress

    progress = Progress(tmp_path, {"scenario": 1}, resume=False)
    rng = np.random.default_rng(10)
    scores = coded(rng, (1, 2, 3000), [-0.5, 0.25, 4.0])
    progress.save_arrays("fresh", {"scores": scores})
    # a block written before coded scores: float scores the store codes by itself, and float ones it cannot
    progress.save_arrays("earlier", {"scores": np.asarray(scores)})
    progress.save_arrays("floats", {"scores": rng.normal(size=(1, 2, 3000))})
    for name in ("fresh", "earlier"):
        back = progress.load_arrays(name, keep_codes=("scores",))["scores"]
        assert isinstance(back, CodedScores) and np.asarray(back).tobytes() == np.asarray(scores).tobytes()
        assert progress.load_arrays(name)["scores"].tobytes() == np.asarray(scores).tobytes()  # decoded
    assert isinstance(progress.load_arrays("floats", keep_codes=("scores",))["scores"], np.ndarray)


def _block(job, pair, target, index, size):
    """A block of two-valued coded scores drawn from (target, index); ``job`` names a block at which to fail."""
    if index == job:
        raise KeyboardInterrupt  # the run is stopped here
    rng = np.random.default_rng([target, index])
    return {"scores": CodedScores((rng.random((1, 2, size)) < 0.3).astype(np.uint8), np.array([-1.0, 2.0]))}


def test_blocks_saved_in_units_resume_and_rebuild_whatever_unit_size_saved_them(tmp_path):
    from recaudit.audits.designs.base import blocks_per_unit, run_blocks, saved_scores
    from recaudit.audits.executors import SerialExecutor
    from recaudit.audits.store import Progress

    trials, block_size, per_unit = 10_000, 100, blocks_per_unit(100)  # 100 blocks a target, 5 to a unit
    assert per_unit == 5

    def run(folder, per_unit, stop=None, resume=False):
        messages = []
        progress = Progress(tmp_path / folder, {"k": 1}, resume=resume)
        scores = run_blocks(_block, stop, [None, None], trials, block_size, SerialExecutor(), progress,
                            messages.append, per_unit)
        return [np.asarray(s.scores) for s in scores], messages

    whole, _ = run("whole", per_unit)
    assert len(list((tmp_path / "whole").glob("block-*.npz"))) == 2 * 20
    with pytest.raises(KeyboardInterrupt):  # stopped at block 57 of target 0: units 0 .. 50 are saved
        run("stopped", per_unit, stop=57)
    resumed, messages = run("stopped", per_unit, resume=True)
    assert "resumed 55 of 200 trial blocks" in messages
    assert all(a.tobytes() == b.tobytes() for a, b in zip(resumed, whole))
    # a folder saved a block to a unit (earlier versions) is read and resumed by units, and a grouped one read
    run("blockwise", 1)
    for folder in ("blockwise", "whole"):
        rebuilt = saved_scores(Progress.saved(tmp_path / folder), "pairs", 2, trials, block_size)
        assert all(np.asarray(r.scores).tobytes() == w.tobytes() for r, w in zip(rebuilt, whole))
    (tmp_path / "blockwise" / "block-001-000007.npz").unlink()
    resumed, messages = run("blockwise", per_unit, resume=True)
    assert "resumed 199 of 200 trial blocks" in messages
    assert all(a.tobytes() == b.tobytes() for a, b in zip(resumed, whole))


def test_blocks_in_the_previous_npz_layout_are_read(tmp_path):
    # before two-valued codes were packed as bits, a block held its codes as bytes ("scores") beside their table
    import json

    from recaudit.audits.store import Progress, _digest_arrays

    progress = Progress(tmp_path, {"scenario": 1}, resume=False)
    codes = (np.random.default_rng(12).random((1, 2, 4000)) < 0.4).astype(np.uint8)
    arrays = {"scores": codes, "scores@values": np.array([-0.5, 0.5])}
    meta = json.dumps({"stamp": progress.stamp, "sha256": _digest_arrays(arrays)})
    np.savez(tmp_path / "block-000-000000.npz", **arrays, __recaudit_meta__=np.array(meta))
    back = Progress.saved(tmp_path).load_arrays("block-000-000000", keep_codes=("scores",))["scores"]
    assert isinstance(back, CodedScores) and back.codes.tobytes() == codes.tobytes()
    # ... by reports rebuilt from the folder; a run recomputes it (it does not say which block it is)
    warnings = []
    progress.warn = warnings.append
    assert progress.load_arrays("block-000-000000") is None and len(warnings) == 1
    progress.save_arrays("now", {"scores": back})  # saved today: packed, eight codes to a byte
    with np.load(tmp_path / "now.npz") as saved:
        assert saved["scores@bits"].nbytes == codes.size // 8
    assert np.asarray(progress.load_arrays("now")["scores"]).tobytes() == np.asarray(back).tobytes()


def test_spans_of_blocks_give_the_blocks_scores_and_resume_only_the_missing_runs_of_blocks(tmp_path):
    from recaudit.audits.designs.base import run_blocks
    from recaudit.audits.executors import SerialExecutor
    from recaudit.audits.store import Progress

    trials, block_size, calls = 10_000, 100, []

    def span(job, pair, target, first, sizes):  # the blocks of a span, each from its own (target, index)
        calls.append((target, first, sizes))
        blocks = [_block(job, pair, target, index, size) for index, size in enumerate(sizes, first)]
        return {"scores": CodedScores(np.concatenate([b["scores"].codes for b in blocks], axis=-1),
                                      blocks[0]["scores"].values)}

    def run(folder, block, per_unit, spans, resume=False):
        messages = []
        progress = Progress(tmp_path / folder, {"k": 1}, resume=resume)
        scores = run_blocks(block, None, [None, None], trials, block_size, SerialExecutor(), progress,
                            messages.append, per_unit, spans=spans)
        return [np.asarray(s.scores) for s in scores], messages

    blockwise, _ = run("blockwise", _block, 1, spans=False)
    spanned, _ = run("spanned", span, 5, spans=True)
    assert calls == [(t, first, (100,) * 5) for t in (0, 1) for first in range(0, 100, 5)]
    assert all(a.tobytes() == b.tobytes() for a, b in zip(spanned, blockwise))
    for index in (7, 8, 12):  # a folder saved block by block, three blocks lost: two spans to run again
        (tmp_path / "blockwise" / f"block-001-{index:06d}.npz").unlink()
    calls.clear()
    resumed, messages = run("blockwise", span, 5, spans=True, resume=True)
    assert calls == [(1, 7, (100, 100)), (1, 12, (100,))]
    assert "resumed 197 of 200 trial blocks" in messages and messages[-1] == "trial block 3/3 done"
    assert all(a.tobytes() == b.tobytes() for a, b in zip(resumed, blockwise))
