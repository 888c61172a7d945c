"""``recaudit data fetch`` of the publishers' large archives (MovieLens 1M-25M) against local mirrors made here:
a ``file://`` folder and an HTTP server on 127.0.0.1 that cuts the first download short; and the Netflix format."""
from __future__ import annotations

import hashlib
import io
import threading
import zipfile
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from recaudit.audits.cli import main
from recaudit.simulator import datasets
from recaudit.simulator.ratings import read_ratings

DAT = "".join(f"{u}::{i}::{(u * i) % 5 + 1}::97830{u}\n" for u in range(1, 41) for i in range(1, 26) if (u + i) % 3)
CSV = "userId,movieId,rating,timestamp\n" + "".join(f"{u},{i},{((u + i) % 10 + 1) / 2},1\n"
                                                    for u in range(1, 30) for i in range(1, 20) if (u * i) % 4)


def _zip(member: str, text: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(member, text)
        z.writestr(member.rsplit("/", 1)[0] + "/README.txt", "a small archive made by the test\n")
    return buffer.getvalue()


@pytest.fixture
def mirror(monkeypatch, tmp_path):
    """Data sets ``tiny-1m`` (``::`` .dat) and ``tiny-20m`` (CSV with a header) whose archives lie in a mirror
    folder; the cache in ``tmp_path``."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv(datasets.MIRROR_ENV, raising=False)
    monkeypatch.setattr("sys.platform", "linux")
    folder = tmp_path / "mirror"
    folder.mkdir()
    archives = {}
    for name, base, member, text in (("tiny-1m", datasets.MOVIELENS_1M, "ml-t1/ratings.dat", DAT),
                                      ("tiny-20m", datasets.MOVIELENS_20M, "ml-t20/ratings.csv", CSV)):
        archive = _zip(member, text)
        (folder / f"{name}.zip").write_bytes(archive)
        ratings = text.count("\n") - text.startswith("userId")
        source = datasets.PublisherArchive(f"{name}.zip", member, hashlib.md5(archive).hexdigest())
        monkeypatch.setitem(datasets.DATASETS, name, replace(base, name=name, filename=member.rsplit("/", 1)[1],
                                                             ratings=ratings, sources=(source,)))
        archives[name] = archive
    return folder, archives


def test_fetch_from_a_file_mirror_extracts_counts_and_records(mirror, tmp_path, capsys):
    folder, _ = mirror
    assert main(["data", "fetch", "tiny-1m", "--mirror", folder.as_uri()]) == 0
    out = capsys.readouterr().out
    path = tmp_path / "cache" / "recaudit" / "tiny-1m" / "ratings.dat"
    assert path.read_text() == DAT and "licence: GroupLens" in out and "MD5" in out
    assert (path.parent / "ratings.dat.sha256").read_text().strip() == hashlib.sha256(DAT.encode()).hexdigest()
    assert not list(path.parent.glob("*.zip*"))  # the archive is not kept
    assert datasets.find("tiny-1m") == path
    parsed = read_ratings(path)
    assert parsed.table.nnz == DAT.count("\n") and parsed.table.shape == (40, 25)
    assert main(["data", "fetch", "tiny-1m", "--mirror", folder.as_uri()]) == 0
    assert "cache hit" in capsys.readouterr().out
    path.write_text(DAT.replace("::5::", "::4::", 1))  # the recorded SHA-256 catches a changed file
    with pytest.raises(datasets.DataError, match="corrupted"):
        datasets.find("tiny-1m")


def test_the_mirror_comes_from_the_environment_and_csv_headers_are_counted(mirror, monkeypatch, tmp_path, capsys):
    folder, _ = mirror
    monkeypatch.setenv(datasets.MIRROR_ENV, folder.as_uri())
    assert main(["data", "fetch", "tiny-20m"]) == 0
    path = datasets.find("tiny-20m")
    assert path.name == "ratings.csv" and read_ratings(path).table.nnz == CSV.count("\n") - 1
    assert main(["data", "list"]) == 0
    listing = capsys.readouterr().out
    assert "tiny-20m:" in listing and "fetched: " in listing and "movielens-25m:" in listing
    assert "download about 262 MB" in listing and "licence: GroupLens" in listing


def test_a_corrupted_archive_is_refused_in_one_line_and_deleted(mirror, tmp_path, capsys):
    folder, archives = mirror
    broken = bytearray(archives["tiny-1m"])
    broken[len(broken) // 2] ^= 0xFF
    (folder / "tiny-1m.zip").write_bytes(bytes(broken))
    assert main(["data", "fetch", "tiny-1m", "--mirror", folder.as_uri()]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "corrupted: MD5" in err[0] and "publisher's" in err[0]
    cache = tmp_path / "cache" / "recaudit" / "tiny-1m"
    assert not list(cache.glob("*"))  # nothing half-made is left
    (folder / "tiny-1m.zip").write_bytes(archives["tiny-1m"])
    assert main(["data", "fetch", "tiny-1m", "--mirror", folder.as_uri()]) == 0


def test_a_wrong_rating_count_is_refused(mirror, monkeypatch, capsys):
    folder, _ = mirror
    data = datasets.DATASETS["tiny-1m"]
    monkeypatch.setitem(datasets.DATASETS, "tiny-1m", replace(data, ratings=data.ratings + 1))
    assert main(["data", "fetch", "tiny-1m", "--mirror", folder.as_uri()]) == 2
    assert "not the publisher's" in capsys.readouterr().err


class _CuttingServer:
    """Serves the mirror folder over HTTP on 127.0.0.1 with ``Range`` support; the first plain GET is cut
    after ``cut`` bytes (the connection closes early), as an interrupted download."""

    def __init__(self, folder, cut: int):
        self.requests: list[str | None] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                body = (folder / self.path.lstrip("/")).read_bytes()
                asked = self.headers.get("Range")
                owner.requests.append(asked)
                if asked:
                    start = int(asked.removeprefix("bytes=").split("-")[0])
                    self.send_response(206)
                    self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
                    self.send_header("Content-Length", str(len(body) - start))
                    self.end_headers()
                    self.wfile.write(body[start:])
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[:cut] if len(owner.requests) == 1 else body)
                self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_an_interrupted_download_resumes_where_it_stopped(mirror, tmp_path, capsys):
    folder, archives = mirror
    cut = len(archives["tiny-1m"]) // 3
    server = _CuttingServer(folder, cut)
    try:
        assert main(["data", "fetch", "tiny-1m", "--mirror", server.url, "--timeout", "5"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "run the same command again to resume" in err[0]
        partial = tmp_path / "cache" / "recaudit" / "tiny-1m" / "tiny-1m.zip.partial"
        assert partial.read_bytes() == archives["tiny-1m"][:cut]
        assert main(["data", "fetch", "tiny-1m", "--mirror", server.url, "--timeout", "5"]) == 0
    finally:
        server.close()
    assert server.requests == [None, f"bytes={cut}-"]
    assert datasets.find("tiny-1m").read_text() == DAT and not partial.exists()


def test_the_publishers_archives_are_pinned():
    for name in ("movielens-1m", "movielens-10m", "movielens-20m", "movielens-25m"):
        data = datasets.DATASETS[name]
        source = data.sources[0]
        assert source.url().startswith("https://files.grouplens.org/datasets/movielens/ml-")
        assert len(source.md5) == 32 and int(source.md5, 16) >= 0 and data.ratings >= 10 ** 6
        assert source.url("file:///m/") == f"file:///m/{source.archive}"
        assert data.filename in ("ratings.dat", "ratings.csv") and source.member.endswith(data.filename)


NETFLIX = "1:\n1488844,3,2005-09-06\n822109,5,2005-05-13\n2:\n2059652,4,2005-09-05\n1488844,4,2005-01-01\n"


def test_the_netflix_format_is_read_and_told_apart(tmp_path):
    path = tmp_path / "mv.txt"
    path.write_text(NETFLIX)
    parsed = read_ratings(path)
    assert parsed.user_ids.tolist() == [822109, 1488844, 2059652] and parsed.item_ids.tolist() == [1, 2]
    assert np.array_equal(parsed.table.toarray(), [[5, 0], [3, 4], [0, 4]])
    assert read_ratings(path, "netflix").table.nnz == 4


@pytest.mark.parametrize("text, problem", [("1:\n5,3,x\n5,3,y\n", "duplicate rating of movie 1 by customer 5"),
                                           ("1:\n5,3,x\n7,0,y\n", ":3: expected 'CUSTOMER,RATING,DATE'"),
                                           ("1:\n5.5,3,x\n", ":2: expected"),
                                           ("1:\n", "no ratings")])
def test_bad_netflix_files_are_one_line(tmp_path, capsys, text, problem):
    path = tmp_path / "mv.txt"
    path.write_text(text)
    assert main(["data", "info", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and problem in err[0]
