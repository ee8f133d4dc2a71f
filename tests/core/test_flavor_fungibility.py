"""Flavor fungibility: when the flavor search stops, and which flavor wins.

Worked out from Kueue's ``findFlavorForPodSets``, ``shouldTryNextFlavor`` and
``isPreferred`` (pkg/scheduler/flavorassigner/flavorassigner.go): a flavor
that does not fit, or where preemption would find no candidates
(``noPreemptionCandidates``, from ``SimulatePreemption``), never ends the
search; one that needs preemption ends it unless whenCanPreempt is
TryNextFlavor; one that needs borrowing ends it unless whenCanBorrow is
TryNextFlavor; one that fits within the ClusterQueue's own quota always does.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action
from tests.helpers import (
    Manifest,
    Run,
    admitted_workload,
    cluster_queue_manifest,
    cohort_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

WITHIN = {"withinClusterQueue": "LowerPriority"}
# The v1beta1 and v1beta2 spellings of "stop here", each in its own API version.
STOP_BORROW = {"v1beta1": "Borrow", "v1beta2": "MayStopSearch"}
STOP_PREEMPT = {"v1beta1": "Preempt", "v1beta2": "MayStopSearch"}

# What the first flavor, f1, offers the 2-cpu head; f2 always has 2 free cpus of its own.
SITUATIONS = ("fit", "borrow", "preempt", "preempt-borrowing", "no-candidates", "no-fit")
BORROW_WITHIN = {
    "withinClusterQueue": "LowerPriority",
    "reclaimWithinCohort": "Any",
    "borrowWithinCohort": {"policy": "LowerPriority"},
}


def queue(
    f1: int,
    f2: int,
    *,
    version: str,
    fungibility: dict[str, str],
    cohort: str = "",
    name: str = "q",
    preemption: dict[str, str] | None = None,
) -> list[Manifest]:
    cq = cluster_queue_manifest(
        name,
        [(["cpu"], [("f1", {"cpu": f1}), ("f2", {"cpu": f2})])],
        cohort=cohort,
        preemption=preemption,
        spec={"flavorFungibility": fungibility} if fungibility else None,
        version=version,
    )
    return [cq, local_queue_manifest(name, name, version=version)]


def scenario(situation: str, version: str, fungibility: dict[str, str]) -> list[Manifest]:
    """The objects for one situation of f1, plus the head ``w`` (2 cpus, priority 10)."""
    docs: list[Manifest] = [flavor_manifest("f1", version=version), flavor_manifest("f2", version=version)]
    if situation == "fit":
        docs += queue(2, 2, version=version, fungibility=fungibility)
    elif situation == "borrow":
        # q has no f1 quota of its own; the lender's 2 f1 cpus are in the cohort.
        docs += queue(0, 2, version=version, fungibility=fungibility, cohort="c")
        docs += queue(2, 0, version=version, fungibility={}, cohort="c", name="lender")
    elif situation in ("preempt", "no-candidates"):
        # f1 is full with one workload of q: lower priority than the head, or higher.
        docs += queue(2, 2, version=version, fungibility=fungibility, preemption=WITHIN)
        victim_priority = 0 if situation == "preempt" else 20
        docs.append(admitted_workload("holder", "q", {"cpu": ("f1", 2)}, priority=victim_priority))
    elif situation == "preempt-borrowing":
        # q owns 1 f1 cpu, held; the cohort has 1 more free: preempting the holder
        # makes room, but only by borrowing (borrowWithinCohort lets it).
        docs += queue(1, 2, version=version, fungibility=fungibility, cohort="c", preemption=BORROW_WITHIN)
        docs += queue(2, 0, version=version, fungibility={}, cohort="c", name="lender")
        docs.append(admitted_workload("holder", "q", {"cpu": ("f1", 1)}, priority=0))
        docs.append(admitted_workload("lender-holder", "lender", {"cpu": ("f1", 1)}, priority=20))
    else:
        docs += queue(1, 2, version=version, fungibility=fungibility)
    docs.append(workload_manifest("w", "q", {"cpu": "2"}, priority=10, created="2026-01-01T00:01:00Z"))
    return docs


def stops_at_first(situation: str, when_can_borrow: str, when_can_preempt: str) -> bool:
    """Kueue's shouldTryNextFlavor for f1's mode, negated."""
    if situation == "fit":
        return True
    if situation == "borrow":
        return when_can_borrow != "TryNextFlavor"
    if situation == "preempt":
        return when_can_preempt != "TryNextFlavor"
    if situation == "preempt-borrowing":
        return when_can_preempt != "TryNextFlavor" and when_can_borrow != "TryNextFlavor"
    return False  # no-candidates, no-fit


def evicted(r: Run) -> list[str]:
    return [d.ref.name for d in r.decisions if d.action == Action.EVICTED]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
@pytest.mark.parametrize("borrow", ["stop", "TryNextFlavor"])
@pytest.mark.parametrize("preempt", ["stop", "TryNextFlavor"])
@pytest.mark.parametrize("situation", SITUATIONS)
def test_every_fungibility_combination(situation: str, borrow: str, preempt: str, version: str) -> None:
    """Kueue's shouldTryNextFlavor over every whenCanBorrow x whenCanPreempt, in both spellings."""
    when_can_borrow = STOP_BORROW[version] if borrow == "stop" else borrow
    when_can_preempt = STOP_PREEMPT[version] if preempt == "stop" else preempt
    fungibility = {"whenCanBorrow": when_can_borrow, "whenCanPreempt": when_can_preempt}
    r = run_manifests(scenario(situation, version, fungibility))
    assert r.is_admitted("w")
    if stops_at_first(situation, borrow, preempt):
        assert r.flavors("w") == {"cpu": "f1"}
        # Staying on f1 when it needs preemption means its holder goes.
        assert evicted(r) == (["holder"] if situation.startswith("preempt") else [])
    else:
        assert r.flavors("w") == {"cpu": "f2"}
        assert evicted(r) == []


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_defaults_borrow_in_place_and_look_further_before_preempting(version: str) -> None:
    """Kueue's defaults: whenCanBorrow MayStopSearch (v1beta1 Borrow), whenCanPreempt TryNextFlavor."""
    borrowing = run_manifests(scenario("borrow", version, {}))
    assert borrowing.flavors("w") == {"cpu": "f1"}
    preempting = run_manifests(scenario("preempt", version, {}))
    assert preempting.flavors("w") == {"cpu": "f2"}
    assert evicted(preempting) == []


