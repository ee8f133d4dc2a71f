"""``kueuestream apply --shadow``: the scaled-out shadow, fed from Kafka, writing nothing to the cluster.

The test plays the workers (it writes the decisions to ``kueue.decisions``, as
a worker's decision writer does) and Kueue (it writes the Workload status); the
watch is the real watcher writing ``kueue.watch``.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import orjson
import pytest

from kueuestream.admission.events import Action
from kueuestream.agents.faust_worker.publish import ensure_topics
from kueuestream.agents.kube.apply_service import KafkaApplier
from kueuestream.agents.kube.rest import WORKLOADS
from kueuestream.agents.kube.shadow import ShadowComparison
from kueuestream.agents.kube.watch_service import WatchOptions, start_watcher
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import kafka_settings
from kueuestream.streams.schemas import Cause, DecisionRecord, Ref
from kueuestream.streams.topics import decision_key, partition_for_key
from tests.cluster.kube_rig import cluster, eventually
from tests.cluster.test_metrics_endpoint import workload
from tests.cluster.test_shadow_mode import admitted, write_status

pytestmark = [pytest.mark.kube, pytest.mark.kafka]


async def test_apply_shadow_compares_kafka_decisions_with_the_live_status(
    kube_config: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    async with cluster(kube_config) as rig:
        q = await rig.quota("applyshadow", "1")
        names = TopicNames(f"t{uuid.uuid4().hex[:8]}.")
        broker = kafka_settings(f"kafka://{kafka_bootstrap}")
        lines: list[str] = []
        report_file = tmp_path / "report.json"
        shadow = ShadowComparison(lines.append, report_file)
        tasks: list[asyncio.Task[Any]] = []
        async with KafkaLog(broker) as kafka:
            try:
                await ensure_topics(kafka, names)
                watcher = await start_watcher(
                    rig.conn, kafka, names, WatchOptions(kubeconfig="", cluster="t")
                )
                tasks.append(asyncio.create_task(watcher.run()))
                await asyncio.wait_for(watcher.synced.wait(), 120)
                applier = KafkaApplier(rig.conn, kafka, broker, names, shadow)
                assert await applier.start() == 0
                tasks += [asyncio.create_task(applier.follow()), asyncio.create_task(applier.flusher())]

                await rig.create(WORKLOADS, workload(q.namespace, "w", "1", q.local_queue))
                status: dict[str, Any] = admitted(q.cluster_queue, q.flavor)
                decision = DecisionRecord(
                    ref=Ref(kind="Workload", namespace=q.namespace, name="w"),
                    action=Action.ADMITTED,
                    status=status,
                    cause=Cause(shard=f"cq:{q.cluster_queue}", offset=0),
                    index=0,
                )
                key = decision_key(q.namespace, "w")
                partition = partition_for_key(key, await kafka.partitions(names.decisions))
                await kafka.append_many(names.decisions, [(key, codec.encode(decision))], partition=partition)
                await write_status(rig, q, "w", admitted(q.cluster_queue, q.flavor))
                wl = (q.namespace, "w")

                async def compared() -> bool:
                    return wl in shadow.compared

                await eventually(compared, "the Workload compared")
                assert shadow.differing == {}

                await write_status(rig, q, "w", admitted(q.cluster_queue, "other-flavor"))

                async def differs() -> bool:
                    return wl in shadow.differing

                await eventually(differs, "the flavor difference reported")
                assert shadow.differing[wl] == {
                    "flavors": (f"main: cpu={q.flavor}", "main: cpu=other-flavor")
                }
                report = orjson.loads(report_file.read_bytes())
                assert report["differing"] == 1 and report["workloads"][0]["name"] == "w"
                assert applier.objects.writes == 0
                assert [r async for r in kafka.read(names.applied, 0)] == []
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
