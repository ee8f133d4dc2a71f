"""How a pod set's requests are walked, and what a pending Workload carries beside QuotaReserved.

Found by running the same scenarios through upstream Kueue's scheduler
(``tests/parity``): ``FlavorAssigner.assignFlavors`` walks a pod set's requests
in ``SliceRequests`` order (``VectorizedResourceRequests``, on by default since
0.19: the 64-bit FNV-1a hash of the name), charges a request of zero for a
covered resource to a flavor like any other, searches a resource group for
every resource it covers (``filterRequestedResources``), and stops at the
first resource no group covers; ``UnsetQuotaReservationWithCondition`` syncs
the Admitted condition beside QuotaReserved (``SyncAdmittedCondition``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.assignment import request_order
from kueuestream.agents.embedded.runtime import admit
from tests.helpers import Run, cluster_queue, flavor, run, workload
from tests.parity.scenarios import scenario

GATE_OFF = Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": False}})
NO_RESERVATION = ("False", "NoReservation", "The workload has no reservation")


def fnv1a_64(data: bytes) -> int:
    """FNV-1a, 64 bits, as Go's hash/fnv New64a computes it (a second, plain spelling of it)."""
    value = 14695981039346656037
    for byte in data:
        value = ((value ^ byte) * 1099511628211) % 2**64
    return value


def condition(r: Run, name: str, type_: str) -> tuple[str, str, str] | None:
    c = r.condition(name, type_)
    return None if c is None else (c["status"], c["reason"], c["message"])


def assignment(r: Run, name: str) -> list[dict[str, object]]:
    return [
        {"flavors": a["flavors"], "resourceUsage": a["resourceUsage"]}
        for a in r.status(name)["admission"]["podSetAssignments"]
    ]


# ------------------------------------------------------------------ the order


def test_the_order_is_fnv1a_of_the_name() -> None:
    """``hashResourceName``: FNV-1a's published vectors, and memory before cpu."""
    assert request_order("")[0] == 0xCBF29CE484222325
    assert request_order("a")[0] == 0xAF63DC4C8601EC8C
    assert request_order("foobar")[0] == 0x85944171F73967E8
    names = ["cpu", "memory", "pods", "nvidia.com/gpu", "example.com/gpu", "ephemeral-storage"]
    assert sorted(names, key=request_order) == [
        "ephemeral-storage",
        "memory",
        "nvidia.com/gpu",
        "pods",
        "example.com/gpu",
        "cpu",
    ]
    assert sorted(names, key=request_order).index("memory") < sorted(names, key=request_order).index("cpu")


@given(st.text(max_size=40))
def test_the_order_is_the_hash_then_the_name(name: str) -> None:
    """``resourceEntry.cmp``: by hash, then by name."""
    assert request_order(name) == (fnv1a_64(name.encode()), name)


# ------------------------------------------------------------------ requests of zero


def test_a_request_of_zero_for_a_covered_resource_is_charged_to_a_flavor() -> None:
    """``assignFlavors`` skips a zero request only for a resource the queue does not cover (#8079):
    a covered one gets the group's flavor and a usage of 0, as Kueue writes it."""
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 4Gi}]",
            covered="[cpu, memory]",
        )
        + workload("w", "q", cpu="2", extra_requests=', memory: "0"')
    )
    r = run(text)
    assert r.admitted() == ["w"]
    assert assignment(r, "w") == [
        {"flavors": {"cpu": "default", "memory": "default"}, "resourceUsage": {"cpu": "2", "memory": "0"}}
    ]


def test_a_request_of_zero_for_an_uncovered_resource_asks_for_nothing() -> None:
    """#8079: ``cpu: 0`` in a queue that covers only memory neither blocks nor shows."""
    text = (
        flavor("default")
        + cluster_queue("q", "default: [{name: memory, nominalQuota: 4Gi}]", covered="[memory]")
        + workload("w", "q", cpu="0", extra_requests=', memory: "1Gi"')
    )
    r = run(text)
    assert r.admitted() == ["w"]
    assert assignment(r, "w") == [{"flavors": {"memory": "default"}, "resourceUsage": {"memory": "1Gi"}}]


def test_only_zero_requests_still_take_a_flavor_each() -> None:
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 0}, {name: memory, nominalQuota: 0}]",
            covered="[cpu, memory]",
        )
        + workload("w", "q", cpu="0", count=3, extra_requests=', memory: "0"')
    )
    r = run(text)
    assert r.admitted() == ["w"]
    assert assignment(r, "w") == [
        {"flavors": {"cpu": "default", "memory": "default"}, "resourceUsage": {"cpu": "0", "memory": "0"}}
    ]


# ------------------------------------------------------------------ where the walk stops