def test_no_candidates_in_the_first_flavor_falls_through_to_preemption_in_the_next() -> None:
    """Kueue's isPreferred ranks a flavor without preemption candidates below one with
    candidates, so with TryNextFlavor the head preempts in f2 rather than wait for f1."""
    docs: list[Manifest] = [flavor_manifest("f1"), flavor_manifest("f2")]
    docs += queue(2, 2, version="v1beta2", fungibility={}, preemption=WITHIN)
    docs.append(admitted_workload("strong", "q", {"cpu": ("f1", 2)}, priority=20))
    docs.append(admitted_workload("weak", "q", {"cpu": ("f2", 2)}, priority=0))
    docs.append(workload_manifest("w", "q", {"cpu": "2"}, priority=10, created="2026-01-01T00:01:00Z"))
    r = run_manifests(docs)
    assert evicted(r) == ["weak"]
    assert r.flavors("w") == {"cpu": "f2"}
    assert r.is_admitted("strong")


def test_no_candidates_anywhere_leaves_the_head_pending() -> None:
    """Kueue's getInitialAssignments: a Preempt assignment whose GetTargets finds nobody
    is not nominated; nothing is evicted."""
    docs: list[Manifest] = [flavor_manifest("f1"), flavor_manifest("f2")]
    docs += queue(2, 2, version="v1beta2", fungibility={}, preemption=WITHIN)
    docs.append(admitted_workload("strong-1", "q", {"cpu": ("f1", 2)}, priority=20))
    docs.append(admitted_workload("strong-2", "q", {"cpu": ("f2", 2)}, priority=20))
    docs.append(workload_manifest("w", "q", {"cpu": "2"}, priority=10, created="2026-01-01T00:01:00Z"))
    r = run_manifests(docs)
    assert not r.is_admitted("w")
    assert evicted(r) == []
    assert "insufficient unused quota for cpu in flavor f1" in r.pending_message("w")


