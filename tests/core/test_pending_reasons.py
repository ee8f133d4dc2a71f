"""Why a Workload waits: QuotaReserved=False reasons and messages as Kueue 0.19 writes them.

The scenarios are worked out from upstream Kueue's code: the flavor assigner's
per-flavor reasons (``fitsResourceQuota``, ``checkFlavorForPodSets``) and how
they combine (``Assignment.resolveNoFitReason``, ``reasonSeverity``); the
scheduler's reasons (``Scheduler.nominate``, ``Scheduler.processEntry``,
``requeueAndUpdate``); the workload controller's (``getQueueBlocker``,
``resolveGranularUnadmittedQuotaReservedCondition``); and the legacy reasons
written with the ``UnadmittedWorkloadsObservability`` gate off
(``workload.UnadmittedWorkloadReasonWithFallback``).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.events import Action
from tests.helpers import Run, cluster_queue, flavor, run, workload

CQ4 = "default: [{name: cpu, nominalQuota: 4}]"
GATE_OFF = Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsObservability": False}})
EXPLICIT = Configuration.model_validate({"featureGates": {"UnadmittedWorkloadsExplicitStatus": True}})


def reserved(r: Run, name: str) -> tuple[str, str]:
    cond = r.condition(name, "QuotaReserved")
    assert cond is not None and cond["status"] == "False", cond
    return cond["reason"], cond["message"]


def two_flavor_queue(first: str, second: str, extra: str = "") -> str:
    """A 4-cpu queue whose one resource group offers flavors ``first`` then ``second``."""
    return cluster_queue(
        "q",
        f"{first}: [{{name: cpu, nominalQuota: 4}}]\n{second}: [{{name: cpu, nominalQuota: 4}}]",
        spec_extra=extra,
    )


# ---------------------------------------------------------------- the flavor assigner's reasons


@pytest.mark.parametrize(("gated", "expected"), [(True, "WaitingForQuota"), (False, "Pending")])
def test_quota_in_use_is_waiting_for_quota(gated: bool, expected: str) -> None:
    """``fitsResourceQuota``: within the maximum but not free now, and nothing to preempt."""
    text = (
        flavor("default")
        + cluster_queue("q", CQ4)
        + workload("first", "q", cpu="3", created="2024-01-01T00:00:00Z")
        + workload("second", "q", cpu="3", created="2024-01-01T00:00:01Z")
    )
    r = run(text, None if gated else GATE_OFF)
    assert r.admitted() == ["first"]
    assert reserved(r, "second") == (
        expected,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
        "2 more needed",
    )


@pytest.mark.parametrize(("gated", "expected"), [(True, "ExceedsMaxQuota"), (False, "Pending")])
def test_more_than_the_queue_can_ever_hold_exceeds_max_quota(gated: bool, expected: str) -> None:
    """``fitsResourceQuota``: the request is over the most the queue could ever have."""
    r = run(
        flavor("default") + cluster_queue("q", CQ4) + workload("big", "q", cpu="5"),
        None if gated else GATE_OFF,
    )
    assert reserved(r, "big") == (
        expected,
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (0) + current podset request (5) > maximum capacity (4)",
    )


def test_no_flavor_matching_the_pods_is_no_matching_flavor() -> None:
    """``checkFlavorForPodSets``: node affinity and untolerated taints rule a flavor out."""
    text = (
        flavor("gpu", "{kind: gpu}")
        + flavor("tainted", extra="  nodeTaints: [{key: spot, value: 'true', effect: NoSchedule}]")
        + two_flavor_queue("gpu", "tainted")
        + workload("w", "q", pod_extra="        nodeSelector: {kind: cpu}\n")
    )
    r = run(text)
    assert reserved(r, "w") == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: flavor gpu doesn't match node affinity, "
        "untolerated taint {spot true NoSchedule <nil>} in flavor tainted",
    )


def test_a_resource_the_queue_does_not_cover_is_no_matching_flavor() -> None:
    """``resolveNoFitReason``: a pod set with no flavor attempt at all gets NoMatchingFlavor."""
    r = run(
        flavor("default") + cluster_queue("q", CQ4) + workload("w", "q", extra_requests=', memory: "1Gi"')
    )
    assert reserved(r, "w") == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: resource memory unavailable in ClusterQueue",
    )


def test_the_least_severe_flavor_of_a_group_gives_the_reason() -> None:
    """``resolveNoFitReason``: any flavor of a group could take the pod set, so the
    group's reason is its least severe flavor's; here a mismatched flavor and one
    that is too small give ExceedsMaxQuota, not NoMatchingFlavor."""
    text = (
        flavor("gpu", "{kind: gpu}")
        + flavor("small")
        + two_flavor_queue("gpu", "small")
        + workload("w", "q", cpu="5", pod_extra="        nodeSelector: {kind: cpu}\n")
    )
    r = run(text)
    reason, message = reserved(r, "w")
    assert reason == "ExceedsMaxQuota"
    assert message == (
        "couldn't assign flavors to pod set main: flavor gpu doesn't match node affinity, "
        "insufficient quota for cpu in flavor small, previously considered podsets requests (0) + "
        "current podset request (5) > maximum capacity (4)"
    )


def test_a_flavor_in_use_beats_a_flavor_too_small() -> None:
    """``reasonSeverity``: WaitingForQuota is the least severe; one flavor too small for the
    request and another only busy give WaitingForQuota."""
    text = (
        flavor("small")
        + flavor("busy")
        + cluster_queue(
            "q",
            "small: [{name: cpu, nominalQuota: 2}]\nbusy: [{name: cpu, nominalQuota: 4}]",
        )
        + workload("running", "q", cpu="3", created="2024-01-01T00:00:00Z")
        + workload("w", "q", cpu="3", created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.flavors("running") == {"cpu": "busy"}
    assert reserved(r, "w")[0] == "WaitingForQuota"


def test_every_resource_of_a_flavor_is_named_and_the_worst_gives_its_reason() -> None:
    """``findFlavorForPodSets`` checks every resource of a flavor, not only up to the first
    that does not fit: the message names each, and the flavor's reason is the most
    severe of them (memory can never fit: ExceedsMaxQuota, though cpu is only busy)."""
    quotas = "default: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 1Gi}]"
    text = (
        flavor("default")
        + cluster_queue("q", quotas, covered="[cpu, memory]")
        + workload("running", "q", cpu="3", created="2024-01-01T00:00:00Z")
        + workload("w", "q", cpu="3", extra_requests=', memory: "2Gi"', created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert reserved(r, "w") == (
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor default, "
        "previously considered podsets requests (0) + current podset request (2Gi) > maximum capacity (1Gi), "
        "insufficient unused quota for cpu in flavor default, 2 more needed",
    )


def _two_group_queue(first_group: str, second_group: str) -> str:
    """Flavors gpu (for pods labelled kind: gpu), plain and small; a queue with two resource groups."""
    return (
        flavor("gpu", "{kind: gpu}")
        + flavor("plain")
        + flavor("small")
        + f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {{name: q}}
spec:
  namespaceSelector: {{}}
  resourceGroups:
{first_group}
{second_group}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {{name: q-lq, namespace: default}}
spec: {{clusterQueue: q}}
---"""
    )


