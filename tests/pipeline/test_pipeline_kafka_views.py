"""The Faust Tables that mirror the state for operators end with that state.

Their writes are held back and sent together, the last value of each key
(``agents/faust_worker/held_writes.py``). Read back from their changelog topics
once every decision is made, the ``usage`` and ``quotas`` views equal what the
engines of the same run on the embedded runtime hold, the ``workloads`` view
each Workload's last decision, and ingest's ``objects`` table its queue
structure; two workers share the partitions.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from kueuestream.agents.faust_worker.app import VIEW_TABLES, cq_views, workload_view
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.schemas import DecisionRecord
from tests.pipeline.kafka_run import worker_group
from tests.pipeline.test_pipeline_kafka import Steps, embedded_run, encoded, through_kafka
from tests.pipeline.watch_streams import workload_stream

pytestmark = pytest.mark.kafka

Views = dict[str, dict[str, Any]]


def embedded_views(steps: Steps) -> tuple[Views, list[dict[int, int]], list[int]]:
    """What the views should end with, after the embedded runtime ran ``steps``; and, after each
    step, the admission end offsets and decision count (to follow the Kafka run)."""
    pipeline, log, ends, counts = embedded_run(steps)
    views: Views = {name: {} for name in (*VIEW_TABLES, "objects")}
    for p in range(pipeline.partitions):
        for shard, held in pipeline.admission.state(p).shards.items():
            for name, cq in held.engine.cqs.items():
                views["usage"][f"{shard}/{name}"], views["quotas"][f"{shard}/{name}"] = cq_views(cq.node)
        for record in log.read_sync("kueue.decisions", p):
            d = codec.decode(record.value, DecisionRecord)
            views["workloads"][f"{d.ref.namespace}/{d.ref.name}"] = workload_view(d)
    views["objects"] = dict(pipeline.ingest.router.objects)
    return views, ends, counts


async def changelog_views(broker: str, app_id: str) -> Views:
    """Each view as its changelog topic holds it: the last value of each key, deletes applied."""
    views: Views = {}
    async with KafkaLog(broker) as kafka:
        for name in (*VIEW_TABLES, "objects"):
            topic = f"{app_id}-{name}-changelog"
            table: dict[str, Any] = {}
            for p in range(await kafka.partitions(topic)):
                async for record in kafka.read(topic, p):
                    key = orjson.loads(record.key)
                    if record.value is None:
                        table.pop(key, None)
                    else:
                        table[key] = orjson.loads(record.value)
            views[name] = table
    return views


def test_the_views_end_with_the_state_of_the_engines(kafka_bootstrap: str, tmp_path: Path) -> None:
    steps = encoded(workload_stream(30, seed=17).steps)
    expected, ends, counts = embedded_views(steps)
    # The run leaves Workloads admitted, so usage is not only zeros.
    assert any(expected["usage"].values()) and expected["workloads"] and expected["objects"]
    with worker_group(kafka_bootstrap, tmp_path, 2) as w:
        asyncio.run(through_kafka(kafka_bootstrap, w.names, steps, ends, counts))
        # Held writes go out every half second, through a producer outside any transaction.
        deadline = time.monotonic() + 30
        while (got := asyncio.run(changelog_views(kafka_bootstrap, w.app_id))) != expected:
            if time.monotonic() > deadline:
                break
            time.sleep(0.5)
    for name in expected:
        assert got[name] == expected[name], name
