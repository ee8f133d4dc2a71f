"""The ingest agent: kueue.watch -> kueue.admission.

It validates each watch event, routes the object to its shard (a cohort tree,
see :mod:`kueuestream.agents.ingest_routing`) and closes batches with TICKs so
every shard with undecided records schedules.

With a cluster behind the watch (``cluster=True``), Kueue's job integration
(:mod:`kueuestream.agents.kube.jobs`) creates each queued Job's Workload in the
cluster, so Jobs are not turned into Workloads here, and a Workload whose
reservation that integration cleared after an eviction
(:func:`kueuestream.agents.kube.stop_signal.job_stopped`) also yields a STOPPED
record for its shard: its job has stopped and its quota can be released.

MultiKueue's events go to no shard, without an error: those of the worker
clusters (cluster names starting with ``multikueue:``), the ClusterConnection
control events, and valid MultiKueueConfig and MultiKueueCluster objects; the
MultiKueue agent (:mod:`kueuestream.agents.multikueue`) reads them.
"""

from __future__ import annotations

from collections.abc import Mapping

from kueuestream.admission.api.batch import Job
from kueuestream.admission.api.kueue import ClusterQueue, Cohort, LocalQueue, Workload
from kueuestream.admission.decode import KINDS, decode
from kueuestream.admission.engine import Engine  # noqa: F401  (registers the DRA kinds with the decoder)
from kueuestream.admission.events import EventType
from kueuestream.admission.jobs import QUEUE_NAME_LABEL, is_queued
from kueuestream.admission.multikueue import names as mk
from kueuestream.agents.ingest_routing import BROADCAST_KINDS, Planned, Router, object_key
from kueuestream.agents.kube.stop_signal import job_stopped
from kueuestream.agents.log_entries import (
    BATCH_BEGIN,
    BATCH_END,
    CLOCK_TICK,
    WATCH_BATCH,
    WATCH_PROGRESS,
    WATCH_STREAM,
    AdmissionEntry,
    Origin,
    control_kind,
)
from kueuestream.agents.outputs import Out, Table, admission_outs, error_out
from kueuestream.agents.sources.watch_events import Identified, identify
from kueuestream.streams import codec
from kueuestream.streams.schemas import FLOAT_FREE, ErrorSource, SourceRef, WatchEvent, WatchEventType
from kueuestream.streams.topics import BROADCAST


class Refused(Exception):
    """A watch event that cannot be taken in; the message says which object and why."""


def _key_mismatch(event: WatchEvent) -> str | None:
    """Why the event's key (kind, namespace, name, apiVersion) is not its object's own, if it is not.

    The key is what a later DELETED names; taking in an object under another
    key would leave it behind when the key is deleted.
    """
    found = identify(event.object)
    key = (event.kind, event.namespace, event.name)
    if isinstance(found, Identified) and found.id == key and found.api_version == event.apiVersion:
        return None
    said = f"{event.kind} {event.namespace + '/' if event.namespace else ''}{event.name} ({event.apiVersion})"
    if isinstance(found, str):
        return f"watch event for {said!r}: its object cannot be identified: {found}; skipped"
    kind, namespace, name = found.id
    held = f"{kind} {namespace + '/' if namespace else ''}{name} ({found.api_version})"
    return (
        f"watch event for {said!r} carries another object, {held!r}; an event's kind, namespace, name "
        "and apiVersion must be its object's own (kind, metadata.namespace, metadata.name, apiVersion); "
        "skipped"
    )


