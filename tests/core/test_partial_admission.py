"""Partial admission: a pod set that does not fit whole goes in with fewer pods, down to minCount.

Worked out from Kueue's ``getInitialAssignments`` (pkg/scheduler/scheduler.go)
and ``PodSetReducer.Search`` (pkg/scheduler/flavorassigner/podset_reducer.go):
only when the whole Workload neither fits nor finds preemption targets, a
binary search over steps 0..sum(count - minCount) takes
``(count - minCount) * step // total`` pods off every pod set and keeps the
first step that fits, or that fits by preempting. The admission carries the
reduced ``count`` and usage. The gate ``PartialAdmission`` is beta and on.
"""

from __future__ import annotations

from typing import Any

import pytest

from kueuestream.admission import job_workload as jw
from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Action
from kueuestream.admission.podset_reducer import counts_at, search
from tests.helpers import (
    Manifest,
    Run,
    admitted_workload,
    cluster_queue_manifest,
    configuration_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

WITHIN = {"withinClusterQueue": "LowerPriority"}


def queue(cpu: int, preemption: dict[str, str] | None = None) -> list[Manifest]:
    return [
        flavor_manifest("default"),
        cluster_queue_manifest("q", [(["cpu"], [("default", {"cpu": cpu})])], preemption=preemption),
        local_queue_manifest("q", "q"),
    ]


def partial(name: str, *pod_sets: tuple[str, int, int | None], priority: int = 0) -> Manifest:
    """A Workload of 1-cpu pods: ``pod_sets`` are (name, count, minCount)."""
    wl = workload_manifest(name, "q", {"cpu": "1"}, priority=priority, created="2026-01-01T00:01:00Z")
    template = wl["spec"]["podSets"][0]["template"]
    out = []
    for ps_name, count, minimum in pod_sets:
        ps: dict[str, Any] = {"name": ps_name, "count": count, "template": template}
        if minimum is not None:
            ps["minCount"] = minimum
        out.append(ps)
    wl["spec"]["podSets"] = out
    return wl


def admitted_counts(r: Run, name: str) -> dict[str, tuple[int, dict[str, str]]]:
    psa = r.status(name)["admission"]["podSetAssignments"]
    return {p["name"]: (p["count"], p["resourceUsage"]) for p in psa}


def test_a_pod_set_that_does_not_fit_whole_goes_in_with_as_many_pods_as_fit() -> None:
    """PodSetReducer.Search over 10 pods down to 4 with 6 cpus free: 6 pods."""
    r = run_manifests([*queue(6), partial("w", ("main", 10, 4))])
    assert admitted_counts(r, "w") == {"main": (6, {"cpu": "6"})}
    # The Workload itself still asks for 10 pods, at least 4.
    assert r.workloads()["w"]["spec"]["podSets"][0]["count"] == 10


def test_below_min_count_it_waits() -> None:
    """PodSetReducer.Search finds nothing when even minCount does not fit; the message is the
    whole Workload's, as getInitialAssignments returns the full assignment."""
    r = run_manifests([*queue(3), partial("w", ("main", 10, 4))])
    assert not r.is_admitted("w")
    assert r.pending_message("w") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (0) + current podset request (10) > maximum capacity (3)"
    )


def test_pod_sets_shrink_together_in_proportion() -> None:
    """fillPodSetSizesForSearchIndex: a (8 pods, min 4) and b (6, min 2) lose 4*step//8 pods each;
    the first step that fits 10 cpus is 4, so a gets 6 and b 4 (not a 8 and b 2)."""
    r = run_manifests([*queue(10), partial("w", ("a", 8, 4), ("b", 6, 2))])
    assert admitted_counts(r, "w") == {"a": (6, {"cpu": "6"}), "b": (4, {"cpu": "4"})}


def test_a_pod_set_without_min_count_keeps_all_its_pods() -> None:
    """PodSetReducer: a pod set without minCount has nothing to give (its delta is 0)."""
    r = run_manifests([*queue(9), partial("w", ("fixed", 5, None), ("elastic", 6, 1))])
    assert admitted_counts(r, "w") == {"fixed": (5, {"cpu": "5"}), "elastic": (4, {"cpu": "4"})}


def test_the_largest_count_that_preemption_makes_room_for_wins() -> None:
    """getInitialAssignments: a reduced count that fits by preempting is taken (10 pods is
    over the 6-cpu quota; 6 fits once the 4-cpu holder goes), and once it stops the
    Workload is admitted with those 6 pods."""
    docs = [
        *queue(6, preemption=WITHIN),
        admitted_workload("holder", "q", {"cpu": ("default", 4)}, priority=0),
        partial("w", ("main", 10, 4), priority=5),
    ]
    r = run_manifests(docs)
    assert [d.ref.name for d in r.decisions if d.action == Action.EVICTED] == ["holder"]
    assert admitted_counts(r, "w") == {"main": (6, {"cpu": "6"})}


