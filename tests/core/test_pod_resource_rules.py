"""LimitRanges, RuntimeClasses and requests above limits, as Kueue reads a Workload's pods.

Upstream: ``workload.AdjustResources`` (``handlePodOverhead``,
``handlePodLimitRange``, ``handleLimitsToRequests``) and
``workload.ValidateAdmissibility`` (``ValidateResources``,
``ValidateLimitRange``, ``limitrange.Summarize``,
``Summary.ValidatePodSpec``), called by the scheduler's ``nominate`` and by
the workload controller's ``resolveGranularUnadmittedQuotaReservedCondition``.
Side by side with upstream's scheduler, ``tests/parity`` covers the same with
random LimitRanges and RuntimeClasses.
"""

from __future__ import annotations

import pytest
import yaml

from kueuestream.admission.api.core import LimitRange, RuntimeClass
from kueuestream.admission.decode import decode
from kueuestream.admission.pod_resource_rules import summarize
from tests.helpers import Run, cluster_queue, flavor, run, workload

QUEUE = flavor("default") + cluster_queue(
    "cq",
    "default: [{name: cpu, nominalQuota: 10}, {name: memory, nominalQuota: 20Gi}]",
    covered="[cpu, memory]",
)
STRICT = flavor("default") + cluster_queue(
    "cq",
    "default: [{name: cpu, nominalQuota: 10}, {name: memory, nominalQuota: 10Gi}]",
    covered="[cpu, memory]",
    spec_extra="  queueingStrategy: StrictFIFO",
)
GATE_OFF = """
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
featureGates: {UnadmittedWorkloadsObservability: false}
---"""


def limit_range(name: str, limits: str, namespace: str = "default") -> str:
    return f"""
apiVersion: v1
kind: LimitRange
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  limits: {limits}
---"""


def runtime_class(name: str, overhead: str | None) -> str:
    spec = f"overhead: {{podFixed: {overhead}}}" if overhead is not None else ""
    return f"""
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {{name: {name}}}
handler: runc
{spec}
---"""


def pods(name: str, containers: str, *, count: int = 1, extra: str = "", created: str = "") -> str:
    """A Workload of one pod set whose pod spec has ``containers`` (a YAML flow list)."""
    stamp = f', creationTimestamp: "{created}"' if created else ""
    return f"""
apiVersion: kueue.x-k8s.io/v1beta1
kind: Workload
metadata: {{name: {name}, namespace: default{stamp}}}
spec:
  queueName: cq-lq
  podSets:
  - name: main
    count: {count}
    template:
      spec:
        containers: {containers}
{extra}
---"""


def usage(r: Run, name: str) -> dict[str, str]:
    return dict(r.status(name)["admission"]["podSetAssignments"][0]["resourceUsage"])


# ---------------------------------------------------------------- AdjustResources


def test_container_defaults_fill_what_a_container_leaves_out() -> None:
    """``handlePodLimitRange``: ``defaultRequest`` becomes the request, ``default`` the limit,
    which stands in for a request still missing; what a container sets is kept."""
    lr = limit_range(
        "defaults", "[{type: Container, default: {cpu: 2, memory: 3Gi}, defaultRequest: {cpu: 500m}}]"
    )
    r = run(
        QUEUE
        + lr
        + pods("bare", "[{name: c}]", count=2)
        + pods("own", "[{name: c, resources: {requests: {cpu: 1}}}]")
        + pods(
            "init",
            "[{name: c, resources: {requests: {cpu: 100m, memory: 1Gi}}}]",
            extra="        initContainers: [{name: i}]",
        )
    )
    assert r.admitted() == ["bare", "init", "own"]
    # cpu from defaultRequest, memory from default (a limit standing in for the request)
    assert usage(r, "bare") == {"cpu": "1", "memory": "6Gi"}
    assert usage(r, "own") == {"cpu": "1", "memory": "3Gi"}
    # The init container is defaulted too, and is larger than the container for memory.
    assert usage(r, "init") == {"cpu": "500m", "memory": "3Gi"}


def test_limit_ranges_of_other_namespaces_do_not_apply() -> None:
    r = run(
        QUEUE
        + limit_range("elsewhere", "[{type: Container, defaultRequest: {cpu: 3}}]", "other")
        + pods("bare", "[{name: c, resources: {requests: {memory: 1Gi}}}]")
    )
    assert usage(r, "bare") == {"memory": "1Gi"}


