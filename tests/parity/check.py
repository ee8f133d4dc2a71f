"""Side by side with upstream Kueue's scheduler: the same scenarios through both, outcomes compared.

    .venv/bin/python -m tests.parity.check [--seeds 0:200] [--keep DIR]

For every Workload: its admission (ClusterQueue, and per pod set the flavors,
count and resource usage) and its ``QuotaReserved`` and ``Admitted``
conditions (status, reason, message). Each difference is printed with the
scenario's seed; ``--keep`` leaves the scenario files in DIR to look at.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from kueuestream.agents.embedded.runtime import admit
from tests.parity import upstream
from tests.parity.scenarios import scenario

COMPARED_CONDITIONS = ("QuotaReserved", "Admitted")
# Far after every creationTimestamp of the scenarios, as upstream's clock is.
NOW_MS = 1_800_000_000_000


def file_name(seed: int) -> str:
    return f"{seed:06d}.yaml"


def write(seeds: Iterable[int], folder: Path) -> dict[str, list[dict[str, Any]]]:
    written = {}
    for seed in seeds:
        docs = scenario(seed)
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


def _conditions(status: Mapping[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c.get("status", ""), c.get("reason", ""), c.get("message", ""))
        for c in status.get("conditions") or []
        if c.get("type") in COMPARED_CONDITIONS
    }


def outcome(status: Mapping[str, Any]) -> dict[str, Any]:
    return {"admission": _admission(status), "conditions": _conditions(status)}


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


def differences(ours: list[dict[str, Any]], theirs: list[dict[str, Any]]) -> list[str]:
    mine = {(w["metadata"].get("namespace", ""), w["metadata"]["name"]): w.get("status") or {} for w in ours}
    upstream_ = {(w["namespace"], w["name"]): w.get("status") or {} for w in theirs}
    found = []
    for key in sorted(set(mine) | set(upstream_)):
        a, b = outcome(mine.get(key, {})), outcome(upstream_.get(key, {}))
        if a["admission"] != b["admission"]:
            found.append(f"{key[0]}/{key[1]}: admission ours {a['admission']} upstream {b['admission']}")
        for kind in COMPARED_CONDITIONS:
            x, y = a["conditions"].get(kind), b["conditions"].get(kind)
            if not _agree(kind, x, y):
                found.append(f"{key[0]}/{key[1]}: {kind} ours {x} upstream {y}")
    return found


def compare(seeds: list[int], folder: Path) -> dict[int, list[str]]:
    """The differences per seed (seeds whose outcomes agree are left out)."""
    written = write(seeds, folder)
    results = upstream.run(folder)
    found: dict[int, list[str]] = {}
    for seed in seeds:
        name = file_name(seed)
        result = results.get(name)
        if result is None or result.get("error"):
            found[seed] = [f"upstream could not run it: {result and result.get('error')}"]
            continue
        admitted = admit(written[name], time_ms=NOW_MS)
        diff = [f"ours refused {about}: {error.error}" for about, error in admitted.errors]
        diff += differences(admitted.workloads, result["workloads"])
        if diff:
            found[seed] = diff
    return found


def _seeds(text: str) -> list[int]:
    start, _, stop = text.partition(":")
    return list(range(int(start), int(stop))) if stop else [int(start)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", default="0:200", help="START:STOP, or one seed")
    parser.add_argument("--keep", type=Path, help="write the scenarios here and keep them")
    args = parser.parse_args(argv)
    seeds = _seeds(args.seeds)
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
        found = compare(seeds, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="kueue-parity-") as tmp:
            found = compare(seeds, Path(tmp))
    for seed, diff in sorted(found.items()):
        print(f"seed {seed}:")
        for line in diff:
            print(f"  {line}")
    print(f"{len(seeds) - len(found)} of {len(seeds)} scenarios agree", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
