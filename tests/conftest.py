"""Shared pytest fixtures.

Each block below belongs to one part of the project; add new fixtures in a
block of their own after the existing ones (imports go up here, at the top).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

# ============================================================================
# Kafka: a real broker for the tests marked `kafka`
# (scripts/kafka.sh runs Apache Kafka in KRaft mode from Maven Central jars)
# ============================================================================
REPO_ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO_ROOT / "scripts" / "kafka.sh"


def _kafka_sh(command: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(KAFKA_SH), command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``host:port`` of a real Kafka broker.

    - ``KUEUESTREAM_KAFKA`` set: that broker (what ``.ci/run`` does).
    - unset under ``CI=true``: the test FAILS; CI must never skip Kafka tests.
    - unset elsewhere: reuse the broker of ``scripts/kafka.sh`` if it is
      running, else start one for this session and stop it at the end.
      ``pytest -m "not kafka"`` deselects these tests on a machine without
      Java/Maven.
    """
    address = os.environ.get("KUEUESTREAM_KAFKA", "").strip()
    if address:
        yield address
        return
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(
            "KUEUESTREAM_KAFKA is not set under CI=true: .ci/run must start Kafka "
            "(scripts/kafka.sh start) and export KUEUESTREAM_KAFKA=host:port",
            pytrace=False,
        )

    status = _kafka_sh("status", timeout=30).stdout.split()
    if status[:1] == ["running"] and ":" in status[-1]:
        # "running PID HOST:PORT": someone else's broker, leave it running.
        yield status[-1]
        return

    started = _kafka_sh("start", timeout=600)
    if started.returncode != 0:
        pytest.fail(
            f"scripts/kafka.sh start failed (exit {started.returncode}):\n{started.stderr[-4000:]}",
            pytrace=False,
        )
    address = started.stdout.strip().splitlines()[-1]
    if "already running" in started.stderr:
        # Another session started it meanwhile: it stops it, not us.
        yield address
        return
    try:
        yield address
    finally:
        _kafka_sh("stop", timeout=60)


# ============================================================================
# end of the Kafka block
# ============================================================================