def test_the_whole_workload_is_preferred_when_preemption_makes_room_for_it() -> None:
    """getInitialAssignments tries the reducer only when the full counts find no targets."""
    docs = [
        *queue(10, preemption=WITHIN),
        admitted_workload("holder", "q", {"cpu": ("default", 4)}, priority=0),
        partial("w", ("main", 10, 4), priority=5),
    ]
    r = run_manifests(docs)
    assert admitted_counts(r, "w") == {"main": (10, {"cpu": "10"})}


def test_with_the_gate_off_the_workload_waits_for_all_its_pods() -> None:
    """Kueue's feature gate PartialAdmission, turned off in the Configuration."""
    docs = [
        configuration_manifest(gates={"PartialAdmission": False}),
        *queue(6),
        partial("w", ("main", 10, 4)),
    ]
    r = run_manifests(docs)
    assert not r.is_admitted("w")


@pytest.mark.parametrize(
    ("full", "minimums", "fitting", "expected"),
    [
        ([10], [4], 6, [6]),
        ([10], [4], 10, [10]),
        ([10], [4], 3, None),
        ([8, 6], [4, 2], 10, [6, 4]),
        ([5], [None], 3, None),
        ([3, 3], [1, 1], 3, [1, 1]),
        ([3, 3], [1, 1], 1, None),
        ([3, 3], [1, 1], 4, [2, 2]),
        ([7, 1, 5], [1, None, 5], 8, [2, 1, 5]),
        ([7, 1, 5], [1, None, 5], 6, None),
    ],
)
def test_reducer_search_matches_kueues_binary_search(
    full: list[int], minimums: list[int | None], fitting: int, expected: list[int] | None
) -> None:
    """PodSetReducer.Search with fits() accepting at most ``fitting`` pods in total; worked
    through by hand with sort.Search's midpoints and fillPodSetSizesForSearchIndex."""
    tried: list[list[int]] = []

    def fits(counts: list[int]) -> list[int] | None:
        tried.append(counts)
        return counts if sum(counts) <= fitting else None

    assert search(full, minimums, fits) == expected
    # Never more pods than asked for, never fewer than minCount.
    for counts in tried:
        for count, top, minimum in zip(counts, full, minimums, strict=True):
            assert (top if minimum is None else minimum) <= count <= top


def test_reducer_steps_are_kueues() -> None:
    """fillPodSetSizesForSearchIndex truncates delta*step/total toward zero."""
    assert [counts_at([7, 5], [6, 0], step, 6) for step in range(7)] == [
        [7, 5],
        [6, 5],
        [5, 5],
        [4, 5],
        [3, 5],
        [2, 5],
        [1, 5],
    ]
    assert counts_at([8, 6], [4, 4], 3, 8) == [7, 5]


def job(parallelism: int, annotation: str | None, completions: int | None = None) -> Manifest:
    meta: dict[str, Any] = {
        "name": "train",
        "namespace": "default",
        "uid": "0b5e0c1e-1111-4d2a-9a4e-7d3c2f000001",
        "creationTimestamp": "2026-01-01T00:01:00Z",
        "labels": {"kueue.x-k8s.io/queue-name": "q"},
    }
    if annotation is not None:
        meta["annotations"] = {"kueue.x-k8s.io/job-min-parallelism": annotation}
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
    }
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}


def test_job_min_parallelism_sets_min_count() -> None:
    """Kueue's Job.PodSets: minCount from the kueue.x-k8s.io/job-min-parallelism annotation,
    so a Job of 5 pods with 3 cpus free starts with 3."""
    r = run_manifests([*queue(3), job(5, "2")])
    [(name, wl)] = r.workloads().items()
    assert wl["spec"]["podSets"][0]["count"] == 5
    assert wl["spec"]["podSets"][0]["minCount"] == 2
    assert admitted_counts(r, name) == {"main": (3, {"cpu": "3"})}


def test_a_job_without_the_annotation_waits_for_all_its_pods() -> None:
    """Kueue's Job.PodSets leaves minCount unset without the annotation."""
    r = run_manifests([*queue(3), job(5, None)])
    [(name, wl)] = r.workloads().items()
    assert "minCount" not in wl["spec"]["podSets"][0]
    assert not r.is_admitted(name)


