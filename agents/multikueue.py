"""The MultiKueue agent: kueue.watch -> kueue.multikueue.

It hands every watch event (the manager's and the workers') to the pure
dispatcher (:mod:`kueuestream.admission.multikueue.dispatcher`) and turns its
decisions into :class:`~kueuestream.streams.schemas.MultiKueueDecision`
records. Control events of the watch log only let time pass (clock ticks,
progress notes) or open and close a batch (a listing). A malformed watch event is skipped here: ingest
records the error.
"""

from __future__ import annotations

from dataclasses import fields

from kueuestream.admission.multikueue.decisions import Decision, Observation
from kueuestream.admission.multikueue.dispatcher import Dispatcher
from kueuestream.agents.log_entries import (
    BATCH_BEGIN,
    BATCH_END,
    SHARD_HANDOVER,
    WATCH_BATCH,
    WATCH_PROGRESS,
)
from kueuestream.streams import codec
from kueuestream.streams.schemas import MultiKueueDecision, WatchEvent, WatchEventType
from kueuestream.streams.topics import multikueue_key

_CONTROL_KINDS = frozenset({WATCH_BATCH, WATCH_PROGRESS, SHARD_HANDOVER})


def decision_key(decision: MultiKueueDecision) -> bytes:
    """The record key: the manager Workload's ``ns/name``, or the cluster's or check's name."""
    return multikueue_key(decision.namespace, decision.name)


def to_record(decision: Decision) -> MultiKueueDecision:
    # Field by field, not dataclasses.asdict: that would deep-copy the objects of every copy.
    return MultiKueueDecision(**{f.name: getattr(decision, f.name) for f in fields(decision)})


class MultiKueueHandler:
    def __init__(self) -> None:
        self.dispatcher = Dispatcher()

    def handle(self, offset: int, raw: bytes, event: WatchEvent | None = None) -> list[MultiKueueDecision]:
        """The decisions the watch event at ``offset`` makes; ``event``, when given, is ``raw`` decoded."""
        if event is None:
            try:
                event = codec.decode(raw, WatchEvent)
            except codec.DecodeError:
                return []
        if event.kind == WATCH_BATCH and event.name in (BATCH_BEGIN, BATCH_END):
            made = self.dispatcher.batch_edge(event.name == BATCH_BEGIN, event.timestamp, offset)
        elif event.kind in _CONTROL_KINDS:
            made = self.dispatcher.tick(event.timestamp, offset)
        else:
            observation = Observation(
                cluster=event.cluster,
                kind=event.kind,
                api_version=event.apiVersion,
                namespace=event.namespace,
                name=event.name,
                deleted=event.type is WatchEventType.DELETED,
                object=event.object,
                time_ms=event.timestamp,
            )
            made = self.dispatcher.apply(observation, offset)
        return [to_record(d) for d in made]

    def next_wakeup_ms(self) -> int | None:
        return self.dispatcher.next_wakeup_ms()