GPU_THEN_PLAIN_MEMORY = """  - coveredResources: [memory]
    flavors:
    - name: gpu
      resources: [{name: memory, nominalQuota: 4Gi}]
    - name: plain
      resources: [{name: memory, nominalQuota: 4Gi}]"""
SMALL_CPU = """  - coveredResources: [cpu]
    flavors:
    - name: small
      resources: [{name: cpu, nominalQuota: 1}]"""
GPU_THEN_PLAIN_CPU = """  - coveredResources: [cpu]
    flavors:
    - name: gpu
      resources: [{name: cpu, nominalQuota: 4}]
    - name: plain
      resources: [{name: cpu, nominalQuota: 4}]"""
SMALL_MEMORY = """  - coveredResources: [memory]
    flavors:
    - name: small
      resources: [{name: memory, nominalQuota: 1Gi}]"""
ON_CPU_NODES = "        nodeSelector: {kind: cpu}\n"


@pytest.mark.parametrize("groups", [(GPU_THEN_PLAIN_MEMORY, SMALL_CPU), (SMALL_CPU, GPU_THEN_PLAIN_MEMORY)])
def test_a_flavor_ruled_out_in_a_group_that_fits_still_counts(groups: tuple[str, str]) -> None:
    """``resolveNoFitReason`` takes the most severe reason across a pod set's resource
    groups and counts every flavor attempt that did not fit, also in a group that found
    another flavor: memory fits on ``plain`` after ``gpu`` was ruled out (NoMatchingFlavor),
    cpu is too small (ExceedsMaxQuota), and Kueue writes NoMatchingFlavor. ``assignFlavors``
    searches memory's group first whatever the groups' order in the queue, since it walks the
    requests in ``SliceRequests`` order (FNV-1a hash of the name: memory before cpu)."""
    text = _two_group_queue(*groups) + workload(
        "w", "q", cpu="2", extra_requests=', memory: "2Gi"', pod_extra=ON_CPU_NODES
    )
    r = run(text)
    # The message, though, is only the failing group's: a search that fit says nothing.
    assert reserved(r, "w") == (
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor small, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)",
    )


