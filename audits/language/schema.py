"""What scenario files may hold, for people and editors: the JSON Schema of a scenario file and the
scenario reference (Markdown) generated from the same pydantic models and registries.

``recaudit schema`` prints the schema; the docs site builds ``scenarios/reference.md`` from
:func:`reference_markdown` (``docs/hooks.py``), so neither can drift from the code.
"""
from __future__ import annotations

import inspect
import json
import re

from .scenario import Scenario

#: sections of a scenario whose value is one of the registered kinds
KIND_SECTIONS = (("population", "population.kind"), ("mechanism", "mechanism.kind"), ("attack", "attack.kind"))
#: plain sections, in the order a scenario file lists them
PLAIN_SECTIONS = ("ChurnConfig", "PanelConfig", "AuditConfig", "ExecutorConfig", "LimitsConfig", "SweepConfig",
                  "SweepAxis", "GridConfig")
_KIND_SUFFIX = "Config"
#: what the top-level keys of a scenario are (their models carry no description of their own)
TOP_LEVEL = {
    "name": "names the default output folder runs/<name>: 1 to 100 letters, digits, '.', '_' or '-'",
    "description": "free text, shown by `recaudit scenarios`",
    "seed": "the one root seed; every random stream is spawned from it",
    "population": "who the users are and what they rate (population kinds below)",
    "churn": "arrivals, departures, query and release rounds on the simulated clock",
    "panel": "a fixed cohort instead of churn (matrix completion)",
    "mechanism": "the privacy mechanism audited (mechanism kinds below)",
    "attack": "one attack or a list (attack kinds below); each is a test of the family",
    "audit": "how the bound is made: design, trials, confidence, estimator",
    "executor": "where trial blocks run; results do not depend on it",
    "sweep": "for `recaudit sweep`: users needed over parameter grids",
    "grid": "for `recaudit grid`: every mechanism at every ε",
    "limits": "refuse the run before any work beyond these estimated costs",
}


def scenario_schema() -> dict:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    schema = Scenario.model_json_schema()
    # grid.compare entries leave epsilon out (the grid sets it): any kind block, checked when loaded
    schema["$defs"]["GridConfig"]["properties"]["compare"]["items"] = {
        "type": "object", "required": ["kind"], "properties": {"kind": {"type": "string"}}}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "recaudit scenario"} | schema


def schema_text() -> str:
    return json.dumps(scenario_schema(), indent=2, ensure_ascii=False) + "\n"


def summary(cls: type) -> str:
    """A class's docstring's first paragraph as one line of plain text (no code markup)."""
    return plain((inspect.getdoc(cls) or "").split("\n\n", 1)[0])


def plain(text: str) -> str:
    """``text`` as one line of plain text: no code markup, no cross-references to the project's own papers and
    pages (``(seed 003, docs/...)``), which a user of the command line does not have at hand."""
    text = re.sub(r"\s*\([^()]*(?:seed \d{3}|docs/|\.md\b)[^()]*\)", "", " ".join(str(text).split()))
    return re.sub(r"`+([^`]*)`+", r"\1", text)


def _type(prop: dict) -> str:
    if "oneOf" in prop:  # a discriminated union of registered kinds
        return "a `kind:` block"
    if "$ref" in prop:
        return prop["$ref"].rsplit("/", 1)[-1].removesuffix(_KIND_SUFFIX)
    if "anyOf" in prop:
        kinds = [_type(p) for p in prop["anyOf"]]
        return " or ".join(k for k in kinds if k != "null") + (" or null" if "null" in kinds else "")
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "any")
    if kind == "array":
        items = prop.get("items") or prop.get("prefixItems")
        inner = ", ".join(_type(i) for i in items) if isinstance(items, list) else _type(items or {})
        return f"list of {inner}" if "items" in prop else f"[{inner}]"
    if kind == "object" and isinstance(prop.get("additionalProperties"), dict):
        return f"map to {_type(prop['additionalProperties'])}"
    bounds = [f"{op} {prop[key]:g}" for key, op in (("exclusiveMinimum", ">"), ("minimum", "≥"),
                                                      ("exclusiveMaximum", "<"), ("maximum", "≤")) if key in prop]
    return kind + (f" ({', '.join(bounds)})" if bounds else "")


def _default(prop: dict, required: bool) -> str:
    if required:
        return "required"
    if "default" not in prop:
        return ""
    return f"`{json.dumps(prop['default'], ensure_ascii=False)}`"


def _plain(text: str) -> str:
    """Docstring text on one line, RST double backquotes as Markdown code."""
    return re.sub(r"``([^`]*)``", r"`\1`", " ".join(text.split()))


def _table(model: dict, skip: tuple[str, ...] = ("kind",), notes: dict | None = None) -> list[str]:
    notes = notes or {}
    required = set(model.get("required", ()))
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, prop in model.get("properties", {}).items():
        if name in skip:
            continue
        text = prop.get("description") or notes.get(name, "")
        description = _plain(text).replace("|", "\\|")
        rows.append(f"| `{name}` | {_type(prop)} | {_default(prop, name in required)} | {description} |")
    return rows if len(rows) > 2 else ["(no settings)"]


def reference_markdown() -> str:
    """The scenario reference page: every section, and every registered kind with its fields."""
    from recaudit.attacks import ATTACKS
    from recaudit.mechanisms import MECHANISMS
    from recaudit.simulator.populations import POPULATIONS

    schema = Scenario.model_json_schema()
    defs = schema["$defs"]
    lines = ["# Scenario reference", "",
             "Generated from the code (the pydantic models and the registries) when this site is built: every "
             "field a scenario file may hold. `recaudit schema --out scenario.schema.json` writes the same as a "
             "[JSON Schema](scenario.schema.json) for editors (with the YAML language server, a first line "
             "`# yaml-language-server: $schema=scenario.schema.json` turns on completion and checks; "
             "`recaudit init NAME` writes both). `recaudit validate FILE` checks a file.", "",
             "## The scenario", ""] + _table(schema, skip=(), notes=TOP_LEVEL) + [""]
    for name in PLAIN_SECTIONS:
        model = defs[name]
        lines += [f"## {name.removesuffix(_KIND_SUFFIX).lower()}", "", _plain(model.get("description", "")), ""]
        lines += _table(model, skip=()) + [""]
    for (section, key), registry in zip(KIND_SECTIONS, (POPULATIONS, MECHANISMS, ATTACKS)):
        lines += [f"## {section} kinds", "", f"`{key}` names one of these; the other keys are its fields.", ""]
        for kind, cls in sorted(registry.items()):
            model = next(m for m in defs.values() if m.get("properties", {}).get("kind", {}).get("const") == kind)
            lines += [f"### {kind}", "", summary(cls), ""] + _table(model) + [""]
    return "\n".join(lines)
