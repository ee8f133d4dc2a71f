"""Pending Workloads in the order the scheduler takes them, as Kueue's visibility API shows them.

Kueue answers ``GET /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/NAME/pendingworkloads``
(and ``.../namespaces/NS/localqueues/NAME/pendingworkloads``) with a
``PendingWorkloadsSummary`` (pkg/visibility/storage): every Workload the
ClusterQueue's queue holds, the active ones and the inadmissible ones alike
(``ClusterQueue.Snapshot``), sorted as the queue's heap sorts them
(``baseCompareFunc``): the Workload whose preemptions are under way first, then
priority, highest first, then queue-order time, oldest first. The same sort
applies to StrictFIFO and BestEffortFIFO; they differ in what a head that does
not fit does, not in the order. Positions count from 0; ``limit`` defaults to
1000 and is capped at 100,000, ``offset`` to 0 (``boundedLimitOffset``).

:func:`pending_summary` answers from engines a process holds;
:func:`pending_json` from a log, for its state at the log's end: folded from
the queue-relevant records (:mod:`kueuestream.agents.audit.queue_fold`), or
from engines rebuilt by a replay when the fold cannot answer. Each item
also carries our pending reason: the ``reason`` and ``message`` of its
``QuotaReserved=False`` condition.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import gc
import heapq
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import Any, NamedTuple

from kueuestream.admission.engine import Engine
from kueuestream.admission.queues import OrderKey
from kueuestream.admission.state import Phase, WorkloadRecord
from kueuestream.admission.status import QUOTA_RESERVED
from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.audit.queue_fold import (
    LastDecisions,
    NeedsReplay,
    QueueFold,
    Waiting,
    apply_decisions,
    fold,
    fold_admission,
    last_decisions,
    queued_order,
)
from kueuestream.agents.audit.replay import (
    is_kafka,
    open_log,
    read_admission,
    read_partition,
    stood_in_for_job_controller,
)
from kueuestream.agents.forked import map_parts
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.log import LogError, Record

GROUP = "visibility.kueue.x-k8s.io"
API_VERSION = f"{GROUP}/v1beta2"
# pkg/constants: DefaultPendingWorkloadsLimit, MaxPendingWorkloadsLimit.
DEFAULT_LIMIT = 1000
MAX_LIMIT = 100_000
_by_order = operator.itemgetter(0)  # an Entry's order
_by_queue = operator.itemgetter(1)  # an Entry's LocalQueue


class QueueNotFound(LookupError):
    """No such ClusterQueue or LocalQueue; ``closest`` names the known ones nearest to it."""

    def __init__(self, kind: str, name: str, closest: Sequence[str], where: str = "") -> None:
        self.kind = kind
        self.name = name
        self.closest = list(closest)
        self.where = where
        self.hint = f"; closest: {', '.join(self.closest)}" if self.closest else f"; there is no {kind}"
        super().__init__(f"{kind} {name} not found{where}{self.hint}")


def bounded(limit: int, offset: int) -> tuple[int, int]:
    """``limit`` (0: the default) and ``offset`` as Kueue bounds them."""
    if limit == 0:
        limit = DEFAULT_LIMIT
    return min(max(limit, 0), MAX_LIMIT), max(offset, 0)


def closest_names(name: str, known: Iterable[str], count: int = 3) -> list[str]:
    """The ``count`` known names most like ``name``; the first known names when none is alike."""
    names = sorted(set(known))
    alike = difflib.get_close_matches(name, names, n=count, cutoff=0.5)
    return alike or names[:count]


def queue_order(engine: Engine, cluster_queue: str) -> list[Entry]:
    """The Workloads ``cluster_queue``'s queue holds, in the order the scheduler takes them.

    That is the queue's active and parked Workloads; while the ClusterQueue is
    inactive, Kueue still keeps its Workloads queued (``AddOrUpdateWorkload``
    does not look at the ClusterQueue's state), so they are listed too.
    """
    workloads = engine.workloads
    queue = engine.queues.queues.get(cluster_queue)
    keys = list(queue.order) if queue is not None else []
    cq = engine.cqs.get(cluster_queue)
    if cq is not None and cq.inactive_reason:
        held = engine.queues.held
        queued = set(keys)
        for key, rec in workloads.items():
            if key in queued or key in held or rec.phase != Phase.PENDING or not rec.active:
                continue
            lq = engine.local_queues.get((key[0], rec.obj.spec.queue_name))
            if lq is not None and lq.spec.cluster_queue == cluster_queue and lq.spec.stop_policy == "None":
                keys.append(key)
    recs = [workloads[key] for key in keys if key in workloads]
    entries = [Entry(rec.order_key(), (rec.key[0], rec.obj.spec.queue_name), rec) for rec in recs]
    entries.sort(key=_by_order)
    return entries


def fold_order(folded: QueueFold, cluster_queue: str, first: int | None = None) -> list[Entry]:
    """What :func:`queue_order` gives, from a :class:`~kueuestream.agents.audit.queue_fold.QueueFold`;
    only its ``first`` entries when that is given."""
    # The LocalQueues whose Workloads wait in cluster_queue's queue.
    feeding = {
        lq for lq, cq in folded.local_queues.items() if cq == cluster_queue
    } - folded.stopped_local_queues
    # Entry(...) without the call through its Python-level __new__: this runs once per Workload.
    new = tuple.__new__
    entries: list[Entry] = [
        new(Entry, (order, lq, wl))
        for wl in folded.workloads.values()
        if (lq := (wl.namespace, wl.queue_name)) in feeding and (order := queued_order(wl)) is not None
    ]
    if first is not None and first < len(entries):
        # A page near the head needs the smallest few, not the whole queue sorted.
        return heapq.nsmallest(first, entries, key=_by_order)
    entries.sort(key=_by_order)
    return entries


class Entry(NamedTuple):
    """A pending Workload, by its place in the queue's order; the rest is read only for the items shown."""

    order: OrderKey
    local_queue: tuple[str, str]  # (namespace, name)
    source: WorkloadRecord | Waiting

    @property
    def namespace(self) -> str:
        return self.local_queue[0]

    @property
    def queue_name(self) -> str:
        return self.local_queue[1]


def _metadata(namespace: str, name: str, manifest_meta: dict[str, Any], created_ms: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    created = manifest_meta.get("creationTimestamp")
    meta["creationTimestamp"] = created if isinstance(created, str) else rfc3339(created_ms)
    owners = [
        {k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref}
        for ref in manifest_meta.get("ownerReferences") or []
        if isinstance(ref, dict)
    ]
    if owners:
        meta["ownerReferences"] = owners
    return meta


def _item(entry: Entry, in_cq: int, in_lq: int) -> dict[str, Any]:
    source = entry.source
    if isinstance(source, Waiting):
        meta = _metadata(source.namespace, source.name, source.manifest_metadata(), source.created_ms)
        priority, (_, reason, message) = source.priority, source.standing
    else:
        held = source.conditions.get(QUOTA_RESERVED)
        waiting = held is not None and held.status == "False"
        manifest_meta = (source.manifest or {}).get("metadata") or {}
        meta = _metadata(source.key[0], source.key[1], manifest_meta, source.created_ms)
        priority = source.priority
        reason = held.reason if held is not None and waiting else ""
        message = held.message if held is not None and waiting else ""
    return {
        "metadata": meta,
        "priority": priority,
        "localQueueName": entry.queue_name,
        "positionInClusterQueue": in_cq,
        "positionInLocalQueue": in_lq,
        "reason": reason,
        "message": message,
    }


def summary(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "PendingWorkloadsSummary", "apiVersion": API_VERSION, "metadata": {}, "items": items}


def cluster_queue_items(order: Sequence[Entry], limit: int, offset: int) -> list[dict[str, Any]]:
    """Kueue's ``pendingWorkloadsInCqREST.Get``: LocalQueue positions count from the queue's head."""
    limit, offset = bounded(limit, offset)
    # Each LocalQueue's Workloads before the page, counted without a Python step per Workload.
    in_lq = Counter(map(_by_queue, order[:offset]))
    items = []
    for index, entry in enumerate(order[offset : offset + limit], offset):
        lq = entry.local_queue
        position = in_lq[lq]
        in_lq[lq] = position + 1
        items.append(_item(entry, index, position))
    return items


def local_queue_items(
    order: Sequence[Entry], namespace: str, name: str, limit: int, offset: int
) -> list[dict[str, Any]]:
    """Kueue's ``pendingWorkloadsInLqREST.Get``: the LocalQueue's Workloads among its ClusterQueue's."""
    limit, offset = bounded(limit, offset)
    wanted = (namespace, name)
    # The LocalQueue's places in the ClusterQueue's order, found without a Python step per Workload.
    places = list(compress(range(len(order)), map(wanted.__eq__, map(_by_queue, order))))
    return [
        _item(order[index], index, position)
        for position, index in enumerate(places[offset : offset + limit], offset)
    ]


@dataclass(frozen=True, slots=True)
class Located:
    """Which engine holds a queue, and the ClusterQueue whose order answers for it."""

    engine: Engine | None
    cluster_queue: str


def locate(
    engines: Sequence[Engine],
    *,
    cluster_queue: str | None,
    local_queue: tuple[str, str] | None,
    where: str = "",
) -> Located:
    """The engine holding the ClusterQueue or LocalQueue asked for; :class:`QueueNotFound` if none does."""
    if (cluster_queue is None) == (local_queue is None):
        raise ValueError("name either a ClusterQueue or a LocalQueue")
    if cluster_queue is not None:
        for engine in engines:
            if cluster_queue in engine.cqs:
                return Located(engine, cluster_queue)
        known = [name for engine in engines for name in engine.cqs]
        raise QueueNotFound("ClusterQueue", cluster_queue, closest_names(cluster_queue, known), where)
    assert local_queue is not None
    found = [e for e in engines if local_queue in e.local_queues]
    if not found:
        known = [f"{ns}/{name}" for engine in engines for ns, name in engine.local_queues]
        wanted = "/".join(local_queue)
        raise QueueNotFound("LocalQueue", wanted, closest_names(wanted, known), where)
    target = found[0].local_queues[local_queue].spec.cluster_queue
    # The LocalQueue's ClusterQueue decides the order; without one, nothing is queued.
    holder = next((e for e in found if target in e.cqs), None)
    return Located(holder, target)


def pending_summary(
    engines: Iterable[Engine],
    *,
    cluster_queue: str | None = None,
    local_queue: tuple[str, str] | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    where: str = "",
) -> dict[str, Any]:
    """The ``PendingWorkloadsSummary`` of a ClusterQueue or a LocalQueue (``(namespace, name)``) held by
    ``engines``; raises :class:`QueueNotFound` (its message ends with ``where``) when none holds it.

    The caller keeps the engines still meanwhile.
    """
    located = locate(list(engines), cluster_queue=cluster_queue, local_queue=local_queue, where=where)
    order = queue_order(located.engine, located.cluster_queue) if located.engine is not None else []
    if local_queue is not None:
        return summary(local_queue_items(order, local_queue[0], local_queue[1], limit, offset))
    return summary(cluster_queue_items(order, limit, offset))


def engines_at_end(admission: Sequence[Sequence[Record]]) -> list[Engine]:
    """Every shard's engine after the recorded ``admission`` partitions, by partition and shard."""
    handler = AdmissionHandler(
        partitions=len(admission),
        admission_topic="kueue.admission",
        job_controller=stood_in_for_job_controller(admission),
    )
    for p, records in enumerate(admission):
        state = handler.state(p)
        for record in records:
            state.feed(record.offset, record.value)
    states = handler.states
    return [states[p].shards[s].engine for p in sorted(states) for s in sorted(states[p].shards)]


async def read_log(
    log: str, names: TopicNames, kafka: KafkaSettings | None
) -> tuple[list[list[Record]], list[list[Record]]]:
    """The partitions of ``kueue.admission`` and of ``kueue.decisions``."""
    async with open_log(log, kafka) as opened:
        if isinstance(opened, FileLog):
            _check_file_log(opened, names)
            # Read at once: nothing else runs on this loop to yield to.
            admission = [
                list(opened.read_sync(names.admission, p))
                for p in range(opened.partitions_sync(names.admission))
            ]
        else:
            admission = await read_admission(opened, names)
        decisions: list[list[Record]] = []
        if names.decisions in await opened.topics():
            for p in range(await opened.partitions(names.decisions)):
                if isinstance(opened, FileLog):
                    decisions.append(list(opened.read_sync(names.decisions, p)))
                else:
                    decisions.append(await read_partition(opened, names.decisions, p))
    return admission, decisions


def _check_file_log(opened: FileLog, names: TopicNames, topics: Sequence[str] | None = None) -> None:
    """:class:`~kueuestream.streams.log.LogError` unless ``opened`` holds a whole ``kueue.admission``
    and ``kueue.decisions`` (of ``topics``, when given)."""
    checked = (names.admission, names.decisions) if topics is None else topics
    lost = [gap for gap in opened.lost_sync() if gap.topic in checked]
    if lost:
        # A lost decision could leave an admitted Workload listed as waiting.
        raise LogError(f"the log lost records, so the pending list could be wrong: {lost[0]}")
    if names.admission in checked and names.admission not in opened.topics_sync():
        raise LogError(f"the log has no {names.admission} topic: no queue to list")


def _fold_file_log(log: str, names: TopicNames) -> QueueFold | None:
    """The fold of the embedded log at ``log``; None when it takes the engines.

    The two topics are read and folded side by side, the decisions in a forked
    child (:func:`~kueuestream.agents.forked.map_parts`) that opens them itself
    once the admission records are open, so that it also checks their CRCs
    meanwhile; the decisions it reads are those present then, never older.
    """
    if not Path(log).is_dir():
        raise LogError(f"no embedded log at {log} (expected a directory, or kafka://HOST:PORT)")
    with FileLog(log, read_only=True, topics=(names.admission,)) as opened:
        _check_file_log(opened, names, (names.admission,))

        def fold_topic(topic: str) -> QueueFold | LastDecisions | str:
            try:
                if topic == names.admission:
                    partitions = range(opened.partitions_sync(topic))
                    # Folded as read, so that each record's memory serves the next one.
                    return fold_admission(opened.read_sync(topic, p) for p in partitions)
                with FileLog(log, read_only=True, topics=(topic,)) as decided:
                    _check_file_log(decided, names, (topic,))
                    if topic not in decided.topics_sync():
                        return {}
                    partitions = range(decided.partitions_sync(topic))
                    return last_decisions([list(decided.read_sync(topic, p)) for p in partitions])
            except NeedsReplay as exc:
                return str(exc)

        folded, last = map_parts(fold_topic, [names.admission, names.decisions])
    if not isinstance(folded, QueueFold) or not isinstance(last, dict):
        return None
    apply_decisions(folded, last)
    return folded


def _summary_of_file_log(
    log: str,
    names: TopicNames,
    cluster_queue: str | None,
    local_queue: tuple[str, str] | None,
    limit: int,
    offset: int,
) -> dict[str, Any] | None:
    """The summary folded from the embedded log at ``log``; None when it takes the engines."""
    try:
        folded = _fold_file_log(log, names)
        if folded is None:
            return None
        return _folded_summary(folded, cluster_queue, local_queue, limit, offset)
    except NeedsReplay:
        return None


@contextlib.contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection meanwhile: a fold allocates some hundred thousand objects and
    frees almost none, so every collection it would trigger finds nothing. What the block keeps
    is left to the next collection, so it should keep little."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def summary_of_log(
    admission: Sequence[Sequence[Record]],
    decisions: Sequence[Sequence[Record]],
    *,
    cluster_queue: str | None = None,
    local_queue: tuple[str, str] | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
) -> dict[str, Any]:
    """The ``PendingWorkloadsSummary`` at the end of the recorded partitions.

    Folded from the queue-relevant records when :func:`~kueuestream.agents.audit.queue_fold.fold`
    can; else from the engines rebuilt by replaying ``admission``.
    """
    try:
        return _folded_summary(fold(admission, decisions), cluster_queue, local_queue, limit, offset)
    except NeedsReplay:
        return pending_summary(
            engines_at_end(admission),
            cluster_queue=cluster_queue,
            local_queue=local_queue,
            limit=limit,
            offset=offset,
        )


def _folded_summary(
    folded: QueueFold, cluster_queue: str | None, local_queue: tuple[str, str] | None, limit: int, offset: int
) -> dict[str, Any]:
    if cluster_queue is not None:
        if cluster_queue not in folded.cluster_queues:
            raise QueueNotFound(
                "ClusterQueue", cluster_queue, closest_names(cluster_queue, folded.cluster_queues)
            )
        first = sum(bounded(limit, offset))
        return summary(cluster_queue_items(fold_order(folded, cluster_queue, first), limit, offset))
    if local_queue is None:
        raise ValueError("name either a ClusterQueue or a LocalQueue")
    target = folded.local_queues.get(local_queue)
    if target is None:
        wanted = "/".join(local_queue)
        known = [f"{ns}/{name}" for ns, name in folded.local_queues]
        raise QueueNotFound("LocalQueue", wanted, closest_names(wanted, known))
    order = fold_order(folded, target) if target in folded.cluster_queues else []
    return summary(local_queue_items(order, local_queue[0], local_queue[1], limit, offset))


def pending_json(
    log: str,
    *,
    cluster_queue: str | None = None,
    local_queue: tuple[str, str] | None = None,
    limit: int = DEFAULT_LIMIT,
    offset: int = 0,
    prefix: str = "",
    kafka: KafkaSettings | None = None,
) -> dict[str, Any]:
    """The ``PendingWorkloadsSummary`` of a ClusterQueue or LocalQueue at the end of ``log``
    (an embedded log folder or ``kafka://HOST:PORT``).

    Raises :class:`QueueNotFound` for a queue the log does not hold, and
    :class:`~kueuestream.streams.log.LogError` for a log that cannot be read.
    """
    names = TopicNames(prefix)
    if not is_kafka(log):
        with _collection_paused():
            answer = _summary_of_file_log(log, names, cluster_queue, local_queue, limit, offset)
        if answer is not None:
            return answer
    admission, decisions = asyncio.run(read_log(log, names, kafka))
    return summary_of_log(
        admission, decisions, cluster_queue=cluster_queue, local_queue=local_queue, limit=limit, offset=offset
    )
