"""``kueuestream watch``: a real cluster into a real Kafka ``kueue.watch``, stopped and started again.

- the first run lists the cluster into the topic, every record keyed by
  cluster/kind/namespace/name; the Configuration comes from the ConfigMap
  named by ``--config-map``, and changes made while it runs follow;
- SIGINT stops it cleanly (exit 0, a summary line);
- a second run lists nothing (it resumes from what the topic records), sends
  what changed meanwhile, and no object event is in the topic twice;
- a kubeconfig context that does not exist is refused before anything starts.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from kueuestream.agents.log_entries import control_kind
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.schemas import WatchEvent
from kueuestream.streams.topics import watch_key
from tests.kube.rig import KUEUE, cluster, cluster_queue, create, flavor, namespace, unique

pytestmark = pytest.mark.kube

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  quotaCheck: OnlyDeclared
"""


class WatchProcess:
    def __init__(self, args: list[str], log: Path) -> None:
        self.log = log
        self.out = log.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "kueuestream", "watch", *args],
            stdout=self.out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def text(self) -> str:
        return self.log.read_text()

    async def wait_for(self, needle: str, timeout_s: float = 120) -> str:
        deadline = time.monotonic() + timeout_s
        while needle not in self.text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"no {needle!r} from kueuestream watch:\n{self.text()}")
            await asyncio.sleep(0.1)
        return self.text()

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=60)
        self.out.close()
        return code


async def topic_events(broker: str, names: TopicNames) -> list[tuple[bytes, WatchEvent]]:
    async with KafkaLog(broker) as kafka:
        return [(r.key, codec.decode(r.value, WatchEvent)) async for r in kafka.read(names.watch, 0)]


async def eventually_in_topic(
    broker: str, names: TopicNames, wanted: set[str], timeout_s: float = 60
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        seen = {e.name for _, e in await topic_events(broker, names)}
        if wanted <= seen:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {names.watch} within {timeout_s:g}s: {sorted(wanted - seen)}")
        await asyncio.sleep(0.5)


@pytest.mark.kafka
async def test_watch_into_kafka_stops_and_resumes(
    kube_config: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    names = TopicNames(f"{unique('w')}.")
    broker = f"kafka://{kafka_bootstrap}"
    async with cluster(kube_config) as conn:
        ns = await namespace(conn, "cmd")
        config_map = unique("kueue-manager-config")
        await create(
            conn,
            f"/api/v1/namespaces/{ns}/configmaps",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"namespace": ns, "name": config_map},
                "data": {"controller_manager_config.yaml": CONFIG},
            },
        )
        rf, cq1, cq2, cq3 = unique("rf"), unique("cq"), unique("cq"), unique("cq")
        await create(conn, f"{KUEUE}/resourceflavors", flavor(rf))
        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(cq1, rf, "2"))

        args = [
            "--kubeconfig",
            kube_config,
            "--cluster",
            "east",
            "--broker",
            broker,
            "--topic-prefix",
            names.prefix,
            "--config-map",
            f"{ns}/{config_map}",
        ]
        first = WatchProcess(args, tmp_path / "first.log")
        try:
            text = await first.wait_for("watching")
            assert f"of cluster east ({conn.server}) into {names.watch}" in text
            await eventually_in_topic(broker, names, {rf, cq1, config_map})
            await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(cq2, rf, "2"))
            await eventually_in_topic(broker, names, {cq2})
        finally:
            assert first.stop() == 0
        assert "events, 0 relists" in first.text()

        await create(conn, f"{KUEUE}/clusterqueues", cluster_queue(cq3, rf, "2"))
        second = WatchProcess(args, tmp_path / "second.log")
        try:
            text = await second.wait_for("watching")
            assert "listed 0 objects" in text  # resumed, not relisted
            await eventually_in_topic(broker, names, {cq3})
        finally:
            assert second.stop() == 0

    records = await topic_events(broker, names)
    objects = [(k, e) for k, e in records if not control_kind(e.object)]
    assert all(e.cluster == "east" for _, e in records)
    assert all(k == watch_key(e.cluster, e.kind, e.namespace, e.name) for k, e in objects)
    counts = Counter((e.kind, e.namespace, e.name, e.resourceVersion, e.type) for _, e in objects)
    assert [k for k, n in counts.items() if n > 1] == []
    config_events = [e for _, e in objects if e.kind == "ConfigMap"]
    assert [e.name for e in config_events] == [config_map]  # only the one named, no other ConfigMap


def test_an_unknown_context_is_refused_before_anything_starts(kube_config: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "kueuestream",
            "watch",
            "--kubeconfig",
            kube_config,
            "--context",
            "nowhere",
            "--broker",
            "kafka://127.0.0.1:1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert "context 'nowhere' not found; expected one of: kueuestream-admin" in done.stderr