def test_summarize_keeps_the_first_default_and_the_tightest_bounds() -> None:
    """``limitrange.Summarize`` over LimitRanges read by name: the first default and
    default request of a resource win, the lowest max and the highest min."""
    a = decode(
        _doc(limit_range("a", "[{type: Container, default: {cpu: 1}, max: {cpu: 4}, min: {cpu: 100m}}]"))
    ).obj
    b = decode(
        _doc(
            limit_range(
                "b", "[{type: Container, default: {cpu: 3, memory: 1Gi}, max: {cpu: 2}, min: {cpu: 200m}}]"
            )
        )
    ).obj
    assert isinstance(a, LimitRange) and isinstance(b, LimitRange)
    container = summarize([a, b])["Container"]
    assert {k: str(v) for k, v in container.default.items()} == {"cpu": "1", "memory": "1Gi"}
    assert str(container.max["cpu"]) == "2"
    assert str(container.min["cpu"]) == "200m"
    # The engine reads them by name whatever order they arrive in.
    r = run(
        QUEUE
        + limit_range("b", "[{type: Container, default: {cpu: 3}}]")
        + limit_range("a", "[{type: Container, default: {cpu: 1}}]")
        + pods("w", "[{name: c}]")
    )
    assert usage(r, "w") == {"cpu": "1"}


def test_a_runtime_class_adds_its_overhead_to_each_pod() -> None:
    """``handlePodOverhead``: only for a pod that names the class and sets no overhead of its own;
    a class that does not exist, or has no overhead, adds nothing."""
    rc = runtime_class("kata", "{cpu: 250m, memory: 128Mi}") + runtime_class("plain", None)
    r = run(
        QUEUE
        + rc
        + pods(
            "kata",
            "[{name: c, resources: {requests: {cpu: 1}}}]",
            count=2,
            extra="        runtimeClassName: kata",
        )
        + pods(
            "own-overhead",
            "[{name: c, resources: {requests: {cpu: 1}}}]",
            extra="        runtimeClassName: kata\n        overhead: {cpu: 100m}",
        )
        + pods(
            "missing",
            "[{name: c, resources: {requests: {cpu: 1}}}]",
            extra="        runtimeClassName: gvisor",
        )
        + pods(
            "plain", "[{name: c, resources: {requests: {cpu: 1}}}]", extra="        runtimeClassName: plain"
        )
    )
    assert usage(r, "kata") == {"cpu": "2500m", "memory": "256Mi"}
    assert usage(r, "own-overhead") == {"cpu": "1100m"}
    assert usage(r, "missing") == {"cpu": "1"}
    assert usage(r, "plain") == {"cpu": "1"}


def test_a_new_limit_range_recounts_pending_workloads() -> None:
    """Kueue's workload controller watches LimitRanges and RuntimeClasses (``resourceUpdatesHandler``):
    a pending Workload is counted again with what they now add."""
    r = run(
        QUEUE
        + pods("big", "[{name: c, resources: {requests: {cpu: 8}}}]")
        + pods("bare", "[{name: c}]", count=4)
    )
    assert r.admitted() == ["bare", "big"]
    r.load(pods("late", "[{name: c}]", count=3))
    assert r.is_admitted("late")  # it asks for nothing
    r.delete("Workload", "default", "late")
    r.load(
        limit_range("defaults", "[{type: Container, defaultRequest: {cpu: 1}}]")
        + pods("later", "[{name: c}]", count=3)
    )
    assert not r.is_admitted("later")
    assert "insufficient unused quota for cpu in flavor default, 1 more needed" in r.pending_message("later")


def test_a_namespace_is_bounded_until_its_last_limit_range_goes() -> None:
    """``resourceUpdatesHandler`` on delete: a Workload refused by a namespace's LimitRanges
    is checked again when one goes, and queued once none is left; one updated stays one."""
    bound = "[{type: Container, max: {cpu: 2}}]"
    r = run(
        QUEUE
        + limit_range("a", bound)
        + limit_range("b", bound)
        + limit_range("a", "[{type: Container, max: {cpu: 1}}]")
        + pods("wide", "[{name: c, resources: {requests: {cpu: 3}}}]")
    )
    assert not r.is_admitted("wide")
    assert r.pending_message("wide").startswith("resources didn't satisfy LimitRange constraints: ")
    r.delete("LimitRange", "default", "a")
    r.delete("LimitRange", "default", "never-made")
    assert not r.is_admitted("wide")
    assert "limitRange max" in r.pending_message("wide")
    r.delete("LimitRange", "default", "b")
    assert r.is_admitted("wide")


