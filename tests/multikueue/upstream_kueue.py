"""Upstream Kueue's controller manager run against a ``scripts/kube.sh`` API server, as a MultiKueue worker.

The binary and the CRDs come from ``scripts/kueue.sh`` (upstream's module, built at
test time, never committed). The manager runs with leader election off, its own
serving certificate for the webhook server (made here with openssl) instead of
upstream's internal certificate management, its metrics and health probes on free
ports of 127.0.0.1, and the visibility server off (it would need the API server's
aggregation layer). No webhook configuration is registered with the API server:
the test cluster has no Service through which it could reach the webhook server,
so objects reach upstream's controllers without its defaulting and validation.

Without internal certificate management, upstream's ``main`` reads the metrics
server's certificate from the fixed path ``/etc/kueue/metrics/certs``; the process
runs in a mount namespace of its own (``unshare``) whose ``/etc`` is an overlay
holding that folder, so nothing is written to the machine's ``/etc``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests import background_builds

ROOT = Path(__file__).resolve().parents[2]
KUEUE_SH = ROOT / "scripts" / "kueue.sh"
START_TIMEOUT_S = 120.0


def _kueue_sh(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(KUEUE_SH), command],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def binary() -> Path:
    """Upstream's manager binary.

    ``KUEUESTREAM_KUEUE_BIN`` if set; else, with ``KUEUESTREAM_KUEUE_BUILD`` (the folder
    of the build ``.ci/run`` started in the background), that build's binary once it
    ends; else the one ``scripts/kueue.sh build`` left in the cache. Missing under
    ``CI=true``: the test fails; elsewhere it is skipped with the command to run.
    """
    given = os.environ.get("KUEUESTREAM_KUEUE_BIN", "").strip()
    building = background_builds.folder()
    if not given and building is not None:
        given = str(background_builds.wait_for(building, "", "scripts/kueue.sh build"))
    if given:
        if not os.access(given, os.X_OK):
            pytest.fail(f"upstream Kueue binary {given}: not an executable file", pytrace=False)
        return Path(given)
    if background_builds.in_ci():
        pytest.fail(
            "neither KUEUESTREAM_KUEUE_BIN nor KUEUESTREAM_KUEUE_BUILD is set under CI=true: "
            ".ci/run must build upstream Kueue (scripts/kueue.sh build)",
            pytrace=False,
        )
    done = _kueue_sh("path")
    if done.returncode != 0:
        pytest.skip("upstream Kueue is not built: scripts/kueue.sh build (or set KUEUESTREAM_KUEUE_BIN)")
    return Path(done.stdout.strip())


def crd_dir() -> Path:
    """The folder of upstream's CRD manifests (``scripts/kueue.sh crds``)."""
    done = _kueue_sh("crds")
    if done.returncode != 0:
        pytest.fail(f"scripts/kueue.sh crds failed:\n{done.stderr[-2000:]}", pytrace=False)
    return Path(done.stdout.strip())


def _kubectl(kubeconfig: Path, *args: str, timeout: float = 180) -> None:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"kubectl {' '.join(args)} failed:\n{done.stderr[-4000:]}", pytrace=False)


def apply_crds(kubeconfig: Path) -> None:
    """Apply upstream's CRDs server-side (the Workload CRD overflows client-side apply); wait until served."""
    crds = str(crd_dir())
    _kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "--field-manager=kueue", "-f", crds)
    _kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=120s", "-f", crds)


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _self_signed(directory: Path) -> None:
    """``tls.crt`` and ``tls.key`` for 127.0.0.1 in ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-keyout",
            str(directory / "tls.key"),
            "-out",
            str(directory / "tls.crt"),
        ],
        capture_output=True,
        check=True,
        stdin=subprocess.DEVNULL,
    )


def configuration(webhook_port: int, cert_dir: Path, metrics_port: int, health_port: int) -> str:
    return "\n".join(
        [
            "apiVersion: config.kueue.x-k8s.io/v1beta2",
            "kind: Configuration",
            "namespace: kueue-system",
            "leaderElection:",
            "  leaderElect: false",
            "internalCertManagement:",
            "  enable: false",
            "webhook:",
            "  host: 127.0.0.1",
            f"  port: {webhook_port}",
            f"  certDir: {cert_dir}",
            "metrics:",
            f"  bindAddress: 127.0.0.1:{metrics_port}",
            "health:",
            f"  healthProbeBindAddress: 127.0.0.1:{health_port}",
            "integrations:",
            "  frameworks:",
            "  - batch/job",
            "",
        ]
    )


@dataclass(frozen=True)
class UpstreamKueue:
    """A running upstream manager: its process and its log file."""

    process: subprocess.Popen[bytes]
    log: Path

    def log_tail(self, chars: int = 6000) -> str:
        return self.log.read_text(errors="replace")[-chars:]


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def upstream_kueue(kubeconfig: Path, workdir: Path) -> Iterator[UpstreamKueue]:
    """Upstream's CRDs applied and its manager running against ``kubeconfig`` until the block ends."""
    kueue = binary()
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed: upstream Kueue runs in a mount namespace", pytrace=False)
    apply_crds(kubeconfig)
    certs = workdir / "serving-certs"
    _self_signed(certs)
    # The overlay's upper layer: /etc/kueue/metrics/certs inside the namespace.
    upper, overlay_work = workdir / "etc-upper", workdir / "etc-work"
    shutil.copytree(certs, upper / "kueue" / "metrics" / "certs")
    overlay_work.mkdir()
    webhook_port, metrics_port, health_port = _free_ports(3)
    config = workdir / "configuration.yaml"
    config.write_text(configuration(webhook_port, certs, metrics_port, health_port))
    log = workdir / "kueue.log"
    mount = f"mount -t overlay overlay -o lowerdir=/etc,upperdir={upper},workdir={overlay_work} /etc"
    command = [
        "unshare",
        "--map-root-user",
        "--mount",
        "sh",
        "-c",
        f'{mount} && exec "$0" "$@"',
        str(kueue),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        # The visibility server is an aggregated API: the test API server has no aggregation set up.
        "--feature-gates=VisibilityOnDemand=false",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    running = UpstreamKueue(process, log)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _ready(health_port):
            if process.poll() is not None:
                pytest.fail(
                    f"upstream Kueue exited ({process.returncode}) before ready:\n{running.log_tail()}",
                    pytrace=False,
                )
            if time.monotonic() > deadline:
                tail = running.log_tail()
                pytest.fail(f"upstream Kueue not ready after {START_TIMEOUT_S:g}s:\n{tail}", pytrace=False)
            time.sleep(0.5)
        yield running
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)
