"""Running a scenario through the embedded runtime and reading back what it wrote."""

from __future__ import annotations

from collections.abc import Sequence

from kueuestream.agents.embedded.memory_log import SyncLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.log_entries import decode_entry
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.schemas import DecisionRecord, ErrorRecord, WatchEvent
from tests.pipeline.checks import decode_all


def run_steps(pipeline: EmbeddedPipeline, steps: Sequence[Sequence[WatchEvent]]) -> EmbeddedPipeline:
    for step in steps:
        pipeline.submit(step)
        pipeline.pump()
        # Time passes between steps, so deferred retries (Kueue's requeue batch) happen.
        pipeline.advance_clock()
    return pipeline


def decisions(log: SyncLog, names: TopicNames | None = None) -> list[list[DecisionRecord]]:
    n = names or TopicNames()
    count = log.partitions_sync(n.decisions)
    return [decode_all(r.value for r in log.read_sync(n.decisions, p)) for p in range(count)]


def raw_topic(log: SyncLog, topic: str) -> list[list[bytes]]:
    return [[r.value for r in log.read_sync(topic, p)] for p in range(log.partitions_sync(topic))]


def errors(log: SyncLog, names: TopicNames | None = None) -> list[ErrorRecord]:
    n = names or TopicNames()
    return [codec.decode(r.value, ErrorRecord) for r in log.read_sync(n.errors, 0)]


def followups(log: SyncLog, names: TopicNames | None = None) -> int:
    n = names or TopicNames()
    total = 0
    for p in range(log.partitions_sync(n.admission)):
        for r in log.read_sync(n.admission, p):
            total += decode_entry(r.value).origin.stream.startswith("admission/")
    return total
