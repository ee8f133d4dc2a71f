"""``kueuestream replay``: the admission log as an audit trail.

Replay runs every partition of the recorded ``kueue.admission`` through fresh
engines (the same handler the runtimes use) and compares, byte for byte, each
decision with the recorded one in ``kueue.decisions`` and each record the
runtime appended itself (handovers, the job controller's STOPPED events) with
the recorded one. A log written with a cluster behind it, whose jobs' stops
came through the watch, replays without the job controller stand-in. Any
difference means the log and the decisions disagree: an altered input, a lost
or extra record, or an engine that is not deterministic.

A log with a ``kueue.multikueue`` topic also has its MultiKueue dispatch
replayed: every ``kueue.watch`` event goes through a fresh MultiKueue agent and
each decision is compared, byte for byte, with the recorded one.

Records an embedded log knows it lost (a damaged tail it cut off, in any
topic, or damage it has not cut yet) are listed, and the replay is not OK even
when every decision that is left is reproduced.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from kueuestream.admission.events import EventType
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.log_entries import AdmissionEntry, decode_entry, encode_entry
from kueuestream.agents.multikueue import MultiKueueHandler
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_log import KafkaLog
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.kafka_urls import redact_text
from kueuestream.streams.log import Log, LogError, Record
from kueuestream.streams.schemas import DecisionRecord
from kueuestream.streams.topics import partition_for_shard

FollowUpKey = tuple[int, str, int, int]  # target partition, origin stream, origin offset, index


def is_kafka(spec: str) -> bool:
    return spec.startswith("kafka://")


@contextlib.asynccontextmanager
async def open_log(spec: str, kafka_settings: KafkaSettings | None = None) -> AsyncIterator[Log]:
    """A log named on the command line: ``kafka://HOST:PORT`` or an embedded log directory.

    ``kafka_settings``, when given, is how Kafka is reached (TLS, SASL); else ``spec`` alone.
    """
    if is_kafka(spec):
        async with KafkaLog(kafka_settings or spec) as kafka:
            yield kafka
        return
    if not Path(spec).is_dir():
        raise LogError(f"no embedded log at {spec} (expected a directory, or kafka://HOST:PORT)")
    with FileLog(spec, read_only=True) as file_log:
        yield file_log


async def read_partition(log: Log, topic: str, partition: int) -> list[Record]:
    return [record async for record in log.read(topic, partition)]


async def read_admission(log: Log, names: TopicNames) -> list[list[Record]]:
    if names.admission not in await log.topics():
        raise LogError(f"the log has no {names.admission} topic: nothing to replay")
    count = await log.partitions(names.admission)
    return [await read_partition(log, names.admission, p) for p in range(count)]


@dataclass(slots=True)
class Mismatch:
    what: str
    expected: str
    got: str


@dataclass(slots=True)
class Verdict:
    records: int = 0
    shards: int = 0
    decisions: int = 0
    followups: int = 0
    mismatches: list[Mismatch] = field(default_factory=list)


def _decision_label(raw: bytes) -> str:
    try:
        d = codec.decode(raw, DecisionRecord)
    except DecodeError:
        return "an unreadable decision"
    what = f"{d.action.value} {d.ref.namespace}/{d.ref.name}"
    return f"decision {d.index} of cause {d.cause.shard}@{d.cause.offset} ({what})"


def stood_in_for_job_controller(admission: Sequence[Sequence[Record]]) -> bool:
    """Whether the runtime that wrote ``admission`` stopped evicted jobs itself.

    It did if the log holds a STOPPED record it appended. A log written with a
    cluster behind it holds none (its stops come through the watch); a log with
    no eviction at all replays the same either way.
    """
    for records in admission:
        for record in records:
            with contextlib.suppress(DecodeError):
                entry = decode_entry(record.value)
                if entry.type is EventType.STOPPED and entry.origin.stream.startswith("admission/"):
                    return True
    return False


def verify(admission: Sequence[Sequence[Record]], decisions: Sequence[Sequence[bytes]]) -> Verdict:
    """Replay ``admission`` and compare with the recorded ``decisions`` (per partition) and follow-ups."""
    partitions = len(admission)
    handler = AdmissionHandler(
        partitions=partitions,
        admission_topic="kueue.admission",
        job_controller=stood_in_for_job_controller(admission),
    )
    verdict = Verdict()
    recorded_followups: dict[FollowUpKey, bytes] = {}
    produced_followups: dict[FollowUpKey, bytes] = {}
    for p, records in enumerate(admission):
        produced: list[bytes] = []
        for record in records:
            with contextlib.suppress(DecodeError):
                entry = decode_entry(record.value)
                if entry.origin.stream.startswith("admission/"):
                    recorded_followups[_key(p, entry)] = record.value
            emitted = handler.feed(p, record.offset, record.value)
            produced += [codec.encode(d) for d in emitted.decisions]
            for follow in emitted.followups:
                target = partition_for_shard(follow.shard, partitions)
                produced_followups[_key(target, follow)] = encode_entry(follow)
        verdict.records += handler.state(p).records
        verdict.shards += len(handler.state(p).shards)
        verdict.decisions += len(produced)
        expected = decisions[p] if p < len(decisions) else []
        for i in range(max(len(expected), len(produced))):
            want = expected[i] if i < len(expected) else None
            got = produced[i] if i < len(produced) else None
            if want == got:
                continue
            label = _decision_label(want or got or b"")
            verdict.mismatches.append(
                Mismatch(
                    f"partition {p}, decision #{i}: {label}",
                    want.decode() if want is not None else "(no recorded decision)",
                    got.decode() if got is not None else "(the replay makes no such decision)",
                )
            )
            break
    verdict.followups = len(produced_followups)
    for key in sorted(set(recorded_followups) | set(produced_followups)):
        want, got = recorded_followups.get(key), produced_followups.get(key)
        if want != got:
            verdict.mismatches.append(
                Mismatch(
                    f"record appended by the runtime to partition {key[0]} "
                    f"(origin {key[1]}@{key[2]} #{key[3]})",
                    want.decode() if want is not None else "(not in the log)",
                    got.decode() if got is not None else "(the replay does not append it)",
                )
            )
            break
    return verdict


def verify_multikueue(watch: Sequence[Record], recorded: Sequence[bytes]) -> tuple[int, Mismatch | None]:
    """Re-run the MultiKueue dispatcher over ``watch``: the decisions it made, and the first difference."""
    handler = MultiKueueHandler()
    produced: list[bytes] = []
    for record in watch:
        produced += [codec.encode(d) for d in handler.handle(record.offset, record.value)]
    for i in range(max(len(recorded), len(produced))):
        want = recorded[i] if i < len(recorded) else None
        got = produced[i] if i < len(produced) else None
        if want != got:
            return len(produced), Mismatch(
                f"kueue.multikueue, decision #{i}",
                want.decode(errors="backslashreplace") if want is not None else "(no recorded decision)",
                got.decode() if got is not None else "(the replay makes no such decision)",
            )
    return len(produced), None


def _key(partition: int, entry: AdmissionEntry) -> FollowUpKey:
    return (partition, entry.origin.stream, entry.origin.offset, entry.origin.index)


async def _replay(
    spec: str, config_path: str | None, out: TextIO, names: TopicNames, kafka: KafkaSettings | None
) -> int:
    async with open_log(spec, kafka) as log:
        lost = log.lost_sync() if isinstance(log, FileLog) else []
        admission = await read_admission(log, names)
        if config_path is not None:
            from kueuestream.agents.audit.whatif import what_if

            for gap in lost:
                print(f"warning: the log lost records, the what-if runs without them: {gap}", file=sys.stderr)
            return what_if(admission, config_path, out)
        decisions: list[list[bytes]] = []
        multikueue: tuple[int, Mismatch | None] | None = None
        topics = await log.topics()
        if names.multikueue in topics:
            recorded = [r.value for r in await read_partition(log, names.multikueue, 0)]
            watch = await read_partition(log, names.watch, 0) if names.watch in topics else []
            multikueue = verify_multikueue(watch, recorded)
        if names.decisions in topics:
            for p in range(await log.partitions(names.decisions)):
                decisions.append([r.value for r in await read_partition(log, names.decisions, p)])
    verdict = verify(admission, decisions)
    if multikueue is not None and multikueue[1] is not None:
        verdict.mismatches.append(multikueue[1])
    for gap in lost:
        print(f"LOST {gap}", file=out)
    if verdict.mismatches:
        first = verdict.mismatches[0]
        print(f"MISMATCH at {first.what}", file=out)
        print(f"  recorded: {first.expected}", file=out)
        print(f"  replayed: {first.got}", file=out)
        return 1
    summary = (
        f"{verdict.records} admission records in {len(admission)} partitions ({verdict.shards} shards) "
        f"replayed; {verdict.decisions} decisions and {verdict.followups} runtime-appended records "
        "reproduced byte for byte"
    )
    if multikueue is not None:
        summary += f"; {multikueue[0]} MultiKueue decisions reproduced byte for byte"
    if lost:
        ranges = "1 range" if len(lost) == 1 else f"{len(lost)} ranges"
        print(f"NOT OK: the log lost records ({ranges} above); of what is left, {summary}", file=out)
        return 1
    print(f"OK: {summary}", file=out)
    return 0


def replay(
    log: str,
    config_path: str | None = None,
    *,
    out: TextIO | None = None,
    prefix: str = "",
    kafka: KafkaSettings | None = None,
) -> int:
    """``kueuestream replay LOG [--config FILE]``: 0 when every decision is reproduced.

    ``kafka`` is how a ``kafka://`` LOG is reached (TLS, SASL); without it, LOG alone.
    """
    stream = out or sys.stdout
    try:
        return asyncio.run(_replay(log, config_path, stream, TopicNames(prefix), kafka))
    except (LogError, OSError, ValueError) as exc:
        message = kafka.redact(str(exc)) if kafka is not None else redact_text(str(exc))
        print(f"error: {message}", file=sys.stderr)
        return 2
