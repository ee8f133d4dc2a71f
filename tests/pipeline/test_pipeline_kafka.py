"""The Faust workers on a real Kafka broker decide exactly what the embedded runtime decides.

Each scenario is run first through the embedded runtime, which gives, after
every step, the admission log and the decisions to expect; then through Faust
workers: after each step the test waits until Kafka holds exactly that many
records, and at the end the two logs must be byte for byte the same.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Sequence
from pathlib import Path

import pytest

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.audit.transfer import export_log, import_log
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.faust_worker.publish import send_watch
from kueuestream.agents.sources.manifests import load_paths
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.schemas import ErrorRecord, WatchEvent
from tests.helpers import T0, cpu_workload, two_trees
from tests.pipeline.embedded_run import raw_topic
from tests.pipeline.kafka_run import TopicReader, read_topic, total, wait_for_count, wait_until, worker_group
from tests.pipeline.watch_streams import Stream, bad_watch_values, workload_stream

pytestmark = pytest.mark.kafka

EXAMPLES = Path(__file__).resolve().parents[2] / "config" / "examples"

Steps = Sequence[Sequence[bytes]]


def encoded(steps: Sequence[Sequence[WatchEvent]]) -> list[list[bytes]]:
    return [[codec.encode(e) for e in step] for step in steps]


def embedded_run(steps: Steps) -> tuple[EmbeddedPipeline, MemoryLog, list[dict[int, int]], list[int]]:
    """The reference run: its pipeline, its log, and after each step the admission end offsets
    and decision count."""
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    ends, counts = [], []
    for step in steps:
        pipeline.submit_raw(step)
        pipeline.pump()
        ends.append(log.end_offsets_sync("kueue.admission"))
        counts.append(sum(log.end_offsets_sync("kueue.decisions").values()))
    return pipeline, log, ends, counts


def embedded(steps: Steps) -> tuple[MemoryLog, list[dict[int, int]], list[int]]:
    _, log, ends, counts = embedded_run(steps)
    return log, ends, counts


async def through_kafka(
    broker: str, names: TopicNames, steps: Steps, ends: list[dict[int, int]], counts: list[int]
) -> None:
    async with KafkaLog(broker) as kafka, TopicReader(broker, names.decisions, 6) as decisions:
        for step, end, count in zip(steps, ends, counts, strict=True):
            await send_watch(kafka, names, step)

            async def caught_up(end: dict[int, int] = end) -> bool:
                return await kafka.end_offsets(names.admission) == end

            await wait_until(caught_up, f"admission end offsets {end}")
            await wait_for_count(decisions, count)
        # Nothing more comes after the last step.
        await asyncio.sleep(1.0)
        await wait_for_count(decisions, counts[-1], timeout=0)
        assert await kafka.end_offsets(names.admission) == ends[-1]


async def kafka_topics(broker: str, names: TopicNames) -> dict[str, list[list[bytes]]]:
    async with KafkaLog(broker) as kafka:
        return {
            base: [[r.value for r in part] for part in await read_topic(kafka, topic)]
            for base, topic in (("kueue.admission", names.admission), ("kueue.decisions", names.decisions))
        }


def assert_same_as_embedded(broker: str, tmp_path: Path, workers: int, steps: Steps, tag: str = "") -> None:
    log, ends, counts = embedded(steps)
    with worker_group(broker, tmp_path, workers, tag=tag) as w:
        asyncio.run(through_kafka(broker, w.names, steps, ends, counts))
        got = asyncio.run(kafka_topics(broker, w.names))
    want = {topic: raw_topic(log, topic) for topic in got}
    assert got == want
    assert counts[-1] > 0


@pytest.mark.parametrize("workers", [1, 3])
def test_a_workload_stream_decides_the_same_with_1_and_3_workers(
    kafka_bootstrap: str, tmp_path: Path, workers: int
) -> None:
    stream = workload_stream(24, seed=21)
    assert_same_as_embedded(kafka_bootstrap, tmp_path, workers, encoded(stream.steps))


@pytest.mark.parametrize("example", ["dra", "drs", "team-queues"])
def test_the_examples_decide_the_same_with_3_workers(
    kafka_bootstrap: str, tmp_path: Path, example: str
) -> None:
    loaded = load_paths([str(EXAMPLES / example)])
    events, problems = listing_events([d.manifest for d in loaded.docs], T0)
    assert not problems and not loaded.errors
    assert_same_as_embedded(
        kafka_bootstrap, tmp_path, 3, [[codec.encode(e) for e in events]], tag=example[:3]
    )


def test_bad_events_are_recorded_and_skipped_on_kafka(kafka_bootstrap: str, tmp_path: Path) -> None:
    stream = Stream()
    stream.listing(two_trees())
    after = Stream(time_ms=T0 + 10_000)
    after.event(cpu_workload("good", "lq-solo", 2))
    steps = [*encoded(stream.steps), bad_watch_values(), *encoded(after.steps)]
    log, ends, counts = embedded(steps)
    with worker_group(kafka_bootstrap, tmp_path, 1) as w:
        asyncio.run(through_kafka(kafka_bootstrap, w.names, steps, ends, counts))

        async def errors() -> list[ErrorRecord]:
            async with KafkaLog(kafka_bootstrap) as kafka:
                return [
                    codec.decode(r.value, ErrorRecord) for r in (await read_topic(kafka, w.names.errors))[0]
                ]

        found = asyncio.run(errors())
    expected = [codec.decode(r.value, ErrorRecord) for r in log.read_sync("kueue.errors", 0)]
    assert len(found) == 4
    assert [e.error for e in found] == [e.error for e in expected]
    assert [e.source.offset for e in found] == [e.source.offset for e in expected]


def test_export_import_and_replay_of_a_kafka_log(kafka_bootstrap: str, tmp_path: Path) -> None:
    stream = workload_stream(15, seed=4)
    steps = encoded(stream.steps)
    _, ends, counts = embedded(steps)
    with worker_group(kafka_bootstrap, tmp_path, 1) as w:
        asyncio.run(through_kafka(kafka_bootstrap, w.names, steps, ends, counts))
    out = io.StringIO()
    # Replay straight from Kafka...
    assert replay(f"kafka://{kafka_bootstrap}", out=out, prefix=w.prefix) == 0, out.getvalue()
    # ... and from an exported copy on disk, then back into other Kafka topics.
    exported = tmp_path / "exported"
    assert export_log(f"kafka://{kafka_bootstrap}", str(exported), prefix=w.prefix) == 0
    assert replay(str(exported), out=out) == 0, out.getvalue()
    again = TopicNames(f"i{w.prefix}")
    assert import_log(str(exported), f"kafka://{kafka_bootstrap}", prefix=again.prefix) == 0
    assert replay(f"kafka://{kafka_bootstrap}", out=out, prefix=again.prefix) == 0, out.getvalue()

    async def copied() -> int:
        async with KafkaLog(kafka_bootstrap) as kafka:
            return total(await read_topic(kafka, again.admission))

    assert asyncio.run(copied()) == sum(ends[-1].values())