def preference_scenario(preference: str | None) -> list[Manifest]:
    """f1 needs a preemption inside q; f2 fits, but only by borrowing the lender's cpus."""
    fungibility: dict[str, Any] = {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"}
    if preference is not None:
        fungibility["preference"] = preference
    docs: list[Manifest] = [flavor_manifest("f1"), flavor_manifest("f2")]
    docs += queue(2, 0, version="v1beta2", fungibility=fungibility, cohort="c", preemption=WITHIN)
    docs += queue(0, 2, version="v1beta2", fungibility={}, cohort="c", name="lender")
    docs.append(admitted_workload("holder", "q", {"cpu": ("f1", 2)}, priority=0))
    docs.append(workload_manifest("w", "q", {"cpu": "2"}, priority=10, created="2026-01-01T00:01:00Z"))
    return docs


@pytest.mark.parametrize(
    ("preference", "flavor", "victims"),
    [
        (None, "f2", []),
        ("BorrowingOverPreemption", "f2", []),
        ("PreemptionOverBorrowing", "f1", ["holder"]),
    ],
)
def test_preference_between_borrowing_and_preemption(
    preference: str | None, flavor: str, victims: list[str]
) -> None:
    """Kueue's isPreferred: BorrowingOverPreemption (the default) puts the preemption mode
    first and the borrowing level second; PreemptionOverBorrowing the other way round."""
    r = run_manifests(preference_scenario(preference))
    assert r.flavors("w") == {"cpu": flavor}
    assert evicted(r) == victims


@pytest.mark.parametrize(
    ("borrow", "preempt", "stopping"),
    [
        ("MayStopSearch", "TryNextFlavor", "whenCanBorrow"),
        ("TryNextFlavor", "MayStopSearch", "whenCanPreempt"),
        ("Borrow", "Preempt", "whenCanBorrow and whenCanPreempt"),
    ],
)
def test_preference_needs_both_policies_at_try_next_flavor(borrow: str, preempt: str, stopping: str) -> None:
    """Kueue's ClusterQueue CRD refuses flavorFungibility.preference unless both policies are
    TryNextFlavor; the ClusterQueue is refused with a message naming the field."""
    fungibility = {
        "whenCanBorrow": borrow,
        "whenCanPreempt": preempt,
        "preference": "PreemptionOverBorrowing",
    }
    docs: list[Manifest] = [flavor_manifest("f1"), flavor_manifest("f2")]
    docs += queue(2, 2, version="v1beta2", fungibility=fungibility)
    r = Run(Engine())
    r.load_manifests(docs)
    assert [(d.ref.kind, d.ref.name) for d in r.rejected()] == [("ClusterQueue", "q")]
    assert r.rejected()[0].message == (
        "spec.flavorFungibility: preference PreemptionOverBorrowing can only be set when both "
        f"whenCanBorrow and whenCanPreempt are TryNextFlavor; {stopping} may stop the search"
    )


def test_a_resource_that_needs_preemption_is_preempted_for_whatever_the_preference_ranks_first() -> None:
    """Kueue's isPreferred under PreemptionOverBorrowing can rank a flavor by its borrowing
    resource (memory, borrowed from the lender) over the one that needs preemption (cpu), but
    Assignment.RepresentativeMode still takes the worst resource: the head preempts the
    holder rather than being nominated as if it fitted."""
    fungibility = {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing",
    }
    groups = [(["cpu", "memory"], [("f1", {"cpu": 2, "memory": 0})])]
    lender_groups = [(["cpu", "memory"], [("f1", {"cpu": 0, "memory": 4})])]
    docs: list[Manifest] = [
        flavor_manifest("f1"),
        cluster_queue_manifest(
            "q", groups, cohort="c", preemption=WITHIN, spec={"flavorFungibility": fungibility}
        ),
        local_queue_manifest("q", "q"),
        cluster_queue_manifest("lender", lender_groups, cohort="c"),
        admitted_workload("holder", "q", {"cpu": ("f1", 2)}, priority=0),
        workload_manifest("w", "q", {"cpu": "2", "memory": "1"}, priority=10, created="2026-01-01T00:01:00Z"),
    ]
    r = run_manifests(docs)
    assert evicted(r) == ["holder"]
    assert r.flavors("w") == {"cpu": "f1", "memory": "f1"}


def test_a_flavor_without_candidates_never_outranks_one_that_fits_further_up() -> None:
    """Kueue's scheduler_test case "PreemptionOverBorrowing preference: select fitting second
    flavor over first flavor with no preemption candidates": on-demand is full with a
    workload of equal priority (borrowing level 1 through the idle sibling), spot fits only
    from the root's quota (level 2); isPreferred ranks noPreemptionCandidates below any
    viable mode before comparing borrowing, so the head goes to spot."""
    fungibility = {
        "whenCanBorrow": "TryNextFlavor",
        "whenCanPreempt": "TryNextFlavor",
        "preference": "PreemptionOverBorrowing",
    }
    root: Manifest = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "root"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "on-demand", "resources": [{"name": "cpu", "nominalQuota": "0"}]},
                        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "5"}]},
                    ],
                }
            ]
        },
    }
    cq = cluster_queue_manifest(
        "q",
        [(["cpu"], [("on-demand", {"cpu": 5}), ("spot", {"cpu": 0})])],
        cohort="mid",
        preemption=WITHIN,
        spec={"flavorFungibility": fungibility},
    )
    cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = "0"
    docs: list[Manifest] = [
        flavor_manifest("on-demand"),
        flavor_manifest("spot"),
        root,
        cohort_manifest("mid", parent="root"),
        cq,
        local_queue_manifest("q", "q"),
        cluster_queue_manifest(
            "sibling", [(["cpu"], [("on-demand", {"cpu": 5}), ("spot", {"cpu": 0})])], cohort="mid"
        ),
        admitted_workload("admitted", "q", {"cpu": ("on-demand", 5)}, priority=0),
        workload_manifest("pending", "q", {"cpu": "5"}, priority=0, created="2026-01-01T00:01:00Z"),
    ]
    r = run_manifests(docs)
    assert r.flavors("pending") == {"cpu": "spot"}
    assert evicted(r) == []


