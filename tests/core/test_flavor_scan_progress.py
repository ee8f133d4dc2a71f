"""The flavor search resumes where the previous cycle's stopped (Kueue's ``LastAssignment``).

Worked out from upstream Kueue (kubernetes-sigs/kueue main, v0.19 gates, where
``FlavorFungibilityPreserveScanProgress`` does not exist yet, so it is off):

- pkg/scheduler/flavorassigner ``findFlavorForPodSets`` starts a resource
  group's search at ``NextFlavorToTryForPodSetResource`` (the flavor after the
  recorded index) and records ``TriedFlavorIdx``: the flavor the search stopped
  at, or -1 when it went through the last one; ``assignFlavors`` drops a pod
  set's flavors when one of its groups found none, and stops at that pod set;
- pkg/workload ``PendingFlavors``: some pod set stopped before its last flavor;
  pkg/cache/queue ``requeueIfNotPresent`` then puts the head straight back in
  its queue instead of among the inadmissible workloads;
- pkg/scheduler ``nominate``/``recordAssignment`` keep the progress of a head
  that found no flavor (``NoFit``); a nominated head that is admitted, skipped
  (``markSkipped``) or preempts (``markPreemptionOutcome``) drops it;
  ``getInitialAssignments`` searches the full counts and the partial-admission
  counts from the same progress; ``lastAssignmentOutdated`` drops it once the
  ClusterQueue's ``AllocatableResourceGeneration`` moved on, which
  pkg/cache/scheduler ``deleteWorkload`` and ``updateClusterQueueResourceNode``
  (every ClusterQueue of a tree whose quotas change) advance.
"""

from __future__ import annotations

from typing import Any

import pytest

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

ONE, TWO, THREE = {"pool": "one"}, {"pool": "two"}, {"pool": "three"}


def flavors(count: int = 2) -> list[Manifest]:
    return [flavor_manifest(f"f{i + 1}", labels) for i, labels in enumerate((ONE, TWO, THREE)[:count])]


def queue(
    quotas: list[int],
    *,
    fungibility: dict[str, str] | None = None,
    cohort: str = "",
    strategy: str = "BestEffortFIFO",
    name: str = "q",
    version: str = "v1beta2",
) -> list[Manifest]:
    spec: dict[str, Any] = {"queueingStrategy": strategy}
    if fungibility:
        spec["flavorFungibility"] = fungibility
    cq = cluster_queue_manifest(
        name,
        [(["cpu"], [(f"f{i + 1}", {"cpu": q}) for i, q in enumerate(quotas)])],
        cohort=cohort,
        spec=spec,
        version=version,
    )
    return [cq, local_queue_manifest(name, name, version=version)]


def two_pod_sets(
    name: str,
    a_cpu: int,
    b_cpu: int,
    *,
    b_selector: dict[str, str] | None = None,
    b_count: int = 1,
    b_min: int | None = None,
    created: str = "2026-01-01T00:01:00Z",
) -> Manifest:
    """Pod set ``a`` (one pod, any flavor) then pod set ``b``, which may ask for one flavor's nodes."""
    wl = workload_manifest(name, "q", {"cpu": str(a_cpu)}, created=created)
    a = wl["spec"]["podSets"][0]
    a["name"] = "a"
    b_pod: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": {"cpu": str(b_cpu)}}}]}
    if b_selector:
        b_pod["nodeSelector"] = dict(b_selector)
    b: dict[str, Any] = {"name": "b", "count": b_count, "template": {"spec": b_pod}}
    if b_min is not None:
        b["minCount"] = b_min
    wl["spec"]["podSets"] = [a, b]
    return wl


def turn_taking() -> Manifest:
    """``w``: pod sets ``a`` (2 cpus) and ``b`` (3 cpus), which take turns stopping before the last
    of two 4-cpu flavors, and ``c`` (10 cpus), which never fits."""
    wl = two_pod_sets("w", 2, 3)
    c = {
        "name": "c",
        "count": 1,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "10"}}}]}},
    }
    wl["spec"]["podSets"].append(c)
    return wl


def assigned(r: Run, name: str) -> dict[str, tuple[int, str]]:
    """Pod set -> (count, cpu flavor) of the Workload's admission."""
    return {
        ps["name"]: (ps["count"], ps["flavors"]["cpu"])
        for ps in r.status(name)["admission"]["podSetAssignments"]
    }


