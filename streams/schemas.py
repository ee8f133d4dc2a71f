"""The records carried by the topics (see :mod:`kueuestream.streams.topics`).

Every record is a frozen pydantic model encoded with :mod:`kueuestream.streams.codec`.
Unknown fields are refused rather than dropped, so a producer that writes a
field nobody reads is caught instead of silently losing data. Integer fields
are strict: ``"5"`` or ``5.0`` in a record is a producer bug, not a number.

Field names follow the wire format: Kubernetes spellings (``apiVersion``,
``resourceVersion``) where the value is copied from an object, snake case for
our own fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictInt,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from kueuestream.admission.events import Action, Decision, Event, EventType, ObjectRef
from kueuestream.admission.multikueue.decisions import MultiKueueAction as MultiKueueAction
from kueuestream.streams.codec import contains_float, normalize_manifest

# An offset, a timestamp or an index: a non-negative int, never a float or a string.
NonNegativeInt = Annotated[StrictInt, Field(ge=0)]
NonEmptyStr = Annotated[str, Field(min_length=1)]

# ErrorRecord keeps at most this much of the bad input: enough to see what it
# was, small enough that a flood of huge garbage cannot bloat the errors topic.
MAX_RAW_CHARS = 4096


# Validation context saying that the ``object`` given is float-free already: it
# is, or is built from, the object of a record that was validated before.
FLOAT_FREE: dict[str, bool] = {"float_free": True}


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    # Fields whose values had their floats replaced when the record was validated
    # (see _normalized), so that encoding need not look for floats in them again.
    normalized_fields: ClassVar[tuple[str, ...]] = ()


def _normalized(obj: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
    # Manifests come from YAML, where `cpu: 0.5` is a float; floats cannot be
    # encoded canonically, so they become their shortest text here, once.
    # Most manifests have no float; checking is cheaper than rebuilding them.
    if obj is None or (info.context is not None and info.context.get("float_free")):
        return obj
    if not contains_float(obj):
        return obj
    normalized: dict[str, Any] = normalize_manifest(obj)
    return normalized


class WatchEventType(StrEnum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"


class WatchEvent(_Record):
    """One Kubernetes watch event (or one object read from a manifest file).

    ``timestamp`` is the event time in milliseconds, set by whoever produced the
    event (the watcher's clock, or a virtual clock in tests and file sources).
    """

    cluster: NonEmptyStr
    kind: NonEmptyStr
    apiVersion: NonEmptyStr
    namespace: str = ""  # "" for cluster-scoped objects
    name: NonEmptyStr
    type: WatchEventType
    resourceVersion: str = ""
    object: dict[str, Any] | None = None
    timestamp: NonNegativeInt

    normalized_fields: ClassVar[tuple[str, ...]] = ("object",)
    _normalize_object = field_validator("object")(_normalized)

    @model_validator(mode="after")
    def _object_unless_deleted(self) -> Self:
        if self.object is None and self.type is not WatchEventType.DELETED:
            raise ValueError(f"object is required for a {self.type.value} event")
        return self


class SourceRef(_Record):
    """Where an admission record's object came from: the cluster and its version."""

    cluster: NonEmptyStr
    resourceVersion: str = ""


class AdmissionRecord(_Record):
    """One input of the admission engine, as stored in ``kueue.admission``.

    Its sequence number is its offset in the shard's partition, so it is not
    stored in the record: a record's identity is its log position. ``kind``,
    ``namespace`` and ``name`` are all empty for a ``Tick``, which concerns no
    object.
    """

    shard: NonEmptyStr
    time_ms: NonNegativeInt
    type: EventType
    kind: str = ""
    namespace: str = ""
    name: str = ""
    object: dict[str, Any] | None = None
    source: SourceRef | None = None

    normalized_fields: ClassVar[tuple[str, ...]] = ("object",)
    _normalize_object = field_validator("object")(_normalized)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        has_ref = bool(self.kind or self.name or self.namespace)
        if self.type is EventType.TICK:
            if has_ref or self.object is not None:
                raise ValueError("a Tick concerns no object: kind, namespace, name and object must be empty")
            return self
        if not self.kind or not self.name:
            raise ValueError(f"a {self.type.value} event needs kind and name")
        if self.type is EventType.UPSERT and self.object is None:
            raise ValueError("an Upsert event needs the object")
        return self

    @property
    def ref(self) -> ObjectRef | None:
        if not self.kind:
            return None
        return ObjectRef(self.kind, self.namespace, self.name)

    def to_event(self) -> Event:
        return Event(type=self.type, time_ms=self.time_ms, ref=self.ref, manifest=self.object)

    @classmethod
    def from_event(cls, shard: str, event: Event, source: SourceRef | None = None) -> AdmissionRecord:
        ref = event.ref
        return cls(
            shard=shard,
            time_ms=event.time_ms,
            type=event.type,
            kind=ref.kind if ref else "",
            namespace=ref.namespace if ref else "",
            name=ref.name if ref else "",
            object=event.manifest,
            source=source,
        )


class Ref(_Record):
    """The object a decision is about (usually a Workload)."""

    kind: NonEmptyStr
    namespace: str = ""
    name: NonEmptyStr

    @classmethod
    def of(cls, ref: ObjectRef) -> Ref:
        return cls(kind=ref.kind, namespace=ref.namespace, name=ref.name)

    def to_object_ref(self) -> ObjectRef:
        return ObjectRef(self.kind, self.namespace, self.name)


class Cause(_Record):
    """The admission-log position of the input that produced a decision.

    The shard names the partition (through :func:`kueuestream.streams.topics.partition_for_shard`)
    and the offset the record in it, so a decision can always be traced back to,
    and recomputed from, its input.
    """

    shard: NonEmptyStr
    offset: NonNegativeInt


class DecisionRecord(_Record):
    """One decision of the engine, as stored in ``kueue.decisions``.

    ``index`` is the decision's position among those produced by the same input,
    so ``(cause, index)`` identifies a decision and makes applying it idempotent.
    """

    ref: Ref
    action: Action
    status: dict[str, Any] = Field(default_factory=dict)
    message: str = ""
    cause: Cause
    index: NonNegativeInt
    # The decision trace (admission/trace.py); left out of the record when there is none.
    trace: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _without_empty_trace(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("trace") is None:
            data.pop("trace", None)
        return data

    @classmethod
    def from_decision(cls, decision: Decision, cause: Cause, index: int) -> DecisionRecord:
        return cls(
            ref=Ref.of(decision.ref),
            action=decision.action,
            status=decision.status,
            message=decision.message,
            cause=cause,
            index=index,
            trace=decision.trace,
        )

    @classmethod
    def from_decisions(cls, decisions: Sequence[Decision], cause: Cause) -> list[DecisionRecord]:
        """All decisions produced by one input, numbered in the engine's order."""
        return [cls.from_decision(d, cause, i) for i, d in enumerate(decisions)]

    def to_decision(self) -> Decision:
        return Decision(
            ref=self.ref.to_object_ref(),
            action=self.action,
            status=self.status,
            message=self.message,
            trace=self.trace,
        )


class ApplyOutcome(StrEnum):
    APPLIED = "Applied"
    CONFLICT = "Conflict"  # the object changed underneath; the status was not written
    ERROR = "Error"
    UNCHANGED = "Unchanged"  # the object already had that status; nothing was written
    SUPERSEDED = "Superseded"  # a newer decision about the same object came first; not written
    GONE = "Gone"  # the object no longer exists


class AppliedRecord(_Record):
    """What the applier did with one decision, as stored in ``kueue.applied``.

    ``cause`` and ``index`` are the decision's own, naming exactly which decision
    this reports on.
    """

    ref: Ref
    cause: Cause
    index: NonNegativeInt
    outcome: ApplyOutcome
    detail: str = ""

    @classmethod
    def for_decision(cls, decision: DecisionRecord, outcome: ApplyOutcome, detail: str = "") -> AppliedRecord:
        return cls(
            ref=decision.ref,
            cause=decision.cause,
            index=decision.index,
            outcome=outcome,
            detail=detail,
        )


class ErrorSource(_Record):
    """Where a bad input was read: a log position, or a file (and document in it)."""

    topic: str | None = None
    partition: NonNegativeInt | None = None
    offset: NonNegativeInt | None = None
    file: str | None = None
    document: NonNegativeInt | None = None  # index of the YAML document in a multi-document file

    @model_validator(mode="after")
    def _somewhere(self) -> Self:
        in_log = self.topic is not None and self.partition is not None and self.offset is not None
        if not in_log and self.file is None:
            raise ValueError("an error source needs topic, partition and offset, or a file")
        return self

    def __str__(self) -> str:
        if self.file is not None:
            return self.file if self.document is None else f"{self.file}#{self.document}"
        return f"{self.topic}[{self.partition}]@{self.offset}"


class ErrorRecord(_Record):
    """A bad input that was skipped, as stored in ``kueue.errors``.

    ``raw`` is the input as text (invalid UTF-8 shown as ``\\xNN`` escapes),
    cut to :data:`MAX_RAW_CHARS` characters; ``raw_size`` is the full size in
    bytes, so a truncation is visible.
    """

    source: ErrorSource
    raw: str
    raw_size: NonNegativeInt
    truncated: bool = False
    error: NonEmptyStr

    @classmethod
    def from_bad_input(cls, raw: bytes | str, error: str | BaseException, source: ErrorSource) -> ErrorRecord:
        data = raw.encode() if isinstance(raw, str) else bytes(raw)
        # Decoding only the head keeps a multi-megabyte blob from being copied whole.
        text = data[: MAX_RAW_CHARS * 4].decode("utf-8", errors="backslashreplace")
        truncated = len(text) > MAX_RAW_CHARS or len(data) > MAX_RAW_CHARS * 4
        message = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return cls(
            source=source,
            raw=text[:MAX_RAW_CHARS],
            raw_size=len(data),
            truncated=truncated,
            error=message or "unknown error",
        )


class MultiKueueDecision(_Record):
    """One decision of the MultiKueue dispatcher, as stored in ``kueue.multikueue``.

    ``cause`` is the offset in ``kueue.watch`` of the event that made it.
    ``cluster`` is a worker's MultiKueueCluster name (without the prefix its
    watch events carry) for the remote actions; ``namespace``/``name`` name the
    manager's Workload (its Job for ``SyncJobStatus``), the MultiKueueCluster
    or the AdmissionCheck.
    """

    time_ms: NonNegativeInt
    cause: NonNegativeInt
    action: MultiKueueAction
    cluster: str = ""
    namespace: str = ""
    name: str = ""
    check: str = ""
    state: str = ""  # Pending | Ready | Retry | Rejected
    active: bool | None = None
    reason: str = ""
    message: str = ""
    clusterName: str = ""
    clusters: list[str] = Field(default_factory=list)
    objects: list[dict[str, Any]] = Field(default_factory=list)
    object: dict[str, Any] | None = None


class MultiKueueApplied(_Record):
    """What the MultiKueue executor did with one decision, as stored in ``kueue.multikueue.applied``.

    ``decision`` is the decision's offset in ``kueue.multikueue``.
    """

    decision: NonNegativeInt
    outcome: str  # applied | unchanged | not-found | conflict | unreachable | failed
    message: str = ""
