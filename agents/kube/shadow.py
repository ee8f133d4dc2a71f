"""Shadow mode: our decisions compared with the Workload status another controller (Kueue) writes.

Nothing is written to the cluster. For every Workload both sides have
decided on, four things are compared:

- ``admitted``: whether the ``Admitted`` condition is True;
- ``clusterQueue``: ``status.admission.clusterQueue``;
- ``flavors``: the flavor of each resource of each pod set (``status.admission``);
- ``reason``: the ``QuotaReserved`` condition's reason while it is not True.

A side has decided once its status carries a ``QuotaReserved`` or ``Admitted``
condition; until the other controller has written one, the Workload is not
compared. Each change in a Workload's differences is shown as table rows; the
JSON report is written at start and again whenever the differences or the
number of Workloads compared change; :class:`ShadowDifferences` exposes their count per
field as ``kueuestream_shadow_differences{kind}``.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from kueuestream.admission.events import Action
from kueuestream.admission.status import ADMITTED, QUOTA_RESERVED
from kueuestream.streams.schemas import DecisionRecord, WatchEvent, WatchEventType

FIELDS = ("admitted", "clusterQueue", "flavors", "reason")
Key = tuple[str, str]
Flavors = tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # (pod set, ((resource, flavor), ...))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one side says about a Workload, in the compared fields."""

    admitted: bool
    cluster_queue: str
    flavors: Flavors
    reason: str

    def value(self, field: str) -> str:
        if field == "admitted":
            return "true" if self.admitted else "false"
        if field == "clusterQueue":
            return self.cluster_queue or "-"
        if field == "flavors":
            shown = "; ".join(
                f"{pod_set}: " + ",".join(f"{res}={flv}" for res, flv in pairs)
                for pod_set, pairs in self.flavors
            )
            return shown or "-"
        return self.reason or "-"