def test_a_group_is_searched_for_all_it_covers_though_an_uncovered_resource_comes_between() -> None:
    """memory, then example.com/other (no group covers it), then cpu: the memory group is
    searched first with cpu too (``filterRequestedResources``), and its failure names both."""
    assert sorted(["cpu", "memory", "example.com/other"], key=request_order) == [
        "memory",
        "example.com/other",
        "cpu",
    ]
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 2Gi}]",
            covered="[cpu, memory]",
        )
        + workload("running", "q", cpu="2", extra_requests=', memory: "1Gi"')
        + workload(
            "w",
            "q",
            cpu="3",
            created="2024-01-01T00:00:01Z",
            extra_requests=', memory: "3Gi", example.com/other: "1"',
        )
    )
    r = run(text)
    assert r.admitted() == ["running"]
    assert condition(r, "w", "QuotaReserved") == (
        "False",
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor default, "
        "previously considered podsets requests (0) + current podset request (3Gi) > maximum capacity (2Gi), "
        "insufficient unused quota for cpu in flavor default, 1 more needed",
    )


def test_an_uncovered_resource_met_first_is_the_one_told() -> None:
    """example.com/other comes before cpu: nothing is searched and the reason is NoMatchingFlavor
    (``resolveNoFitReason`` for a pod set without flavor attempts), however short cpu is."""
    text = (
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 1}]")
        + workload("w", "q", cpu="5", extra_requests=', example.com/other: "1"')
    )
    r = run(text)
    assert condition(r, "w", "QuotaReserved") == (
        "False",
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: resource example.com/other unavailable in ClusterQueue",
    )


# ------------------------------------------------------------------ Admitted beside QuotaReserved


@pytest.mark.parametrize("gated", [True, False])
def test_a_pending_workload_carries_admitted_false_with_the_gate(gated: bool) -> None:
    """``UnsetQuotaReservationWithCondition`` then ``SyncAdmittedCondition``: with
    UnadmittedWorkloadsObservability, once QuotaReserved is set Admitted is set beside it
    (NoReservation); without the gate a Workload never admitted has no Admitted condition."""
    text = (
        flavor("default")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + workload("first", "q", cpu="3")
        + workload("second", "q", cpu="3", created="2024-01-01T00:00:01Z")
    )
    r = run(text, None if gated else GATE_OFF)
    assert r.admitted() == ["first"]
    assert condition(r, "second", "QuotaReserved") is not None
    assert condition(r, "second", "Admitted") == (NO_RESERVATION if gated else None)
    types = [c["type"] for c in r.status("second")["conditions"]]
    assert types == (["QuotaReserved", "Admitted"] if gated else ["QuotaReserved"])
    assert condition(r, "first", "Admitted") == ("True", "Admitted", "The workload is admitted")


def test_namespace_mismatch_is_told_to_every_equivalent_workload() -> None:
    """Kueue bulk-moves equivalent Workloads aside only after NoFit or PreemptionNoCandidates
    (``requeueIfNotPresent``); after a namespace mismatch each is popped and told the same."""
    text = (
        flavor("default")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 4}]",
            spec_extra="  namespaceSelector: {matchLabels: {team: a}}",
        ).replace("  namespaceSelector: {}\n", "")
        + "".join(workload(f"w{i}", "q", created=f"2024-01-01T00:00:0{i}Z") for i in range(3))
    )
    r = run(text)
    assert r.admitted() == []
    for i in range(3):
        assert condition(r, f"w{i}", "QuotaReserved") == (
            "False",
            "Misconfigured",
            "workload namespace doesn't match ClusterQueue selector",
        )


def test_a_request_of_zero_fits_where_usage_is_over_the_quota() -> None:
    """``ClusterQueueSnapshot.Fits`` compares with ``Available``, which is never below zero: with
    the ClusterQueue's cpu quota lowered under what its admitted Workloads use, a Workload asking
    for no cpu (and memory that is free) is still admitted; one asking for 1 cpu is not."""
    quotas = "default: [{{name: cpu, nominalQuota: {cpu}}}, {{name: memory, nominalQuota: 4Gi}}]"
    r = run(
        flavor("default")
        + cluster_queue("q", quotas.format(cpu=4), covered="[cpu, memory]")
        + workload("running", "q", cpu="4")
    )
    assert r.admitted() == ["running"]
    r.load(cluster_queue("q", quotas.format(cpu=2), covered="[cpu, memory]"))
    r.tick()
    r.load(
        workload("no-cpu", "q", cpu="0", created="2024-01-01T00:00:01Z", extra_requests=', memory: "1Gi"')
        + workload("one-cpu", "q", cpu="1", created="2024-01-01T00:00:02Z", extra_requests=', memory: "1Gi"')
    )
    r.tick()
    assert sorted(r.admitted()) == ["no-cpu", "running"]
    assert assignment(r, "no-cpu") == [
        {"flavors": {"cpu": "default", "memory": "default"}, "resourceUsage": {"cpu": "0", "memory": "1Gi"}}
    ]


# ------------------------------------------------------------------ equivalent Workloads


def _namespace(name: str, team: str) -> str:
    return f"""
apiVersion: v1
kind: Namespace
metadata: {{name: {name}, labels: {{team: {team}}}}}
---"""


