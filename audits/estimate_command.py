"""``recaudit estimate FILE``: scores in, ε out (the estimators of ``recaudit.audits.estimate`` on a file)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from .estimate import estimate, read_scores


def add_parser(sub) -> None:
    """The ``estimate`` subcommand's arguments."""
    est = sub.add_parser("estimate", help="scores in, epsilon out: lower bounds from a file of attack scores",
                         description="Epsilon lower bounds from attack scores made anywhere (docs/api.md). FILE is "
                                     "CSV (a header row) or .npz with a numeric column `score` and either a 0/1 "
                                     "column `member` (one run: each canary in or out; the one-run estimators) or "
                                     "a 0/1 column `world` (many runs: the neighbouring world each run came from; "
                                     "the many-run estimators, each world's runs in file order). Without "
                                     "--estimator every estimator of the design that can run does; the others "
                                     "are listed as skipped, with the reason.")
    est.add_argument("file", type=Path, metavar="FILE", help="a .csv or .npz file (a report's trials.csv works)")
    est.add_argument("--epsilon", type=float, required=True, help="the claimed epsilon")
    est.add_argument("--delta", type=float, required=True, help="the claimed delta (0 for pure epsilon-DP)")
    est.add_argument("--estimator", action="append", metavar="NAME",
                     help="an estimator to run (repeat for several; `recaudit list` names them)")
    est.add_argument("--alpha", type=float, default=0.05,
                     help="1 - confidence of each bound (default 0.05, as a scenario's audit.alpha)")
    est.add_argument("--mu", type=float, help="the claim's Gaussian mu (mu-GDP): the Gaussian-DP estimators need it")
    est.add_argument("--test", metavar="NAME", help="the rows of one test, when FILE has a `test` column holding "
                                                    "several (a report's trials.csv)")
    est.add_argument("--json", action="store_true", help="print one JSON object (key `estimates`) instead of a table")


def run(args: argparse.Namespace) -> int:
    """One JSON object (``--json``) or a table on stdout; a bad file is a ``BadInput`` (one line, exit 2)."""
    scores, labels, design = read_scores(args.file, args.test)
    result = estimate(scores, **{"members" if design == "member" else "worlds": labels}, epsilon=args.epsilon,
                      delta=args.delta, estimators=args.estimator, alpha=args.alpha, mu=args.mu)
    print(json.dumps(result.to_dict(), indent=2, allow_nan=False) if args.json else result.table())
    return 0
