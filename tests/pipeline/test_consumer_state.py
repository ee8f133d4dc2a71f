"""What a stalled worker says of the partitions it holds (``agents/faust_worker/consumer_state.py``).

A real Faust app, never started (no broker): its consumer's bookkeeping and a
stream's buffer are driven through Faust's own calls, as a rebalance's
recovery and the conductor drive them, and the lines must name the gate that
stays shut.
"""

from __future__ import annotations

from typing import Any

import faust
from faust.types import TP

from kueuestream.agents.faust_worker.consumer_state import describe

WATCH = ("kueue.watch", 0)
OTHER = ("kueue.watch", 1)


def app_with_agent(buffer: int = 10) -> tuple[faust.App, Any]:
    app = faust.App("stalled", broker="kafka://127.0.0.1:9", store="memory://", stream_buffer_maxsize=buffer)
    topic = app.topic("kueue.watch", partitions=2, value_serializer="raw")

    @app.agent(topic)
    async def ingest(stream: Any) -> None:
        async for _ in stream:
            pass

    return app, topic


def line_of(lines: list[str], key: tuple[str, int]) -> str:
    [line] = [entry for entry in lines if entry.startswith(f"{key[0]}[{key[1]}]:")]
    return line


def test_an_app_with_nothing_made_yet_is_described_with_question_marks() -> None:
    app, _ = app_with_agent()
    lines = describe(app, [WATCH])
    assert lines[0].startswith("flow: consumer flow active ?")
    assert "Faust: active ?, paused ?" in line_of(lines, WATCH)
    assert "aiokafka: no assignment" in line_of(lines, WATCH)


def test_a_partition_left_paused_by_a_table_restore_is_named() -> None:
    """Faust's recovery pauses the active partitions while it restores the tables and resumes
    them when done; one it never resumes is assigned but never fetched."""
    app, _ = app_with_agent()
    consumer = app.consumer
    consumer._set_active_tps({TP(*WATCH), TP(*OTHER)})
    consumer.pause_partitions({TP(*WATCH)})
    lines = describe(app, [OTHER, WATCH])
    assert "Faust: active no, paused yes, buffer under pressure no" in line_of(lines, WATCH)
    assert "Faust: active yes, paused no, buffer under pressure no" in line_of(lines, OTHER)
    consumer.resume_partitions({TP(*WATCH)})
    assert "Faust: active yes, paused no" in line_of(describe(app, [WATCH]), WATCH)


async def test_a_stream_buffer_under_pressure_takes_its_partition_out_until_it_drains() -> None:
    """Faust's conductor stops fetching a partition whose stream buffer is nearly full and fetches
    it again once the stream has taken the buffer down to 40 %: the line shows the buffer and the
    drop it waits for."""
    app, topic = app_with_agent(buffer=10)
    consumer = app.consumer
    consumer._set_active_tps({TP(*WATCH), TP(*OTHER)})
    channel = topic.clone()
    app.topics.add(channel)
    queue = channel.queue

    def full() -> None:
        consumer.on_buffer_full(TP(*WATCH))

    def drop() -> None:
        consumer.on_buffer_drop(TP(*WATCH))

    for i in range(9):
        queue.put_nowait_enhanced(i, on_pressure_high=full, on_pressure_drop=drop)
    line = line_of(describe(app, [WATCH]), WATCH)
    assert "Faust: active no, paused no, buffer under pressure yes" in line
    assert "stream buffer: 9 of 10 buffered, 1 waiting for the pressure to drop" in line
    # The stream takes records; at 4 left the drop comes and the partition is fetched again.
    for _ in range(5):
        queue.get_nowait()
    assert "buffer under pressure yes" in line_of(describe(app, [WATCH]), WATCH)
    queue.get_nowait()
    line = line_of(describe(app, [WATCH]), WATCH)
    assert "Faust: active yes, paused no, buffer under pressure no" in line
    assert "stream buffer: 3 of 10 buffered, 0 waiting for the pressure to drop" in line


async def test_the_flow_line_shows_a_suspended_flow_control() -> None:
    """During a rebalance Faust suspends its flow control, and every stream waits until recovery
    resumes it."""
    app, _ = app_with_agent()
    app.consumer.resume_flow()
    app.flow_control.resume()
    assert "consumer flow active yes, flow control active yes" in describe(app, [])[0]
    app.flow_control.suspend()
    app.consumer.stop_flow()
    assert "consumer flow active no, flow control active no" in describe(app, [])[0]


def test_state_that_cannot_be_read_is_said_so_and_the_description_goes_on() -> None:
    """The description is written just before the worker exits: a part that raises is named,
    never allowed to stop the exit."""

    class Replaced:
        """An app whose consumer is being replaced as it is read."""

        @property
        def _consumer(self) -> Any:
            raise RuntimeError("consumer gone")

    lines = describe(Replaced(), [OTHER, WATCH])
    assert lines == [
        "flow: could not be read (RuntimeError('consumer gone'))",
        "kueue.watch[0]: could not be read (RuntimeError('consumer gone'))",
        "kueue.watch[1]: could not be read (RuntimeError('consumer gone'))",
    ]
