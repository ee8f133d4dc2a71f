"""Tables as ``kubectl get`` prints Kueue's objects: its printer columns, its layout, its ages.

The columns are those of Kueue's CRDs (``+kubebuilder:printcolumn`` on
Workload and ClusterQueue); ``-o wide`` adds the columns of priority 1. The
layout is kubectl's tab writer (cells padded by 3 spaces to at least 10
characters, the last column not padded, headers in upper case, a missing value
blank), and an age is written as ``duration.HumanDuration`` writes it. For
ClusterQueues, ``-o wide`` also shows each flavor's usage against its nominal
quota, which kubectl does not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from kueuestream.admission.timefmt import parse_rfc3339

MIN_WIDTH = 10
PADDING = 3


def render(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """The table as kubectl's tab writer lays it out, one line per row, header first."""
    lines = [[h.upper() for h in header], *[list(r) for r in rows]]
    widths = [max(MIN_WIDTH, max(len(line[i]) for line in lines) + PADDING) for i in range(len(header) - 1)]
    out = []
    for line in lines:
        cells = [cell.ljust(width) for cell, width in zip(line, widths, strict=False)]
        out.append("".join(cells) + line[-1])
    return "\n".join(out) + "\n"


def human_duration(seconds: int) -> str:
    """An age as kubectl writes it (apimachinery's ``duration.HumanDuration``)."""
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        s = seconds % 60
        return f"{minutes}m" if s == 0 else f"{minutes}m{s}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        m = minutes % 60
        return f"{hours}h" if m == 0 else f"{hours}h{m}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        h = hours % 24
        return f"{hours // 24}d" if h == 0 else f"{hours // 24}d{h}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        dy = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if dy == 0 else f"{hours // 24 // 365}y{dy}d"
    return f"{hours // 24 // 365}y"


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _condition_status(obj: Any, type_: str) -> str:
    for cond in _get(obj, "status", "conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == type_:
            return _text(cond.get("status"))
    return ""


def age(obj: Any, now_ms: int) -> str:
    """The AGE column: since ``metadata.creationTimestamp``, ``<unknown>`` without one."""
    created = _get(obj, "metadata", "creationTimestamp")
    when = parse_rfc3339(created) if isinstance(created, str) else None
    if when is None:
        return "<unknown>"
    return human_duration((now_ms - when) // 1000)


def workload_table(items: Sequence[Any], now_ms: int, wide: bool = False) -> str:
    """``kubectl get workloads -A``: namespace, name, queue, reserved in, admitted, finished, age.

    No Workload column has priority 1, so ``wide`` shows the same columns.
    """
    header = ["namespace", "name", "queue", "reserved in", "admitted", "finished", "age"]
    rows = [
        [
            _text(_get(wl, "metadata", "namespace")),
            _text(_get(wl, "metadata", "name")),
            _text(_get(wl, "spec", "queueName")),
            _text(_get(wl, "status", "admission", "clusterQueue")),
            _condition_status(wl, "Admitted"),
            _condition_status(wl, "Finished"),
            age(wl, now_ms),
        ]
        for wl in items
    ]
    return render(header, rows)


def _usage(cq: Any) -> str:
    """Each flavor's ``resource=used/nominal``, in the order of the resource groups."""
    used = {
        (_text(f.get("name")), _text(r.get("name"))): _text(r.get("total"))
        for f in _get(cq, "status", "flavorsUsage") or []
        for r in f.get("resources") or []
    }
    parts = []
    for group in _get(cq, "spec", "resourceGroups") or []:
        for flavor in _get(group, "flavors") or []:
            name = _text(_get(flavor, "name"))
            resources = [
                f"{_text(r.get('name'))}={used.get((name, _text(r.get('name'))), '0')}/"
                f"{_text(r.get('nominalQuota'))}"
                for r in _get(flavor, "resources") or []
                if isinstance(r, dict)
            ]
            parts.append(f"{name}: {' '.join(resources)}")
    return "; ".join(parts)


def cohort(cq: Any) -> str:
    """``spec.cohortName``, or v1beta1's ``spec.cohort``."""
    return _text(_get(cq, "spec", "cohortName") or _get(cq, "spec", "cohort"))


def cluster_queue_table(items: Sequence[Any], wide: bool = False) -> str:
    """``kubectl get clusterqueues``: name, cohort, pending workloads; with ``wide`` also
    strategy, admitted workloads and the usage of each flavor."""
    if not wide:
        header = ["name", "cohort", "pending workloads"]
        rows = [
            [_text(_get(cq, "metadata", "name")), cohort(cq), _text(_get(cq, "status", "pendingWorkloads"))]
            for cq in items
        ]
        return render(header, rows)
    header = ["name", "cohort", "strategy", "pending workloads", "admitted workloads", "usage"]
    rows = [
        [
            _text(_get(cq, "metadata", "name")),
            cohort(cq),
            # The API server defaults the strategy; show what it would.
            _text(_get(cq, "spec", "queueingStrategy") or "BestEffortFIFO"),
            _text(_get(cq, "status", "pendingWorkloads")),
            _text(_get(cq, "status", "admittedWorkloads")),
            _usage(cq),
        ]
        for cq in items
    ]
    return render(header, rows)