@pytest.mark.parametrize("groups", [(GPU_THEN_PLAIN_CPU, SMALL_MEMORY), (SMALL_MEMORY, GPU_THEN_PLAIN_CPU)])
def test_a_group_searched_after_the_failing_one_is_not_searched_at_all(groups: tuple[str, str]) -> None:
    """``assignFlavors`` stops at the first group that finds no flavor, in request order
    (memory before cpu): the cpu group, whose ruled-out ``gpu`` flavor would have made the
    reason NoMatchingFlavor, is never searched, so the reason is memory's ExceedsMaxQuota."""
    text = _two_group_queue(*groups) + workload(
        "w", "q", cpu="2", extra_requests=', memory: "2Gi"', pod_extra=ON_CPU_NODES
    )
    r = run(text)
    assert reserved(r, "w") == (
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for memory in flavor small, "
        "previously considered podsets requests (0) + current podset request (2Gi) > maximum capacity (1Gi)",
    )


def test_every_pod_set_that_does_not_simply_fit_is_named() -> None:
    """``Assignment.Message``: one line per pod set whose flavor search did not end on a fit,
    joined by "; "; the reason comes from the pod sets that cannot fit at all (here ``b``:
    ExceedsMaxQuota, while ``a`` could fit by preempting)."""
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("low", "q", cpu="4", priority=1)
    )
    r.tick()
    r.load(
        """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {name: w, namespace: default, creationTimestamp: "2024-01-01T00:00:01Z"}
spec:
  queueName: q-lq
  priority: 10
  podSets:
  - name: a
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}
  - name: b
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "5"}}}]}}
---"""
    )
    assert r.admitted() == ["low"]
    assert reserved(r, "w") == (
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set a: insufficient unused quota for cpu in flavor default, "
        "2 more needed; couldn't assign flavors to pod set b: insufficient quota for cpu in flavor "
        "default, previously considered podsets requests (2) + current podset request (5) > "
        "maximum capacity (4)",
    )


# ---------------------------------------------------------------- the scheduler's reasons


