"""What Faust and aiokafka say of a partition a stalled worker holds, for the line it exits with.

A worker that holds a partition with records waiting and takes none of them
(:mod:`.stall_watch`) is stopped at one of a few gates, each kept in another
place: Faust's consumer fetches only its *active* partitions (it drops one
whose stream buffer is under pressure until the buffer drains, and one it
paused while restoring tables until the restore resumes it), Faust's flow
control holds every stream during a rebalance and recovery, and aiokafka's
own consumer skips a partition it has paused or has no position for. Printed
side by side for each stalled partition, they say which gate stayed shut.

Everything is read from the objects' private state, as a diagnosis only: a
missing attribute (another Faust or aiokafka version) is shown as ``?``, and
nothing here changes what it reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from faust.types import TP

Key = tuple[str, int]


def _yes(value: object) -> str:
    if value is None:
        return "?"
    return "yes" if value else "no"


def _member(collection: Any, item: object) -> bool | None:
    try:
        return item in collection if collection is not None else None
    except TypeError:
        return None


def flow_line(app: Any) -> str:
    """The gates every stream of ``app`` passes: its consumer's flow, the flow control, recovery."""
    consumer = getattr(app, "_consumer", None)
    flow = getattr(app, "flow_control", None)
    # The table manager is made on first use: read, never made, here.
    recovery = getattr(vars(app).get("tables"), "_recovery", None)
    completed = getattr(recovery, "completed", None)
    return (
        f"flow: consumer flow active {_yes(getattr(consumer, 'flow_active', None))}, "
        f"flow control active {_yes(flow.is_active() if flow is not None else None)}, "
        f"in recovery {_yes(getattr(app, 'in_recovery', None))}, "
        f"table recovery completed {_yes(completed.is_set() if completed is not None else None)}, "
        f"rebalancing {_yes(getattr(app, 'rebalancing', None))}"
    )


def partition_line(app: Any, key: Key) -> str:
    """Faust's and aiokafka's view of partition ``key``."""
    tp = TP(*key)
    consumer = getattr(app, "_consumer", None)
    faust_part = (
        f"Faust: active {_yes(_member(getattr(consumer, '_active_partitions', None), tp))}, "
        f"paused {_yes(_member(getattr(consumer, '_paused_partitions', None), tp))}, "
        f"buffer under pressure {_yes(_member(getattr(consumer, '_buffered_partitions', None), tp))}, "
        f"read offset {getattr(consumer, '_read_offset', {}).get(tp, '?')}"
    )
    return f"{key[0]}[{key[1]}]: {faust_part}; {_queues(app, key[0])}; {_aiokafka(consumer, tp)}"


def _queues(app: Any, topic: str) -> str:
    """The buffers of the streams that read ``topic``: size, limit, and whether a drop in
    pressure is awaited (the partition is fetched again only once it comes)."""
    shown = []
    for channel in sorted(getattr(getattr(app, "topics", None), "_topics", ()), key=repr):
        if topic not in getattr(channel, "topics", ()):
            continue
        queue = getattr(channel, "_queue", None)
        if queue is None:
            shown.append("no buffer yet")
            continue
        pending = len(getattr(queue, "_pending_pressure_drop_callbacks", ()))
        shown.append(
            f"{queue.qsize()} of {queue.maxsize} buffered, {pending} waiting for the pressure to drop"
        )
    return "stream buffer: " + ("; ".join(shown) or "none")


def _aiokafka(consumer: Any, tp: TP) -> str:
    client = getattr(getattr(consumer, "_thread", None), "_consumer", None)
    subscription = getattr(getattr(client, "_subscription", None), "subscription", None)
    assignment = getattr(subscription, "assignment", None)
    if assignment is None:
        return "aiokafka: no assignment"
    state = assignment.state_value(tp)
    if state is None:
        return "aiokafka: not assigned"
    position = state.position if state.has_valid_position else "none"
    return (
        f"aiokafka: paused {_yes(state.paused)}, position {position}, "
        f"highwater {state.highwater}, last stable {state.lso}"
    )


def describe(app: Any, keys: Iterable[Key]) -> list[str]:
    """One line on the flow of ``app`` and one per partition in ``keys``."""
    lines = []
    # A diagnosis must not stop the exit it explains.
    try:
        lines.append(flow_line(app))
    except Exception as exc:
        lines.append(f"flow: could not be read ({exc!r})")
    for key in sorted(keys):
        try:
            lines.append(partition_line(app, key))
        except Exception as exc:
            lines.append(f"{key[0]}[{key[1]}]: could not be read ({exc!r})")
    return lines