@pytest.mark.parametrize(
    ("when_can_preempt", "flavor", "victim"),
    [("TryNextFlavor", "f2", "borrower"), ("MayStopSearch", "f1", "holder")],
)
def test_reclaiming_borrowed_quota_beats_preempting_in_the_queue(
    when_can_preempt: str, flavor: str, victim: str
) -> None:
    """Kueue's SimulatePreemption answers Reclaim when every candidate is in another
    ClusterQueue and Preempt when one is in the head's own; isPreferred ranks reclaim
    higher. With TryNextFlavor the head takes f2 from the queue that borrowed it rather
    than preempt its own queue's holder on f1; with MayStopSearch it stays on f1."""
    # LowerPriority both ways, so the preempted holder cannot reclaim f2 in turn.
    both = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "LowerPriority"}
    fungibility = {"whenCanPreempt": when_can_preempt}
    docs: list[Manifest] = [flavor_manifest("f1"), flavor_manifest("f2")]
    docs += queue(2, 2, version="v1beta2", fungibility=fungibility, cohort="c", preemption=both)
    docs += queue(0, 0, version="v1beta2", fungibility={}, cohort="c", name="other")
    docs.append(admitted_workload("holder", "q", {"cpu": ("f1", 2)}, priority=0))
    docs.append(admitted_workload("borrower", "other", {"cpu": ("f2", 2)}, priority=0))
    docs.append(workload_manifest("w", "q", {"cpu": "2"}, priority=10, created="2026-01-01T00:01:00Z"))
    r = run_manifests(docs)
    assert evicted(r) == [victim]
    assert r.flavors("w") == {"cpu": flavor}
