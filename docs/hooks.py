"""MkDocs hooks (mkdocs.yml ``hooks:``): generated pages, and a nav that takes new pages by itself.

- ``scenarios/reference.md`` and ``scenarios/scenario.schema.json`` are generated from the code at build
  time (``recaudit.audits.language.schema``), so they cannot drift from it.
- Every page under a folder listed in ``AUTO_SECTIONS`` (``findings/``, ``guide/``) appears in its nav
  section, after the pages named in mkdocs.yml, by file name — a new page needs no mkdocs.yml edit.
"""
from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
AUTO_SECTIONS = {"Findings": "findings", "Guides": "guide"}


def on_config(config):
    sys.path.insert(0, str(ROOT))  # the checkout's packages, also when recaudit is not installed
    docs = Path(config["docs_dir"])
    for section, folder in AUTO_SECTIONS.items():
        entry = next((e for e in config["nav"] if isinstance(e, dict) and section in e), None)
        if entry is None:
            entry = {section: []}
            config["nav"].append(entry)
        pages = entry[section]
        listed = {next(iter(p.values())) if isinstance(p, dict) else p for p in pages}
        pages += [f"{folder}/{p.name}" for p in sorted((docs / folder).glob("*.md"))
                  if f"{folder}/{p.name}" not in listed]
        if not pages:
            config["nav"].remove(entry)
    return config


def on_files(files, config):
    from recaudit.audits.language.schema import reference_markdown, schema_text

    for uri, content in (("scenarios/reference.md", reference_markdown()),
                         ("scenarios/scenario.schema.json", schema_text())):
        files.append(File.generated(config, uri, content=content))
    return files
