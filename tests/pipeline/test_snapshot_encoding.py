"""A state taken up from a snapshot goes on exactly as the state that was never stopped.

The Faust worker snapshots an admission partition's state (pickled) and
ingest's routing tables (JSON). Cut a stream anywhere, encode the state there,
decode it and feed it the rest: every output must be the same, byte for byte,
as feeding the whole stream to one state. Damaged bytes are refused with a
reason, never decoded into some other state.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission.queue_manager import REQUEUE_BATCH_MS
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.faust_worker.snapshots import (
    SnapshotError,
    decode_state,
    decode_tables,
    encode_state,
    encode_tables,
)
from kueuestream.agents.ingest import IngestHandler
from kueuestream.agents.ingest_routing import TABLES
from kueuestream.agents.log_entries import decode_entry
from kueuestream.agents.outputs import Role
from kueuestream.streams import codec
from kueuestream.streams.schemas import DecisionRecord, EventType, WatchEventType
from tests.helpers import (
    NS,
    cpu_queue,
    cpu_workload,
    finished_workload,
    flavor_manifest,
    local_queue_manifest,
)
from tests.pipeline.watch_streams import Stream, moving_stream, workload_stream

WATCH = [codec.encode(e) for e in moving_stream(30).events() + workload_stream(30, seed=4).events()]


def admission_log() -> list[list[bytes]]:
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    pipeline.submit_raw(WATCH)
    pipeline.pump()
    return [[r.value for r in log.read_sync("kueue.admission", p)] for p in range(6)]


ADMISSION = admission_log()
BUSIEST = max(range(6), key=lambda p: len(ADMISSION[p]))


@settings(max_examples=15, deadline=None)
@given(cut=st.floats(0.0, 1.0))
def test_an_admission_partition_decides_the_same_after_a_snapshot(cut: float) -> None:
    records = ADMISSION[BUSIEST]
    at = int(cut * len(records))

    def handler() -> AdmissionHandler:
        return AdmissionHandler(partitions=6, admission_topic="kueue.admission")

    whole = handler()
    expected = [whole.handle(BUSIEST, offset, raw) for offset, raw in enumerate(records)]
    first = handler()
    got = [first.handle(BUSIEST, offset, raw) for offset, raw in enumerate(records[:at])]
    resumed = handler()
    resumed.states[BUSIEST] = decode_state(encode_state(first.state(BUSIEST)), BUSIEST)
    got += [resumed.handle(BUSIEST, offset, raw) for offset, raw in enumerate(records) if offset >= at]
    assert got == expected
    assert len(records) > 40 and sum(map(len, expected)) > 20


@settings(max_examples=15, deadline=None)
@given(cut=st.floats(0.0, 1.0))
def test_ingest_routes_the_same_after_a_snapshot_of_its_tables(cut: float) -> None:
    at = int(cut * len(WATCH))

    def ingest(tables: dict[str, dict]) -> IngestHandler:
        return IngestHandler(tables, partitions=6, watch_topic="kueue.watch")

    whole = ingest({name: {} for name in TABLES})
    expected = [whole.handle(offset, raw) for offset, raw in enumerate(WATCH)]
    tables: dict[str, dict] = {name: {} for name in TABLES}
    first = ingest(tables)
    got = [first.handle(offset, raw) for offset, raw in enumerate(WATCH[:at])]
    resumed = ingest(decode_tables(encode_tables(tables), TABLES))
    got += [resumed.handle(offset, raw) for offset, raw in enumerate(WATCH) if offset >= at]
    assert got == expected


def test_damaged_snapshots_are_refused_with_a_reason() -> None:
    handler = AdmissionHandler(partitions=6, admission_topic="kueue.admission")
    for offset, raw in enumerate(ADMISSION[BUSIEST]):
        handler.feed(BUSIEST, offset, raw)
    blob = encode_state(handler.state(BUSIEST))
    with pytest.raises(SnapshotError, match="the state does not decode"):
        decode_state(blob[: len(blob) // 2], BUSIEST)
    with pytest.raises(SnapshotError, match="not that of admission partition"):
        decode_state(blob, (BUSIEST + 1) % 6)
    with pytest.raises(SnapshotError, match="the state does not decode"):
        decode_state(zlib.compress(b"\x80\x05not a pickle"), BUSIEST)
    with pytest.raises(SnapshotError, match="the routing tables do not decode"):
        decode_tables(b"garbage", TABLES)
    with pytest.raises(SnapshotError, match="the routing tables are not"):
        decode_tables(encode_tables({"objects": {}}), TABLES)


def test_a_snapshot_keeps_parked_workloads_and_when_their_requeue_is_due() -> None:
    """Parked Workloads and their pending requeue survive a snapshot taken between the freeing of
    their quota and the tick that requeues them (upstream ``workqueueRequeuer.notifyCohort``: the
    requeue comes a batch period later): the restored state waits for the same time and admits
    them on the same tick, as the Faust worker's clock expects after a restart."""
    stream = Stream()
    stream.listing([flavor_manifest("default"), cpu_queue("cq", 4), local_queue_manifest("lq", "cq", NS)])
    big = cpu_workload("big", "lq", 4)
    for manifest in (big, cpu_workload("small-1", "lq", 2), cpu_workload("small-2", "lq", 2)):
        stream.event(manifest)
    finished_at = stream.time_ms
    stream.event(finished_workload(big), WatchEventType.MODIFIED)
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)
    pipeline.submit_raw([codec.encode(e) for e in stream.events()])
    pipeline.pump()
    assert pipeline.next_wakeup_ms() == finished_at + REQUEUE_BATCH_MS
    pipeline.advance_clock()
    logs = [[r.value for r in log.read_sync("kueue.admission", p)] for p in range(6)]
    partition = max(range(6), key=lambda p: len(logs[p]))
    records = logs[partition]
    tick = max(i for i, raw in enumerate(records) if decode_entry(raw).type == EventType.TICK)

    def handler() -> AdmissionHandler:
        return AdmissionHandler(partitions=6, admission_topic="kueue.admission")

    whole = handler()
    for offset, raw in enumerate(records[:tick]):
        whole.handle(partition, offset, raw)
    restored = handler()
    restored.states[partition] = decode_state(encode_state(whole.state(partition)), partition)
    assert restored.next_wakeup_ms() == whole.next_wakeup_ms() == finished_at + REQUEUE_BATCH_MS
    outs = [restored.handle(partition, offset, raw) for offset, raw in enumerate(records) if offset >= tick]
    assert outs == [
        whole.handle(partition, offset, raw) for offset, raw in enumerate(records) if offset >= tick
    ]
    admitted = [
        d.ref.name
        for out in outs
        for o in out
        if o.role == Role.DECISIONS
        and (d := codec.decode(o.value, DecisionRecord)).action.value == "Admitted"
    ]
    assert sorted(admitted) == ["small-1", "small-2"]
    assert restored.next_wakeup_ms() is None
