"""Kafka over SASL_SSL: the real broker's listener with TLS (client certificate) and PLAIN or SCRAM.

The listener is the one ``scripts/kafka.sh`` starts beside the PLAINTEXT one
(fixture ``kafka_sasl_ssl``): its certificate is signed by a test CA, it asks
every client for a certificate signed by that CA, and it knows one user for
PLAIN (JAAS) and SCRAM-SHA-256/512 (added by ``kafka-storage format --add-scram``).

- the log, a worker, publish, replay and export/import work
  with the right settings, given as flags, as variables or in the URL;
- a wrong password ends each command with one clear line (no traceback, no
  password); an untrusted broker certificate or a missing client certificate
  too: TLS verification is on.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from pathlib import Path
from urllib.parse import quote

import pytest

from kueuestream.admission.events import Action
from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded.runtime import admit_documents
from kueuestream.agents.sources.manifests import load_paths
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import Given, KafkaSettings, build_kafka_settings
from kueuestream.streams.schemas import DecisionRecord
from tests.kafka.sasl_ssl_broker import SaslSslBroker

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "config" / "examples" / "team-queues"
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
WRONG = "not-the-password-42"
# Upper bound for the pipeline to decide; it normally takes a few seconds.
TIMEOUT = 120.0


def settings_of(broker: SaslSslBroker, mechanism: str) -> KafkaSettings:
    given = {
        "ssl_cafile": broker.cafile,
        "ssl_certfile": broker.certfile,
        "ssl_keyfile": broker.keyfile,
        "sasl_mechanism": mechanism,
        "sasl_username": broker.username,
        "sasl_password_file": broker.password_file,
    }
    return build_kafka_settings(
        [Given(f"kafka://{broker.bootstrap}", "test")], {k: Given(str(v), k) for k, v in given.items()}
    )


class Way:
    """How a command is given the settings: the broker URL, flags, and environment variables."""

    def __init__(self, broker: SaslSslBroker, mechanism: str, how: str, password_file: Path | None = None):
        secret = password_file or broker.password_file
        tls = {"ssl-cafile": broker.cafile, "ssl-certfile": broker.certfile, "ssl-keyfile": broker.keyfile}
        self.url = f"kafka://{broker.bootstrap}"

        def variables(options: Mapping[str, object]) -> dict[str, str]:
            return {f"KUEUESTREAM_KAFKA_{k.upper().replace('-', '_')}": str(v) for k, v in options.items()}

        self.flags: list[str] = []
        self.env: dict[str, str] = {}
        if how == "flags":
            options = {**tls, "sasl-mechanism": mechanism, "sasl-username": broker.username}
            self.flags = [x for k, v in options.items() for x in (f"--kafka-{k}", str(v))]
            self.flags += ["--kafka-sasl-password-file", str(secret)]
        elif how == "environment":
            options = {**tls, "sasl-mechanism": mechanism, "sasl-username": broker.username}
            self.env = variables({**options, "sasl-password-file": secret})
        else:  # the URL's userinfo, TLS files from the environment, the mechanism as a flag
            password = quote(secret.read_text().strip(), safe="")
            self.url = f"kafka://{broker.username}:{password}@{broker.bootstrap}"
            self.env = variables(tls)
            self.flags = ["--kafka-sasl-mechanism", mechanism]

    def argv(self, *args: str) -> list[str]:
        """``args`` with ``{url}`` replaced by the broker URL, then the flags."""
        return [a.replace("{url}", self.url) for a in args] + self.flags

    def environ(self) -> dict[str, str]:
        kept = {k: v for k, v in os.environ.items() if not k.startswith("KUEUESTREAM_KAFKA_")}
        return {**kept, **self.env, "PYTHONUNBUFFERED": "1"}

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kueuestream", *self.argv(*args)],
            cwd=REPO,
            env=self.environ(),
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=TIMEOUT,
            check=False,
        )


WAYS = {"SCRAM-SHA-512": "environment", "SCRAM-SHA-256": "flags", "PLAIN": "url"}


@pytest.fixture
def prefix() -> str:
    return f"sasl{uuid.uuid4().hex[:8]}."


# --- with the right settings ---------------------------------------------------------------


@pytest.mark.parametrize("mechanism", MECHANISMS)
async def test_the_log_round_trips_over_sasl_ssl(kafka_sasl_ssl: SaslSslBroker, mechanism: str) -> None:
    topic = f"kueuestream-test-sasl-{uuid.uuid4().hex[:10]}"
    async with KafkaLog(settings_of(kafka_sasl_ssl, mechanism)) as kafka:
        await kafka.ensure_topic(topic, 2)
        records = [(f"k{i}".encode(), f"v{i}".encode()) for i in range(10)]
        positions = await kafka.append_many(topic, records)
        read = {p: [(r.key, r.value) for r in [r async for r in kafka.read(topic, p)]] for p in range(2)}
        await kafka.delete_topic(topic)
    assert sorted(x for part in read.values() for x in part) == sorted(records)
    assert sum(len(part) for part in read.values()) == len(positions)


def admitted_by_admit() -> set[str]:
    """The Workloads ``kueuestream admit`` admits for the example."""
    loaded = load_paths([str(EXAMPLE)])
    items = admit_documents([doc.manifest for doc in loaded.docs])
    return {
        f"{w['metadata']['namespace']}/{w['metadata']['name']}"
        for w in items
        if any(c["type"] == "Admitted" and c["status"] == "True" for c in w["status"].get("conditions", []))
    }


async def admitted_on_kafka(settings: KafkaSettings, names: TopicNames) -> set[str]:
    """The Workloads whose last decision in ``kueue.decisions`` is Admitted."""
    last: dict[str, Action] = {}
    async with KafkaLog(settings) as kafka:
        if names.decisions not in await kafka.topics():
            return set()
        for partition in range(await kafka.partitions(names.decisions)):
            async for record in kafka.read(names.decisions, partition):
                decision = codec.decode(record.value, DecisionRecord)
                if decision.ref.kind == "Workload":
                    last[f"{decision.ref.namespace}/{decision.ref.name}"] = decision.action
    return {ref for ref, action in last.items() if action == Action.ADMITTED}


@pytest.fixture
def worker_log(tmp_path: Path) -> Iterator[Path]:
    log = tmp_path / "worker.log"
    yield log
    if log.exists():
        print(f"--- worker log ---\n{log.read_text(errors='replace')[-3000:]}", file=sys.stderr)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_worker_with_the_right_credentials_admits_end_to_end(
    kafka_sasl_ssl: SaslSslBroker, mechanism: str, prefix: str, tmp_path: Path, worker_log: Path
) -> None:
    """publish -> worker -> decisions over SASL_SSL: the worker admits what ``admit`` admits."""
    way = Way(kafka_sasl_ssl, mechanism, WAYS[mechanism])
    published = way.run("publish", str(EXAMPLE), "--broker", "{url}", "--topic-prefix", prefix)
    assert published.returncode == 0, published.stderr
    assert published.stdout.strip() == f"published 14 objects to {prefix}kueue.watch"

    with worker_log.open("wb") as out:
        args = ["worker", "--broker", "{url}", "--topic-prefix", prefix, "--app-id", prefix.rstrip(".")]
        args += ["--datadir", str(tmp_path / "faust"), "--loglevel", "info"]
        worker = subprocess.Popen(
            [sys.executable, "-m", "kueuestream", *way.argv(*args)],
            cwd=REPO,
            env=way.environ(),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        want = admitted_by_admit()
        assert want, "the example admits some Workloads"
        names, settings = TopicNames(prefix), settings_of(kafka_sasl_ssl, mechanism)
        deadline = time.monotonic() + TIMEOUT
        got: set[str] = set()
        while got != want and time.monotonic() < deadline and worker.poll() is None:
            time.sleep(1.0)
            got = asyncio.run(admitted_on_kafka(settings, names))
        assert worker.poll() is None, "the worker exited"
        assert got == want
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            worker.wait(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(timeout=30)
    log = worker_log.read_text(errors="replace")
    assert f"Authenticated as {kafka_sasl_ssl.username} via {mechanism}" in log
    assert kafka_sasl_ssl.password not in log

    replayed = way.run("replay", "{url}", "--topic-prefix", prefix)
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout.startswith("OK: ")


def test_export_and_import_over_sasl_ssl(kafka_sasl_ssl: SaslSslBroker, prefix: str, tmp_path: Path) -> None:
    """A log copied out of Kafka and back, both ways over SASL_SSL, replays the same."""
    way = Way(kafka_sasl_ssl, "SCRAM-SHA-512", "flags")
    assert way.run("publish", str(EXAMPLE), "--broker", "{url}", "--topic-prefix", prefix).returncode == 0
    exported = tmp_path / "exported"
    done = way.run("export", "--broker", "{url}", "--out", str(exported), "--topic-prefix", prefix)
    assert done.returncode == 0, done.stderr
    # 14 objects between the two markers of one listing batch.
    assert f"{prefix}kueue.watch -> kueue.watch: 16 records" in done.stdout
    again = f"{prefix}again."
    done = way.run("import", str(exported), "--broker", "{url}", "--topic-prefix", again)
    assert done.returncode == 0, done.stderr
    assert f"kueue.watch -> {again}kueue.watch: 16 records" in done.stdout

    async def watch_values(topic_prefix: str) -> list[bytes]:
        async with KafkaLog(settings_of(kafka_sasl_ssl, "PLAIN")) as kafka:
            return [r.value async for r in kafka.read(f"{topic_prefix}kueue.watch", 0)]

    assert asyncio.run(watch_values(again)) == asyncio.run(watch_values(prefix))


# --- with the wrong settings -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "mechanism"),
    [
        ("worker", "SCRAM-SHA-512"),
        ("publish", "PLAIN"),
        ("replay", "SCRAM-SHA-256"),
        ("export", "SCRAM-SHA-512"),
        ("import", "PLAIN"),
    ],
)
def test_a_wrong_password_fails_with_one_clear_line(
    kafka_sasl_ssl: SaslSslBroker, command: str, mechanism: str, tmp_path: Path
) -> None:
    wrong = tmp_path / "wrong-password"
    wrong.write_text(WRONG + "\n")
    way = Way(kafka_sasl_ssl, mechanism, WAYS[mechanism], password_file=wrong)
    args = {
        "worker": ["worker", "--broker", "{url}", "--datadir", str(tmp_path / "faust")],
        "publish": ["publish", str(EXAMPLE), "--broker", "{url}"],
        "replay": ["replay", "{url}"],
        "export": ["export", "--broker", "{url}", "--out", str(tmp_path / "out")],
        "import": ["import", str(tmp_path), "--broker", "{url}"],
    }[command]
    done = way.run(*args)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Traceback" not in output
    assert WRONG not in output and kafka_sasl_ssl.password not in output
    assert done.stderr.splitlines() == [
        f"error: cannot use Kafka at {kafka_sasl_ssl.bootstrap} (SASL_SSL, {mechanism} as "
        f"{kafka_sasl_ssl.username}): the broker rejected the user name or password of "
        f"{kafka_sasl_ssl.username!r} ({REJECTED[mechanism]})"
    ]


# What the broker says (Kafka 3.9) when it rejects a password.
REJECTED = {
    "PLAIN": "Authentication failed: Invalid username or password",
    "SCRAM-SHA-256": "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-256",
    "SCRAM-SHA-512": "Authentication failed during authentication due to invalid credentials "
    "with SASL mechanism SCRAM-SHA-512",
}


def test_a_broker_certificate_the_ca_did_not_sign_is_refused(
    kafka_sasl_ssl: SaslSslBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """TLS verification is on: the client certificate is no CA of the broker's certificate."""
    way = Way(kafka_sasl_ssl, "SCRAM-SHA-512", "flags")
    for name in list(os.environ):
        if name.startswith("KUEUESTREAM_KAFKA_"):
            monkeypatch.delenv(name)
    argv = way.argv("publish", str(EXAMPLE), "--broker", "{url}")
    argv[argv.index("--kafka-ssl-cafile") + 1] = str(kafka_sasl_ssl.certfile)
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: cannot use Kafka at {kafka_sasl_ssl.bootstrap} (SASL_SSL, SCRAM-SHA-512 as "
        f"{kafka_sasl_ssl.username}): the broker's TLS certificate is not trusted by the CA file "
        f"{kafka_sasl_ssl.certfile}: self-signed certificate in certificate chain"
    ]


def test_a_client_without_a_certificate_is_turned_away(
    kafka_sasl_ssl: SaslSslBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    way = Way(kafka_sasl_ssl, "PLAIN", "flags")
    for name in list(os.environ):
        if name.startswith("KUEUESTREAM_KAFKA_"):
            monkeypatch.delenv(name)
    argv = way.argv("publish", str(EXAMPLE), "--broker", "{url}")
    for flag in ("--kafka-ssl-certfile", "--kafka-ssl-keyfile"):
        at = argv.index(flag)
        del argv[at : at + 2]
    assert main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        f"error: cannot use Kafka at {kafka_sasl_ssl.bootstrap} (SASL_SSL, PLAIN as "
        f"{kafka_sasl_ssl.username}): the broker closed the connection; if it requires a client "
        "certificate, give one (KUEUESTREAM_KAFKA_SSL_CERTFILE and KUEUESTREAM_KAFKA_SSL_KEYFILE, "
        "or their flags)"
    ]
