"""The applier agent's records: decisions read from kueue.decisions, outcomes to kueue.applied.

Where a decision is written depends on the runtime: status files when embedded
(:mod:`kueuestream.agents.embedded.status_files`).
"""

from __future__ import annotations

from kueuestream.agents.outputs import Out, Role
from kueuestream.streams import codec
from kueuestream.streams.schemas import AppliedRecord, ApplyOutcome, DecisionRecord
from kueuestream.streams.topics import decision_key


def applied_out(partition: int, decision: DecisionRecord, outcome: ApplyOutcome, detail: str = "") -> Out:
    record = AppliedRecord.for_decision(decision, outcome, detail)
    return Out(
        Role.APPLIED, partition, decision_key(decision.ref.namespace, decision.ref.name), codec.encode(record)
    )


def read_decision(raw: bytes) -> DecisionRecord:
    return codec.decode(raw, DecisionRecord)
