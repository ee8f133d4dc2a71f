"""A real Chromium for the dashboard tests, driven by Playwright through the system's browser.

Playwright's own browser download does not reach every machine, Debian's
Chromium does: ``.ci/run`` installs it (``apt-get install chromium``), and
``KUEUESTREAM_CHROMIUM`` names another binary. A missing browser fails the
test; it never skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, sync_playwright

ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_path() -> Path:
    path = Path(os.environ.get("KUEUESTREAM_CHROMIUM", "/usr/bin/chromium"))
    if not path.is_file():
        pytest.fail(
            f"no Chromium at {path}: install Debian's (apt-get install -y chromium), as .ci/run does, "
            "or set KUEUESTREAM_CHROMIUM to a Chromium binary",
            pytrace=False,
        )
    return path


@contextmanager
def chromium(profile: Path, width: int = 1280, height: int = 900) -> Iterator[BrowserContext]:
    """A headless Chromium with a fresh profile in ``profile``, closed on exit."""
    executable = chromium_path()
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(profile),
            executable_path=str(executable),
            args=ARGS,
            headless=True,
            viewport={"width": width, "height": height},
        )
        try:
            yield context
        finally:
            context.close()