@pytest.mark.parametrize("strategy", ["BestEffortFIFO", "StrictFIFO"])
@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_the_next_cycle_tries_the_flavors_after_where_the_search_stopped(strategy: str, version: str) -> None:
    """Cycle 1: ``a`` fits f1 and its search stops there; ``b`` only runs on f1's nodes and
    no longer fits beside it, so the Workload does not fit, with f2 untried for ``a``
    (PendingFlavors). It goes straight back to the head, and cycle 2 searches ``a`` from
    f2 on: ``a`` takes f2 and ``b`` fits f1 (findFlavorForPodSets, requeueIfNotPresent)."""
    docs = [
        *[{**f, "apiVersion": f"kueue.x-k8s.io/{version}"} for f in flavors()],
        *queue([4, 4], strategy=strategy, version=version),
        two_pod_sets("w", 2, 3, b_selector=ONE),
    ]
    r = run_manifests(docs)
    assert assigned(r, "w") == {"a": (1, "f2"), "b": (1, "f1")}
    assert r.engine.cycles == 2


def test_a_search_that_went_through_the_last_flavor_starts_again_from_the_first() -> None:
    """Three flavors and a pod set ``b`` that fits none: ``a`` stops at f1, then (resumed)
    at f2, then at f3, the last, which records -1; only then is the Workload parked
    (TriedFlavorIdx = -1 when attemptedFlavorIdx is the last flavor, PendingFlavors)."""
    r = run_manifests([*flavors(3), *queue([4, 4, 4]), two_pod_sets("w", 2, 10)])
    assert r.admitted() == []
    assert r.engine.cycles == 3
    # b's reasons name the flavor a was charged to in the last search as already holding 2 cpus.
    message = r.pending_message("w")
    assert message.startswith("couldn't assign flavors to pod set b: ")
    held = [
        f
        for f in ("f1", "f2", "f3")
        if f"in flavor {f}, previously considered podsets requests (2)" in message
    ]
    assert held == ["f3"]


@pytest.mark.parametrize("when_can_borrow", ["MayStopSearch", "TryNextFlavor"])
def test_a_search_stopped_by_borrowing_resumes_and_one_that_went_on_does_not(when_can_borrow: str) -> None:
    """``a`` can only borrow in f1 (the lender holds the cohort's f1 quota) and fits f2 in q's
    own quota. With whenCanBorrow MayStopSearch its search stops at f1; ``b``, on f1's
    nodes, then needs more than the cohort has, and the Workload waits a cycle to
    resume at f2. With TryNextFlavor the first search already went on to f2
    (shouldTryNextFlavor) and admits it in one cycle, with no pending status."""
    docs = [
        *flavors(),
        *queue([0, 4], fungibility={"whenCanBorrow": when_can_borrow}, cohort="c"),
        *queue([4, 0], cohort="c", name="lender"),
        cohort_manifest("c"),
        two_pod_sets("w", 2, 3, b_selector=ONE),
    ]
    r = run_manifests(docs)
    assert assigned(r, "w") == {"a": (1, "f2"), "b": (1, "f1")}
    assert r.engine.cycles == (2 if when_can_borrow == "MayStopSearch" else 1)


def test_partial_admission_in_the_same_cycle_comes_before_resuming() -> None:
    """getInitialAssignments tries fewer pods before the cycle ends: ``b`` (2 pods, minCount 1)
    does not fit whole beside ``a`` on f1, but one pod does, so the Workload is admitted
    in the first cycle with ``a`` on f1 and no resumed search."""
    docs = [*flavors(), *queue([4, 4]), two_pod_sets("w", 2, 2, b_selector=ONE, b_count=2, b_min=1)]
    r = run_manifests(docs)
    assert assigned(r, "w") == {"a": (1, "f1"), "b": (1, "f1")}
    assert r.engine.cycles == 1


def test_partial_admission_searches_from_the_resumed_flavor() -> None:
    """The partial-admission search of the resumed cycle starts from the same progress as its
    full search (getInitialAssignments shares the Workload's LastAssignment): ``b`` (4 pods of
    1 cpu on f1's nodes, minCount 3) fits neither whole nor reduced beside ``a`` on f1; in
    cycle 2 ``a`` is on f2 and all of ``b`` fits f1."""
    docs = [*flavors(), *queue([4, 4]), two_pod_sets("w", 2, 1, b_selector=ONE, b_count=4, b_min=3)]
    r = run_manifests(docs)
    assert assigned(r, "w") == {"a": (1, "f2"), "b": (4, "f1")}
    assert r.engine.cycles == 2


