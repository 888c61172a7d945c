"""Nothing lost, nobody in: killed runs resume to the same report; one folder holds one run.

Runs are real processes (forked from this already-imported test process, so
each starts in milliseconds) killed with SIGKILL, with their executor's
workers, at random moments drawn from a fixed seed.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

import recaudit.audits.reports.report  # noqa: F401  (imported before forking: children start at once)
from recaudit.audits.cli import main
from recaudit.audits.store import Progress
from tests.conftest import SCENARIOS

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="needs fork and process groups")
FORK = multiprocessing.get_context("fork")


def scenario(tmp_path: Path, seed: int = 20261122, name: str = "s.yaml") -> Path:
    data = yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text())
    data["seed"] = seed
    data["churn"].update(arrival_rate=200, horizon=10.0, release_interval=5.0)
    data["audit"].update(trials=6000, block_size=300, targets=2)  # 2 targets x 20 blocks
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _child(argv: list[str]) -> None:
    os.setpgrp()  # its own group, so a kill takes its pool workers with it
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os._exit(main(argv))


def start(argv: list[str]):
    process = FORK.Process(target=_child, args=(argv,))
    process.start()
    return process


def kill(process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.join()


def finish(argv: list[str], timeout: float = 300) -> int:
    process = start(argv)
    process.join(timeout)
    assert process.exitcode is not None, "run did not finish"
    return process.exitcode


def outputs(out: Path) -> tuple[dict, bytes]:
    """The report (without timing) and every score the folder's score store holds."""
    from recaudit.audits.runner import result_from_run_dir

    report = json.loads((out / "report.json").read_text())
    report.pop("timing")
    return report, b"".join(np.asarray(t.scores).tobytes() for t in result_from_run_dir(out).tests)


def saved_blocks(out: Path) -> int:
    return len(list((out / "progress").glob("block-*.npz")))


def leftovers(out: Path) -> list[Path]:
    return [p for p in out.rglob("*.tmp")]


@pytest.mark.parametrize("executor, kills", [("serial", 6), ("processes", 5),
                                             pytest.param("serial", 30, marks=pytest.mark.slow),
                                             pytest.param("processes", 30, marks=pytest.mark.slow)])
def test_killed_runs_resume_to_the_uninterrupted_report(tmp_path, executor, kills):
    path = scenario(tmp_path)
    args = ["run", str(path), "--executor", executor, "--workers", "2"]
    started = time.monotonic()
    assert finish(args + ["--out", str(tmp_path / "reference")]) == 0
    duration = time.monotonic() - started
    reference = outputs(tmp_path / "reference")

    out = tmp_path / "killed"
    # kill moments from a fixed seed: every other run at a uniform time over an uninterrupted run's
    # duration (world, blocks, reports), the others once a random number of further blocks is saved
    rng = np.random.default_rng(11)
    finished_early, saved_after_kill = 0, []
    for k in range(kills):
        process = start(args + ["--out", str(out)] + (["--resume"] if k else []))
        if k % 2:
            process.join(rng.uniform(0.05, 1.0) * duration)
        else:
            target = min(39, saved_blocks(out) + int(rng.integers(1, 8)))
            while process.is_alive() and saved_blocks(out) < target:
                time.sleep(0.0005)
        if process.exitcode is not None:  # it finished before the kill: fine, keep going
            finished_early += 1
            assert process.exitcode == 0
        kill(process)
        saved_after_kill.append(saved_blocks(out))
    assert finished_early < kills, "no run was ever killed"
    # blocks are saved as they finish (serial included): some kill left part of the 40 blocks on disk
    assert any(0 < n < 40 for n in saved_after_kill), saved_after_kill
    assert finish(args + ["--out", str(out), "--resume"]) == 0
    assert outputs(out) == reference  # same bound, verdict and every trial's score: none lost or repeated
    assert leftovers(out) == []