def _condition(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return cond
    return None


def verdict_of(status: Any) -> Verdict | None:
    """The compared fields of a Workload ``status``; None while no admission decision is in it."""
    if not isinstance(status, dict):
        return None
    reserved, admitted = _condition(status, QUOTA_RESERVED), _condition(status, ADMITTED)
    if reserved is None and admitted is None:
        return None
    found = status.get("admission")
    admission: dict[str, Any] = found if isinstance(found, dict) else {}
    flavors: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for assignment in admission.get("podSetAssignments") or []:
        if isinstance(assignment, dict):
            given = assignment.get("flavors")
            pairs: dict[str, Any] = given if isinstance(given, dict) else {}
            flavors.append(
                (str(assignment.get("name", "")), tuple(sorted((str(r), str(f)) for r, f in pairs.items())))
            )
    reserved_true = reserved is not None and reserved.get("status") == "True"
    return Verdict(
        admitted=admitted is not None and admitted.get("status") == "True",
        cluster_queue=str(admission.get("clusterQueue") or ""),
        flavors=tuple(sorted(flavors)),
        reason="" if reserved_true or reserved is None else str(reserved.get("reason") or ""),
    )


def differences(ours: Verdict, theirs: Verdict) -> dict[str, tuple[str, str]]:
    return {f: (ours.value(f), theirs.value(f)) for f in FIELDS if ours.value(f) != theirs.value(f)}


class ShadowComparison:
    """Our newest decision and the live status of every Workload, and where they differ."""

    def __init__(self, show: Callable[[str], None], report_file: Path | None = None) -> None:
        self.show = show
        self.report_file = report_file
        self.ours: dict[Key, Verdict] = {}
        self.theirs: dict[Key, Verdict] = {}
        self.differing: dict[Key, dict[str, tuple[str, str]]] = {}
        self.compared: set[Key] = set()  # Workloads both sides have decided on
        # Replaced whole after each change, so a scrape from another thread reads a complete one.
        self.current_counts: dict[str, int] = dict.fromkeys(FIELDS, 0)
        self._header_shown = False

    # --- input ---------------------------------------------------------------------

    def decide(self, decision: DecisionRecord) -> None:
        """One of our decisions, in the order made."""
        if decision.ref.kind != "Workload":
            return
        key = (decision.ref.namespace, decision.ref.name)
        if decision.action in (Action.DELETED, Action.REJECTED):
            self.ours.pop(key, None)
        else:
            found = verdict_of(decision.status)
            if found is None:
                return
            self.ours[key] = found
        self._compare([key])

    def observe(self, events: Iterable[WatchEvent]) -> None:
        """Watch events from the cluster; a Workload's status is what the other controller wrote."""
        keys: list[Key] = []
        for event in events:
            if event.kind != "Workload":
                continue
            key = (event.namespace, event.name)
            if event.type is WatchEventType.DELETED or event.object is None:
                self.theirs.pop(key, None)
                self.ours.pop(key, None)
            else:
                found = verdict_of(event.object.get("status"))
                if found is None:
                    self.theirs.pop(key, None)
                else:
                    self.theirs[key] = found
            keys.append(key)
        self._compare(keys)

    # --- comparing -----------------------------------------------------------------

    def _compare(self, keys: Iterable[Key]) -> None:
        changed, compared = False, len(self.compared)
        for key in dict.fromkeys(keys):
            ours, theirs = self.ours.get(key), self.theirs.get(key)
            if ours is not None and theirs is not None:
                self.compared.add(key)
                now = differences(ours, theirs)
            else:
                self.compared.discard(key)
                now = {}
            before = self.differing.get(key, {})
            if now == before:
                continue
            changed = True
            if now:
                self.differing[key] = now
            else:
                del self.differing[key]
            self._show(key, now)
        if changed:
            self.current_counts = self.counts()
        if changed or compared != len(self.compared):
            self.write_report()

    def _show(self, key: Key, now: Mapping[str, tuple[str, str]]) -> None:
        if not self._header_shown:
            self.show(f"{'SHADOW':<8} {'WORKLOAD':<40} {'FIELD':<13} {'OURS':<30} KUEUE")
            self._header_shown = True
        workload = f"{key[0]}/{key[1]}"
        if not now:
            self.show(f"{'agrees':<8} {workload:<40}")
        for field, (ours, theirs) in now.items():
            self.show(f"{'differs':<8} {workload:<40} {field:<13} {ours:<30} {theirs}")

    # --- output --------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        """How many Workloads differ in each compared field."""
        out = dict.fromkeys(FIELDS, 0)
        for fields in self.differing.values():
            for field in fields:
                out[field] += 1
        return out

    def report(self) -> dict[str, Any]:
        return {
            "compared": len(self.compared),
            "differing": len(self.differing),
            "differences": self.counts(),
            "workloads": [
                {
                    "namespace": ns,
                    "name": name,
                    "differences": [
                        {"field": field, "ours": ours, "kueue": theirs}
                        for field, (ours, theirs) in self.differing[(ns, name)].items()
                    ],
                }
                for ns, name in sorted(self.differing)
            ],
        }

    def write_report(self) -> None:
        """Replace the report file (when one was given) with the current report, atomically."""
        if self.report_file is None:
            return
        folder = self.report_file.parent
        data = orjson.dumps(self.report(), option=orjson.OPT_INDENT_2) + b"\n"
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{self.report_file.name}.")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
            os.replace(tmp, self.report_file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class ShadowDifferences(Collector):
    """``kueuestream_shadow_differences{kind}``: Workloads whose ``kind`` field differs from Kueue's."""

    def __init__(self, comparison: ShadowComparison) -> None:
        self.comparison = comparison

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kueuestream_shadow_differences",
            "Workloads whose live status differs from our decision, per compared field",
            labels=["kind"],
        )
        for field, count in self.comparison.current_counts.items():
            family.add_metric([field], count)
        yield family