def test_an_equivalent_workload_is_not_parked_with_a_head_that_resumes() -> None:
    """requeueIfNotPresent puts a head with flavors left straight back in its queue, so its
    equivalent workloads are not bulk-moved to the inadmissible ones with it: ``w1``
    resumes and is admitted (a on f2, b on f1), then ``w2`` is tried on its own: its ``b``
    finds f1 taken and it waits."""
    docs = [
        *flavors(),
        *queue([4, 4]),
        two_pod_sets("w1", 2, 3, b_selector=ONE),
        two_pod_sets("w2", 2, 3, b_selector=ONE, created="2026-01-01T00:02:00Z"),
    ]
    r = run_manifests(docs)
    assert r.admitted() == ["w1"]
    assert assigned(r, "w1") == {"a": (1, "f2"), "b": (1, "f1")}
    assert "couldn't assign flavors to pod set b" in r.pending_message("w2")


def test_a_workload_that_fits_on_the_first_search_is_admitted_where_it_first_fits() -> None:
    """No resumed search without a failed one: ``b`` fits f1 beside ``a`` on f1."""
    r = run_manifests([*flavors(), *queue([8, 4]), two_pod_sets("w", 2, 3, b_selector=ONE)])
    assert assigned(r, "w") == {"a": (1, "f1"), "b": (1, "f1")}
    assert r.engine.cycles == 1


def test_pod_sets_whose_searches_take_turns_do_not_keep_the_engine_cycling() -> None:
    """Three pod sets where ``c`` never fits: ``a`` and ``b`` take turns stopping before the
    last flavor (a on f1 leaves b only f2; b then starts at f1 when a moves to f2), so
    PendingFlavors never clears and Kueue's loop would pop the head forever. The engine
    resumes as many cycles in a row as the ClusterQueue's flavors times the Workload's pod
    sets, then the Workload waits, pending, for the next event."""
    r = run_manifests([*flavors(), *queue([4, 4]), turn_taking()])
    assert r.admitted() == []
    assert "couldn't assign flavors to pod set c" in r.pending_message("w")
    # 2 flavors x 3 pod sets cycles that go on to resume, and the one that does not.
    assert r.engine.cycles == 6 + 1
    # Another event tries the head once more, and stops again.
    r.tick()
    r.load_manifests([flavor_manifest("f9")])
    assert r.engine.cycles == 8


def test_freed_quota_starts_a_fresh_run_of_resumed_searches() -> None:
    """The same turn-taking pod sets beside a Workload holding 1 cpu of f2. Once it finishes,
    the ClusterQueue's generation moves on (deleteWorkload), the recorded progress is
    stale (lastAssignmentOutdated), and the head gets a whole new run of resumed cycles."""
    holder = admitted_workload("holder", "q", {"cpu": ("f2", 1)})
    r = run_manifests([*flavors(), *queue([4, 4]), holder, turn_taking()])
    assert r.engine.cycles == 7
    r.tick()
    r.finish("default", "holder")
    assert r.admitted() == []
    # A whole new run, then one more cycle when the freed tree's workloads are requeued a second later.
    assert r.engine.cycles == 7 + 7 + 1


def test_a_clusterqueue_generation_moves_on_when_quota_may_have_freed_there() -> None:
    """Kueue's AllocatableResourceGeneration, which makes a recorded search stale: a Workload
    leaving a ClusterQueue advances that ClusterQueue's generation (deleteWorkload), and a
    change to a tree's quotas advances every ClusterQueue of that tree
    (updateCohortTreeResources), not those of another tree; a change that leaves the quotas
    and flavors as they were advances nothing (updateQuotasAndResourceGroups)."""
    holder = workload_manifest("holder", "q", {"cpu": "1"}, created="2026-01-01T00:00:00Z")
    docs = [
        *flavors(),
        cohort_manifest("c"),
        *queue([4, 4], cohort="c"),
        *queue([4, 4], cohort="c", name="sibling"),
        *queue([4, 4], name="alone"),
        holder,
    ]
    r = run_manifests(docs)
    generations = r.engine.cache.generations
    before = dict(generations)
    r.tick()
    r.finish("default", "holder")
    assert generations == {**before, "q": before["q"] + 1}

    before = dict(generations)
    r.tick()
    r.load_manifests(queue([4, 6], cohort="c", name="sibling")[:1])
    assert generations == {**before, "q": before["q"] + 1, "sibling": before["sibling"] + 1}

    before = dict(generations)
    r.tick()
    r.load_manifests(queue([6, 4], name="alone")[:1])
    assert generations == {**before, "alone": before["alone"] + 1}

    before = dict(generations)
    r.tick()
    strategy_only = queue([6, 4], name="alone", strategy="StrictFIFO")[:1]
    r.load_manifests(strategy_only)
    assert generations == before