def test_two_runs_into_one_folder(tmp_path, capsys):
    first, second = scenario(tmp_path, seed=1, name="a.yaml"), scenario(tmp_path, seed=2, name="b.yaml")
    assert finish(["run", str(second), "--out", str(tmp_path / "b-alone")]) == 0
    out = tmp_path / "shared"
    running = start(["run", str(first), "--out", str(out)])
    try:
        deadline = time.monotonic() + 60
        while not (out / ".recaudit.pid").exists() or not (out / ".recaudit.pid").read_text().strip():
            assert time.monotonic() < deadline and running.is_alive()
            time.sleep(0.01)
        capsys.readouterr()
        for extra in ([], ["--resume"]):
            code = main(["run", str(second), "--out", str(out), "--quiet"] + extra)
            err = capsys.readouterr().err.strip()
            assert code == 2 and err.endswith("another recaudit run (pid "
                                              f"{running.pid}) is writing to this folder; wait for it to finish "
                                              "or choose another --out")
        code = main(["run", str(first), "--out", str(out), "--quiet"])  # the same scenario is no exception
        assert code == 2
    finally:
        running.join(300)
    assert running.exitcode == 0
    # the finished first run's progress is not the second's: --resume refuses it in one line ...
    assert main(["run", str(second), "--out", str(out), "--resume", "--quiet"]) == 2
    assert "saved progress belongs to another scenario or seed" in capsys.readouterr().err
    # ... and a folder whose stamp was overwritten still never lends the first run's blocks to the second
    from recaudit.audits.language.scenario import load_scenario

    (out / "progress" / "fingerprint.json").write_text(json.dumps({"fingerprint": load_scenario(second).fingerprint()}))
    assert main(["run", str(second), "--out", str(out), "--resume"]) == 0
    err = capsys.readouterr().err
    assert err.count("saved block belongs to another scenario; recomputing it") == 40
    assert outputs(out) == outputs(tmp_path / "b-alone")


def test_corrupt_blocks_are_recomputed_with_one_line_each(tmp_path, capsys):
    path = scenario(tmp_path)
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    reference = outputs(out)
    blocks = sorted((out / "progress").glob("block-*.npz"))
    blocks[0].write_bytes(blocks[0].read_bytes()[:100])  # cut short: not a zip any more
    blocks[1].write_bytes(b"garbage")
    saved = np.load(blocks[2])  # a valid file whose scores were altered after stamping
    arrays = {k: saved[k] for k in saved.files}
    arrays["scores@values"] = arrays["scores@values"] + 1.0  # the scores' table (their codes are packed bits)
    with open(blocks[2], "wb") as handle:
        np.savez(handle, **arrays)
    (out / "progress" / ".block-000-000001.npz.0a1b2c3d.tmp").write_bytes(b"half a write")
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "recomputing" in line]
    assert lines == [f"[recaudit] {blocks[0]}: unreadable saved block (BadZipFile); recomputing it",
                     f"[recaudit] {blocks[1]}: unreadable saved block (ValueError); recomputing it",
                     f"[recaudit] {blocks[2]}: saved block fails its checksum; recomputing it"]
    assert outputs(out) == reference
    assert leftovers(out) == []


def test_a_corrupt_folder_stamp_is_not_a_traceback(tmp_path):
    warnings = []
    (tmp_path / "fingerprint.json").write_bytes(b"\x00\x01not json")
    progress = Progress(tmp_path, {"fingerprint": "abc"}, resume=True, warn=warnings.append)
    assert warnings == [f"{tmp_path / 'fingerprint.json'}: unreadable (JSONDecodeError); rewriting it, "
                        "checking each saved unit"]
    assert json.loads((tmp_path / "fingerprint.json").read_text()) == {"fingerprint": "abc"}
    progress.save_json("unit", {"u_star": 5})
    assert progress.load_json("unit") == {"u_star": 5}
    assert Progress(tmp_path, {"fingerprint": "abc"}, resume=True).load_json("unit") == {"u_star": 5}


def test_serial_runs_save_each_block_as_it_finishes(tmp_path):
    from recaudit.audits.executors import SerialExecutor, as_finished

    directory = tmp_path / "p"
    progress = Progress(directory, {"k": 1}, resume=False)
    seen = []

    def task(i):
        seen.append(sorted(p.name for p in directory.glob("unit-*.json")))  # saved before this one starts
        return i

    for key, result in as_finished(SerialExecutor(), [(i, task, (i,)) for i in range(4)]):
        progress.save_json(f"unit-{key}", result)
    assert seen == [[], ["unit-0.json"], ["unit-0.json", "unit-1.json"], ["unit-0.json", "unit-1.json", "unit-2.json"]]


def test_the_store_codes_few_valued_scores_and_gives_every_array_back_bit_for_bit(tmp_path):
    progress = Progress(tmp_path, {"scenario": 1}, resume=False)
    rng = np.random.default_rng(0)
    arrays = {"scores": rng.choice([0.25, 1.5, -3.0], size=(1, 2, 5000)),  # discrete scores: coded
              "zeros": rng.choice([-0.0, 0.0], size=4000),  # equal but different bits: kept as they are
              "reach": np.full((1, 2, 5000), np.nan), "many": rng.random((2, 3000))}
    progress.save_arrays("block", arrays)
    back = progress.load_arrays("block")
    assert sorted(back) == sorted(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].tobytes() == array.tobytes(), name
    with np.load(tmp_path / "block.npz") as saved:
        assert saved["scores"].dtype == np.uint8 and saved["many"].dtype == float


