"""Shared pytest fixtures.

Each block below belongs to one part of the project; add new fixtures in a
block of their own after the existing ones (imports go up here, at the top).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.kafka.sasl_ssl_broker import SaslSslBroker

# ============================================================================
# Kafka: a real broker for the tests marked `kafka`
# (scripts/kafka.sh runs Apache Kafka in KRaft mode from Maven Central jars)
# ============================================================================
REPO_ROOT = Path(__file__).resolve().parents[1]
KAFKA_SH = REPO_ROOT / "scripts" / "kafka.sh"


def _script(
    script: Path, command: str, timeout: float, instance: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``bash SCRIPT COMMAND`` (as ``KUBE_INSTANCE=instance`` when given), output captured."""
    env = None if instance is None else {**os.environ, "KUBE_INSTANCE": instance}
    return subprocess.run(
        ["bash", str(script), command],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
        env=env,
    )


def _fail_under_ci(message: str) -> None:
    """A server the test needs is not given: under ``CI=true`` that is a failure, never a skip."""
    if os.environ.get("CI", "").strip().lower() == "true":
        pytest.fail(message, pytrace=False)


def _started_for_session(script: Path, start_timeout: float, stop_timeout: float) -> Iterator[str]:
    """``SCRIPT start``'s last output line; ``SCRIPT stop`` at the end unless someone else started it."""
    started = _script(script, "start", start_timeout)
    if started.returncode != 0:
        pytest.fail(
            f"scripts/{script.name} start failed (exit {started.returncode}):\n{started.stderr[-4000:]}",
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
        _script(script, "stop", stop_timeout)


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
    _fail_under_ci(
        "KUEUESTREAM_KAFKA is not set under CI=true: .ci/run must start Kafka "
        "(scripts/kafka.sh start) and export KUEUESTREAM_KAFKA=host:port",
    )

    status = _script(KAFKA_SH, "status", timeout=30).stdout.split()
    if status[:1] == ["running"] and ":" in status[-1]:
        # "running PID HOST:PORT": someone else's broker, leave it running.
        yield status[-1]
        return

    yield from _started_for_session(KAFKA_SH, start_timeout=600, stop_timeout=60)


# ============================================================================
# end of the Kafka block
# ============================================================================


# ============================================================================
# Kubernetes: a real API server (etcd + kube-apiserver) for the tests marked `kube`
# (scripts/kube.sh compiles both from Go modules; no controllers run)
# ============================================================================
KUBE_SH = REPO_ROOT / "scripts" / "kube.sh"


def _running_kubeconfig(name: str | None) -> Path | None:
    """The kubeconfig of instance NAME (None: the default instance) if it runs."""
    lines = _script(KUBE_SH, "status", timeout=30, instance=name).stdout.splitlines()
    first = lines[0].split() if lines else []
    if first[:1] == ["running"] and len(first) == 3:
        return Path(first[2])
    return None


@pytest.fixture(scope="session")
def kube_config() -> Iterator[str]:
    """Path of a kubeconfig for a real Kubernetes API server.

    - ``KUEUESTREAM_KUBECONFIG`` set: that file (what ``.ci/run`` does).
    - unset under ``CI=true``: the test FAILS; CI must never skip these tests.
    - unset elsewhere: reuse the API server of ``scripts/kube.sh`` if it is
      running, else start one for this session and stop it at the end. The
      first start on a machine compiles etcd and kube-apiserver (~8 min with
      cold Go caches; cached per user after that). ``pytest -m "not kube"``
      deselects these tests on a machine without Go.

    Contexts: ``kueuestream-admin`` (current, cluster-admin),
    ``kueuestream-admin-cert`` and ``kueuestream-controller`` (a user with no
    RBAC rights until a test binds some). No controllers run: give each test
    its own namespace and never wait for a deletion to finish.
    """
    path = os.environ.get("KUEUESTREAM_KUBECONFIG", "").strip()
    if path:
        if not Path(path).is_file():
            pytest.fail(f"KUEUESTREAM_KUBECONFIG={path} is not a file", pytrace=False)
        yield path
        return
    _fail_under_ci(
        "KUEUESTREAM_KUBECONFIG is not set under CI=true: .ci/run must start the API server "
        "(scripts/kube.sh start) and export KUEUESTREAM_KUBECONFIG=PATH",
    )

    running = _running_kubeconfig(None)
    if running is not None:
        # Someone else's server: leave it running.
        yield str(running)
        return

    # Generous: the first start on a machine includes the compile.
    yield from _started_for_session(KUBE_SH, start_timeout=1800, stop_timeout=120)


# ============================================================================
# end of the Kubernetes block
# ============================================================================


# ============================================================================
# Kafka over SASL_SSL: the SASL_SSL listener scripts/kafka.sh starts beside the
# PLAINTEXT one (TLS with a client certificate; PLAIN, SCRAM-SHA-256/512)
# ============================================================================
SASL_SSL_DIR = REPO_ROOT / ".kafka" / "sasl-ssl"
SASL_SSL_FILES = ("ca.pem", "client.pem", "client.key", "username", "password")


@pytest.fixture(scope="session")
def kafka_sasl_ssl(request: pytest.FixtureRequest) -> SaslSslBroker:
    """The test broker's SASL_SSL listener, its CA, a client certificate and credentials.

    - ``KUEUESTREAM_KAFKA_SASL_SSL`` set: that ``host:port`` (what ``.ci/run``
      does), with the files of ``.kafka/sasl-ssl/``.
    - unset under ``CI=true``: the test FAILS; CI must never skip Kafka tests.
    - unset elsewhere: the listener of the broker the ``kafka_bootstrap``
      fixture uses, which must be one ``scripts/kafka.sh`` runs for this checkout.
    """
    address = os.environ.get("KUEUESTREAM_KAFKA_SASL_SSL", "").strip()
    if not address:
        _fail_under_ci(
            "KUEUESTREAM_KAFKA_SASL_SSL is not set under CI=true: .ci/run must start Kafka "
            "(scripts/kafka.sh start) and export KUEUESTREAM_KAFKA_SASL_SSL=host:port "
            "(.kafka/sasl-ssl/bootstrap)"
        )
        request.getfixturevalue("kafka_bootstrap")
        bootstrap_file = SASL_SSL_DIR / "bootstrap"
        if not bootstrap_file.is_file():
            pytest.fail(
                f"no {bootstrap_file}: the Kafka broker in use has no SASL_SSL listener of this "
                "checkout (started elsewhere, or by an older scripts/kafka.sh); run "
                "scripts/kafka.sh stop && scripts/kafka.sh start, or set KUEUESTREAM_KAFKA_SASL_SSL",
                pytrace=False,
            )
        address = bootstrap_file.read_text().strip()
    missing = [name for name in SASL_SSL_FILES if not (SASL_SSL_DIR / name).is_file()]
    if missing:
        pytest.fail(
            f"{SASL_SSL_DIR} lacks {', '.join(missing)}: scripts/kafka.sh start writes them",
            pytrace=False,
        )
    return SaslSslBroker(
        bootstrap=address,
        cafile=SASL_SSL_DIR / "ca.pem",
        certfile=SASL_SSL_DIR / "client.pem",
        keyfile=SASL_SSL_DIR / "client.key",
        username=(SASL_SSL_DIR / "username").read_text().strip(),
        password_file=SASL_SSL_DIR / "password",
    )


# ============================================================================
# end of the Kafka over SASL_SSL block
# ============================================================================


# ============================================================================
# MultiKueue: three API servers at once (a manager and two workers), each an
# instance of scripts/kube.sh (KUBE_INSTANCE=NAME), for the tests marked `kube`
# that federate clusters
# ============================================================================
MULTIKUEUE_INSTANCES = ("mk-manager", "mk-worker1", "mk-worker2")


@dataclass(frozen=True)
class KubeInstance:
    """One running ``scripts/kube.sh`` instance: its name and kubeconfig."""

    name: str
    kubeconfig: Path

    def command(self, command: str, timeout: float = 180) -> None:
        """Run ``KUBE_INSTANCE=name scripts/kube.sh COMMAND``; fail the test if it fails."""
        done = _script(KUBE_SH, command, timeout, instance=self.name)
        if done.returncode != 0:
            pytest.fail(
                f"KUBE_INSTANCE={self.name} scripts/kube.sh {command} failed "
                f"(exit {done.returncode}):\n{done.stderr[-4000:]}",
                pytrace=False,
            )

    def stop_apiserver(self) -> None:
        """Make the cluster unreachable (etcd keeps its data)."""
        self.command("stop-apiserver")

    def start_apiserver(self) -> None:
        """Bring a stopped API server back on the same port."""
        self.command("restart-apiserver")


@dataclass(frozen=True)
class MultiKueueServers:
    manager: KubeInstance
    worker1: KubeInstance
    worker2: KubeInstance


@pytest.fixture(scope="session")
def multikueue_servers() -> Iterator[MultiKueueServers]:
    """Three real API servers: ``manager``, ``worker1``, ``worker2``.

    - ``KUEUESTREAM_MULTIKUEUE_INSTANCES=manager,worker1,worker2`` (instance names
      of ``scripts/kube.sh`` already running for this checkout; what ``.ci/run``
      does): those.
    - unset under ``CI=true``: the test FAILS; CI must never skip these tests.
    - unset elsewhere: reuse the instances ``mk-manager``, ``mk-worker1`` and
      ``mk-worker2`` that run, start the others (in parallel), and stop the
      ones started here when the session ends.
    """
    given = os.environ.get("KUEUESTREAM_MULTIKUEUE_INSTANCES", "").strip()
    if given:
        names = tuple(n.strip() for n in given.split(","))
        if len(names) != 3:
            pytest.fail(
                f"KUEUESTREAM_MULTIKUEUE_INSTANCES={given}: want three scripts/kube.sh "
                "instance names, manager,worker1,worker2",
                pytrace=False,
            )
        found = {name: _running_kubeconfig(name) for name in names}
        missing = [name for name, path in found.items() if path is None]
        if missing:
            pytest.fail(
                f"KUEUESTREAM_MULTIKUEUE_INSTANCES: {', '.join(missing)} not running "
                "(KUBE_INSTANCE=NAME scripts/kube.sh start)",
                pytrace=False,
            )
        yield MultiKueueServers(*(KubeInstance(n, p) for n, p in found.items() if p is not None))
        return
    _fail_under_ci(
        "KUEUESTREAM_MULTIKUEUE_INSTANCES is not set under CI=true: .ci/run must start "
        "three instances (KUBE_INSTANCE=NAME scripts/kube.sh start) and export their names",
    )

    started: list[str] = []
    paths: dict[str, Path] = {}
    starting: dict[str, subprocess.Popen[str]] = {}
    for name in MULTIKUEUE_INSTANCES:
        path = _running_kubeconfig(name)
        if path is not None:
            paths[name] = path
            continue
        starting[name] = subprocess.Popen(
            ["bash", str(KUBE_SH), "start"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env={**os.environ, "KUBE_INSTANCE": name},
        )
    failures: list[str] = []
    for name, proc in starting.items():
        out, err = proc.communicate(timeout=1800)
        if proc.returncode != 0:
            failures.append(f"{name} (exit {proc.returncode}):\n{err[-2000:]}")
            continue
        paths[name] = Path(out.strip().splitlines()[-1])
        if "already running" not in err:
            started.append(name)
    try:
        if failures:
            pytest.fail("scripts/kube.sh start failed for " + "\n".join(failures), pytrace=False)
        yield MultiKueueServers(*(KubeInstance(n, paths[n]) for n in MULTIKUEUE_INSTANCES))
    finally:
        for name in started:
            _script(KUBE_SH, "stop", timeout=120, instance=name)


# ============================================================================
# end of the MultiKueue block
# ============================================================================