# ---------------------------------------------------------------- ValidateAdmissibility


def test_a_request_above_its_limit_is_misconfigured() -> None:
    """``ValidateResources``, with the field errors' text as apimachinery prints them: the
    resources as a JSON list by name, several errors in brackets."""
    r = run(
        QUEUE
        + pods("one", "[{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]")
        + pods(
            "several",
            "[{name: a, resources: {requests: {memory: 2Gi, cpu: 2}, limits: {memory: 1Gi, cpu: 1}}},"
            " {name: b, resources: {requests: {cpu: 3}, limits: {cpu: 2}}}]",
            extra="        initContainers: [{name: i, resources: {requests: {cpu: 1}, limits: {cpu: 500m}}}]",
        )
        + pods("equal", "[{name: c, resources: {requests: {cpu: 1}, limits: {cpu: 1, memory: 1Gi}}}]")
    )
    assert r.admitted() == ["equal"]
    one = r.condition("one", "QuotaReserved")
    assert one is not None and (one["status"], one["reason"]) == ("False", "Misconfigured")
    assert one["message"] == (
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: "
        'Invalid value: ["cpu"]: requests must not exceed its limits'
    )
    above = "requests must not exceed its limits"
    assert r.pending_message("several") == (
        "resources validation failed: ["
        f'spec.podSets[0].template.spec.initContainers[0]: Invalid value: ["cpu"]: {above}, '
        f'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu","memory"]: {above}, '
        f'spec.podSets[0].template.spec.containers[1]: Invalid value: ["cpu"]: {above}]'
    )


def test_limit_range_bounds_are_checked_per_container_and_per_pod() -> None:
    """``ValidateLimitRange``: a container's larger of request and limit against ``max``, its
    smaller against ``min``, each only for resources both name; a Pod item against the pod's total."""
    lr = limit_range(
        "bounds",
        "[{type: Container, max: {cpu: 2}, min: {memory: 1Gi}}, {type: Pod, max: {cpu: 3}}]",
    )
    r = run(
        QUEUE
        + lr
        + pods("fits", "[{name: c, resources: {requests: {cpu: 1, memory: 1Gi}}}]")
        + pods("limit-too-high", "[{name: c, resources: {requests: {cpu: 1}, limits: {cpu: 3}}}]")
        + pods("too-small", "[{name: c, resources: {requests: {cpu: 1, memory: 512Mi}}}]")
        + pods(
            "pod-too-big",
            "[{name: a, resources: {requests: {cpu: 2}}}, {name: b, resources: {requests: {cpu: 2}}}]",
        )
    )
    assert r.admitted() == ["fits"]
    prefix = "resources didn't satisfy LimitRange constraints: "
    assert r.pending_message("limit-too-high") == (
        prefix + 'spec.podSets[0].template.spec.containers[0]: Invalid value: ["cpu"]: '
        "requests must not be above the limitRange max"
    )
    assert r.pending_message("too-small") == (
        prefix + 'spec.podSets[0].template.spec.containers[0]: Invalid value: ["memory"]: '
        "requests must not be below the limitRange min"
    )
    assert r.pending_message("pod-too-big") == (
        prefix
        + 'spec.podSets[0].template.spec: Invalid value: ["cpu"]: '
        + "requests must not be above the limitRange max"
    )


def test_pod_level_resources_are_defaulted_and_checked_too() -> None:
    """A pod that sets pod-level ``resources`` takes its Pod LimitRanges' defaults for them
    (``handlePodLimitRange``), and its pod-level request may not exceed its pod-level limit
    (``ValidateResources``); a pod without them is left alone."""
    lr = limit_range("pods", "[{type: Pod, defaultRequest: {cpu: 3}}]")
    r = run(
        QUEUE
        + lr
        + pods("pod-level", "[{name: c, resources: {requests: {cpu: 1}}}]", extra="        resources: {}")
        + pods("containers-only", "[{name: c, resources: {requests: {cpu: 1}}}]")
        + pods(
            "over",
            "[{name: c, resources: {requests: {cpu: 1}}}]",
            extra="        resources: {requests: {cpu: 2, memory: 1Gi}, limits: {cpu: 1}}",
        )
    )
    assert usage(r, "pod-level") == {"cpu": "3"}
    assert usage(r, "containers-only") == {"cpu": "1"}
    assert r.pending_message("over") == (
        "resources validation failed: spec.podSets[0].template.spec.resources: "
        'Invalid value: ["cpu"]: requests must not exceed its limits'
    )


