"""The ``recaudit`` command line: run, sweep, grid, report, export, compare, validate, scenarios, init, schema, list,
plan, data, estimate.

Results go to stdout; what is happening goes to stderr through ``logging``
(logger ``recaudit``) and, on a terminal, tqdm progress bars — both silent
under ``--quiet``.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from recaudit.core.errors import BadInput

from . import data_command, estimate_command
from .executors import EXIT_INTERRUPTED, EXIT_TERMINATED, MAX_WORKERS, on_terminate, terminated
from .info_commands import (EXIT_BAD_INPUT, EXIT_INTERNAL, EXIT_OK, EXIT_VIOLATED, _cmd_init, _cmd_list,  # noqa: F401
                            _cmd_scenarios, _cmd_schema, _cmd_validate, _version)
from .reports.report import summary_line
from .language.shipped import resolve
from .progress_log import PROGRESS_EVERY, ConsoleReporter, beating  # noqa: F401  (ConsoleReporter: the CLI's)
from .store import hold_folder
from .language.studies import StudyScenario
from .language.yamlio import ScenarioError, one_line

EXECUTORS = ["serial", "processes", "dask"]
#: a scenario to copy the block a command needs from
EXAMPLES = {"sweep": "scaling-maxsense.yaml", "grid": "matrix-completion-rmse-vs-epsilon.yaml"}
log = logging.getLogger("recaudit")


def _setup_logging(quiet: bool) -> None:
    log.handlers.clear()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[recaudit] %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.WARNING if quiet else logging.INFO)
    log.propagate = False


def _add_run_options(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("scenario", type=Path, help="a scenario YAML file, or the name of a shipped scenario "
                                                "(`recaudit scenarios` lists them)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="report folder (default: runs/<scenario name>); finished work is saved under it")
    p.add_argument("--executor", choices=EXECUTORS,
                   help=f"where {what} run, overriding the scenario's executor.type (results do not depend on it)")
    p.add_argument("--workers", type=int, metavar="N", help="workers for the processes / dask executors (>= 1)")
    p.add_argument("--resume", action="store_true",
                   help=f"reuse the finished {what} saved in --out (refused if they belong to another scenario)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bars or log messages on stderr (bars also stay off when stderr is not a "
                        "terminal)")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="recaudit", description="Simulate private recommenders and audit their privacy claims.",
        epilog="Exit codes: 0 done, 1 verdict 'violated' (with --fail-on-violation), 2 bad input (nothing run), "
               "3 internal error (never a verdict), 130 interrupted (Ctrl-C), 143 terminated (SIGTERM).")
    parser.add_argument("--version", action="version", version=f"recaudit {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="simulate a scenario, audit its privacy claim, write reports",
                         description="Simulate the scenario's world, audit the mechanism's claim and write "
                                     "report.json, report.md, report.html and accuracy.svg; every attack score "
                                     "is kept in the folder's score store (progress/).")
    _add_run_options(run, "trial blocks")
    run.add_argument("--csv", action="store_true",
                     help="also write trials.csv, every trial's score as text (large; `recaudit export` "
                          "writes it later)")
    run.add_argument("--fail-on-violation", action="store_true", help="exit 1 when the verdict is 'violated'")
    sw = sub.add_parser("sweep", help="measure users needed for accurate clustering over the scenario's sweep grid",
                        description="Run the scenario's sweep: block and write sweep.json, sweep.md, sweep.html, "
                                    "sweep_points.csv and scaling.png.")
    _add_run_options(sw, "sweep runs")
    sw.add_argument("--full", action="store_true", help="use each axis's full_values grid (hours) instead of values")
    grid = sub.add_parser("grid", help="run the scenario's grid: every mechanism at every ε, then compare them",
                          description="Run every point of the scenario's grid (the mechanism and grid.compare at "
                                      "each of grid.epsilons, grid.reference once) as an ordinary run into "
                                      "DIR/<kind>-eps<ε>/ (DIR/<kind>/), then write the comparison in DIR: "
                                      "compare.json, compare.md, compare.html (held-out RMSE and ε_LB against ε).")
    _add_run_options(grid, "points (and their trial blocks)")
    rep = sub.add_parser("report", help="rebuild every report of run folders without rerunning",
                         description="Rebuild the reports of run folders from what they hold: report.json and "
                                     "the score store (tests re-estimated from the saved scores) and/or "
                                     "sweep.json.")
    rep.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                     help="a folder written by `recaudit run` or `recaudit sweep`")
    rep.add_argument("--quiet", action="store_true", help="no log messages on stderr")
    exp = sub.add_parser("export", help="write trials.csv (every trial's score) of run folders",
                         description="Write RUN_DIR/trials.csv from the folder's score store: one row per trial "
                                     "(test, trial, world — member for a one-run audit's canaries —, part, score).")
    exp.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="folders written by `recaudit run`")
    exp.add_argument("--quiet", action="store_true", help="no log messages on stderr")
    cmp = sub.add_parser("compare", help="tabulate and plot runs side by side",
                         description="Tabulate and plot audit runs side by side: compare.json, compare.md and "
                                     "compare.html (ε_LB against the claimed ε, the privacy–utility frontier).")
    cmp.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR", help="folders written by `recaudit run`")
    cmp.add_argument("--out", type=Path, metavar="DIR", default=Path("runs/compare"),
                     help="folder for the comparison (default: runs/compare)")
    cmp.add_argument("--quiet", action="store_true", help="no log messages on stderr")
    val = sub.add_parser("validate", help="check scenario files and report every problem",
                         description="Check scenario files without running them; every problem is printed as "
                                     "file:line: path: message.")
    val.add_argument("scenarios", type=Path, nargs="+", metavar="SCENARIO", help="scenario YAML files")
    sub.add_parser("scenarios", help="list the shipped scenarios (run one by name: recaudit run quickstart)",
                   description="The scenarios shipped with recaudit, each with the command that runs it (run, "
                               "sweep or grid; a study runs with run) and its description; `recaudit run NAME` "
                               "runs one from any folder, `recaudit init NAME` copies it out to edit.")
    init = sub.add_parser("init", help="copy a shipped scenario (and the scenario JSON Schema) out, to edit",
                          description="Write the shipped scenario NAME to NAME.yaml (or --out), with a first line "
                                      "pointing editors at scenario.schema.json, written beside it.")
    init.add_argument("name", help="a shipped scenario (see `recaudit scenarios`)")
    init.add_argument("--out", type=Path, metavar="FILE", help="where to write it (default: ./NAME.yaml)")
    schema = sub.add_parser("schema", help="print the JSON Schema of scenario files (editors complete with it)",
                            description="The JSON Schema of scenario files, generated from the installed "
                                        "recaudit (its mechanisms, populations and attacks).")
    schema.add_argument("--out", type=Path, metavar="FILE", help="write it to FILE instead of stdout")
    sub.add_parser("list", help="name the registered populations, mechanisms, attacks, designs and estimators",
                   description="Name every registered population, mechanism, attack, audit design and estimator.")
    data_command.add_parser(sub)
    plan = sub.add_parser("plan", help="trials per world needed to show a true epsilon against a claim",
                          description="Trials per world an audit needs to show a mechanism's true epsilon "
                                      "against its claim with the given power, and the ceiling at that size.")
    plan.add_argument("--true-epsilon", type=float, required=True, help="the epsilon the mechanism really has")
    plan.add_argument("--claimed-epsilon", type=float, required=True, help="the epsilon it claims")
    plan.add_argument("--delta", type=float, default=0.0, help="the claim's delta (default 0)")
    plan.add_argument("--alpha", type=float, default=1e-3, help="1 - confidence of the bound (default 1e-3)")
    plan.add_argument("--power", type=float, default=0.9, help="wanted chance of showing the violation")
    plan.add_argument("--shape", choices=["pure", "gaussian"], default="pure",
                      help="trade-off curve of the true mechanism (pure: tightest eps-DP; gaussian: mu-GDP)")
    estimate_command.add_parser(sub)
    return parser


def _cmd_plan(args: argparse.Namespace) -> int:
    from .stats.planning import plan_trials

    try:
        p = plan_trials(args.true_epsilon, args.claimed_epsilon, args.alpha, args.power, args.delta, args.shape)
    except ValueError as exc:
        print(f"recaudit plan: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{p.trials} trials per world ({p.evaluation_runs} counted) show true eps = {p.true_epsilon:g} against "
          f"claimed eps = {p.claimed_epsilon:g} (delta = {p.delta:g}) with power {p.power:.3f} at alpha = {p.alpha:g}")
    print(f"  best test on the {p.shape} curve: FPR = {p.fpr:.4g}, FNR = {p.fnr:.4g}; ceiling at that size "
          f"{p.ceiling:.3f}")
    print(f"  below {p.trials_for_ceiling} trials per world the ceiling is under the claim: no audit can show it")
    print("  assumes an attack reaching the curve; a learned attack also needs its fitting runs")
    return EXIT_OK


def _load(args: argparse.Namespace):
    from .language.scenario import command_problems, load_scenario

    given = args.scenario
    try:
        args.scenario = resolve(args.scenario)
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return None
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        print(f"--workers: must be between 1 and {MAX_WORKERS}", file=sys.stderr)
        return None
    if isinstance(scenario, StudyScenario):
        if args.command != "run":
            print(f"{args.scenario}: study: a study scenario runs with 'recaudit run' (its study iterates by "
                  f"itself)", file=sys.stderr)
            return None
        return scenario
    needs = "sweep" if scenario.sweep is not None else "grid" if scenario.grid is not None else "run"
    if needs != args.command:  # `run` would audit a sweep's or grid's base point only, and say nothing
        print(one_line(f"{given}: {needs}: a {needs} scenario runs with 'recaudit {needs} {given}'" if needs != "run"
                       else f"{given}: {args.command}: required for 'recaudit {args.command}' (see "
                            f"scenarios/{EXAMPLES[args.command]})"), file=sys.stderr)
        return None
    if args.executor or args.workers or getattr(args, "full", False):  # the scenario as written was checked
        flags = " ".join(f for f, on in (("--executor", args.executor), ("--workers", args.workers),
                                         ("--full", getattr(args, "full", False))) if on)
        for field, message in command_problems(scenario, args.command, args.executor, args.workers,
                                               getattr(args, "full", False))[:1]:
            print(one_line(f"{args.scenario}: {field} (with {flags}): {message}"), file=sys.stderr)
            return None
    return scenario


def _announce_cost(scenario, args: argparse.Namespace) -> None:
    """Log the estimated time first, before any work (however short): of one run (``recaudit run``), of every
    point of a grid one after another (``grid``), or of every learning curve (``sweep``)."""
    from recaudit.mechanisms import MECHANISMS

    from .language.limits import estimate_cost, grid_cost, sweep_cost
    from .language.scenario import Scenario, build, grid_points

    executor, workers = getattr(args, "executor", None), getattr(args, "workers", None)
    if args.command == "sweep":
        cost = sweep_cost(scenario, build(scenario.mechanism, MECHANISMS), getattr(args, "full", False), executor,
                          workers)
        detail = f"{cost['curves']:.0f} learning curves of up to {_duration(cost['curve_seconds'])} each"
    elif args.command == "grid":
        base = getattr(scenario, "_base_dir", None)
        points = [Scenario.model_validate(p.data, context={"base_dir": base}) for p in grid_points(scenario)]
        cost = grid_cost([estimate_cost(p, build(p.mechanism, MECHANISMS), executor, workers, base_dir=base)
                          for p in points])
        detail = f"{len(points)} runs, one after another"
    else:
        cost = estimate_cost(scenario, build(scenario.mechanism, MECHANISMS), executor, workers)
        detail = f"world {_duration(cost['world_seconds'])}, audit {_duration(cost['audit_seconds'])}"
    log.info("estimated %s on 2 cores (%s); progress every %.0f s", _duration(cost["seconds"]), detail,
             PROGRESS_EVERY)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 \
        else f"{seconds / 3600:.1f} h"


def _cmd_run(args: argparse.Namespace) -> int:
    from recaudit.audits.designs.pairs import PairError

    from .reports.report import write_reports
    from .runner import run_scenario

    scenario = _load(args)
    if scenario is None:
        return EXIT_BAD_INPUT
    if isinstance(scenario, StudyScenario):
        return _run_study(args, scenario)
    out = args.out or Path("runs") / scenario.name
    with hold_folder(out):  # checked (and held) before any simulation
        _announce_cost(scenario, args)
        try:
            result = run_scenario(scenario, out, resume=args.resume, executor_type=args.executor,
                                  workers=args.workers, report=ConsoleReporter(args.quiet), started=args.started)
        except PairError as exc:  # the neighbouring worlds cannot differ: no report, never a silent "consistent"
            print(one_line(f"{args.scenario}: the audit cannot show the claim: {exc}"), file=sys.stderr)
            return EXIT_BAD_INPUT
        report = write_reports(result, out, csv=args.csv)
    print(summary_line(report))
    print(f"reports in {out}/ (report.html, report.md, report.json{', trials.csv' if args.csv else ''})")
    return EXIT_VIOLATED if args.fail_on_violation and report["verdict"] == "violated" else EXIT_OK


def _run_study(args: argparse.Namespace, scenario: StudyScenario) -> int:
    """A study: refused before any work when it cannot run; every part saved as it finishes (a rerun resumes)."""
    study = scenario.build()
    study.check()
    print(scenario.announce(study, args.scenario), flush=True)  # the estimate, before any work (over limits: refused)
    out = args.out or Path("runs") / scenario.name
    reporter = ConsoleReporter(args.quiet)
    with hold_folder(out), beating(reporter):  # a study's parts report as they finish: a line while they run
        written = study.run(out, scenario.seed, reporter)
    print(f"{scenario.name}: tables in {out}/ ({', '.join(p.name for p in written)}); a rerun into the same "
          "folder resumes")
    return EXIT_OK


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .reports.sweep_report import write_sweep_reports
    from .sweep import run_sweep

    scenario = _load(args)
    if scenario is None:
        return EXIT_BAD_INPUT
    out = args.out or Path("runs") / scenario.name
    with hold_folder(out):
        _announce_cost(scenario, args)
        result = run_sweep(scenario, out, full=args.full, resume=args.resume, executor_type=args.executor,
                           workers=args.workers, report=ConsoleReporter(args.quiet))
        write_sweep_reports(result, out)
    print((out / "sweep.md").read_text())
    return EXIT_OK


def _cmd_grid(args: argparse.Namespace) -> int:
    from recaudit.audits.designs.pairs import PairError

    from .grid import run_grid

    scenario = _load(args)
    if scenario is None:
        return EXIT_BAD_INPUT
    _announce_cost(scenario, args)
    out = args.out or Path("runs") / scenario.name
    try:
        run_grid(scenario, out, resume=args.resume, executor_type=args.executor, workers=args.workers,
                 report=ConsoleReporter(args.quiet))
    except PairError as exc:
        print(one_line(f"{args.scenario}: the audit cannot show the claim: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    print((out / "compare.md").read_text())
    print(f"point runs and the comparison in {out}/ (compare.html, compare.md, compare.json)")
    return EXIT_OK


def _cmd_report(args: argparse.Namespace) -> int:
    import json

    from .reports.report import write_reports
    from .reports.sweep_report import write_sweep_files
    from .runner import RunFolderError, result_from_run_dir

    failed = False
    for run_dir in args.run_dirs:
        found = False
        try:
            if (run_dir / "report.json").exists():
                found = True
                report = write_reports(result_from_run_dir(run_dir), run_dir)
                log.info("rebuilt %s/report.{json,md,html}, accuracy.svg", run_dir)
                print(summary_line(report))
            if (run_dir / "sweep.json").exists():
                found = True
                write_sweep_files(json.loads((run_dir / "sweep.json").read_text()), run_dir)
                log.info("rebuilt %s/sweep.{json,md,html}, sweep_points.csv, scaling.png", run_dir)
        except (RunFolderError, ValueError, KeyError) as exc:
            print(f"{run_dir}: cannot rebuild its reports: {exc}", file=sys.stderr)
            failed = True
            continue
        if not found:
            print(f"{run_dir}: no report.json or sweep.json (not a run folder)", file=sys.stderr)
            failed = True
    return EXIT_BAD_INPUT if failed else EXIT_OK


def _cmd_export(args: argparse.Namespace) -> int:
    from .reports.report import write_trials_csv
    from .runner import RunFolderError, result_from_run_dir

    failed = False
    for run_dir in args.run_dirs:
        try:
            write_trials_csv(result_from_run_dir(run_dir).tests, run_dir / "trials.csv")
        except (RunFolderError, ValueError, KeyError) as exc:
            print(one_line(f"{run_dir}: cannot export its scores: {exc}"), file=sys.stderr)
            failed = True
            continue
        log.info("wrote %s/trials.csv", run_dir)
    return EXIT_BAD_INPUT if failed else EXIT_OK


def _cmd_compare(args: argparse.Namespace) -> int:
    from .reports.compare import CompareError, write_comparison

    try:
        rows = write_comparison(args.run_dirs, args.out)
    except CompareError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    print((args.out / "compare.md").read_text())
    log.info("comparison of %d runs in %s/ (compare.html, compare.md, compare.json)", len(rows), args.out)
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 done, 1 violated (with --fail-on-violation), 2 bad input, 3 internal error."""
    started = time.time()  # a command's timing counts from here (the heavy imports come later)
    args = _parser().parse_args(argv)
    args.started = started
    _setup_logging(getattr(args, "quiet", False))
    # a renamed scenario field (recaudit.audits.language.sections.renamed_field) warns in one line
    warnings.formatwarning = lambda message, category, *rest, **kw: f"recaudit: warning: {message}\n"
    commands = {"list": lambda: _cmd_list(), "validate": lambda: _cmd_validate(args.scenarios),
                "scenarios": lambda: _cmd_scenarios(), "init": lambda: _cmd_init(args),
                "schema": lambda: _cmd_schema(args),
                "sweep": lambda: _cmd_sweep(args), "grid": lambda: _cmd_grid(args), "report": lambda: _cmd_report(args),
                "export": lambda: _cmd_export(args),
                "compare": lambda: _cmd_compare(args), "run": lambda: _cmd_run(args),
                "plan": lambda: _cmd_plan(args), "data": lambda: data_command.run(args, log.info),
                "estimate": lambda: estimate_command.run(args)}
    previous = on_terminate()
    try:
        return commands[args.command]()
    except BadInput as exc:  # the user's input or environment (recaudit.core.errors): one line, exit 2
        print(exc if isinstance(exc, ScenarioError) else one_line(str(exc)), file=sys.stderr)
        if getattr(exc, "trainer_traceback", None):  # a trainer's own failure: its frames, once
            print(f"--- the trainer's traceback ---\n{exc.trainer_traceback}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # stdout closed early (`recaudit list | head`): not an error of recaudit's
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:  # Ctrl-C (SIGINT), or SIGTERM (on_terminate): the workers are stopped by now
        code = EXIT_TERMINATED if terminated() else EXIT_INTERRUPTED
        print(f"recaudit: {'terminated' if code == EXIT_TERMINATED else 'interrupted'} (finished blocks are "
              "saved; --resume continues)", file=sys.stderr)
        return code
    except Exception as exc:  # a crash must never read as a verdict
        if os.environ.get("RECAUDIT_TRACEBACK"):
            traceback.print_exc()
        print(one_line(f"recaudit: internal error (exit {EXIT_INTERNAL}, not a verdict): "
                       f"{type(exc).__name__}: {exc}; set RECAUDIT_TRACEBACK=1 for the traceback"), file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        on_terminate(previous)


if __name__ == "__main__":
    sys.exit(main())
