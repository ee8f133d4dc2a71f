"""The embedded runtime's engine room: the three agents in one process over one log.

Processing is sequential and in a fixed order, so a run is a pure function of
the watch log: each watch event goes through ingest, then every admission
partition is drained in partition order (again, until the records the agents
appended themselves are drained too), each decision being applied as soon as
it is written, before the next watch event.

Restart. Nothing but the log is kept: on start every topic is read again from
offset 0 through fresh handlers, which rebuilds the routing tables and the
engines exactly. What the handlers produce again and is already in the log is
not appended twice (admission records from watch events are recognised by
their origin; the records an admission partition's agent appended, and its
decisions, by their count, since it produces them in one deterministic order;
errors by their source), so a crash at any point neither loses nor duplicates
a record: whatever was cut off is produced again and appended, the rest is
skipped.

Lost records. A damaged tail the file log cut off is gone, and its offsets are
never used again (:mod:`kueuestream.streams.file_log`). What the agents
recorded as processed is checked against what the log holds: the watch
offsets named as the origin of admission records and errors, and the
admission offsets named as the cause of decisions and the origin of appended
records. A recorded offset the log does not hold means more was cut off than
its tombstone covers, so the log is told to skip past it (:class:`SkippingLog`).
Then what was lost is produced again like anything a crash cut off: records of
the derived topics by the handlers, watch events by the source (which compares
its folder with what the repaired watch log says exists).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import orjson

from kueuestream.admission.events import Action
from kueuestream.agents.admission import AdmissionHandler
from kueuestream.agents.applier import read_decision
from kueuestream.agents.embedded.memory_log import SyncLog
from kueuestream.agents.embedded.status_files import StatusDirectory
from kueuestream.agents.ingest import IngestHandler
from kueuestream.agents.log_entries import (
    CLOCK_TICK,
    WATCH_STREAM,
    AdmissionEntry,
    admission_stream,
    batch_marker,
    decode_entry,
)
from kueuestream.agents.multikueue import MultiKueueHandler, decision_key
from kueuestream.agents.outputs import Out, Role, empty_tables, error_out
from kueuestream.agents.topic_names import TopicNames
from kueuestream.streams import codec
from kueuestream.streams.codec import DecodeError
from kueuestream.streams.log import UnknownTopicError
from kueuestream.streams.schemas import (
    ApplyOutcome,
    DecisionRecord,
    ErrorRecord,
    ErrorSource,
    MultiKueueDecision,
    WatchEvent,
)

DecisionHook = Callable[[DecisionRecord], None]
ErrorHook = Callable[[ErrorRecord], None]


@runtime_checkable
class SkippingLog(Protocol):
    """A log that can lose a damaged tail, and so must be able to skip offsets (the file log)."""

    def skip_to_sync(self, topic: str, partition: int, offset: int, note: str) -> None: ...


@dataclass(slots=True)
class PumpStats:
    watch_events: int = 0
    admission_records: int = 0
    decisions: int = 0  # newly written
    errors: int = 0  # newly written
    multikueue: int = 0  # MultiKueue decisions newly written


class EmbeddedPipeline:
    def __init__(
        self,
        log: SyncLog,
        *,
        names: TopicNames | None = None,
        status: StatusDirectory | None = None,
        on_decision: DecisionHook | None = None,
        on_error: ErrorHook | None = None,
        job_controller: bool = True,
        cluster: bool = False,
    ) -> None:
        self.log = log
        self.names = names or TopicNames()
        self.status = status
        self.on_decision = on_decision
        self.on_error = on_error
        n = self.names
        log.ensure_topic_sync(n.watch, 1)
        self.partitions = log.ensure_topic_sync(n.admission)
        # Decisions of admission partition p go to decisions partition p (see kueuestream.agents.outputs).
        log.ensure_topic_sync(n.decisions, self.partitions)
        log.ensure_topic_sync(n.errors)
        # The names, validated once rather than on every record.
        self.watch_topic, self.admission_topic = n.watch, n.admission
        self.decisions_topic, self.errors_topic = n.decisions, n.errors
        # Records this pipeline appended and has not read back yet, as they decode
        # (codec.reread), by offset in the watch log and by (partition, offset) in
        # kueue.admission: reading them back needs no second validation.
        self._unread_events: dict[int, WatchEvent] = {}
        self._unread_entries: dict[tuple[int, int], AdmissionEntry] = {}
        # With a cluster behind the watch its job integration creates the Workloads
        # and stops the jobs; the pipeline must do neither.
        self.ingest = IngestHandler(
            empty_tables(), partitions=self.partitions, watch_topic=n.watch, cluster=cluster
        )
        self.admission = AdmissionHandler(
            partitions=self.partitions,
            admission_topic=n.admission,
            job_controller=job_controller and not cluster,
        )
        # Every watch event also goes to the MultiKueue dispatcher; its decisions go to
        # kueue.multikueue, a topic made when the first one is written.
        self.multikueue = MultiKueueHandler()
        self.multikueue_topic = n.multikueue
        self._multikueue_topic_made = False
        self.watch_cursor = 0
        self.cursors = [0] * self.partitions
        self.stats = PumpStats()
        self._scan_existing()
        # Where each admission partition ends, as far as this pipeline (the log's only
        # writer) knows: a partition whose cursor is there has nothing to read.
        ends = log.end_offsets_sync(n.admission)
        self._admission_ends = [ends.get(p, 0) for p in range(self.partitions)]

    # --- what the log already holds ------------------------------------------------

    def _scan_existing(self) -> None:
        n = self.names
        # (partition, "watch") -> the last watch origin already written there.
        self._last_origin: dict[tuple[int, str], tuple[int, int]] = {}
        # (partition, "admission/q") -> records q's agent appended there that are still to be skipped.
        self._skip_followups: dict[tuple[int, str], int] = {}
        # (topic, partition) -> the highest offset an agent recorded having processed.
        processed: dict[tuple[str, int], int] = {}

        def saw(topic: str, partition: int, offset: int) -> None:
            processed[(topic, partition)] = max(processed.get((topic, partition), -1), offset)

        appended_by = {admission_stream(q): q for q in range(self.partitions)}

        for p in range(self.partitions):
            for record in self.log.read_sync(n.admission, p):
                try:
                    origin = decode_entry(record.value).origin
                except DecodeError:
                    continue
                key = (p, origin.stream)
                if origin.stream == WATCH_STREAM:
                    self._last_origin[key] = max(self._last_origin.get(key, (-1, -1)), origin.key())
                    saw(n.watch, 0, origin.offset)
                else:
                    self._skip_followups[key] = self._skip_followups.get(key, 0) + 1
                    if origin.stream in appended_by:
                        saw(n.admission, appended_by[origin.stream], origin.offset)
        # The dispatcher makes its decisions in one deterministic order: as many as the
        # topic holds are already written. Each names the watch event that made it.
        self._skip_multikueue = 0
        try:
            for record in self.log.read_sync(n.multikueue, 0):
                self._skip_multikueue += 1
                try:
                    saw(n.watch, 0, int(orjson.loads(record.value)["cause"]))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue
        except UnknownTopicError:
            pass  # a prefixed log that has no such topic yet
        # Decisions produced again before reaching these counts are already written.
        self._skip_decisions: dict[int, int] = {}
        for p in range(self.partitions):
            count = 0
            for record in self.log.read_sync(n.decisions, p):
                count += 1
                try:
                    saw(n.admission, p, int(orjson.loads(record.value)["cause"]["offset"]))
                except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
                    continue
            self._skip_decisions[p] = count
        # Decisions produced so far per partition: the offset of the next one.
        self._decisions_made: dict[int, int] = {}
        self._errors_seen: set[tuple[str, str]] = set()
        for record in self.log.read_sync(n.errors, 0):
            try:
                error = codec.decode(record.value, ErrorRecord)
            except DecodeError:
                continue
            self._errors_seen.add((str(error.source), error.error))
            where = error.source
            if where.topic in (n.watch, n.admission) and where.offset is not None:
                saw(where.topic, where.partition or 0, where.offset)
        self.skipped = self._skip_lost(processed)

    def _skip_lost(self, processed: dict[tuple[str, int], int]) -> list[str]:
        """Make the log skip past every offset an agent processed that it no longer holds."""
        skipped: list[str] = []
        if not isinstance(self.log, SkippingLog):
            return skipped  # a log that never loses a tail (in memory, Kafka)
        for (topic, partition), last in sorted(processed.items()):
            end = self.log.end_offsets_sync(topic).get(partition)
            if end is None or last < end:
                continue  # no such partition: a damaged error record named it
            note = (
                f"offsets up to {last} were processed (records derived from them are in the log) "
                f"but the log ended at {end}: records were lost"
            )
            self.log.skip_to_sync(topic, partition, last + 1, note)
            skipped.append(f"{topic} partition {partition}, offsets {end}..{last}: {note}")
        return skipped

    # --- input ---------------------------------------------------------------------

    def submit(self, events: Sequence[WatchEvent]) -> None:
        if not events:
            return
        values = [codec.encode(e) for e in events]
        positions = self.log.append_many_sync(self.watch_topic, [(b"", v) for v in values], partition=0)
        for event, value, position in zip(events, values, positions, strict=True):
            self._unread_events[position.offset] = codec.reread(event, value)

    def submit_raw(self, values: Sequence[bytes]) -> None:
        """Watch events as bytes, as a producer would send them (malformed ones included)."""
        if values:
            self.log.append_many_sync(self.names.watch, [(b"", v) for v in values], partition=0)

    def record_errors(self, errors: Sequence[ErrorRecord]) -> None:
        """Errors found before anything reached the log (a file that is not YAML)."""
        self._write([Out(Role.ERRORS, 0, str(e.source).encode(), codec.encode(e)) for e in errors])

    # --- processing ----------------------------------------------------------------

    def pump(self) -> PumpStats:
        """Process everything submitted so far, to quiescence.

        One watch event at a time, each drained before the next: then where the
        agents' own records land depends on the watch log alone, not on how
        events were submitted, and a restart rebuilds the very same log.
        """
        self._drain_admission()
        unread = self._unread_events
        for record in self.log.read_sync(self.watch_topic, 0, self.watch_cursor):
            event = unread.pop(record.offset, None)
            self._write(self.ingest.handle(record.offset, record.value, event))
            self._write_multikueue(self.multikueue.handle(record.offset, record.value, event))
            self.watch_cursor = record.offset + 1
            self.stats.watch_events += 1
            self._drain_admission()
        return self.stats

    def _drain_admission(self) -> bool:
        progressed = False
        unread = self._unread_entries
        while True:
            round_progress = False
            for p in range(self.partitions):
                if self.cursors[p] >= self._admission_ends[p]:
                    continue
                outs: list[Out] = []
                for record in self.log.read_sync(self.admission_topic, p, self.cursors[p]):
                    entry = unread.pop((p, record.offset), None)
                    outs += self.admission.handle(p, record.offset, record.value, entry)
                    self.cursors[p] = record.offset + 1
                    self.stats.admission_records += 1
                    round_progress = True
                self._write(outs)
            if not round_progress:
                return progressed
            progressed = True

    # --- output --------------------------------------------------------------------

    def _write(self, outs: list[Out]) -> None:
        if not outs:
            return
        admission: list[Out] = []
        decisions: dict[int, list[Out]] = {}
        errors: list[Out] = []
        for out in outs:
            if out.role == Role.ADMISSION:
                assert out.origin is not None
                key = (out.partition, out.origin.stream)
                if out.origin.stream != WATCH_STREAM:
                    if self._skip_followups.get(key, 0) > 0:
                        self._skip_followups[key] -= 1
                        continue
                    admission.append(out)
                    continue
                last = self._last_origin.get(key)
                if last is not None and out.origin.key() <= last:
                    continue
                self._last_origin[key] = out.origin.key()
                admission.append(out)
            elif out.role == Role.DECISIONS:
                decisions.setdefault(out.partition, []).append(out)
            elif out.role == Role.ERRORS:
                self._keep_error(out, errors)
        for p in sorted({o.partition for o in admission}):
            items = [o for o in admission if o.partition == p]
            positions = self.log.append_many_sync(
                self.admission_topic, [(o.key, o.value) for o in items], partition=p
            )
            if positions:
                self._admission_ends[p] = max(self._admission_ends[p], positions[-1].offset + 1)
            for out, position in zip(items, positions, strict=True):
                if out.entry is not None:
                    self._unread_entries[(p, position.offset)] = codec.reread(out.entry, out.value)
        for p, items in sorted(decisions.items()):
            skip = min(self._skip_decisions.get(p, 0), len(items))
            self._skip_decisions[p] = self._skip_decisions.get(p, 0) - skip
            fresh = items[skip:]
            if fresh:
                self.log.append_many_sync(
                    self.decisions_topic, [(o.key, o.value) for o in fresh], partition=p
                )
            if self.status is None and self.on_decision is None:
                # Nobody reads the decisions here (``admit``): count them without decoding them.
                made = self._decisions_made.get(p, 0)
                self._decisions_made[p] = made + len(items)
                self.stats.decisions += len(items) - skip
                continue
            for i, out in enumerate(items):
                decision = read_decision(out.value)
                offset = self._decisions_made.get(p, 0)
                self._decisions_made[p] = offset + 1
                if self.status is not None:
                    outcome, detail = self.status.apply(decision)
                    # A rejection is in the decision itself; any other failure is news.
                    if outcome is ApplyOutcome.ERROR and decision.action is not Action.REJECTED:
                        source = ErrorSource(topic=self.decisions_topic, partition=p, offset=offset)
                        self._keep_error(error_out(out.value, detail, source), errors)
                if i >= skip:
                    self.stats.decisions += 1
                    if self.on_decision is not None:
                        self.on_decision(decision)
        if errors:
            self.log.append_many_sync(self.errors_topic, [(o.key, o.value) for o in errors], partition=0)
            for out in errors:
                self.stats.errors += 1
                if self.on_error is not None:
                    self.on_error(codec.decode(out.value, ErrorRecord))

    def _write_multikueue(self, decisions: list[MultiKueueDecision]) -> None:
        skip = min(self._skip_multikueue, len(decisions))
        self._skip_multikueue -= skip
        fresh = decisions[skip:]
        if not fresh:
            return
        if not self._multikueue_topic_made:
            self.log.ensure_topic_sync(self.multikueue_topic, 1)
            self._multikueue_topic_made = True
        self.log.append_many_sync(
            self.multikueue_topic, [(decision_key(d), codec.encode(d)) for d in fresh], partition=0
        )
        self.stats.multikueue += len(fresh)

    def _keep_error(self, out: Out, errors: list[Out]) -> None:
        error = codec.decode(out.value, ErrorRecord)
        seen = (str(error.source), error.error)
        if seen not in self._errors_seen:
            self._errors_seen.add(seen)
            errors.append(out)

    def next_wakeup_ms(self, *, deadlines: bool = True) -> int | None:
        wakeups = [self.admission.next_wakeup_ms(deadlines=deadlines), self.multikueue.next_wakeup_ms()]
        due = [t for t in wakeups if t is not None]
        return min(due) if due else None

    def advance_clock(self, until_ms: int | None = None, cluster: str = "local") -> None:
        """Tick the clock at every time an engine asked for, up to ``until_ms``, or until
        nothing waits when None.

        The ticks are watch events like any other, so a replay sees the same clock.
        Run to quiescence (no ``until_ms``), time moves only for retries: running
        on to the workloads' maximum execution times would deactivate them all.
        """
        deadlines = until_ms is not None
        while (due := self.next_wakeup_ms(deadlines=deadlines)) is not None and (
            until_ms is None or due <= until_ms
        ):
            self.submit([batch_marker(CLOCK_TICK, cluster, due)])
            self.pump()

    def close(self) -> None:
        self.log.close_sync()
