"""After a takeover, the admission records of inputs a previous owner may have processed are
sent only when the log does not hold them yet (``agents/faust_worker/resend_window.py``)."""

from __future__ import annotations

from kueuestream.agents.faust_worker.resend_window import LogOrigins, OriginKey, ResendWindow
from kueuestream.agents.log_entries import Origin
from kueuestream.agents.outputs import Out, Role


def out(partition: int, stream: str, offset: int, index: int = 0, role: Role = Role.ADMISSION) -> Out:
    origin = Origin(stream=stream, offset=offset, index=index) if role == Role.ADMISSION else None
    return Out(role, partition, b"k", f"{stream}/{offset}/{index}".encode(), origin)


class Log:
    """What the admission partitions hold, by origin and offset, and the reads asked of them."""

    def __init__(self, held: dict[int, list[OriginKey]]) -> None:
        self.held = held
        self.reads: list[tuple[int, int]] = []

    async def read(self, partition: int, start: int) -> set[OriginKey]:
        self.reads.append((partition, start))
        return set(self.held.get(partition, [])[start:])


async def test_records_already_in_the_log_are_not_sent_again() -> None:
    log = Log({2: [("watch", 1, 0), ("admission/2", 21, 0), ("admission/2", 21, 1)]})
    window = ResendWindow(until=30, origins=LogOrigins(scan_from={2: 1}, read=log.read))
    sent_before = [out(2, "admission/2", 21, 0), out(2, "admission/2", 21, 1)]
    half_sent = [out(2, "admission/2", 22, 0), out(2, "admission/2", 22, 1)]
    error = out(0, "admission/2", 22, role=Role.ERRORS)
    assert window.covers(21) and window.covers(29) and not window.covers(30)
    assert await window.origins.missing(sent_before) == []
    assert await window.origins.missing([*half_sent, error]) == [*half_sent, error]
    # What the window sent counts as present: the same input processed again sends nothing.
    assert await window.origins.missing(half_sent) == []
    # Each partition is read once, from where the window's outputs can start.
    assert log.reads == [(2, 1)]


async def test_a_record_before_the_scan_start_does_not_count() -> None:
    """Only the part of the log after the snapshot's ends holds outputs of the window's inputs;
    an older record with the same origin (another stream's history) is not looked at."""
    log = Log({0: [("admission/0", 5, 0)], 3: []})
    origins = LogOrigins(scan_from={0: 1}, read=log.read)
    outs = [out(0, "admission/0", 5), out(3, "watch", 5)]
    assert await origins.missing(outs) == outs
    assert sorted(log.reads) == [(0, 1), (3, 0)]
