"""The ``recaudit`` command line: run, validate, list."""
from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path

from .executors import MAX_WORKERS, ExecutorUnavailable
from .io.store import FolderBusy, FolderUnusable, ProgressMismatch, hold_folder
from .io.yamlio import ScenarioError, one_line
from .utility import utility_summary

#: 1 is only ever a verdict; a crash is 3, so it never reads as one
EXIT_OK, EXIT_VIOLATED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
#: failures of the user's input or environment, reported in one line with exit 2
BAD_INPUT = (ScenarioError, ProgressMismatch, FolderBusy, FolderUnusable, ExecutorUnavailable)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="recaudit", description="Simulate and audit private recommenders.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a scenario, audit its privacy claim, write reports")
    run.add_argument("scenario", type=Path)
    run.add_argument("--out", type=Path, help="report folder (default: runs/<scenario name>)")
    run.add_argument("--executor", choices=["serial", "processes", "dask"], help="override the scenario's executor")
    run.add_argument("--workers", type=int, help="workers for the processes / dask executors")
    run.add_argument("--resume", action="store_true", help="reuse finished trial blocks saved in --out")
    run.add_argument("--fail-on-violation", action="store_true", help="exit 1 when the verdict is 'violated'")
    run.add_argument("--quiet", action="store_true")
    sw = sub.add_parser("sweep", help="measure users needed for accurate clustering over the scenario's sweep grid")
    sw.add_argument("scenario", type=Path)
    sw.add_argument("--out", type=Path, help="report folder (default: runs/<scenario name>)")
    sw.add_argument("--full", action="store_true", help="use each axis's full_values grid")
    sw.add_argument("--executor", choices=["serial", "processes", "dask"])
    sw.add_argument("--workers", type=int)
    sw.add_argument("--resume", action="store_true", help="reuse finished sweep tasks saved in --out")
    sw.add_argument("--quiet", action="store_true")
    val = sub.add_parser("validate", help="check scenario files and report every problem")
    val.add_argument("scenarios", type=Path, nargs="+")
    sub.add_parser("list", help="name the registered populations, mechanisms, attacks, designs and estimators")
    plan = sub.add_parser("plan", help="trials per world needed to show a true epsilon against a claim")
    plan.add_argument("--true-epsilon", type=float, required=True)
    plan.add_argument("--claimed-epsilon", type=float, required=True)
    plan.add_argument("--delta", type=float, default=0.0)
    plan.add_argument("--alpha", type=float, default=1e-3)
    plan.add_argument("--power", type=float, default=0.9)
    plan.add_argument("--shape", choices=["pure", "gaussian"], default="pure",
                      help="trade-off curve of the true mechanism (pure: tightest eps-DP; gaussian: mu-GDP)")
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


def _cmd_list() -> int:
    from attacks import ATTACKS
    from mechanisms import MECHANISMS
    from simulator.population import POPULATIONS

    from .designs import DESIGNS
    from .stats.estimators import ESTIMATORS

    for title, registry in (("populations", POPULATIONS), ("mechanisms", MECHANISMS), ("attacks", ATTACKS),
                            ("audit designs (audit.design)", DESIGNS),
                            ("estimators (audit.method / audit.threshold)", ESTIMATORS)):
        print(f"{title}:")
        for kind, cls in sorted(registry.items()):
            doc = (cls.__doc__ or "").strip().splitlines()[0]
            print(f"  {kind:<28} {doc}")
    return EXIT_OK


def _cmd_validate(paths: list[Path]) -> int:
    from .io.scenario import load_scenario

    failed = False
    for path in paths:
        try:
            load_scenario(path)
            print(f"{path}: ok")
        except ScenarioError as exc:
            failed = True
            print(exc, file=sys.stderr)
    return EXIT_BAD_INPUT if failed else EXIT_OK


def _cmd_run(args: argparse.Namespace) -> int:
    from simulator.neighbours import PairError

    from .io.report import write_reports
    from .runner import run_scenario
    from .io.scenario import load_scenario

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        print(f"--workers: must be between 1 and {MAX_WORKERS}", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path("runs") / scenario.name
    say = (lambda _: None) if args.quiet else (lambda msg: print(f"[recaudit] {msg}", file=sys.stderr))
    with hold_folder(out):  # checked (and held) before any simulation
        try:
            result = run_scenario(scenario, out, resume=args.resume, executor_kind=args.executor,
                                  workers=args.workers, report=say)
        except PairError as exc:  # the neighbouring worlds cannot differ: no report, never a silent "consistent"
            print(one_line(f"{args.scenario}: the audit cannot show the claim: {exc}"), file=sys.stderr)
            return EXIT_BAD_INPUT
        report = write_reports(result, out)
    a = report["audit"]
    print(f"{scenario.name}: claim ε={report['claim']['epsilon']:g} (δ={report['claim']['delta']:g}); "
          f"ε_LB={a['epsilon_lb']:.4f} at {a['confidence']:.0%} confidence (ceiling {a['ceiling']:.3f}); "
          f"verdict {report['verdict']}; {utility_summary(report['utility'])}")
    print(f"reports in {out}/ (report.md, report.json, trials.csv)")
    return EXIT_VIOLATED if args.fail_on_violation and report["verdict"] == "violated" else EXIT_OK


def _cmd_sweep(args: argparse.Namespace) -> int:
    from .io.report import write_sweep_reports
    from .io.scenario import load_scenario
    from .sweep import run_sweep

    try:
        scenario = load_scenario(args.scenario)
    except ScenarioError as exc:
        print(exc, file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.workers is not None and not 1 <= args.workers <= MAX_WORKERS:
        print(f"--workers: must be between 1 and {MAX_WORKERS}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if scenario.sweep is None:
        print(f"{args.scenario}: sweep: required for 'recaudit sweep' (see scenarios/scaling-maxsense.yaml)",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path("runs") / scenario.name
    say = (lambda _: None) if args.quiet else (lambda msg: print(f"[recaudit] {msg}", file=sys.stderr))
    with hold_folder(out):
        result = run_sweep(scenario, out, full=args.full, resume=args.resume, executor_kind=args.executor,
                           workers=args.workers, report=say)
        write_sweep_reports(result, out)
    print((out / "sweep.md").read_text())
    return EXIT_OK


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "plan":
        return _cmd_plan(args)
    if args.command == "list":
        return _cmd_list()
    if args.command == "validate":
        return _cmd_validate(args.scenarios)
    if args.command == "sweep":
        return _cmd_sweep(args)
    return _cmd_run(args)


def main(argv: list[str] | None = None) -> int:
    """Exit codes: 0 done, 1 violated (with --fail-on-violation), 2 bad input, 3 internal error."""
    args = _parser().parse_args(argv)
    try:
        return _dispatch(args)
    except BAD_INPUT as exc:
        print(exc if isinstance(exc, ScenarioError) else one_line(str(exc)), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("recaudit: interrupted (finished blocks are saved; --resume continues)", file=sys.stderr)
        return 130
    except Exception as exc:  # a crash must never read as a verdict
        if os.environ.get("RECAUDIT_TRACEBACK"):
            traceback.print_exc()
        print(one_line(f"recaudit: internal error (exit {EXIT_INTERNAL}, not a verdict): "
                       f"{type(exc).__name__}: {exc}; set RECAUDIT_TRACEBACK=1 for the traceback"), file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
