"""The Go builds ``.ci/run`` starts in the background while the tests run.

``KUEUESTREAM_KUEUE_BUILD`` names their folder. Each build writes its output
to ``<step>out``, its errors to ``<step>log`` and, last, its exit status to
``<step>rc``: upstream Kueue's manager (``scripts/kueue.sh build``) with no
prefix, then upstream's scheduler for ``tests/parity`` with ``parity.``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

# Upstream Kueue's manager takes ~750 s of CPU with cold Go caches; the scheduler's tests follow it.
BUILD_WAIT_S = 2400.0


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() == "true"


def folder() -> Path | None:
    """The folder of ``.ci/run``'s background builds, when it started them."""
    building = os.environ.get("KUEUESTREAM_KUEUE_BUILD", "").strip()
    return Path(building) if building else None


def wait_for(build: Path, step: str, what: str) -> Path:
    """The last line ``step``'s build printed (the path it built), once it has ended well."""
    rc = build / f"{step}rc"
    deadline = time.monotonic() + BUILD_WAIT_S
    while not rc.is_file():
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not done after {BUILD_WAIT_S:g}s ({build})", pytrace=False)
        time.sleep(2)
    if rc.read_text().strip() != "0":
        log = (build / f"{step}log").read_text(errors="replace")[-4000:]
        pytest.fail(f"{what} failed (exit {rc.read_text().strip()}):\n{log}", pytrace=False)
    return Path((build / f"{step}out").read_text().strip().splitlines()[-1])
