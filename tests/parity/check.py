"""Side by side with upstream Kueue's scheduler: the same scenarios through both, outcomes compared.

    .venv/bin/python -m tests.parity.check [--seeds 0:200] [--preemption] [--fair-sharing] [--keep DIR]

For every Workload: its admission (ClusterQueue, and per pod set the flavors,
count and resource usage) and its ``QuotaReserved`` and ``Admitted``
conditions (status, reason, message). Each difference is printed with the
scenario's seed; ``--keep`` leaves the scenario files in DIR to look at.

``--preemption`` runs the scenarios with preemption policies and a second
wave of Workloads (see :func:`~tests.parity.scenarios.scenario`), and
compares the ``Evicted``, ``Preempted`` and ``Requeued`` conditions too. Both
sides play the job controller, stopping an evicted Workload's job at once.

``--fair-sharing`` turns fair sharing on (a Configuration with random
preemption strategies) and gives Cohorts and ClusterQueues random weights;
with ``--preemption`` it checks fair sharing's preemption too.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kueuestream.admission.timefmt import rfc3339
from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.sources.watch_events import as_batch, identify, listing_events, watch_event
from kueuestream.streams import codec
from kueuestream.streams.schemas import ErrorRecord, WatchEvent, WatchEventType
from tests.parity import upstream
from tests.parity.scenarios import CHECKS_STATE, DELETE, FINISH, UPDATE, WAVE, scenario

COMPARED_CONDITIONS = ("QuotaReserved", "Admitted")
PREEMPTION_CONDITIONS = (*COMPARED_CONDITIONS, "Evicted", "Preempted", "Requeued")
# Far after every creationTimestamp of the scenarios, as upstream's clock is.
NOW_MS = 1_800_000_000_000


def file_name(seed: int) -> str:
    return f"{seed:06d}.yaml"


def write(
    seeds: Iterable[int], folder: Path, *, preemption: bool, fair_sharing: bool
) -> dict[str, list[dict[str, Any]]]:
    written = {}
    for seed in seeds:
        docs = scenario(seed, preemption=preemption, fair_sharing=fair_sharing)
        (folder / file_name(seed)).write_text(yaml.safe_dump_all(docs, sort_keys=False))
        written[file_name(seed)] = docs
    return written


def _admission(status: Mapping[str, Any]) -> Any:
    admission = status.get("admission")
    if not admission:
        return None
    return {
        "clusterQueue": admission.get("clusterQueue"),
        "podSetAssignments": [
            {
                "name": a.get("name"),
                "flavors": a.get("flavors") or {},
                "count": a.get("count"),
                "resourceUsage": a.get("resourceUsage") or {},
            }
            for a in admission.get("podSetAssignments") or []
        ],
    }


def _conditions(status: Mapping[str, Any], kinds: tuple[str, ...]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c.get("status", ""), c.get("reason", ""), c.get("message", ""))
        for c in status.get("conditions") or []
        if c.get("type") in kinds
    }


def outcome(status: Mapping[str, Any], kinds: tuple[str, ...] = COMPARED_CONDITIONS) -> dict[str, Any]:
    return {"admission": _admission(status), "conditions": _conditions(status, kinds)}


# Written by Kueue's workload controller, which upstream's side of the check does not run,
# for a Workload the scheduler set aside with an equivalent one that failed.
BYPASSED = "Bypassed scheduling evaluation because an equivalent workload recently failed"


def _agree(kind: str, ours: tuple[str, str, str] | None, theirs: tuple[str, str, str] | None) -> bool:
    if ours == theirs:
        return True
    if ours is not None and theirs is None:
        return ours[2] == BYPASSED or (kind == "Admitted" and ours[1] == "NoReservation")
    if ours is not None and theirs is not None and theirs[1] == "" and ours[1] == "NoMatchingFlavor":
        # Kueue's resolveNoFitReason leaves the reason empty for a pod set stopped at a resource
        # the queue does not cover after a group that fit; the API server refuses a condition
        # without a reason, so Kueue's write fails there. Kueuestream writes NoMatchingFlavor.
        return ours[0] == theirs[0] and ours[2] == theirs[2]
    return False


def _alternates(workload: Mapping[str, Any]) -> set[tuple[str, str, str]]:
    """The QuotaReserved states a Workload upstream went round in at the end of the run."""
    alternates = workload.get("alternates") or []
    return {(c["status"], c.get("reason", ""), c.get("message", "")) for c in alternates}


def differences(
    ours: list[dict[str, Any]], theirs: list[dict[str, Any]], kinds: tuple[str, ...] = COMPARED_CONDITIONS
) -> list[str]:
    mine = {(w["metadata"].get("namespace", ""), w["metadata"]["name"]): w.get("status") or {} for w in ours}
    upstream_ = {(w["namespace"], w["name"]): w for w in theirs}
    found = []
    for key in sorted(set(mine) | set(upstream_)):
        theirs_ = upstream_.get(key, {})
        a, b = outcome(mine.get(key, {}), kinds), outcome(theirs_.get("status") or {}, kinds)
        if a["admission"] != b["admission"]:
            found.append(f"{key[0]}/{key[1]}: admission ours {a['admission']} upstream {b['admission']}")
        for kind in kinds:
            x, y = a["conditions"].get(kind), b["conditions"].get(kind)
            if kind == "QuotaReserved" and x in _alternates(theirs_):
                continue  # a state upstream's search goes round in, where our search stops
            if not _agree(kind, x, y):
                found.append(f"{key[0]}/{key[1]}: {kind} ours {x} upstream {y}")
    return found


def _annotation(doc: Mapping[str, Any], key: str) -> str | None:
    annotations: Mapping[str, str] = doc.get("metadata", {}).get("annotations") or {}
    return annotations.get(key)


def _true(status: Mapping[str, Any]) -> set[str]:
    return {c["type"] for c in status.get("conditions") or [] if c.get("status") == "True"}


def _holds_quota(status: Mapping[str, Any]) -> bool:
    """Quota reserved and not being evicted."""
    true = _true(status)
    return "QuotaReserved" in true and "Evicted" not in true


def _running(status: Mapping[str, Any]) -> bool:
    """Admitted and not being evicted: a running job that can complete."""
    return _holds_quota(status) and "Admitted" in _true(status)


def _checks_set(workload: dict[str, Any], state: str) -> dict[str, Any] | None:
    """The Workload with every admission check set to ``state``, as their controllers would
    write it, or None when it has none in another state."""
    status = dict(workload.get("status") or {})
    checks = status.get("admissionChecks") or []
    if all(c.get("state") == state for c in checks):
        return None
    changed = {"state": state, "message": "", "lastTransitionTime": rfc3339(NOW_MS)}
    status["admissionChecks"] = [{**c, **changed} for c in checks]
    return {**workload, "status": status}


def _finished(workload: dict[str, Any]) -> dict[str, Any]:
    """The Workload as its job controller writes it once the job completed (Kueue's finish.Finish)."""
    status = dict(workload.get("status") or {})
    finished = {"type": "Finished", "status": "True", "reason": "Succeeded"}
    finished |= {"message": "Job finished successfully", "lastTransitionTime": rfc3339(NOW_MS)}
    status["conditions"] = [*(status.get("conditions") or []), finished]
    return {**workload, "status": status}


def admit_in_waves(docs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[ErrorRecord]]:
    """Every Workload with its status, and the errors recorded, after both waves settle.

    As :func:`kueuestream.agents.embedded.runtime.admit` does for one listing:
    the first wave (every object not annotated :data:`WAVE`) is one listing
    settled to quiescence; then the Workloads annotated :data:`FINISH` that
    are admitted finish (their update with the ``Finished`` condition, as a
    watch sees it), those annotated :data:`DELETE` are deleted, the
    ClusterQueues annotated :data:`UPDATE` take their new spec, those annotated
    :data:`CHECKS_STATE` that hold quota have their admission checks set to the
    state it names (after the new specs, as upstream's side evicts for them),
    and the pipeline settles again; the second wave is one listing more.
    """
    second = [d for d in docs if _annotation(d, WAVE) == "2"]
    updates = [d for d in docs if _annotation(d, UPDATE)]
    first = [d for d in docs if not any(d is s for s in (*second, *updates))]

    def marked(key: str) -> set[tuple[str, str]]:
        return {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in first if _annotation(d, key)}

    finishing, checking = marked(FINISH), marked(CHECKS_STATE)
    log = MemoryLog()
    pipeline = EmbeddedPipeline(log)

    def settle(events: list[WatchEvent]) -> None:
        pipeline.submit(events)
        pipeline.pump()
        pipeline.advance_clock()

    settle(listing_events(first, NOW_MS)[0])
    settled = pipeline.admission.workload_objects()
    done = [
        watch_event(found, WatchEventType.MODIFIED, NOW_MS)
        for w in settled
        if (w["metadata"]["namespace"], w["metadata"]["name"]) in finishing
        if _running(w.get("status") or {})
        if not isinstance(found := identify(_finished(w)), str)
    ]
    done += [
        watch_event(found, WatchEventType.DELETED, NOW_MS)
        for d in first
        if _annotation(d, DELETE) and not isinstance(found := identify(d), str)
    ]
    # Before the checks' states: upstream's side has its workload controller act on those
    # (evict, deactivate) once the ClusterQueues' new specs are in.
    done += [
        watch_event(found, WatchEventType.MODIFIED, NOW_MS)
        for d in updates
        if not isinstance(found := identify(d), str)
    ]
    done += [
        watch_event(found, WatchEventType.MODIFIED, NOW_MS)
        for w in settled
        if (w["metadata"]["namespace"], w["metadata"]["name"]) in checking
        if not _annotation(w, DELETE) and _holds_quota(w.get("status") or {})
        if (changed := _checks_set(w, _annotation(w, CHECKS_STATE))) is not None
        if not isinstance(found := identify(changed), str)
    ]
    if done:
        settle(as_batch(done, NOW_MS))
    settle(listing_events(second, NOW_MS)[0])
    errors = [codec.decode(r.value, ErrorRecord) for r in log.read_sync(pipeline.names.errors, 0)]
    return pipeline.admission.workload_objects(), errors


def compare(
    seeds: list[int], folder: Path, *, preemption: bool = False, fair_sharing: bool = False
) -> dict[int, list[str]]:
    """The differences per seed (seeds whose outcomes agree are left out).

    A scenario upstream does not settle (Workloads preempting each other back
    and forth) is not compared: its outcome depends on where the run stops.
    """
    written = write(seeds, folder, preemption=preemption, fair_sharing=fair_sharing)
    kinds = PREEMPTION_CONDITIONS if preemption else COMPARED_CONDITIONS
    results = upstream.run(folder)
    found: dict[int, list[str]] = {}
    for seed in seeds:
        name = file_name(seed)
        result = results.get(name)
        if result is None or result.get("error"):
            found[seed] = [f"upstream could not run it: {result and result.get('error')}"]
            continue
        if result.get("unsettled"):
            found[seed] = [UNSETTLED]
            continue
        workloads, errors = admit_in_waves(written[name])
        diff = [f"ours refused {error.source}: {error.error}" for error in errors]
        diff += differences(workloads, result["workloads"], kinds)
        if diff:
            found[seed] = diff
    return found


UNSETTLED = "not compared: upstream does not settle (still reserving or preempting after 400 cycles)"


def _seeds(text: str) -> list[int]:
    start, _, stop = text.partition(":")
    return list(range(int(start), int(stop))) if stop else [int(start)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0:200", help="START:STOP, or one seed")
    parser.add_argument("--keep", type=Path, help="write the scenarios here and keep them")
    parser.add_argument(
        "--preemption", action="store_true", help="preemption policies and a second wave of Workloads"
    )
    parser.add_argument(
        "--fair-sharing", action="store_true", help="fair sharing on, with weights and preemption strategies"
    )
    args = parser.parse_args(argv)
    seeds = _seeds(args.seeds)
    how = {"preemption": args.preemption, "fair_sharing": args.fair_sharing}
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        found = compare(seeds, args.keep, **how)
    else:
        with tempfile.TemporaryDirectory(prefix="kueue-parity-") as tmp:
            found = compare(seeds, Path(tmp), **how)
    unsettled = sorted(seed for seed, diff in found.items() if diff == [UNSETTLED])
    for seed, diff in sorted(found.items()):
        print(f"seed {seed}:")
        for line in diff:
            print(f"  {line}")
    print(
        f"{len(seeds) - len(found)} of {len(seeds) - len(unsettled)} scenarios agree"
        f" ({len(unsettled)} upstream does not settle: {unsettled})",
        file=sys.stderr,
    )
    return 1 if len(found) > len(unsettled) else 0


if __name__ == "__main__":
    raise SystemExit(main())