@pytest.mark.parametrize(("gated", "expected"), [(True, "WaitingForPreemptedWorkloads"), (False, "Pending")])
def test_a_preemptor_waits_for_its_victims(gated: bool, expected: str) -> None:
    """``processEntry``: once it issued its preemptions the head waits for them to complete."""
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}")
        + workload("low", "q", cpu="4", priority=1),
        None if gated else GATE_OFF,
    )
    r.tick()
    decisions = r.load(workload("high", "q", cpu="4", priority=10, created="2024-01-01T01:00:00Z"))
    waiting = [d for d in decisions if d.ref.name == "high" and d.action == Action.PENDING]
    assert len(waiting) == 1
    cond = next(c for c in waiting[0].status["conditions"] if c["type"] == "QuotaReserved")
    assert (cond["reason"], cond["message"]) == (
        expected,
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, "
        "4 more needed. Pending the preemption of 1 workload(s)",
    )
    assert r.admitted() == ["high"]


@pytest.mark.parametrize(("gated", "expected"), [(True, "Misconfigured"), (False, "Pending")])
def test_namespace_not_selected_is_misconfigured(gated: bool, expected: str) -> None:
    """``nominate`` with ``ValidateAdmissibility``: ``ErrNamespaceMismatch``, lower-case."""
    text = (
        flavor("default")
        + cluster_queue("q", CQ4).replace(
            "namespaceSelector: {}", "namespaceSelector: {matchLabels: {team: a}}"
        )
        + workload("w", "q")
    )
    r = run(text, None if gated else GATE_OFF)
    assert reserved(r, "w") == (expected, "workload namespace doesn't match ClusterQueue selector")


def test_a_workload_the_scheduler_could_not_admit_shows_what_it_requests() -> None:
    """``requeueAndUpdate`` with ``PropagateResourceRequests``: each pod set's total
    requests; once admitted, ``status.admission`` replaces them (``admissionStatusPatch``)."""
    quotas = "default: [{name: cpu, nominalQuota: 4}, {name: memory, nominalQuota: 4Gi}]"
    r = run(
        flavor("default")
        + cluster_queue("q", quotas, covered="[cpu, memory]")
        + workload("first", "q", cpu="3", created="2024-01-01T00:00:00Z")
        + workload(
            "second",
            "q",
            cpu="1500m",
            count=2,
            extra_requests=', memory: "1Gi"',
            created="2024-01-01T00:00:01Z",
        )
    )
    assert r.admitted() == ["first"]
    assert "resourceRequests" not in r.status("first")
    assert r.status("second")["resourceRequests"] == [
        {"name": "main", "resources": {"cpu": "3", "memory": "2Gi"}}
    ]
    r.tick()
    r.finish("default", "first")
    assert r.admitted() == ["second"]
    assert "resourceRequests" not in r.status("second")


# ---------------------------------------------------------------- the workload controller's reasons


QUEUE_BLOCKERS = [
    pytest.param(
        flavor("default") + workload("w", "q"),
        ("Misconfigured", "LocalQueue q-lq doesn't exist"),
        id="no-local-queue",
    ),
    pytest.param(
        flavor("default") + workload("w", "q") + "\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: q-lq, namespace: default}\nspec: {clusterQueue: q, stopPolicy: Hold}\n---",
        ("Suspended", "LocalQueue q-lq is inactive"),
        id="local-queue-stopped",
    ),
    pytest.param(
        flavor("default") + workload("w", "q") + "\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: q-lq, namespace: default}\nspec: {clusterQueue: q}\n---",
        ("Misconfigured", "ClusterQueue q doesn't exist"),
        id="no-cluster-queue",
    ),
    pytest.param(
        flavor("default") + cluster_queue("q", CQ4, spec_extra="  stopPolicy: Hold") + workload("w", "q"),
        ("Suspended", "ClusterQueue q is inactive"),
        id="cluster-queue-stopped",
    ),
]
INACTIVE = workload("w", "q").replace("spec:\n  queueName", "spec:\n  active: false\n  queueName")


