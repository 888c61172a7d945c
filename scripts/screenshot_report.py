#!/usr/bin/env python3
"""Screenshot a recaudit HTML report in headless Chromium.

    python scripts/screenshot_report.py runs/quickstart/report.html [shot.png] [--width 1300] [--height 2800]

Needs a Chromium binary (``chromium``, ``chromium-browser`` or ``google-chrome``
on PATH, or ``$CHROMIUM``); on Debian: ``apt-get install chromium``. The
report is self-contained, so the page is opened from disk with no network.
``tests/test_reports.py::test_report_renders_in_headless_chromium`` runs this
script when a browser is present and checks that the plots appear in the
screenshot; CI without a browser skips that test.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The Chromium to use: ``$CHROMIUM`` or the first of BROWSERS on PATH."""
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    return next((path for path in map(shutil.which, BROWSERS) if path), None)


def screenshot(html: Path, png: Path, width: int = 1300, height: int = 2800, timeout: float = 90) -> None:
    """Render ``html`` in headless Chromium and save a ``width`` × ``height`` screenshot to ``png``."""
    browser = find_browser()
    if browser is None:
        raise SystemExit("no Chromium found: install one (apt-get install chromium) or set $CHROMIUM")
    png = Path(png).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as profile:  # a throwaway profile: no state shared with other runs
        command = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                   "--no-first-run", f"--user-data-dir={profile}", f"--window-size={width},{height}",
                   f"--screenshot={png}", Path(html).resolve().as_uri()]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0 or not png.is_file():
        raise SystemExit(f"{browser} failed ({done.returncode}):\n{done.stderr[-2000:]}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Screenshot a recaudit HTML report in headless Chromium.")
    parser.add_argument("html", type=Path, help="the report.html (or compare.html, sweep.html) to render")
    parser.add_argument("png", type=Path, nargs="?", help="where to save the screenshot (default: beside the HTML)")
    parser.add_argument("--width", type=int, default=1300, help="window width in pixels (default 1300)")
    parser.add_argument("--height", type=int, default=2800, help="window height in pixels (default 2800)")
    args = parser.parse_args(argv)
    png = args.png or args.html.with_suffix(".png")
    screenshot(args.html, png, args.width, args.height)
    print(png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