def _local_queue(namespace: str) -> str:
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: q-lq, namespace: {namespace}}}
spec: {{clusterQueue: q}}
---"""


def test_equivalent_workloads_of_other_namespaces_are_set_aside_together() -> None:
    """``computeSchedulingHash`` is the priority and the pod sets' shape, not the namespace, and
    ``handleInadmissibleHash`` moves every equivalent Workload of the ClusterQueue aside with a
    head that did not fit: the one in the other namespace is never evaluated itself."""
    text = (
        flavor("default")
        + _namespace("team-a", "a")
        + _namespace("team-b", "b")
        + cluster_queue("q", "default: [{name: cpu, nominalQuota: 4}]")
        + _local_queue("team-a")
        + _local_queue("team-b")
        + workload("running", "q", cpu="4")
        + workload("a", "q", cpu="2", created="2024-01-01T00:00:01Z", namespace="team-a")
        + workload("b", "q", cpu="2", created="2024-01-01T00:00:02Z", namespace="team-b")
    )
    r = run(text)
    assert r.admitted() == ["running"]
    assert condition(r, "a", "QuotaReserved") == (
        "False",
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
        "2 more needed",
    )
    assert condition(r, "b", "QuotaReserved") == (
        "False",
        "WaitingForQuota",
        "Bypassed scheduling evaluation because an equivalent workload recently failed",
    )


def _team_a_only(spec_extra: str = "") -> str:
    """Namespaces team-a and team-b, each with a LocalQueue of ClusterQueue ``q`` (4 cpu),
    which selects team-a's only."""
    return (
        flavor("default")
        + _namespace("team-a", "a")
        + _namespace("team-b", "b")
        + cluster_queue(
            "q",
            "default: [{name: cpu, nominalQuota: 4}]",
            spec_extra="  namespaceSelector: {matchLabels: {team: a}}" + spec_extra,
        ).replace("  namespaceSelector: {}\n", "")
        + _local_queue("team-a")
        + _local_queue("team-b")
    )


def test_a_namespace_mismatch_sets_aside_no_equivalent_workload() -> None:
    """``requeueIfNotPresent`` bulk-moves equivalents only after NoFit or PreemptionNoCandidates:
    the head whose namespace the ClusterQueue does not select waits alone, and its equivalent
    from a selected namespace is admitted."""
    text = (
        _team_a_only()
        + workload("b", "q", cpu="2", created="2024-01-01T00:00:01Z", namespace="team-b")
        + workload("a", "q", cpu="2", created="2024-01-01T00:00:02Z", namespace="team-a")
    )
    r = run(text)
    assert r.admitted() == ["a"]
    assert condition(r, "b", "QuotaReserved") == (
        "False",
        "Misconfigured",
        "workload namespace doesn't match ClusterQueue selector",
    )


def test_a_namespace_not_selected_is_told_before_the_scheduler_reaches_it() -> None:
    """Kueue's workload controller checks the namespace when it reconciles a queued Workload
    (``resolveGranularUnadmittedQuotaReservedCondition`` → ``ValidateAdmissibility``), before
    any scheduling cycle: behind a StrictFIFO head that never fits, the Workload of a
    namespace the ClusterQueue does not select is Misconfigured all the same, and one of a
    selected namespace has no condition yet. Without the gate the workload controller leaves
    both alone."""
    text = (
        _team_a_only("\n  queueingStrategy: StrictFIFO")
        + workload("head", "q", cpu="5", created="2024-01-01T00:00:00Z", namespace="team-a")
        + workload("b", "q", cpu="1", created="2024-01-01T00:00:01Z", namespace="team-b")
        + workload("a", "q", cpu="1", created="2024-01-01T00:00:02Z", namespace="team-a")
    )
    r = run(text)
    assert r.admitted() == []
    assert condition(r, "head", "QuotaReserved")[1] == "ExceedsMaxQuota"  # type: ignore[index]
    assert condition(r, "b", "QuotaReserved") == (
        "False",
        "Misconfigured",
        "workload namespace doesn't match ClusterQueue selector",
    )
    assert condition(r, "a", "QuotaReserved") is None
    legacy = run(
        text, Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": False}})
    )
    assert [condition(legacy, name, "QuotaReserved") for name in ("a", "b")] == [None, None]


@pytest.mark.parametrize("seed", [655, 696, 774, 801, 1025, 1058, 1121])
def test_parity_scenarios_that_once_stopped_the_engine_run_to_the_end(seed: int) -> None:
    """Scenarios of ``tests/parity`` where a Workload parked alone after a namespace mismatch
    left an entry in the queue's heap tying on the order key with one of another group: the
    heap then compared the two groups' keys, of different types, and the engine raised. They
    run to the end now, and a Workload holds an admission exactly when QuotaReserved is True."""
    docs = scenario(seed, placement=False)
    admitted = admit(docs, time_ms=1_800_000_000_000)
    assert admitted.errors == []
    assert len(admitted.workloads) == sum(1 for d in docs if d["kind"] == "Workload")
    for w in admitted.workloads:
        status = w.get("status") or {}
        reserved = {c["type"]: c["status"] for c in status.get("conditions", [])}.get("QuotaReserved")
        assert (reserved == "True") == ("admission" in status), w["metadata"]["name"]
