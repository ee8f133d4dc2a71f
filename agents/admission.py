"""The admission agent: kueue.admission -> kueue.decisions.

One :class:`~kueuestream.agents.admission_shards.PartitionState` per partition
holds an engine per shard; the records it emits beside decisions (requeues,
handovers) go back to kueue.admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kueuestream.admission.api.config import Configuration
from kueuestream.agents.admission_shards import Emitted, ObjKey, PartitionState
from kueuestream.agents.log_entries import AdmissionEntry
from kueuestream.agents.outputs import Out, Role, admission_outs, error_out
from kueuestream.streams import codec
from kueuestream.streams.schemas import ErrorSource
from kueuestream.streams.topics import decision_key


class AdmissionHandler:
    """kueue.admission -> kueue.decisions (+ records the runtime appends to kueue.admission)."""

    def __init__(
        self,
        *,
        partitions: int,
        admission_topic: str,
        job_controller: bool = True,
        config: Configuration | None = None,
        overrides: Mapping[ObjKey, dict[str, Any]] | None = None,
    ) -> None:
        self.partitions = partitions
        self.admission_topic = admission_topic
        self.job_controller = job_controller
        self.config = config
        self.overrides = overrides
        self.states: dict[int, PartitionState] = {}

    def state(self, partition: int) -> PartitionState:
        state = self.states.get(partition)
        if state is None:
            state = PartitionState(
                partition, config=self.config, job_controller=self.job_controller, overrides=self.overrides
            )
            self.states[partition] = state
        return state

    def drop(self, partition: int) -> None:
        self.states.pop(partition, None)

    def feed(self, partition: int, offset: int, raw: bytes, entry: AdmissionEntry | None = None) -> Emitted:
        """Apply the record ``raw``; ``entry`` is what it decodes to, when the caller already has that."""
        return self.state(partition).feed(offset, raw, entry)

    def handle(
        self, partition: int, offset: int, raw: bytes, entry: AdmissionEntry | None = None
    ) -> list[Out]:
        return self.outs(partition, self.feed(partition, offset, raw, entry), raw)

    def outs(self, partition: int, emitted: Emitted, raw: bytes = b"") -> list[Out]:
        outs = [
            Out(Role.DECISIONS, partition, decision_key(d.ref.namespace, d.ref.name), codec.encode(d))
            for d in emitted.decisions
        ]
        for entry in emitted.followups:
            outs += admission_outs(entry, self.partitions)
        for offset, why in emitted.unreadable:
            source = ErrorSource(topic=self.admission_topic, partition=partition, offset=offset)
            outs.append(error_out(raw, f"unreadable admission record: {why}", source))
        for offset, what in emitted.problems:
            source = ErrorSource(topic=self.admission_topic, partition=partition, offset=offset)
            outs.append(error_out(raw, what, source))
        return outs

    def next_wakeup_ms(self, *, deadlines: bool = True) -> int | None:
        """The earliest time any shard's engine wants a clock tick, or None (see
        :meth:`Engine.next_wakeup_ms` for ``deadlines``)."""
        times = [
            t
            for p in sorted(self.states)
            for shard in sorted(self.states[p].shards)
            if (t := self.states[p].shards[shard].engine.next_wakeup_ms(deadlines=deadlines)) is not None
        ]
        return min(times) if times else None

    def workload_objects(self) -> list[dict[str, Any]]:
        objects = [obj for p in sorted(self.states) for obj in self.states[p].workload_objects()]
        return sorted(objects, key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))

    def cluster_queue_objects(self) -> list[dict[str, Any]]:
        objects = [obj for p in sorted(self.states) for obj in self.states[p].cluster_queue_objects()]
        return sorted(objects, key=lambda o: str(o.get("metadata", {}).get("name", "")))
