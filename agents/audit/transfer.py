"""``kueuestream export`` and ``import``: the pipeline's topics between Kafka and a local log folder."""

from __future__ import annotations

import asyncio
from pathlib import Path

from kueuestream.agents.kafka_commands import run_with_kafka
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings, KafkaTarget
from kueuestream.streams.log import LogError
from kueuestream.streams.topic_copy import copy_topic

# What a copy can run into: the log's errors, the file system's, bad values.
FAILURES = (LogError, OSError, ValueError)


def export_log(broker: KafkaTarget, out_dir: str, *, prefix: str = "") -> int:
    """``kueuestream export``: copy the pipeline's Kafka topics into an embedded log directory.

    Topics are stored under their plain names (``kueue.admission``, ...), so
    ``kueuestream replay DIR`` reads the copy whatever prefix production used.
    """

    async def run(settings: KafkaSettings) -> int:
        names = TopicNames(prefix)
        async with KafkaLog(settings) as kafka:
            existing = set(await kafka.topics())
            with FileLog(out_dir) as target:
                for topic in names.all():
                    if topic not in existing:
                        continue
                    copy = await copy_topic(kafka, target, topic, destination_topic=names.base_of(topic))
                    kept = "offsets kept" if copy.offsets_preserved else "offsets renumbered"
                    print(f"{topic} -> {copy.destination_topic}: {copy.records} records ({kept})")
        return 0

    return run_with_kafka(broker, lambda settings: asyncio.run(run(settings)), FAILURES)


def import_log(in_dir: str, broker: KafkaTarget, *, prefix: str = "") -> int:
    """``kueuestream import``: copy an embedded log directory into (empty) Kafka topics."""

    async def run(settings: KafkaSettings) -> int:
        names = TopicNames(prefix)
        if not Path(in_dir).is_dir():
            raise LogError(f"no log to import at {in_dir}")
        async with KafkaLog(settings) as kafka:
            with FileLog(in_dir, read_only=True) as source:
                for topic in source.topics_sync():
                    copy = await copy_topic(source, kafka, topic, destination_topic=f"{names.prefix}{topic}")
                    print(f"{topic} -> {copy.destination_topic}: {copy.records} records")
        return 0

    return run_with_kafka(broker, lambda settings: asyncio.run(run(settings)), FAILURES)
