"""Issue 21: a valid scenario with extreme values is refused within seconds or finishes within 3x its estimate.

Each document is a shipped scenario (every shipped mechanism kind; not the sweeps, grids or fetched data
sets) with its sizes drawn over orders of magnitude: items, users, arrivals, horizon, a panel's cohort,
trials, block size and ε. A tight ``limits.hours`` keeps what may run short; the estimate then decides,
and the property is that it never lets through a run that takes more than three times what it said.
The run is serial and in this process, so its CPU time (``time.process_time``: the machine may be shared)
is the whole of it. The default version draws a few documents; ``-m slow`` draws many, with a longer limit.
"""
from __future__ import annotations

import time

import pytest
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from recaudit.audits.cli import main
from tests.conftest import SCENARIOS, scenario_text, write_text

SHIPPED = {path.stem: yaml.safe_load(path.read_text()) for path in sorted(SCENARIOS.glob("*.yaml"))}
RUNNABLE = sorted(name for name, data in SHIPPED.items()  # (a trainer's cost is its user's code: no estimate)
                  if not {"sweep", "grid"} & set(data) and "dataset" not in data["population"]
                  and data["mechanism"]["kind"] != "trainer")
#: size factors: down to a hundredth (two items, one user, ten trials) and up to 10^4; the fast version's go
#: down only (most documents going up are refused by a limit, and a few documents should run)
SCALES, SMALL = [0.01, 0.1, 1.0, 1.0, 10.0, 100.0, 1e4], [0.01, 0.1, 1.0]


@st.composite
def extreme_scenarios(draw, hours: float, scales: list[float]) -> dict:
    """A shipped scenario with each size scaled by a factor drawn from ``scales`` (ints stay ints)."""
    name = draw(st.sampled_from(RUNNABLE))
    data = yaml.safe_load(yaml.safe_dump(SHIPPED[name]))

    def scaled(section: dict, key: str, low: float = 1):
        if isinstance(section.get(key), (int, float)) and not isinstance(section[key], bool):
            value = max(low, section[key] * draw(st.sampled_from(scales)))
            section[key] = max(1, round(value)) if isinstance(section[key], int) else value

    pop = data["population"]
    for key in ("n_items", "n_users"):
        scaled(pop, key, 2)
    if "ratings_per_user" in pop and "n_items" in pop:
        pop["ratings_per_user"] = max(1, min(pop["ratings_per_user"], pop["n_items"] // 2))
    if "churn" in data:
        churn = data["churn"]
        scaled(churn, "arrival_rate", 0.1)
        scaled(churn, "horizon", 0.1)
        churn["query_interval"] = min(churn.get("query_interval", 1.0), churn["horizon"])
        churn["release_interval"] = min(churn.get("release_interval", 1.0), churn["horizon"])
    if data.get("panel"):
        scaled(data["panel"], "n_users", 2)
    audit = data["audit"]
    scaled(audit, "trials", 10)
    audit["block_size"] = min(audit["trials"], draw(st.sampled_from([1, 100, 10_000, audit["trials"]])))
    if "epsilon" in data["mechanism"]:
        data["mechanism"]["epsilon"] = draw(st.sampled_from([1e-12, 1e-3, 1.0, 50.0, 700.0]))
    data.pop("executor", None)  # serial: the whole run's CPU time is this process's
    data["limits"] = {"hours": hours}
    return data


def refused_or_within_three_estimates(data: dict, tmp_path, capsys) -> bool:
    """Whether ``data`` ran (else it was refused); fails if it was refused slowly or ran over 3x its estimate."""
    from recaudit.audits.language.limits import estimate_cost
    from recaudit.audits.language.scenario import build, load_scenario
    from recaudit.mechanisms import MECHANISMS

    folder = tmp_path / f"x{time.monotonic_ns()}"  # hypothesis reuses tmp_path between examples
    folder.mkdir()
    path = write_text(folder, scenario_text(data))
    started = time.process_time()
    code = main(["validate", str(path)])
    if not refused_in_seconds(code, started, capsys, path):
        scenario = load_scenario(path)
        estimate = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS))["seconds"]
        started = time.process_time()
        code = main(["run", str(path), "--out", str(folder / "out"), "--quiet"])
        if not refused_in_seconds(code, started, capsys, path):  # a pair that can show nothing, say
            seconds = time.process_time() - started
            assert code in (0, 1), capsys.readouterr().err
            assert seconds <= 3 * estimate, f"{data['name']}: {seconds:.1f} s of CPU, estimated {estimate:.1f} s"
            return True
    return False


def refused_in_seconds(code: int, started: float, capsys, path) -> bool:
    """Whether the command refused the scenario (exit 2); if so, under 10 s of CPU, in lines naming the file."""
    err = capsys.readouterr().err
    assert code in (0, 1, 2), err
    if code == 2:
        assert time.process_time() - started < 10, err
        assert err and all(line.startswith(f"{path}:") for line in err.splitlines()), err  # one line per field
    return code == 2


SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@settings(max_examples=8, **SETTINGS)
@given(extreme_scenarios(hours=20 / 3600, scales=SMALL))
def test_an_extreme_scenario_is_refused_or_runs_within_three_estimates(tmp_path, capsys, data):
    refused_or_within_three_estimates(data, tmp_path, capsys)


@pytest.mark.slow
def test_many_extreme_scenarios_are_refused_or_run_within_three_estimates(tmp_path, capsys):
    ran = []

    @settings(max_examples=80, phases=[Phase.generate], **SETTINGS)  # no shrinking: each example may run minutes
    @given(extreme_scenarios(hours=120 / 3600, scales=SCALES))
    def each(data):
        ran.append(refused_or_within_three_estimates(data, tmp_path, capsys))

    each()
    # most documents are refused by design (sizes up to 10^4 x); if fewer than 10 of 80 ran, the estimate's
    # side of the property would hardly have been tested
    assert sum(ran) >= 10, f"only {sum(ran)} of {len(ran)} documents ran"