@pytest.mark.parametrize(("text", "expected"), QUEUE_BLOCKERS)
def test_queue_blockers_with_the_gate_on(text: str, expected: tuple[str, str]) -> None:
    """``getQueueBlocker`` and ``resolveGranularUnadmittedQuotaReservedCondition``."""
    assert reserved(run(text), "w") == expected


@pytest.mark.parametrize(("text", "expected"), QUEUE_BLOCKERS)
def test_queue_blockers_with_the_gate_off_are_inadmissible(text: str, expected: tuple[str, str]) -> None:
    """``resolveLegacyUnadmittedQuotaReservedCondition``: the same messages, reason Inadmissible."""
    assert reserved(run(text, GATE_OFF), "w") == ("Inadmissible", expected[1])


def test_an_inactive_workload_is_deactivated_before_any_queue_blocker() -> None:
    """``resolveGranularUnadmittedQuotaReservedCondition`` looks at ``IsActive`` first."""
    stopped = cluster_queue("q", CQ4, spec_extra="  stopPolicy: Hold")
    for queue in (cluster_queue("q", CQ4), stopped):
        assert reserved(run(flavor("default") + queue + INACTIVE), "w") == (
            "Deactivated",
            "The workload is deactivated",
        )


def test_without_the_gate_an_inactive_workload_hears_only_of_its_queue() -> None:
    """``resolveLegacyUnadmittedQuotaReservedCondition`` has no reason for an inactive
    Workload: it writes a queue blocker's message, Inadmissible, and nothing otherwise."""
    assert (
        run(flavor("default") + cluster_queue("q", CQ4) + INACTIVE, GATE_OFF).condition("w", "QuotaReserved")
        is None
    )
    stopped = cluster_queue("q", CQ4, spec_extra="  stopPolicy: Hold")
    assert reserved(run(flavor("default") + stopped + INACTIVE, GATE_OFF), "w") == (
        "Inadmissible",
        "ClusterQueue q is inactive",
    )


STRICT_BLOCKED = (
    flavor("default")
    + cluster_queue("q", CQ4, spec_extra="  queueingStrategy: StrictFIFO")
    + workload("head", "q", cpu="5", created="2024-01-01T00:00:00Z")
)


def test_a_queued_workload_never_evaluated_has_no_condition_by_default() -> None:
    """``resolveGranularUnadmittedQuotaReservedCondition``: without
    UnadmittedWorkloadsExplicitStatus (beta, off) a new Workload gets no condition
    until the scheduler looks at it; behind a StrictFIFO head it never does."""
    r = run(STRICT_BLOCKED + workload("behind", "q", created="2024-01-01T00:00:01Z"))
    assert reserved(r, "head")[0] == "ExceedsMaxQuota"
    assert r.condition("behind", "QuotaReserved") is None


def test_explicit_status_stamps_pending_evaluation_on_a_queued_workload() -> None:
    """With UnadmittedWorkloadsExplicitStatus on, a queued Workload says it waits for the scheduler."""
    r = run(STRICT_BLOCKED + workload("behind", "q", created="2024-01-01T00:00:01Z"), EXPLICIT)
    assert reserved(r, "behind") == (
        "PendingEvaluation",
        "Workload is pending evaluation in the scheduling queue",
    )


@pytest.mark.parametrize(("gated", "expected"), [(True, "PendingEvaluation"), (False, "Inadmissible")])
def test_a_blocker_resolved_turns_into_pending_evaluation(gated: bool, expected: str) -> None:
    """A reason the scheduler did not write (Misconfigured) is replaced by PendingEvaluation
    once the workload is queued; with the gate off the old condition stays until the
    scheduler writes one."""
    r = run(
        STRICT_BLOCKED + workload("late", "other", created="2024-01-01T00:00:01Z"),
        None if gated else GATE_OFF,
    )
    assert reserved(r, "late")[0] == ("Misconfigured" if gated else "Inadmissible")
    r.tick()
    r.load(
        "\napiVersion: kueue.x-k8s.io/v1beta1\nkind: LocalQueue\n"
        "metadata: {name: other-lq, namespace: default}\nspec: {clusterQueue: q}\n---"
    )
    reason, message = reserved(r, "late")
    assert reason == expected
    if gated:
        assert message == "Workload is pending evaluation in the scheduling queue"


