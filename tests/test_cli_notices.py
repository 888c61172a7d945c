"""Small surprises of the command line (issue 34, item 7): an output folder nothing can be written in is never
"another recaudit run", negative ids in a ratings file are refused in one line, and grid and sweep print their estimate
before any work."""
from __future__ import annotations

from pathlib import Path

import pytest

from recaudit.audits.cli import main
from recaudit.simulator.ratings import RatingsFileError, read_ratings


def _empty_folder_taking_no_files() -> Path | None:
    """An empty folder of /proc/self/net (procfs never lets a file be created; none on this kernel: skip)."""
    try:
        return next((f for f in sorted(Path("/proc/self/net").iterdir()) if f.is_dir() and not any(f.iterdir())),
                    None)
    except OSError:
        return None


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_an_output_folder_that_takes_no_files_is_never_another_run(capsys):
    """/proc/self holds files recaudit did not write; an empty kernel folder takes none: neither is busy."""
    assert main(["run", "quickstart", "--out", "/proc/self", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("/proc/self: ") and "another recaudit run" not in err[0], err
    empty = _empty_folder_taking_no_files()
    if empty is None:
        pytest.skip("no empty kernel folder on this machine")
    assert main(["run", "quickstart", "--out", str(empty), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{empty}: cannot write in the output folder"), err


@pytest.mark.parametrize("name, content, line, message", [
    ("ml.csv", "userId,movieId,rating,timestamp\n1,2,4,9\n1,-3,4,9\n2,-3,5,9\n", 3,
     "movieId: -3 is negative (user and item ids are >= 0) (and 1 more such lines)"),
    ("u.data", "1\t2\t4\t9\n-7\t3\t4\t9\n", 2, "user: -7 is negative"),
    ("own.csv", "user,item,rating\n5,8,3\n-4,7,4\n", 3, "user: -4 is negative"),
])
def test_negative_ids_are_refused_naming_file_line_and_column(tmp_path, name, content, line, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(RatingsFileError) as info:
        read_ratings(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}:{line}: {message}"), text


def test_text_ids_have_no_sign_and_are_kept(tmp_path):
    path = tmp_path / "names.csv"
    path.write_text("user,item,rating\n-4,x,4\nbob,y,3\n")
    assert sorted(read_ratings(path).user_ids) == ["-4", "bob"]


@pytest.mark.parametrize("command, name, detail", [("grid", "matrix-completion-rmse-vs-epsilon", "14 runs"),
                                                   ("sweep", "scaling-maxsense", "45 learning curves")])
def test_grid_and_sweep_print_their_estimate_before_any_work(monkeypatch, capsys, tmp_path, command, name, detail):
    import recaudit.audits.grid
    import recaudit.audits.sweep

    started = []

    def work(*args, **kwargs):  # the work itself: what was printed before it began is the point
        started.append(capsys.readouterr().err)
        raise KeyboardInterrupt

    monkeypatch.setattr(recaudit.audits.grid, "run_grid", work)
    monkeypatch.setattr(recaudit.audits.sweep, "run_sweep", work)
    assert main([command, name, "--out", str(tmp_path / "out")]) == 130
    assert len(started) == 1
    line = next(line for line in started[0].splitlines() if "estimated" in line)
    assert line.startswith("[recaudit] estimated ") and f"({detail}" in line, line
