"""The flow control that fetches again what a resume empties out of the streams' buffers
(``agents/faust_worker/flow_control.py``).

Real Faust objects of an app that is never started: its stream buffers (the
queues Faust makes for its channels) hold real events, and the seek is the
one thing the worker passes in, recorded here. The Kafka side is
``test_records_a_restored_snapshot_covers_are_not_applied_again``
(``test_pipeline_kafka_snapshots.py``), where a restarted worker's records
were emptied out for good in about a third of the runs before.
"""

from __future__ import annotations

import asyncio
import logging

import faust
import pytest
from faust.types import TP, Message

from kueuestream.agents.faust_worker.flow_control import RefetchingFlowControl

ADMISSION = "t.kueue.admission"


class Seeks:
    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[TP, int]] = []
        self.fail = fail

    async def __call__(self, tp: TP, offset: int) -> None:
        self.calls.append((tp, offset))
        if self.fail:
            raise RuntimeError("no current assignment for the partition")


def app_with(seeks: Seeks) -> tuple[faust.App, RefetchingFlowControl]:
    app = faust.App("refetch", broker="kafka://127.0.0.1:9", store="memory://")
    flow = RefetchingFlowControl(seeks, [ADMISSION])
    app.flow_control = flow
    return app, flow


def buffer_of(
    app: faust.App, records: list[tuple[int, int]], topic: str = ADMISSION
) -> asyncio.Queue[faust.Event]:
    """A stream buffer as Faust makes it (emptied on resume), holding ``(partition, offset)``.
    The flow control holds its buffers weakly: the caller keeps the one returned."""
    queue = app.FlowControlQueue(maxsize=100, clear_on_resume=True)
    for partition, offset in records:
        message = Message(topic, partition, offset, 0.0, 0, None, b"", b"{}", None)
        queue.put_nowait(faust.Event(app, b"", b"{}", None, message))
    return queue


async def settled() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_a_resume_seeks_each_partition_back_to_the_first_record_it_emptied_out() -> None:
    seeks = Seeks()
    app, flow = app_with(seeks)
    first = buffer_of(app, [(5, 0), (5, 1), (2, 7), (5, 2)])
    second = buffer_of(app, [(2, 4), (2, 5)])
    flow.resume()
    await settled()
    assert first.empty() and second.empty()
    assert sorted(seeks.calls) == [(TP(ADMISSION, 2), 4), (TP(ADMISSION, 5), 0)]
    assert flow.is_active()


async def test_a_resume_with_nothing_buffered_seeks_nothing() -> None:
    seeks = Seeks()
    app, flow = app_with(seeks)
    queue = buffer_of(app, [])
    flow.resume()
    await settled()
    assert queue.empty() and seeks.calls == []


async def test_records_of_a_tables_changelog_are_left_to_faust() -> None:
    """Faust's recovery reads the Tables' changelogs from offsets it seeks itself."""
    seeks = Seeks()
    app, flow = app_with(seeks)
    queue = buffer_of(app, [(0, 40)], topic="refetch-usage-changelog")
    flow.resume()
    await settled()
    assert queue.empty() and seeks.calls == []


async def test_records_emptied_on_revocation_are_not_fetched_again() -> None:
    """Faust empties the buffers itself when partitions are revoked: those records belong to the
    assignment that ends, and the next one starts from the committed offsets."""
    seeks = Seeks()
    app, flow = app_with(seeks)
    queue = buffer_of(app, [(1, 3)])
    flow.suspend()
    flow.clear()
    await settled()
    assert queue.empty() and seeks.calls == []


async def test_a_seek_that_fails_is_logged_and_the_resume_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    seeks = Seeks(fail=True)
    app, flow = app_with(seeks)
    queue = buffer_of(app, [(3, 9)])
    with caplog.at_level(logging.INFO, logger="kueuestream.agents.faust_worker.flow_control"):
        flow.resume()
        await settled()
    assert seeks.calls == [(TP(ADMISSION, 3), 9)]
    assert queue.empty() and flow.is_active()
    messages = [r.getMessage() for r in caplog.records]
    assert any("t.kueue.admission[3]: 1 record(s) from offset 9 emptied out" in m for m in messages), messages
    assert any("could not seek back to offset 9" in m for m in messages), messages