# ---------------------------------------------------------------- the user's files, and blocks that know who they are


def snapshot(folder: Path) -> dict:
    """Every file under ``folder``: its bytes and modification time."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_folder_recaudit_did_not_write_is_refused_and_left_as_it_was(tmp_path, capsys):
    path = scenario(tmp_path)
    out = tmp_path / "u"
    (out / "progress").mkdir(parents=True)
    (out / "report.md").write_text("my notes")
    (out / "progress" / "a.json").write_text("{}")
    np.savez(out / "progress" / "b.npz", x=np.arange(3))
    (out / ".config.tmp").write_text("mine")
    before = snapshot(out)
    capsys.readouterr()
    code = main(["run", str(path), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"{out}: the folder holds files recaudit did not write; choose an empty or new "
                                 "--out (or the folder of an earlier recaudit run)"]
    assert snapshot(out) == before  # nothing written, nothing removed
    for extra in (["--resume"],):
        assert main(["run", str(path), "--out", str(out), "--quiet"] + extra) == 2
    assert snapshot(out) == before


def test_a_rerun_removes_only_what_runs_wrote(tmp_path):
    path, other = scenario(tmp_path), scenario(tmp_path, seed=3, name="b.yaml")
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    mine = {"progress/notes.json": b"{}", "progress/extra.npz": b"zip?", ".config.tmp": b"mine", "notes.md": b"hi",
            "progress/.notes.0a1b2c3d.tmp": b"looks like a temporary, is not the run's"}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    assert main(["run", str(other), "--out", str(out), "--quiet"]) == 0  # another scenario, no --resume
    assert {name: (out / name).read_bytes() for name in mine} == mine
    assert outputs(out)[0]["scenario"]["seed"] == 3 and saved_blocks(out) == 40


def test_a_folder_of_an_earlier_recaudit_is_still_a_run_folder(tmp_path):
    path = scenario(tmp_path)
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    (out / ".recaudit-manifest").unlink()  # as written before manifests: the lock and pid files mark it
    (out / "progress" / "block-000-000099.npz").write_bytes(b"an old block")
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    assert not (out / "progress" / "block-000-000099.npz").exists()  # cleaned up as it was then


def test_a_block_copied_over_another_is_recomputed_not_reused(tmp_path, capsys):
    path = scenario(tmp_path)
    out = tmp_path / "o"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 0
    reference = outputs(out)
    progress = out / "progress"
    (progress / "block-000-000010.npz").write_bytes((progress / "block-000-000009.npz").read_bytes())
    (progress / "block-001-000003.npz").write_bytes((progress / "block-000-000003.npz").read_bytes())
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(out), "--resume"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "recomputing" in line or "resumed" in line]
    assert lines == [
        f"[recaudit] {progress / 'block-000-000010.npz'}: saved block is block-000-000009 target 0 blocks [9, 10], "
        "not block-000-000010 target 0 blocks [10, 11]; recomputing it",
        f"[recaudit] {progress / 'block-001-000003.npz'}: saved block is block-000-000003 target 0 blocks [3, 4], "
        "not block-001-000003 target 1 blocks [3, 4]; recomputing it",
        "[recaudit] resumed 38 of 40 trial blocks"]
    assert outputs(out) == reference  # the bound of an uninterrupted run, every score in its place
    assert main(["report", str(out), "--quiet"]) == 0  # and the rebuilt report agrees
    assert outputs(out) == reference


def test_a_block_of_another_seed_stream_is_not_reused(tmp_path, capsys):
    progress = Progress(tmp_path, {"fingerprint": "f"}, resume=False)
    from recaudit.audits.designs.base import _Joined, _restore, unit_identity

    scores = {"scores": np.arange(20, dtype=float).reshape(1, 2, 10)}
    progress.save_arrays("block-000-000000", scores, unit_identity(0, 0, 1, 10, entropy=1))
    warnings = []
    progress.warn = warnings.append
    assert _restore(progress, _Joined(1, [10]), 0, 0, 1, entropy=1) == []
    assert _restore(progress, _Joined(1, [10]), 0, 0, 1, entropy=2) == [0] and len(warnings) == 1