class IngestHandler:
    """kueue.watch -> kueue.admission: validate, route to the shard, close batches."""

    def __init__(
        self, tables: Mapping[str, Table], *, partitions: int, watch_topic: str, cluster: bool = False
    ) -> None:
        self.router = Router(dict(tables))
        self.state = tables["ingest_state"]
        self.partitions = partitions
        self.watch_topic = watch_topic
        self.cluster = cluster

    def handle(self, offset: int, raw: bytes, event: WatchEvent | None = None) -> list[Out]:
        """Take in the watch event ``raw``; ``event``, when given, is what ``raw`` decodes to."""
        if event is None:
            try:
                event = codec.decode(raw, WatchEvent)
            except codec.DecodeError as exc:
                return [error_out(raw, f"malformed watch event: {exc}", self._source(offset))]
        if event.kind == WATCH_BATCH and control_kind(event.object) == WATCH_BATCH:
            return self._batch_edge(event, offset)
        if event.kind == WATCH_PROGRESS and control_kind(event.object) == WATCH_PROGRESS:
            return []  # the watcher's own bookkeeping: no object changed
        outs: list[Out] = []
        try:
            planned = self._route(event)
        except Refused as exc:
            planned = []
            outs.append(error_out(raw, str(exc), self._source(offset)))
        ref = SourceRef(cluster=event.cluster, resourceVersion=event.resourceVersion)
        entries = [self._entry(p, event.timestamp, offset, i, ref) for i, p in enumerate(planned)]
        touched = {e.shard for e in entries}
        if self.state.get("batch"):
            self.state["open"] = sorted(set(self.state.get("open") or []) | touched)
        else:
            entries += self._close(touched, event.timestamp, offset, len(entries))
        for entry in entries:
            outs += admission_outs(entry, self.partitions)
        return outs

    def _source(self, offset: int) -> ErrorSource:
        # Made only for an error: most events have none, and validating one costs.
        return ErrorSource(topic=self.watch_topic, partition=0, offset=offset)

    def _entry(
        self, p: Planned, time_ms: int, offset: int, index: int, ref: SourceRef | None
    ) -> AdmissionEntry:
        # Every object routed is a watch event's (validated, so float-free), or built from one.
        return AdmissionEntry.model_validate(
            {
                "shard": p.shard,
                "time_ms": time_ms,
                "type": p.type,
                "kind": p.kind,
                "namespace": p.namespace,
                "name": p.name,
                "object": p.object,
                "source": ref if p.object is not None and p.kind != "ShardHandover" else None,
                "origin": Origin(stream=WATCH_STREAM, offset=offset, index=index),
            },
            context=FLOAT_FREE,
        )

    def _close(self, touched: set[str], time_ms: int, offset: int, first_index: int) -> list[AdmissionEntry]:
        """TICKs that let every shard with undecided records schedule."""
        shards = touched | set(self.state.get("open") or [])
        self.state["open"] = []
        targets = [BROADCAST] if BROADCAST in shards else sorted(shards)
        return [
            self._entry(Planned(shard, EventType.TICK), time_ms, offset, first_index + i, None)
            for i, shard in enumerate(targets)
        ]

    def _multikueue_object(self, event: WatchEvent) -> list[Planned]:
        """MultiKueue's own objects reach no shard; an invalid one is reported like any other."""
        if event.type != WatchEventType.DELETED:
            if (mismatch := _key_mismatch(event)) is not None:
                raise Refused(mismatch)
            decoded = decode(event.object)
            if decoded.errors:
                raise Refused(f"{decoded.label}: {'; '.join(str(e) for e in decoded.errors)}")
        return []

    def _batch_edge(self, event: WatchEvent, offset: int) -> list[Out]:
        entries: list[AdmissionEntry] = []
        if event.name == CLOCK_TICK:
            tick = self._entry(Planned(BROADCAST, EventType.TICK), event.timestamp, offset, 0, None)
            return admission_outs(tick, self.partitions)
        if self.state.get("batch") or event.name == BATCH_END:
            # A begin inside a batch means its end was lost (a source restarted): close it.
            entries = self._close(set(), event.timestamp, offset, 0)
        self.state["batch"] = event.name == BATCH_BEGIN
        outs: list[Out] = []
        for entry in entries:
            outs += admission_outs(entry, self.partitions)
        return outs

    def _route(self, event: WatchEvent) -> list[Planned]:
        r = self.router
        ident = f"{event.kind} {event.namespace + '/' if event.namespace else ''}{event.name}"
        if mk.worker_name(event.cluster) is not None or event.kind == mk.CLUSTER_CONNECTION_KIND:
            return []  # a worker's objects and connections are the MultiKueue agent's alone
        if event.kind in mk.MULTIKUEUE_KINDS:
            return self._multikueue_object(event)
        if event.type == WatchEventType.DELETED:
            kind = event.kind
            config_map = object_key("ConfigMap", event.namespace, event.name)
            if kind == "ConfigMap" and r.objects.pop(config_map, None) is not None:
                # It carried the Configuration (Kueue's own way of shipping it).
                return [r.broadcast("Configuration", event.namespace, event.name, None)]
            if kind == "ConfigMap":
                return []  # any other ConfigMap is none of ours
            if kind not in KINDS:
                raise Refused(f"{ident}: unknown kind {kind!r}; nothing to delete")
            if kind in BROADCAST_KINDS:
                return [r.broadcast(kind, event.namespace, event.name, None)]
            if kind == "Cohort":
                return r.delete_cohort(event.name)
            if kind == "ClusterQueue":
                return r.delete_cluster_queue(event.name)
            if kind == "LocalQueue":
                return r.delete_local_queue(event.namespace, event.name)
            return r.delete_workload(kind, event.namespace, event.name)
        if self.cluster and event.kind == "Job":
            return []  # its Workload comes from the cluster; nothing to read here
        manifest = event.object
        if (mismatch := _key_mismatch(event)) is not None:
            raise Refused(mismatch)
        decoded = decode(manifest)
        if decoded.errors:
            raise Refused(f"{decoded.label}: {'; '.join(str(e) for e in decoded.errors)}")
        obj = decoded.obj
        if obj is None or not decoded.relevant:
            raise Refused(
                f"{ident} ({event.apiVersion}): unknown kind, not one Kueuestream reads "
                f"(it reads {', '.join(sorted(KINDS))}); skipped"
            )
        assert manifest is not None
        kind, ns, name = decoded.kind, decoded.namespace, decoded.name
        # Kueue reads one Configuration, often written without a name: it is still that one.
        name = name or ("config" if kind == "Configuration" else name)
        if event.kind == "ConfigMap":
            r.objects[object_key("ConfigMap", event.namespace, event.name)] = True
        if kind in BROADCAST_KINDS:
            return [r.broadcast(kind, ns, name, manifest)]
        if isinstance(obj, Cohort):
            return r.upsert_cohort(name, obj.spec.parent_name, manifest)
        if isinstance(obj, ClusterQueue):
            return r.upsert_cluster_queue(name, obj.spec.cohort, manifest)
        if isinstance(obj, LocalQueue):
            return r.upsert_local_queue(ns, name, obj.spec.cluster_queue, manifest)
        if isinstance(obj, Workload):
            planned = r.upsert_workload("Workload", ns, name, obj.spec.queue_name, manifest)
            if self.cluster and job_stopped(obj):
                planned.append(Planned(planned[-1].shard, EventType.STOPPED, "Workload", ns, name))
            return planned
        if isinstance(obj, Job):
            if self.cluster or not is_queued(obj):
                # Not Kueue's to admit (Kueue ignores it too), or its Workload comes from the cluster.
                return []
            return r.upsert_workload("Job", ns, name, obj.metadata.labels[QUEUE_NAME_LABEL], manifest)
        raise Refused(f"{decoded.label}: Kueuestream has no route for kind {kind}; skipped")