def test_requests_above_limits_are_reported_before_limit_ranges() -> None:
    lr = limit_range("bounds", "[{type: Container, max: {cpu: 1}}]")
    r = run(QUEUE + lr + pods("both", "[{name: c, resources: {requests: {cpu: 4}, limits: {cpu: 3}}}]"))
    assert r.pending_message("both").startswith("resources validation failed: ")


def test_a_default_request_above_the_limit_is_caught_by_the_scheduler_only() -> None:
    """Kueue's workload controller checks the Workload as written, its scheduler as adjusted:
    a ``defaultRequest`` above a limit the container sets is only seen once it is a head."""
    lr = limit_range("defaults", "[{type: Container, defaultRequest: {memory: 3Gi}}]")
    r = run(
        STRICT
        + lr
        + pods("head", "[{name: c, resources: {requests: {cpu: 20}}}]", created="2024-01-01T00:00:00Z")
        + pods("behind", "[{name: c, resources: {limits: {memory: 1Gi}}}]", created="2024-01-01T00:01:00Z")
    )
    # StrictFIFO: the head that does not fit keeps everything behind it waiting, unchecked.
    assert r.condition("behind", "QuotaReserved") is None
    r.delete("Workload", "default", "head")
    assert r.pending_message("behind") == (
        "resources validation failed: spec.podSets[0].template.spec.containers[0]: "
        'Invalid value: ["memory"]: requests must not exceed its limits'
    )


def test_a_misconfigured_strict_fifo_head_blocks_its_queue() -> None:
    """The scheduler requeues such a head with Kueue's Generic reason (``nominate``,
    ``requeueIfNotPresent``): a StrictFIFO queue keeps it at its head."""
    r = run(
        STRICT
        + pods(
            "bad",
            "[{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]",
            created="2024-01-01T00:00:00Z",
        )
        + workload("after", "cq", created="2024-01-01T00:01:00Z")
    )
    assert r.admitted() == []
    assert r.condition("after", "QuotaReserved") is None
    r2 = run(
        QUEUE
        + pods(
            "bad",
            "[{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]",
            created="2024-01-01T00:00:00Z",
        )
        + workload("after", "cq", created="2024-01-01T00:01:00Z")
    )
    # BestEffortFIFO sets it aside and goes on.
    assert r2.admitted() == ["after"]


@pytest.mark.parametrize("gate_off", [False, True], ids=["granular", "legacy"])
def test_the_reason_follows_the_observability_gate(gate_off: bool) -> None:
    r = run(
        (GATE_OFF if gate_off else "")
        + QUEUE
        + pods("bad", "[{name: c, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}]")
    )
    cond = r.condition("bad", "QuotaReserved")
    assert cond is not None
    assert cond["reason"] == ("Pending" if gate_off else "Misconfigured")
    assert cond["message"].startswith("resources validation failed: ")


# ---------------------------------------------------------------- the objects themselves


def test_invalid_limit_ranges_and_runtime_classes_are_named() -> None:
    bad_type = decode(_doc(limit_range("x", "[{type: Node, max: {cpu: 1}}, {max: {cpu: 1}}]")))
    assert [str(e) for e in bad_type.errors] == [
        "spec.limits[0].type: unsupported value 'Node'; one of Pod, Container, PersistentVolumeClaim",
        "spec.limits[1].type: required field is missing; one of Pod, Container, PersistentVolumeClaim",
    ]
    no_handler = decode({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "x"}})
    assert [str(e) for e in no_handler.errors] == ["handler: required field is missing"]
    good = decode(_doc(runtime_class("kata", "{cpu: 1}"))).obj
    assert isinstance(good, RuntimeClass)


def _doc(text: str) -> dict[str, object]:
    found: dict[str, object] = yaml.safe_load(text.removesuffix("---"))
    return found
