"""The command line's informational commands: list, scenarios, init, schema, validate, --version; and the
exit codes every command returns.
"""
from __future__ import annotations

import argparse
import sys
from importlib import metadata
from pathlib import Path

from .language.shipped import resolve
from .language.yamlio import ScenarioError

#: 1 is only ever a verdict; a crash is 3, so it never reads as one
EXIT_OK, EXIT_VIOLATED, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _version() -> str:
    try:
        return metadata.version("recaudit")
    except metadata.PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


def _cmd_list() -> int:
    from recaudit.attacks import ATTACKS
    from recaudit.mechanisms import MECHANISMS
    from recaudit.simulator.populations import POPULATIONS

    from .designs import DESIGNS
    from .language.schema import summary
    from .stats.estimators import ESTIMATORS

    registries = (("populations", POPULATIONS), ("mechanisms", MECHANISMS), ("attacks", ATTACKS),
                  ("audit designs (audit.design)", DESIGNS),
                  ("estimators (audit.method / audit.threshold_rule)", ESTIMATORS))
    width = max(len(kind) for _, registry in registries for kind in registry) + 2
    for title, registry in registries:
        print(f"{title}:")
        for kind, cls in sorted(registry.items()):
            if registry is ESTIMATORS:  # a scenario names an estimator by its method and threshold
                kind = cls.method if cls.threshold_rule is None else f"{cls.method} / {cls.threshold_rule}"
            print(f"  {kind:<{width}}{summary(cls)}")
    return EXIT_OK


def _cmd_scenarios() -> int:
    from .language.shipped import command, description, is_study, shipped_scenarios

    shipped = shipped_scenarios()
    width = max(map(len, shipped), default=0) + 2
    commands = {name: f"recaudit {command(path)}" for name, path in shipped.items()}
    room = max(map(len, commands.values()), default=0) + 2
    for name, path in shipped.items():
        what = "a study: " if is_study(path) else ""
        print(f"{name:<{width}}{commands[name]:<{room}}{what}{description(path)}")
    return EXIT_OK


def _cmd_init(args: argparse.Namespace) -> int:
    from .language.schema import schema_text
    from .language.shipped import shipped_scenarios
    from .store import write_text

    source = shipped_scenarios().get(args.name.removesuffix(".yaml"))
    if source is None:
        print(f"{args.name}: no shipped scenario of that name (`recaudit scenarios` lists them)", file=sys.stderr)
        return EXIT_BAD_INPUT
    out = args.out or Path(f"{Path(args.name).name.removesuffix('.yaml')}.yaml")
    if out.exists():
        print(f"{out}: exists; not overwritten (give --out)", file=sys.stderr)
        return EXIT_BAD_INPUT
    schema = out.parent / "scenario.schema.json"
    write_text(out, f"# yaml-language-server: $schema={schema.name}\n" + source.read_text())
    write_text(schema, schema_text())
    print(f"wrote {out} (and {schema}, for editors); run it with: recaudit run {out}")
    return EXIT_OK


def _cmd_schema(args: argparse.Namespace) -> int:
    from .language.schema import schema_text
    from .store import write_text

    if args.out is None:
        sys.stdout.write(schema_text())
    else:
        write_text(args.out, schema_text())
    return EXIT_OK


def _cmd_validate(paths: list[Path]) -> int:
    from .language.scenario import load_scenario

    failed = False
    for path in paths:
        try:
            load_scenario(resolve(path))
            print(f"{path}: ok")
        except ScenarioError as exc:
            failed = True
            print(exc, file=sys.stderr)
    return EXIT_BAD_INPUT if failed else EXIT_OK