@pytest.mark.parametrize(
    ("parallelism", "completions", "annotation", "problem"),
    [
        (5, None, "two", "must be a whole number of pods, got 'two'"),
        (5, None, " 2", "must be a whole number of pods, got ' 2'"),
        (5, None, "2.5", "must be a whole number of pods, got '2.5'"),
        (5, None, "0", "must be between 1 and 4 (fewer than the Job's 5 pods), got 0"),
        (5, None, "-1", "must be between 1 and 4 (fewer than the Job's 5 pods), got -1"),
        (5, None, "5", "must be between 1 and 4 (fewer than the Job's 5 pods), got 5"),
        (5, 3, "3", "must be between 1 and 2 (fewer than the Job's 3 pods), got 3"),
        (1, None, "1", "needs a Job of 2 or more pods; this one runs 1"),
    ],
)
def test_a_bad_min_parallelism_refuses_the_job(
    parallelism: int, completions: int | None, annotation: str, problem: str
) -> None:
    """Kueue's Job webhook (validatePartialAdmissionCreate): an integer above 0 and below the
    Job's pod count. The Job is refused with the field and what would be accepted; the
    other objects are unaffected."""
    r = Run(Engine())
    r.load_manifests([*queue(3), job(parallelism, annotation, completions)])
    assert [(d.ref.kind, d.ref.name, d.message) for d in r.rejected()] == [
        ("Job", "train", f"metadata.annotations[kueue.x-k8s.io/job-min-parallelism]: {problem}")
    ]
    assert r.workloads() == {}


def test_a_pods_quota_counts_pods_and_limits_the_reduced_count() -> None:
    """Kueue's assignFlavors requests one "pods" per pod when the ClusterQueue covers the
    resource, so a quota of 4 pods admits 4 of 10 pods (minCount 2) though cpu is plenty,
    and the admission's usage shows the pods."""
    docs = [
        flavor_manifest("default"),
        cluster_queue_manifest("q", [(["cpu", "pods"], [("default", {"cpu": 100, "pods": 4})])]),
        local_queue_manifest("q", "q"),
        partial("w", ("main", 10, 2)),
        partial("whole", ("main", 5, None)),
    ]
    r = run_manifests(docs)
    assert admitted_counts(r, "w") == {"main": (4, {"cpu": "4", "pods": "4"})}
    # Without minCount, 5 pods never fit a quota of 4.
    assert r.pending_message("whole") == (
        "couldn't assign flavors to pod set main: insufficient quota for pods in flavor default, "
        "previously considered podsets requests (0) + current podset request (5) > maximum capacity (4)"
    )


@pytest.mark.parametrize(
    ("raw", "expected"), [("2", 2), ("+2", 2), ("002", 2), (" 2", None), ("2_0", None), ("", None)]
)
def test_the_cluster_connector_reads_the_annotation_as_kueue_does(raw: str, expected: int | None) -> None:
    """Kueue's minPodsCount takes the annotation through strconv.Atoi: a sign and leading
    zeros are fine, spaces and underscores are not. The Workload the cluster connector
    creates for a Job carries the same minCount."""
    manifest = job(5, raw)
    assert jw.workload_for_job(manifest)["spec"]["podSets"][0].get("minCount") == expected


THREE_POD_SETS = (("one", 20, None), ("two", 30, 10), ("three", 15, 5))


def test_three_pod_sets_two_of_them_variable() -> None:
    """Kueue's scheduler_test case "partial admission multiple variable pod sets", worked
    through PodSetReducer: 50 cpus, one 20 (fixed), two 30 (min 10), three 15 (min 5);
    step 15 of 30 is the first to fit: 20 + 20 + 10."""
    r = run_manifests([*queue(50), partial("w", *THREE_POD_SETS)])
    assert admitted_counts(r, "w") == {
        "one": (20, {"cpu": "20"}),
        "two": (20, {"cpu": "20"}),
        "three": (10, {"cpu": "10"}),
    }


def test_three_pod_sets_with_the_gate_off() -> None:
    """Kueue's scheduler_test case "partial admission disabled, multiple variable pod sets":
    the third pod set is where the 50 cpus run out, and the message says so."""
    docs = [configuration_manifest(gates={"PartialAdmission": False}), *queue(50)]
    r = run_manifests([*docs, partial("w", *THREE_POD_SETS)])
    assert not r.is_admitted("w")
    assert r.pending_message("w") == (
        "couldn't assign flavors to pod set three: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (50) + current podset request (15) > maximum capacity (50)"
    )