# ---------------------------------------------------------------- preemption messages


def test_preemption_messages_carry_both_paths_in_the_cohort_tree() -> None:
    """``preemptionMessage`` with ``buildCQPath``: each ClusterQueue's path from its root cohort."""
    text = (
        flavor("default")
        + """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: left}
spec: {parentName: org}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: right}
spec: {parentName: org}
---"""
        + cluster_queue("lender", CQ4, cohort="left", spec_extra="  preemption: {reclaimWithinCohort: Any}")
        + cluster_queue("borrower", "default: [{name: cpu, nominalQuota: 0}]", cohort="right")
        + workload("b", "borrower", cpu="4")
    )
    r = run(text)
    assert r.admitted() == ["b"]
    r.tick()
    r.load(workload("own", "lender", cpu="4", created="2024-01-01T01:00:00Z"))
    message = (
        "Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to reclamation within "
        "the cohort; preemptor path: /org/left/lender; preemptee path: /org/right/borrower"
    )
    for kind in ("Evicted", "Preempted"):
        cond = r.condition("b", kind)
        assert cond is not None and cond["message"] == message, kind
    assert r.admitted() == ["own"]


# ---------------------------------------------------------------- property


@settings(max_examples=60, deadline=None)
@given(
    nominal=st.integers(min_value=1, max_value=8),
    used=st.integers(min_value=0, max_value=8),
    request=st.integers(min_value=1, max_value=12),
    gated=st.booleans(),
)
def test_the_reason_follows_the_quota_arithmetic(nominal: int, used: int, request: int, gated: bool) -> None:
    """``fitsResourceQuota`` in one queue without a cohort: more than the nominal quota is
    ExceedsMaxQuota, more than what is free is WaitingForQuota, anything else is admitted."""
    used = min(used, nominal)
    text = flavor("default") + cluster_queue("q", f"default: [{{name: cpu, nominalQuota: {nominal}}}]")
    if used:
        text += workload("running", "q", cpu=str(used), created="2024-01-01T00:00:00Z")
    text += workload("w", "q", cpu=str(request), created="2024-01-01T00:00:01Z")
    r = run(text, None if gated else GATE_OFF)
    if request <= nominal - used:
        assert r.is_admitted("w")
        return
    expected = "ExceedsMaxQuota" if request > nominal else "WaitingForQuota"
    assert reserved(r, "w")[0] == (expected if gated else "Pending")


@settings(max_examples=40, deadline=None)
@given(
    loads=st.lists(
        st.tuples(st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=3)),
        min_size=1,
        max_size=6,
    ),
)
def test_the_engine_never_writes_the_job_stopped_signal(loads: list[tuple[int, int]]) -> None:
    """With a cluster, QuotaReserved=False/PendingEvaluation beside Evicted=True is the job
    integration's word that an evicted job stopped (``JobReconciler`` "handle eviction");
    whatever preempts whom, no decision of the engine carries that pair."""
    r = run(
        flavor("default")
        + cluster_queue("q", CQ4, spec_extra="  preemption: {withinClusterQueue: LowerPriority}"),
        EXPLICIT,
        stops_at_once=False,
    )
    for i, (cpu, priority) in enumerate(loads):
        r.tick()
        r.load(workload(f"w{i}", "q", cpu=str(cpu), priority=priority, created=f"2024-01-01T00:00:{i:02d}Z"))
    for decision in r.decisions:
        conditions = {c["type"]: c for c in decision.status.get("conditions", [])}
        evicted = conditions.get("Evicted", {}).get("status") == "True"
        reserved_cond = conditions.get("QuotaReserved", {})
        assert not (evicted and reserved_cond.get("reason") == "PendingEvaluation"), decision
