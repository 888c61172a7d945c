"""Reports people look at: HTML with embedded figures, rebuilding from a run folder, comparing runs,
escaping of user strings, the published schema, progress bars and the real-data utility."""
from __future__ import annotations

import argparse
import base64
import io
import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import numpy as np
import pytest
import yaml

from recaudit.audits.cli import ConsoleReporter, _parser, main
from recaudit.audits.reports import plots
from recaudit.audits.reports.report import finite, md, schema
from tests.conftest import small_world

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class _Page(HTMLParser):
    """Collects every tag, the <img> sources and the text of an HTML page."""

    def __init__(self):
        super().__init__()
        self.tags, self.images, self.text = [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "img":
            self.images.append(dict(attrs))

    def handle_data(self, data):
        self.text.append(data)


def parse_html(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text())
    return page


def decode_image(src: str) -> np.ndarray:
    """The pixels of a data-URI PNG (fails unless it is a valid, non-empty PNG)."""
    import matplotlib.image

    prefix = "data:image/png;base64,"
    assert src.startswith(prefix), src[:40]
    data = base64.b64decode(src[len(prefix):], validate=True)
    assert data.startswith(PNG_SIGNATURE)
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
    assert pixels.shape[0] > 100 and pixels.shape[1] > 100
    return pixels


def run_cli(tmp_path, data: dict, name: str, *extra) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    out = tmp_path / name
    assert main(["run", str(path), "--out", str(out), "--quiet", *extra]) in (0, 1)
    return out


def without_timing(text: str) -> str:
    """A report.json's text with its ``timing`` object cut out (the only wall-clock part)."""
    cut = re.sub(r'\n  "timing": \{.*?\n  \},?', "", text, flags=re.S)
    assert cut != text
    return cut.replace(",\n}", "\n}")


def decode_svg(src: str) -> ElementTree.Element:
    """The root of a data-URI SVG (fails unless it is well-formed SVG that draws lines or markers)."""
    prefix = "data:image/svg+xml;base64,"
    assert src.startswith(prefix), src[:40]
    root = ElementTree.fromstring(base64.b64decode(src[len(prefix):], validate=True))
    assert root.tag == "{http://www.w3.org/2000/svg}svg" and int(root.get("width")) > 100
    return root


def decode_figure(src: str):
    """A data-URI figure, PNG (the figures across runs) or SVG (a run's own), checked as by its decoder."""
    return decode_svg(src) if src.startswith("data:image/svg+xml;") else decode_image(src)


def test_html_report_is_self_contained_with_every_figure_a_valid_svg(tmp_path, quickstart_data):
    out = run_cli(tmp_path, small_world(quickstart_data, 4_000), "run")
    page = parse_html(out / "report.html")
    # self-contained: no scripts, no external style sheets, every image embedded
    assert "script" not in page.tags and "link" not in page.tags
    assert len(page.images) == 3  # ROC, epsilon per test, timeline
    for img in page.images:
        root = decode_svg(img["src"])
        assert any(el.tag.endswith(("polyline", "circle")) for el in root.iter())  # not a blank canvas
        assert img["alt"]
    text = " ".join(page.text)
    report = json.loads((out / "report.json").read_text())
    assert report["summary"] in text and report["summary"].startswith("maxsense claims ε = 1 local DP per user;")
    assert text.index(report["summary"]) < text.index("Tests")  # the verdict comes first


def test_report_rebuilds_identically_from_the_run_folder(tmp_path, quickstart_data, capsys):
    out = run_cli(tmp_path, small_world(quickstart_data, 4_000), "run", "--csv")
    saved = {name: (out / name).read_bytes() for name in ("report.json", "report.md", "report.html", "trials.csv")}
    printed = capsys.readouterr().out.splitlines()[0]
    (out / "report.html").unlink()
    (out / "trials.csv").unlink()
    assert main(["report", str(out), "--quiet"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == printed
    rebuilt = (out / "report.json").read_text()
    assert without_timing(rebuilt) == without_timing(saved["report.json"].decode())
    assert json.loads(rebuilt)["timing"]["report_rebuilt_at"]
    for name in ("report.md", "report.html"):
        assert (out / name).read_bytes() == saved[name], name
    assert not (out / "trials.csv").exists()
    assert main(["export", str(out), "--quiet"]) == 0  # the CSV on request equals run --csv's
    assert (out / "trials.csv").read_bytes() == saved["trials.csv"]


def _tamper(out: Path, name: str, change) -> None:
    """Rewrite one saved unit of ``out``'s score store with ``change`` applied to its scores (a valid checksum)."""
    from recaudit.audits.store import Progress

    store = Progress.saved(out / "progress")
    unit = store.load_arrays(name)
    with np.load(out / "progress" / f"{name}.npz") as saved:  # the unit says which it is: kept
        identity = json.loads(str(saved["__recaudit_meta__"]))["identity"]
    store.save_arrays(name, unit | {"scores": change(unit["scores"])}, identity)


@pytest.mark.parametrize("case", ["holm-family", "one-run"])
def test_rebuild_re_estimates_every_test_from_the_score_store(tmp_path, quickstart_data, case, capsys):
    data = small_world(quickstart_data, 4_000)
    data["mechanism"] = {"kind": "maxsense_broken", "epsilon": 1.0, "leak_factor": 2.0}
    if case == "holm-family":  # two tests of one name per target: scores are matched by order, not by name
        data["attack"] = [{"kind": "likelihood_ratio"}, {"kind": "likelihood_ratio"}]
        data["audit"]["targets"] = 2
    else:
        data["audit"]["method"] = "one-run"
    out = run_cli(tmp_path, data, case)
    original = (out / "report.json").read_text()
    assert main(["report", str(out), "--quiet"]) == 0
    assert without_timing((out / "report.json").read_text()) == without_timing(original)
    # the tests really are recomputed: changed scores change the rebuilt bounds
    _tamper(out, "canaries" if case == "one-run" else "block-001-000000", np.zeros_like)
    assert main(["report", str(out), "--quiet"]) == 0
    assert json.loads((out / "report.json").read_text())["tests"] != json.loads(original)["tests"]
    # a damaged unit is refused in one line, never read
    unit = next((out / "progress").glob("*.npz"))
    unit.write_bytes(unit.read_bytes()[:-40])
    capsys.readouterr()
    assert main(["report", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().endswith("no saved scores (progress/ is missing or incomplete); "
                                                    "rerun the scenario into it with --resume")


def test_csv_era_folders_rebuild_from_trials_csv(tmp_path, quickstart_data):
    """A folder written before the score store holds report.json and trials.csv only: rebuilt from the CSV."""
    data = small_world(quickstart_data, 4_000)
    data["audit"]["method"] = "one-run"
    out = run_cli(tmp_path, data, "old", "--csv")
    original = (out / "report.json").read_text()
    shutil.rmtree(out / "progress")
    assert main(["report", str(out), "--quiet"]) == 0
    assert without_timing((out / "report.json").read_text()) == without_timing(original)


def test_report_refuses_folders_that_are_not_runs(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run folder" in capsys.readouterr().err


def test_sweep_folder_rebuilds_identically(tmp_path, quickstart_data):
    from tests.test_sweep import SWEEP, tiny

    data = tiny(quickstart_data) | yaml.safe_load(SWEEP)
    data["sweep"]["max_users"] = 3_000  # small cap: some runs are censored
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    out = tmp_path / "sweep"
    assert main(["sweep", str(path), "--out", str(out), "--quiet"]) == 0
    saved = {n: (out / n).read_bytes() for n in ("sweep.json", "sweep.md", "sweep.html", "scaling.png")}
    report = json.loads(saved["sweep.json"])
    censored = sum(p["u_star"] is None for p in report["points"])
    assert censored == report["fits"][0]["censored"]
    for p in report["points"]:  # the ones the cap stopped drew a triangle at the cap; the md says so
        assert p["u_star"] is None or p["u_star"] <= 3_000
    assert "drawn at the cap" in saved["sweep.md"].decode()
    (out / "sweep.html").unlink()
    assert main(["report", str(out), "--quiet"]) == 0
    for name, content in saved.items():
        assert (out / name).read_bytes() == content, name
    for img in parse_html(out / "sweep.html").images:
        decode_figure(img["src"])


def test_sweep_figure_draws_censored_runs_and_the_fit_band():
    points = [{"parameter": "x", "value": v, "replicate": r, "u_star": u, "theory_users": v ** 2}
              for v, r, u in [(10, 0, 100), (10, 1, 120), (20, 0, 400), (20, 1, 380), (40, 0, None), (40, 1, 1500)]]
    from recaudit.audits.sweep import fit_slope

    done = [p for p in points if p["u_star"] is not None]
    fit = fit_slope(np.array([p["value"] for p in done]), np.array([p["u_star"] for p in done]))
    # the band brackets the fitted line at every grid value and the line follows the slope
    assert all(b["low"] < b["fit"] < b["high"] for b in fit["band"])
    band = fit["band"]
    assert np.log(band[-1]["fit"] / band[0]["fit"]) / np.log(band[-1]["x"] / band[0]["x"]) == pytest.approx(
        fit["slope"])
    fit |= {"parameter": "x", "theory_slope": 2.0, "censored": 1, "values": [10, 20, 40]}
    png = plots.sweep_figure({"scenario": {"sweep": {"max_users": 2000}}, "fits": [fit], "points": points})
    assert png.startswith(PNG_SIGNATURE)


def test_compare_tabulates_and_plots_runs(tmp_path, quickstart_data, capsys):
    import copy

    runs = []
    for eps in (0.5, 2.0):
        data = small_world(copy.deepcopy(quickstart_data), 4_000)
        data["name"], data["mechanism"]["epsilon"] = f"eps{eps:g}", eps
        runs.append(run_cli(tmp_path, data, f"eps{eps:g}"))
    out = tmp_path / "cmp"
    assert main(["compare", *map(str, runs), "--out", str(out), "--quiet"]) == 0
    rows = json.loads((out / "compare.json").read_text())["runs"]
    assert [r["scenario"] for r in rows] == ["eps0.5", "eps2"]
    for r, run in zip(rows, runs):
        report = json.loads((run / "report.json").read_text())
        assert r["epsilon_lb"] == report["audit"]["epsilon_lb"] and r["utility"] == report["utility"]["final_accuracy"]
        assert r["optimal_epsilon_lb"] == report["audit"]["optimal_epsilon_lb"]  # the power figure is carried over
        assert r["uninformative"] == report["audit"]["uninformative"]
    assert "| eps2 |" in capsys.readouterr().out
    assert "optimal ε_LB" in (out / "compare.md").read_text() and "optimal ε_LB" in (out / "compare.html").read_text()
    images = parse_html(out / "compare.html").images
    assert len(images) == 2  # ε_LB against the claims, the frontier
    for img in images:
        decode_figure(img["src"])
    assert main(["compare", str(runs[0]), str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert main(["compare", *map(str, runs), "--out", str(out), "--quiet"]) == 0  # its own folder: rewritten
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "compare.md").write_text("my notes")
    assert main(["compare", *map(str, runs), "--out", str(mine), "--quiet"]) == 2  # the user's folder: refused
    assert (mine / "compare.md").read_text() == "my notes" and sorted(p.name for p in mine.iterdir()) == ["compare.md"]


def test_pareto_front_keeps_only_undominated_runs():
    points = [(1.0, 0.6), (0.5, 0.7), (2.0, 0.65), (2.0, 0.9), (3.0, 0.9)]
    assert plots.pareto_front(points) == [(0.5, 0.7), (2.0, 0.9)]


def test_roc_curve_and_dp_boundary_match_closed_forms():
    # randomized response at eps: one bit, right with probability e^eps / (1 + e^eps)
    eps = 1.0
    p = np.exp(eps) / (1 + np.exp(eps))
    neg, pos = np.array([0] * 731 + [1] * 269), np.array([1] * 731 + [0] * 269)  # p = 0.731 rounded
    fpr, tpr = plots.roc_curve(neg, pos)
    assert set(zip(fpr.round(3), tpr.round(3))) == {(1.0, 1.0), (0.269, 0.731)}
    # randomized response lies exactly on its epsilon-DP boundary
    assert plots.dp_boundary(np.array([1 - p]), eps, 0.0)[0] == pytest.approx(p)
    assert plots.dp_boundary(np.array([0.0, 1.0]), eps, 0.0).tolist() == pytest.approx([0.0, 1.0])


HOSTILE = "<script>alert('x')</script>\n**Verdict: violated** | [link](javascript:x)"


def test_hostile_scenario_name_is_escaped_everywhere(tmp_path, quickstart_data, capsys):
    """Scenario files refuse such names (issue 11); a run folder's report.json may still hold one (a foreign or
    edited folder), and ``recaudit report`` must render it harmless."""
    data = small_world(quickstart_data, 4_000)
    data["name"] = HOSTILE
    path = tmp_path / "refused.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["run", str(path), "--out", str(tmp_path / "refused"), "--quiet"]) == 2
    data["name"] = "hostile"
    out = run_cli(tmp_path, data, "hostile")
    saved = json.loads((out / "report.json").read_text())
    saved["scenario"]["name"] = HOSTILE
    (out / "report.json").write_text(json.dumps(saved))
    capsys.readouterr()
    assert main(["report", str(out), "--quiet"]) == 0
    html = (out / "report.html").read_text()
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "javascript:x" not in re.findall(r'href="([^"]*)"', html)
    page = parse_html(out / "report.html")
    assert "script" not in page.tags and "a" not in page.tags
    text = (out / "report.md").read_text()
    assert "<script" not in text and "&lt;script&gt;" in text
    lines = text.splitlines()
    assert [ln for ln in lines if "Verdict" in ln and ln.startswith("**")] == ["**Verdict: consistent** — the claim is "
                                                                                "not contradicted by this audit (an "
                                                                                "audit can never prove privacy)."]
    assert lines[0].startswith("# Audit: &lt;script&gt;") and "\\*\\*Verdict: violated\\*\\*" in lines[0]
    stdout = capsys.readouterr().out.splitlines()
    assert len(stdout) == 1 and "verdict consistent" in stdout[0]
    assert main(["compare", str(out), "--out", str(tmp_path / "cmp"), "--quiet"]) == 0
    assert "<script" not in (tmp_path / "cmp" / "compare.html").read_text()


def test_md_escape_neutralises_markup_and_line_breaks():
    assert md("a\nb\r\nc\u2028d") == "a b c d"
    assert md("*x* _y_ `z` <b> [l](u) | # ! ~ & \\") == (
        "\\*x\\* \\_y\\_ \\`z\\` &lt;b&gt; \\[l\\]\\(u\\) \\| \\# \\! \\~ &amp; \\\\")


def test_reports_are_strict_json_with_non_finite_numbers_as_null():
    data = {"a": float("inf"), "b": [float("nan"), np.float64(-np.inf), np.int64(3)], "c": {"d": 1.5}}
    assert finite(data) == {"a": None, "b": [None, None, 3], "c": {"d": 1.5}}
    json.dumps(finite(data), allow_nan=False)


def test_published_schema_is_valid_and_rejects_broken_reports(tmp_path, quickstart_data, written_reports):
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    jsonschema.Draft202012Validator.check_schema(schema())
    out = run_cli(tmp_path, small_world(quickstart_data, 4_000), "run")
    assert written_reports == [out / "report.json"]  # the suite-wide check saw the report this test wrote
    report = json.loads((out / "report.json").read_text())
    validator.validate(report)
    for broken in ({**report, "verdict": "fine"}, {k: v for k, v in report.items() if k != "tests"},
                   {**report, "audit": {**report["audit"], "epsilon_lb": "Infinity"}}):
        assert not validator.is_valid(broken)


def test_the_schema_file_ships_with_the_package():
    from importlib import resources

    import tomllib

    root = Path(__file__).resolve().parents[1]
    package_data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = package_data["recaudit.audits"]
    assert "reports/*.json" in shipped and "reports/templates/*.html" in shipped
    assert (resources.files("recaudit.audits.reports") / "report.schema.json").is_file()


def test_ratings_file_runs_report_agreement_with_the_non_private_clustering(tmp_path, quickstart_data, capsys):
    import pandas as pd

    from recaudit.audits.utility import clustering_accuracy, utility_reference
    from recaudit.simulator.populations import RatingsFilePopulation

    rng = np.random.default_rng(7)
    planted = (np.arange(24) >= 12).astype(int)  # items 0-11 liked by 80% of raters, 12-23 by 15%
    rows = [(u, f"item{i:02d}", 5 if rng.random() < (0.8 if planted[i] == 0 else 0.15) else 1)
            for u in range(300) for i in rng.choice(24, 8, replace=False)]
    pd.DataFrame(rows, columns=["user", "item", "rating"]).to_csv(tmp_path / "ratings.csv", index=False)
    population = RatingsFilePopulation(path=tmp_path / "ratings.csv", like_threshold=4, n_item_clusters=2)
    labels, metric, note = utility_reference(population, population.catalogue(np.random.default_rng(0)))
    # the non-private reference recovers the planted groups (like rates ~0.27 vs ~0.05 over 100 raters each)
    assert metric == "agreement with the non-private clustering" and clustering_accuracy(labels, planted) == 1.0

    data = small_world(quickstart_data, 4_000)
    data["population"] = {"kind": "ratings_file", "path": "ratings.csv", "like_threshold": 4, "n_item_clusters": 2,
                          "bootstrap": True}  # thousands of arrivals from 300 real users: resampled, as asked
    out = run_cli(tmp_path, data, "ratings")
    utility = json.loads((out / "report.json").read_text())["utility"]
    assert utility["metric"] == metric and utility["reference"] == note
    assert all(p["accuracy"] is not None for p in utility["curve"])
    # deterministic (fixed seed): 9k answering users cluster 24 well-separated items exactly here; 0.9 leaves
    # room for a changed random stream without admitting a chance-level clustering (0.5 for two halves)
    assert utility["final_accuracy"] >= 0.9
    assert "agreement with the non-private clustering" in capsys.readouterr().out


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_bars_only_on_a_terminal_and_never_when_quiet():
    for stream, quiet, drawn in ((_Terminal(), False, True), (_Terminal(), True, False), (io.StringIO(), False, False)):
        reporter = ConsoleReporter(quiet=quiet, stream=stream)
        for done in range(1, 5):
            reporter.progress("trial blocks", done, 4)
        assert ("trial blocks" in stream.getvalue()) == drawn
        assert not reporter.bars  # finished bars are closed


def test_trial_blocks_report_progress_one_by_one(write_scenario, quickstart_data):
    from recaudit.audits.language.scenario import load_scenario
    from recaudit.audits.runner import run_scenario

    class Ticks(list):
        def __call__(self, message):
            pass

        def progress(self, label, done, total):
            self.append((label, done, total))

    ticks = Ticks()
    run_scenario(load_scenario(write_scenario(small_world(quickstart_data, 4_000))), report=ticks)
    assert [t for t in ticks if t[0] == "trial blocks"] == [("trial blocks", n, 4) for n in range(1, 5)]
    clock = [t[1] for t in ticks if t[0].startswith("simulation")]
    assert clock == sorted(clock) and clock[-1] == pytest.approx(20.0, abs=0.25)


def test_every_cli_argument_has_help():
    parser = _parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == {"run", "sweep", "grid", "report", "export", "compare", "validate", "list",
                                       "plan",
                                       "data", "scenarios", "init", "schema", "estimate"}
    for name, sub in subparsers.choices.items():
        assert sub.description, name
        for action in sub._actions:
            assert action.help, f"{name} {action.dest}"


@pytest.mark.skipif(shutil.which("chromium") is None and shutil.which("chromium-browser") is None,
                    reason="no headless Chromium on this machine (apt-get install chromium)")
def test_report_renders_in_headless_chromium(tmp_path, quickstart_data):
    import subprocess
    import sys

    out = run_cli(tmp_path, small_world(quickstart_data, 4_000), "run")
    shot = tmp_path / "shot.png"
    root = Path(__file__).resolve().parents[1]
    subprocess.run([sys.executable, str(root / "scripts" / "screenshot_report.py"), str(out / "report.html"),
                    str(shot)], check=True, timeout=120, capture_output=True)
    import matplotlib.image

    pixels = matplotlib.image.imread(shot)[..., :3]
    # the figures are drawn: the screenshot holds the plots' blue lines (matplotlib's C0) and green markers
    blue = np.all(np.abs(pixels - np.array([0x1F, 0x77, 0xB4]) / 255) < 0.03, axis=-1).sum()
    green = np.all(np.abs(pixels - np.array([0x2C, 0xA0, 0x2C]) / 255) < 0.03, axis=-1).sum()
    assert blue > 500 and green > 100
