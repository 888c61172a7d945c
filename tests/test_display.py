"""What people read: the command each shipped scenario needs, `run` refusing sweep and grid scenarios, numbers
rounded for display, tables without empty columns and without a horizontal scrollbar at 1400 px, and the
figures of reports and comparisons."""
from __future__ import annotations

import copy
import json
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from recaudit.audits.cli import main
from recaudit.audits.language.shipped import shipped_scenarios
from recaudit.audits.reports import run_figures
from recaudit.audits.reports.compare import write_comparison
from recaudit.audits.reports.report import figure, report_page
from tests.conftest import SCENARIOS, small_world

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
from screenshot_report import find_browser


def test_scenarios_names_the_command_each_scenario_needs(capsys):
    assert main(["scenarios"]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert set(lines) == set(shipped_scenarios())
    for name, command in [("quickstart", "run"), ("scaling-regimes", "sweep"), ("scaling-maxsense", "sweep"),
                          ("matrix-completion-rmse-vs-epsilon", "grid"), ("studies/sp2-table2-movielens-100k", "run")]:
        assert lines[name].split()[1:3] == ["recaudit", command], lines[name]
    assert "a study:" in lines["studies/sp2-table2-movielens-100k"] and "a study" not in lines["quickstart"]
    assert all(line.split()[2] in ("run", "sweep", "grid") for line in lines.values())


@pytest.mark.parametrize("given, name, command", [("run", "scaling-regimes", "sweep"),
                                                 ("run", "matrix-completion-rmse-vs-epsilon", "grid"),
                                                 ("grid", "scaling-regimes", "sweep"),
                                                 ("sweep", "matrix-completion-rmse-vs-epsilon", "grid")])
def test_a_sweep_or_grid_scenario_under_another_command_is_refused_naming_its_own(tmp_path, capsys, given, name,
                                                                                  command):
    out = tmp_path / "out"
    assert main([given, name, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"'recaudit {command} {name}'" in err[0], err
    assert not out.exists()  # refused before any work


# ---------------------------------------------------------------- tables that fit 1400 px without a scrollbar

class _Tables(HTMLParser):
    """Every <table> of a page: its class and its rows of cells; a cell is its text (<wbr> read as a space) and
    whether it is a header cell."""

    def __init__(self):
        super().__init__()
        self.tables, self.cell = [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"class": dict(attrs).get("class", ""), "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th") and self.tables:
            self.cell = {"header": tag == "th", "text": "", "nowrap": "nowrap" in (dict(attrs).get("class") or "")}
            self.tables[-1]["rows"][-1].append(self.cell)
        elif tag == "wbr" and self.cell is not None:
            self.cell["text"] += " "

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell["text"] += data


def _em(css: str, selector: str, prop: str, index: int = 0) -> float:
    """The ``index``-th ``em`` length of ``prop`` in the stylesheet rule of ``selector``."""
    rule = re.search(r"(?m)^" + re.escape(selector) + r"\s*\{([^}]*)\}", css).group(1)
    return float(re.findall(r"([\d.]+)em", re.search(prop + r"\s*:([^;]*);", rule).group(1))[index])


def content_width(html: str) -> float:
    """The width the page gives its content in pixels (the body's max-width at the default 16 px font)."""
    return 16 * _em(html, "body", "max-width")


def table_min_widths(html: str) -> list[float]:
    """An upper estimate of each table's narrowest layout in pixels with no word broken: per column its widest
    unbreakable piece (text cut at spaces, after hyphens and at <wbr>; a nowrap cell whole) at 0.62 em a
    character (0.7 em in bold headers; DejaVu Sans' widest lowercase letters and digits are 0.61–0.64 em), plus
    padding and border. Against Chromium's own min-content widths it came out 6-14 % above them."""
    parser = _Tables()
    parser.feed(html)
    base = 16 * _em(html, "table", "font-size")
    pad = _em(html, "th, td", "padding", 1)
    widths = []
    for table in parser.tables:
        font = base * (_em(html, "table.wide", "font-size") if "wide" in table["class"] else 1.0)
        columns: dict[int, float] = {}
        for row in table["rows"]:
            for i, cell in enumerate(row):
                text = cell["text"].strip()
                chars = len(text) if cell["nowrap"] else max(map(len, re.split(r"\s+|(?<=-)", text)))
                em = 0.7 if cell["header"] else 0.62
                columns[i] = max(columns.get(i, 0.0), (chars * em + 2 * pad) * font + 1)
        widths.append(sum(columns.values()) + 1)
    return widths


@pytest.fixture(scope="module")
def six_tests(tmp_path_factory) -> tuple[Path, dict]:
    """A real run of six tests (three targets × two attacks, about a second): its folder and report.json."""
    data = small_world(yaml.safe_load((SCENARIOS / "quickstart.yaml").read_text()), 4_000)
    data["name"], data["audit"]["targets"] = "six-tests", 3
    data["attack"] = [{"kind": "likelihood_ratio"}, {"kind": "histogram"}]
    folder = tmp_path_factory.mktemp("six")
    (folder / "six.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["run", str(folder / "six.yaml"), "--out", str(folder / "run"), "--quiet"]) == 0
    report = json.loads((folder / "run" / "report.json").read_text())
    assert len(report["tests"]) == 6
    return folder / "run", report


def longest(registry, count: int) -> list[str]:
    return sorted(registry, key=len, reverse=True)[:count]


def widest_six_test_page(report: dict) -> str:
    """The six-test report with the widest cells a report can hold: test names of the longest registered attack
    kinds, a bound at its ceiling, an uninformative test, a p-value at the floor; with its ε_LB figure."""
    from recaudit.attacks import ATTACKS

    report = copy.deepcopy(report)
    for i, (test, attack) in enumerate(zip(report["tests"], longest(ATTACKS, 6))):
        test["name"] = f"target {i // 2} / {attack}"
    report["tests"][1]["epsilon_lb"] = report["tests"][1]["ceiling"]
    report["tests"][2]["uninformative"] = True
    report["tests"][3]["p_value"] = 1e-300
    figures = report_figures_without_scores(report)
    return report_page(report, figures)


def report_figures_without_scores(report: dict) -> list[dict]:
    """A report's figures that need no trial scores (the ROC curves do): ε_LB per test and the world."""
    rows = [{"label": t["name"], "claim": t["claim"]["epsilon"], "epsilon_lb": t["epsilon_lb"], "ceiling": t["ceiling"],
             "confidence": t["confidence"], "verdict": t["verdict"]} for t in report["tests"]]
    return [figure("ε lower bounds against the claim", run_figures.epsilon_figure(rows, "ε_LB per test"), ""),
            figure("The world over time", run_figures.timeline_figure(report["world"], report["utility"]), "")]


def fake_runs(folder: Path, report: dict, count: int, edit=None) -> tuple[list[Path], list[str]]:
    """``count`` run folders holding copies of ``report`` (compare reads only report.json): mechanisms of the
    longest registered kinds at four ε each, named as `recaudit run` names folders (runs/<scenario>);
    ``edit(i, report)`` changes the i-th."""
    from recaudit.mechanisms import MECHANISMS

    kinds = longest(MECHANISMS, (count + 3) // 4)
    dirs, labels = [], []
    for i in range(count):
        r = copy.deepcopy(report)
        kind, eps = kinds[i // 4], (0.25, 0.5, 1.0, 2.0)[i % 4]
        r["scenario"]["name"] = f"{kind}-eps{eps:g}"
        r["scenario"]["mechanism"] = {"kind": kind, "epsilon": eps}
        r["claim"]["epsilon"] = eps
        if edit:
            edit(i, r)
        d = folder / "runs" / r["scenario"]["name"]
        d.mkdir(parents=True)
        (d / "report.json").write_text(json.dumps(r))
        dirs.append(d)
        labels.append(f"runs/{r['scenario']['name']}")
    return dirs, labels


def _widest(i: int, r: dict) -> None:
    """Every kind of wide cell a comparison can hold: at the ceiling, uninformative, violated, utility and RMSE."""
    audit = r["audit"]
    if i % 5 == 0:
        audit["epsilon_lb"] = audit["ceiling"]
    if i % 7 == 3:
        audit["uninformative"] = True
    if i % 3 == 1:
        r["verdict"] = "violated"
    if i % 2:
        r["utility"] |= {"rmse": 0.2 + i / 100, "zero_rmse": 0.9}


@pytest.fixture(scope="module")
def sixteen_runs(six_tests, tmp_path_factory) -> Path:
    """compare.html of sixteen runs with the widest cells a comparison can hold."""
    folder = tmp_path_factory.mktemp("sixteen")
    dirs, labels = fake_runs(folder, six_tests[1], 16, _widest)
    write_comparison(dirs, folder / "cmp", labels)
    return folder / "cmp" / "compare.html"


def test_six_test_report_and_sixteen_run_comparison_fit_1400_px_without_breaking_a_word(six_tests, sixteen_runs):
    """Estimated from the stylesheet and the cells, no browser: every table's narrowest layout that breaks no
    word fits the page's content width at 1400 px (body max-width, inside 1400 px less its padding and a
    scrollbar), so nothing scrolls sideways; identifiers (names, kinds, paths) offer breaks after _ and /."""
    for html in (widest_six_test_page(six_tests[1]), sixteen_runs.read_text()):
        room = content_width(html)
        assert room <= 1400 - 2 * 16 - 15
        widths = table_min_widths(html)
        assert len(widths) >= 1 and max(widths) <= room, (widths, room)
    page = widest_six_test_page(six_tests[1])
    assert "differencing_<wbr>noise_<wbr>aware" in page  # the widest attack name wraps at its underscores


MEASURE = """<script>(function () {
  var overflow = 0, right = 0;
  document.querySelectorAll("*").forEach(function (el) {
    if (getComputedStyle(el).overflowX !== "visible") overflow = Math.max(overflow, el.scrollWidth - el.clientWidth);
  });
  document.querySelectorAll("td, th").forEach(function (c) {
    right = Math.max(right, c.getBoundingClientRect().right);
  });
  document.body.setAttribute("data-measure", JSON.stringify({scroll: document.documentElement.scrollWidth,
                             overflow: overflow, right: right, inner: window.innerWidth}));
})();</script>"""


@pytest.mark.skipif(find_browser() is None, reason="no headless Chromium on this machine (apt-get install chromium)")
def test_in_chromium_at_1400_px_nothing_scrolls_sideways(six_tests, sixteen_runs, tmp_path):
    """Laid out by headless Chromium at 1400 × 1000: the page is no wider than the window, no table (or other
    element) scrolls inside itself, and every cell (the verdict column included) ends inside the window."""
    import subprocess
    import tempfile

    for name, html in (("report", widest_six_test_page(six_tests[1])), ("compare", sixteen_runs.read_text())):
        page = tmp_path / f"{name}.html"
        page.write_text(html.replace("</body>", MEASURE + "</body>"))
        with tempfile.TemporaryDirectory() as profile:
            dom = subprocess.run([find_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                  f"--user-data-dir={profile}", "--window-size=1400,1000", "--dump-dom",
                                  page.as_uri()], capture_output=True, text=True, timeout=120, check=False).stdout
        found = re.search(r'data-measure="([^"]*)"', dom)
        assert found, dom[-500:]
        m = json.loads(found.group(1).replace("&quot;", '"'))
        assert m["inner"] == 1400 and m["scroll"] <= 1400 and m["overflow"] <= 0 and m["right"] <= 1400, (name, m)


# ---------------------------------------------------------------- numbers, columns and figures

def test_claims_and_p_values_print_rounded_while_json_keeps_every_digit(six_tests, tmp_path):
    from recaudit.audits.reports.report_text import (
        report_markdown,
        summary_line,
        verdict_sentence,
    )
    from recaudit.mechanisms import MECHANISMS

    accounted = MECHANISMS["mcsherry_mironov"](epsilon=2.0, noise="laplace").claim.epsilon  # the accountant's
    assert f"{accounted:g}" == "2.00002"  # what the reports used to print
    report = copy.deepcopy(six_tests[1])
    for claim in [report["claim"]] + [t["claim"] for t in report["tests"]]:
        claim["epsilon"] = accounted
    report["tests"][0]["p_value"], report["tests"][0]["holm_adjusted_p_value"] = 1e-300, 6e-300  # at the floor
    report["summary"] = verdict_sentence(report)
    markdown, page, line = report_markdown(report), report_page(report, []), summary_line(report)
    for text in (report["summary"], line, markdown, page):
        assert "2.00002" not in text and "e-300" not in text
    assert "claims ε = 2 local DP" in report["summary"] and "claim ε=2 (δ=0)" in line
    assert "claim (2, 0)-DP" in markdown and "| < 1e-10 | < 1e-10 |" in markdown
    assert '<td class="num nowrap">&lt; 1e-10</td>' in page and "(2, 0)-DP" in page
    dirs, labels = fake_runs(tmp_path, report, 1, lambda i, r: r["claim"].update(epsilon=accounted))
    rows = write_comparison(dirs, tmp_path / "cmp", labels)
    assert "| 2 |" in (tmp_path / "cmp" / "compare.md").read_text()
    saved = json.loads((tmp_path / "cmp" / "compare.json").read_text())["runs"][0]["claim"]
    assert saved == accounted == rows[0]["claim"]  # the JSON keeps every digit


def _header(markdown: str) -> list[str]:
    line = next(line for line in markdown.splitlines() if line.startswith("| run |"))
    return [cell.strip() for cell in line.strip("|").split("|")]


def _html_headers(html: str) -> list[str]:
    return [h["text"] for h in next(t for t in parse_tables(html) if t["rows"][0][0]["text"] == "run")["rows"][0]]


def parse_tables(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def test_a_column_empty_in_every_row_is_left_out_of_markdown_and_html(six_tests, tmp_path):
    """A grid's runs have a held-out RMSE and no clustering utility: no utility column of n/a beside RMSE."""
    def grid_like(i, r):
        r["utility"] |= {"final_accuracy": None, "rmse": 0.3 + i / 10, "curve": []}

    dirs, labels = fake_runs(tmp_path / "grid", six_tests[1], 3, grid_like)
    write_comparison(dirs, tmp_path / "grid" / "cmp", labels)
    markdown, html = ((tmp_path / "grid" / "cmp" / f"compare.{ext}").read_text() for ext in ("md", "html"))
    for header in (_header(markdown), _html_headers(html)):
        assert "utility" not in header and "held-out RMSE" in header and "ε_LB" in header and "verdict" in header
    rows = [line for line in markdown.splitlines() if line.startswith("| runs/")]
    assert len(rows) == 3 and all(len(r.strip("|").split("|")) == len(_header(markdown)) for r in rows)
    dirs, labels = fake_runs(tmp_path / "clusters", six_tests[1], 2)  # clustering runs: utility, no RMSE
    write_comparison(dirs, tmp_path / "clusters" / "cmp", labels)
    header = _header((tmp_path / "clusters" / "cmp" / "compare.md").read_text())
    assert "utility" in header and "held-out RMSE" not in header


def test_sweep_html_names_the_mechanism_of_every_fit_as_sweep_md_does():
    from recaudit.audits.reports.report import render_html

    fits = [{"parameter": "mechanism.epsilon", "values": [1, 2], "slope": s, "ci_low": s - 0.1, "ci_high": s + 0.1,
             "theory_slope": -1.0, "theory_in_ci": True, "censored": 0, "mechanism": m}
            for m, s in (("maxsense", -0.9), ("multi_maxsense", -1.1))]
    report = {"scenario": {"name": "sw", "mechanism": {"kind": "maxsense"}}, "grid": "default", "definition": "U*",
              "mechanisms": ["maxsense", "multi_maxsense"], "fits": fits}
    table = parse_tables(render_html("sweep.html", report=report, figures=[]))[0]["rows"]
    assert table[0][0]["text"] == "mechanism"
    assert [(r[0]["text"].replace("_ ", "_"), r[1]["text"]) for r in table[1:]] == [
        ("maxsense", "mechanism.epsilon"), ("multi_maxsense", "mechanism.epsilon")]  # (<wbr> read as a space)


def test_the_frontier_names_the_runs_it_cannot_place(six_tests, tmp_path):
    def edit(i, r):
        if i == 2:
            r["utility"] |= {"final_accuracy": None}
        if i == 3:
            r["claim"]["epsilon"], r["verdict"] = None, "no_claim"

    dirs, labels = fake_runs(tmp_path, six_tests[1], 4, edit)
    rows = write_comparison(dirs, tmp_path / "cmp", labels)
    html = (tmp_path / "cmp" / "compare.html").read_text()
    caption = re.search(r"<strong>Privacy–utility frontier\.</strong>([^<]*)</figcaption>", html).group(1)
    assert (f"Not drawn: {rows[2]['scenario']}: no utility at the last release; {rows[3]['scenario']}: claims no ε"
            in caption), caption
    caption = re.search(r"<strong>ε lower bounds against the claims\.</strong>([^<]*)</figcaption>", html).group(1)
    assert f"Not drawn: {rows[3]['scenario']} (claims no ε)." in caption, caption


def _svg(html: str, title: str):
    import base64
    from xml.etree import ElementTree

    src = re.search(r'<img src="data:image/svg\+xml;base64,([^"]+)" alt="' + re.escape(title) + '"', html).group(1)
    return ElementTree.fromstring(base64.b64decode(src))


def test_the_epsilon_figure_gives_every_run_its_own_labelled_row(six_tests, tmp_path):
    """Sixteen runs all claiming ε = 1 used to sit on one vertical line at x = 1: each is now a row."""
    def at_one(i, r):
        r["claim"]["epsilon"] = 1.0

    dirs, labels = fake_runs(tmp_path, six_tests[1], 16, at_one)
    rows = write_comparison(dirs, tmp_path / "cmp", labels)
    svg = _svg((tmp_path / "cmp" / "compare.html").read_text(), "ε lower bounds against the claims")
    ns = "{http://www.w3.org/2000/svg}"
    dots = sorted(float(c.get("cy")) for c in svg.iter(f"{ns}circle"))[:-1]  # the last: the legend's dot
    assert len(dots) == 16 and len(set(dots)) == 16  # sixteen rows, one dot each
    texts = {t.text: float(t.get("y")) for t in svg.iter(f"{ns}text")}
    for r, y in zip(rows, dots):
        assert abs(texts[r["scenario"]] - 4 - y) < 1, r["scenario"]  # each row labelled with its run


def test_the_epsilon_figure_is_as_tall_as_its_rows():
    """One test is one short row, not a 420-pixel square that is mostly empty."""
    def height(n: int) -> float:
        rows = [{"label": f"target {i} / likelihood_ratio", "claim": 1.0, "epsilon_lb": 0.8, "ceiling": 5.0,
                 "confidence": 0.95, "verdict": "consistent"} for i in range(n)]
        from xml.etree import ElementTree

        return float(ElementTree.fromstring(run_figures.epsilon_figure(rows, "ε_LB per test")).get("height"))

    assert height(1) <= 160 and height(6) - height(1) == 5 * run_figures.ROW


def test_every_claim_and_bound_lies_inside_the_epsilon_figure():
    """A grid's runs at ε = 4 whose ceilings are under 3: their claims were drawn beyond the axis."""
    from xml.etree import ElementTree

    rows = [{"label": f"run {eps:g}", "claim": eps, "epsilon_lb": lb, "ceiling": 2.8, "confidence": 0.95,
             "verdict": "consistent"} for eps, lb in ((1.0, 0.0), (4.0, 0.3))]
    svg = ElementTree.fromstring(run_figures.epsilon_figure(rows, "ε_LB across runs"))
    ns = "{http://www.w3.org/2000/svg}"
    frame = next(r for r in svg.iter(f"{ns}rect") if r.get("fill") == "none")
    left, right = float(frame.get("x")), float(frame.get("x")) + float(frame.get("width"))
    ticks = [float(line.get("x1")) for line in svg.iter(f"{ns}line") if line.get("stroke-width") == "2"
             and line.get("x1") == line.get("x2")][:2]  # the two rows' claim ticks (the legend's comes last)
    dots = [float(c.get("cx")) for c in svg.iter(f"{ns}circle")][:2]
    assert len(ticks) == 2 and all(left <= x < right for x in ticks + dots), (ticks, dots, left, right)
    assert ticks[1] == pytest.approx(left + (ticks[0] - left) * 4, abs=0.5)  # linear from 0 (drawn to 0.1 px)
