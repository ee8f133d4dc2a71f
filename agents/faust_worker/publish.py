"""``kueuestream publish DIR --broker ...``: manifests into ``kueue.watch``, as a watcher would send them."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from kueuestream.agents.embedded.runtime import now_ms
from kueuestream.agents.kafka_commands import run_with_kafka
from kueuestream.agents.sources.manifests import load_paths
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings, KafkaTarget
from kueuestream.streams.log import LogError
from kueuestream.streams.schemas import WatchEvent


async def ensure_topics(kafka: KafkaLog, names: TopicNames) -> None:
    """Create the pipeline's topics with their partition counts, before any worker subscribes.

    A consumer subscribing to a missing topic makes a broker with automatic topic
    creation create it with its default count (one partition), which would put
    every shard on one partition for good.
    """
    counts = names.partition_counts()
    for topic in names.all():
        await kafka.ensure_topic(topic, counts[topic])


async def send_watch(kafka: KafkaLog, names: TopicNames, values: Sequence[bytes]) -> None:
    await ensure_topics(kafka, names)
    if values:
        await kafka.append_many(names.watch, [(b"", v) for v in values], partition=0)


async def publish_events(broker: KafkaTarget, events: Sequence[WatchEvent], *, prefix: str = "") -> None:
    async with KafkaLog(broker) as kafka:
        await send_watch(kafka, TopicNames(prefix), [codec.encode(e) for e in events])


def publish_dir(directory: str, broker: KafkaTarget, *, prefix: str = "") -> int:
    """Send every manifest under ``directory`` as one batch of ADDED watch events; 0 on success."""
    loaded = load_paths([directory])
    for problem in loaded.errors:
        print(f"error: {problem}", file=sys.stderr)
    events, problems = listing_events([doc.manifest for doc in loaded.docs], now_ms())
    for problem in problems:
        print(f"error: {problem}", file=sys.stderr)

    def send(settings: KafkaSettings) -> int:
        asyncio.run(publish_events(settings, events, prefix=prefix))
        return 0

    status = run_with_kafka(broker, send, (LogError, ValueError))
    if status:
        return status
    objects = sum(1 for e in events if e.kind != "WatchBatch")
    print(f"published {objects} objects to {TopicNames(prefix).watch}")
    return 1 if loaded.errors or problems else 0
