"""A worker that holds records it no longer takes exits, so that it is started again.

A Faust worker can keep a partition of ``kueue.watch`` or ``kueue.admission``
with records waiting in it and take none of them: seen after a run of SIGKILLs
and rebalances, where a worker held ``kueue.watch`` with one event waiting,
went on heartbeating, and processed nothing for minutes. The group sees a live
member, so it never moves the partition, and every decision behind that event
waits. Nothing inside the stuck worker can be trusted to free it; a new
process can (its Deployment restarts it, as after any crash, and it rebuilds
its partitions from their snapshots and the log).

:class:`StallWatch` decides, from what the broker says, when a worker is
stuck: a partition it is assigned has a record at or after the group's
committed offset, and that committed offset has not moved for ``limit``
seconds, while the worker was neither rebalancing, restoring its tables, nor
rebuilding a partition. It holds no clock of its own (the caller passes the
time), so the rule is tested without Kafka.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from kueuestream.streams.kafka_log import KafkaLog

log = logging.getLogger(__name__)

# How long a waiting record may stay untaken before the worker gives up.
STALL_LIMIT = 60.0
# How often the worker asks the broker.
STALL_CHECK_INTERVAL = 5.0
# The exit status of a worker that gave up (EX_TEMPFAIL: start it again).
STALL_EXIT_CODE = 75

Key = tuple[str, int]


@dataclass(frozen=True)
class Position:
    """A partition as the broker sees it: the group's committed offset and the partition's end.

    Records between the two wait for the worker. (Written in a transaction, the
    last offsets may be markers no reader gets: a stall is confirmed by reading
    the tail before the worker gives up.)"""

    committed: int
    end: int

    @property
    def waiting(self) -> bool:
        return self.end > self.committed


@dataclass(frozen=True)
class Stall:
    key: Key
    committed: int
    seconds: float

    def describe(self) -> str:
        topic, partition = self.key
        return (
            f"{topic}[{partition}]: a record waits at offset {self.committed} or later and the "
            f"committed offset has stayed at {self.committed} for {self.seconds:.0f}s"
        )


class StallWatch:
    def __init__(self, limit: float = STALL_LIMIT, interval: float = STALL_CHECK_INTERVAL) -> None:
        self.limit = limit
        self.interval = interval
        # Per waiting partition: the committed offset it had, and since when.
        self._since: dict[Key, tuple[int, float]] = {}
        self._last_check: float | None = None

    def reset(self) -> None:
        """Forget every partition: the worker is busy for a reason of its own (a rebalance, a
        table restore, a rebuild), or the broker could not be asked."""
        self._since.clear()
        self._last_check = None

    def observe(self, now: float, positions: Mapping[Key, Position]) -> list[Stall]:
        """The partitions among ``positions`` (those assigned now) stuck for ``limit`` seconds.

        A check long after the one before means the process itself was stopped
        (SIGSTOP, a suspended VM): nothing could move meanwhile, so the count
        starts again instead of blaming the worker for the pause.
        """
        paused = self._last_check is not None and now - self._last_check > 3 * self.interval
        self._last_check = now
        if paused:
            self._since.clear()
        stalls = []
        for key in sorted(positions):
            position = positions[key]
            if not position.waiting:
                self._since.pop(key, None)
                continue
            seen = self._since.get(key)
            if seen is None or seen[0] != position.committed:
                self._since[key] = (position.committed, now)
                continue
            if now - seen[1] >= self.limit:
                stalls.append(Stall(key, position.committed, now - seen[1]))
        for key in sorted(set(self._since) - set(positions)):
            del self._since[key]
        return stalls


async def positions(kafka: KafkaLog, group: str, assigned: Iterable[Key]) -> dict[Key, Position]:
    """The committed offset and end of each partition in ``assigned``, from the broker."""
    keys = sorted(set(assigned))
    out: dict[Key, Position] = {}
    for topic in sorted({topic for topic, _ in keys}):
        committed = await kafka.committed_offsets(group, topic)
        ends = await kafka.end_offsets(topic)
        for _, partition in (k for k in keys if k[0] == topic):
            out[(topic, partition)] = Position(committed.get(partition, 0), ends.get(partition, 0))
    return out


async def confirmed(kafka: KafkaLog, stalls: list[Stall], seen: Mapping[Key, Position]) -> list[Stall]:
    """Those of ``stalls`` with a record a reader gets at or after the committed offset (not only
    the markers or aborted records of a transaction)."""
    last = await kafka.last_visible_offsets({s.key: seen[s.key].end for s in stalls})
    return [s for s in stalls if last.get(s.key, -1) >= s.committed]


def give_up(stalls: list[Stall], consumer: Sequence[str] = ()) -> NoReturn:
    """Log why, what the consumer said of the partitions (``consumer``, see
    :mod:`.consumer_state`) and what every task of the worker was waiting on, then exit at once:
    a stuck worker may not get through an orderly shutdown."""
    lines = [s.describe() for s in stalls]
    log.error(
        "no progress on %d partition(s) this worker holds; exiting with status %d so that it is "
        "started again:\n  %s\nwhat the consumer says of them:\n  %s\nwhat the worker was waiting on:\n%s",
        len(stalls),
        STALL_EXIT_CODE,
        "\n  ".join(lines),
        "\n  ".join(consumer) or "(nothing)",
        "\n".join(_waiting_on()),
    )
    for handler in logging.getLogger().handlers:
        handler.flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(STALL_EXIT_CODE)


def _waiting_on() -> list[str]:
    """One line per task of the running loop (the chain of awaits, innermost last) and one
    block per thread (its innermost frames)."""
    out = []
    for task in sorted(asyncio.all_tasks(), key=lambda t: t.get_name()):
        out.append(f"  task {task.get_name()}: {' -> '.join(_awaits(task.get_coro()))}")
    for ident, frame in sorted(sys._current_frames().items()):
        stack = "".join(traceback.format_stack(frame)[-4:])
        out.append(f"  thread {ident}:\n{stack.rstrip()}")
    return out


def _awaits(coro: Any) -> list[str]:
    chain: list[str] = []
    while coro is not None and len(chain) < 40:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            chain.append(type(coro).__name__)
            break
        chain.append(f"{frame.f_code.co_name} ({frame.f_code.co_filename}:{frame.f_lineno})")
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return chain
