"""Random admission scenarios for the side-by-side check with upstream Kueue's scheduler.

Each scenario is a small cluster (flavors, a cohort tree, ClusterQueues with
borrowing and lending limits, namespaces and LocalQueues) and a backlog of
Workloads, all present from the start; once the cycles reach quiescence, the
jobs of some of the Workloads then admitted complete (:data:`FINISH`), some
Workloads are deleted (:data:`DELETE`), a ClusterQueue's nominal quota may
change (:data:`UPDATE`), and the cycles run to quiescence again: the outcome
is what they reach then, which upstream's controllers cannot change
afterwards. Every field the API server would default is written out, since
upstream's side of the check applies no defaulting.

What varies: flavor order and fungibility (``whenCanBorrow`` /
``whenCanPreempt``), one or two resource groups, nominal quotas (zero
included), borrowing and lending limits, cohorts with their own quotas and
parents, namespace selectors, queueing strategy, priorities, creation times,
several pod sets, partial admission (``minCount``), Workloads that can never
fit, Workloads whose LocalQueue or ClusterQueue is missing, flavors' node
labels, taints and tolerations against pod sets' node selectors, required
node affinity and tolerations, how pod sets' requests are written (init
containers, sidecars, pod overhead, limits standing for missing requests,
milli-CPU, pod-level resources, requests above limits), LimitRanges and
RuntimeClasses that add to them or refuse them, ClusterQueues stopped with ``Hold`` or ``HoldAndDrain`` (and
restarted by their update), inactive Workloads, Kueue's feature gates that
change scheduling turned off (:data:`GATES`), which Workloads finish or are
deleted, a ClusterQueue's quota changing, admission checks (on every flavor or
some, active, inactive or missing) and which Workloads' checks turn Ready, Retry
or Rejected;
optionally preemption policies with a second wave, and fair sharing with
weights.
"""

from __future__ import annotations

import copy
import datetime
import random
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
CONFIG_API = "config.kueue.x-k8s.io/v1beta2"
T0 = 1_700_000_000
FUNGIBILITY = ("MayStopSearch", "TryNextFlavor")
RESOURCES = ("cpu", "memory", "example.com/gpu")
# Marks the Workloads of a scenario's second wave (upstream/parity_test.go reads it too).
WAVE = "parity.kueuestream.io/wave"
# "true": the Workload's job completes once the first wave has settled, if it then holds
# quota and is not being evicted (upstream/parity_test.go reads it too).
FINISH = "parity.kueuestream.io/finish"
# "true": the Workload is deleted once the first wave has settled, pending or admitted.
DELETE = "parity.kueuestream.io/delete"
# "true": a ClusterQueue's new spec, applied once the first wave has settled.
UPDATE = "parity.kueuestream.io/update"
# Ready, Retry or Rejected: once the first wave has settled, the controllers of the
# Workload's admission checks set them all to this state, if it then holds quota
# (upstream/parity_test.go reads it too).
CHECKS_STATE = "parity.kueuestream.io/checks-state"
CHECK_CONTROLLER = "example.com/parity-check"


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}Gi" if resource == "memory" else str(amount)


def _amount(quantity: str) -> int:
    return int(quantity.removesuffix("Gi"))


def _rfc3339(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _groups(
    rng: random.Random, flavors: list[str], covered: list[str], *, nominal_max: int, limits: bool
) -> list[dict[str, Any]]:
    """Resource groups over ``covered``: one group, or two with disjoint resources and flavors."""
    if len(covered) >= 2 and len(flavors) >= 2 and rng.random() < 0.25:
        split = rng.randint(1, len(covered) - 1)
        fsplit = rng.randint(1, len(flavors) - 1)
        parts = [(covered[:split], flavors[:fsplit]), (covered[split:], flavors[fsplit:])]
    else:
        parts = [(covered, flavors)]
    groups = []
    for resources, group_flavors in parts:
        chosen = rng.sample(group_flavors, rng.randint(1, len(group_flavors)))
        groups.append(
            {
                "coveredResources": list(resources),
                "flavors": [
                    {"name": flavor, "resources": [_quota(rng, r, nominal_max, limits) for r in resources]}
                    for flavor in chosen
                ],
            }
        )
    return groups


def _quota(rng: random.Random, resource: str, nominal_max: int, limits: bool) -> dict[str, Any]:
    """A quota; borrowing and lending limits only with a cohort (or parent) to borrow from and lend to."""
    nominal = rng.randint(0, nominal_max)
    quota: dict[str, Any] = {"name": resource, "nominalQuota": _quantity(resource, nominal)}
    if limits and rng.random() < 0.3:
        quota["borrowingLimit"] = _quantity(resource, rng.randint(0, nominal_max))
    if limits and rng.random() < 0.25:
        quota["lendingLimit"] = _quantity(resource, rng.randint(0, nominal))
    return quota


def _preemption(rng: random.Random) -> dict[str, Any]:
    """A ClusterQueue's preemption policies, every combination Kueue accepts.

    Kueue's validation refuses ``borrowWithinCohort`` other than Never where
    ``reclaimWithinCohort`` is Never.
    """
    reclaim = rng.choice(["Never", "LowerPriority", "Any"])
    borrow: dict[str, Any] = {
        "policy": "Never" if reclaim == "Never" else rng.choice(["Never", "LowerPriority"])
    }
    if borrow["policy"] == "LowerPriority" and rng.random() < 0.4:
        borrow["maxPriorityThreshold"] = rng.choice([0, 1, 5])
    return {
        "reclaimWithinCohort": reclaim,
        "borrowWithinCohort": borrow,
        "withinClusterQueue": rng.choice(["Never", "LowerPriority", "LowerOrNewerEqualPriority"]),
    }


def _fair_sharing(rng: random.Random) -> dict[str, Any]:
    """A Configuration turning fair sharing on, with one of the strategy lists Kueue accepts."""
    strategies = rng.choice(
        [
            ["LessThanOrEqualToFinalShare", "LessThanInitialShare"],
            ["LessThanOrEqualToFinalShare"],
            ["LessThanInitialShare"],
        ]
    )
    return {
        "apiVersion": CONFIG_API,
        "kind": "Configuration",
        "fairSharing": {"preemptionStrategies": strategies},
    }


def _weigh(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """Random ``fairSharing.weight``s on Cohorts and ClusterQueues; 0 included, unset kept for some."""
    for doc in docs:
        if doc["kind"] in ("Cohort", "ClusterQueue") and rng.random() < 0.7:
            doc["spec"]["fairSharing"] = {"weight": rng.choice(["0", "500m", "1", "1", "2", "3"])}


ZONES = ("a", "b", "c")
TIERS = ("gold", "silver")


def _requirement(rng: random.Random) -> dict[str, Any]:
    key, values = rng.choice([("zone", ZONES), ("tier", TIERS)])
    operator = rng.choice(["In", "In", "NotIn", "Exists", "DoesNotExist"])
    requirement: dict[str, Any] = {"key": key, "operator": operator}
    if operator in ("In", "NotIn"):
        requirement["values"] = sorted(rng.sample(values, rng.randint(1, 2)))
    return requirement


def _toleration(rng: random.Random) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": "dedicated", "operator": rng.choice(["Equal", "Exists"])}
    if toleration["operator"] == "Equal":
        toleration["value"] = rng.choice(["ml", "batch"])
    if rng.random() < 0.7:
        toleration["effect"] = rng.choice(["NoSchedule", "NoExecute"])
    return toleration


def _place(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """Node labels and taints on some flavors; node selectors, required node affinity and
    tolerations on some pod sets (Kueue's ``checkFlavorForPodSets``)."""
    for doc in docs:
        if doc["kind"] == "ResourceFlavor":
            spec = doc["spec"]
            if rng.random() < 0.45:
                spec["nodeLabels"] = {"zone": rng.choice(ZONES)}
                if rng.random() < 0.35:
                    spec["nodeLabels"]["tier"] = rng.choice(TIERS)
            if rng.random() < 0.2:
                effect = rng.choice(["NoSchedule", "NoExecute", "PreferNoSchedule"])
                spec["nodeTaints"] = [
                    {"key": "dedicated", "value": rng.choice(["ml", "batch"]), "effect": effect}
                ]
                if rng.random() < 0.25:
                    spec["tolerations"] = [_toleration(rng)]
        elif doc["kind"] == "Workload":
            for pod_set in doc["spec"]["podSets"]:
                pod = pod_set["template"]["spec"]
                draw = rng.random()
                if draw < 0.2:
                    pod["nodeSelector"] = {"zone": rng.choice(ZONES)}
                elif draw < 0.32:
                    terms = [
                        {"matchExpressions": [_requirement(rng) for _ in range(rng.randint(1, 2))]}
                        for _ in range(rng.randint(1, 2))
                    ]
                    required = {"nodeSelectorTerms": terms}
                    pod["affinity"] = {
                        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}
                    }
                if rng.random() < 0.15:
                    pod["tolerations"] = [_toleration(rng)]


def _pod_shapes(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """Requests written as users write them, which Kueue sums as the kubelet does
    (``PodRequests``: the larger of the containers' sum and each init container,
    sidecars counted with the containers, plus the overhead) once its workload
    controller has taken missing requests from limits (``AdjustResources``)."""
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            for group in doc["spec"]["resourceGroups"]:
                for flavor in group["flavors"]:
                    for quota in flavor["resources"]:
                        if quota["name"] == "cpu" and rng.random() < 0.15:
                            quota["nominalQuota"] = f"{int(quota['nominalQuota']) * 1000 + 500}m"
            continue
        if doc["kind"] != "Workload":
            continue
        for pod_set in doc["spec"]["podSets"]:
            pod = pod_set["template"]["spec"]
            container = pod["containers"][0]
            requests = container["resources"]["requests"]
            covered = [r for r in requests if r in RESOURCES]
            if "cpu" in requests and requests["cpu"] != "0" and rng.random() < 0.15:
                requests["cpu"] = f"{int(requests['cpu']) * 1000 - rng.choice([0, 0, 500])}m"
            draw = rng.random()
            if draw < 0.25 and covered:
                init: dict[str, Any] = {"name": "init", "image": "registry.k8s.io/pause:3.9"}
                if draw < 0.1:
                    init |= {"name": "sidecar", "restartPolicy": "Always"}
                ceiling = 1 if draw < 0.1 else 4
                init["resources"] = {"requests": {r: _quantity(r, rng.randint(0, ceiling)) for r in covered}}
                pod["initContainers"] = [init]
            if covered and rng.random() < 0.1:
                resource = rng.choice(covered)
                pod["overhead"] = {resource: "500m" if resource == "cpu" else _quantity(resource, 1)}
            draw = rng.random()
            if draw < 0.1:
                resource = rng.choice(sorted(requests))
                container["resources"]["limits"] = {resource: requests.pop(resource)}
            elif draw < 0.2:
                container["resources"]["limits"] = dict(requests)


def _pod_rules(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """What the API server would make of the pods, as Kueue's workload controller reads it
    (``AdjustResources``, ``ValidateAdmissibility``).

    In about a third of scenarios, LimitRanges in some namespaces: a Container
    item with defaults and default requests for some resources and, at times, a
    max or min, sometimes split over two LimitRanges (``limitrange.Summarize``
    keeps the first default and the tightest bounds), and at times a Pod item
    with a max. In about a quarter, a RuntimeClass with a pod overhead, named by
    some pod sets that set none (``handlePodOverhead``), and by some a class that
    does not exist. Some containers then leave a request out for the defaults to
    fill, and a few ask for more than their limit (``ValidateResources``).
    """
    namespaces = [d["metadata"]["name"] for d in docs if d["kind"] == "Namespace"]
    workloads = [d for d in docs if d["kind"] == "Workload"]
    added: list[dict[str, Any]] = []
    if rng.random() < 0.35:
        for ns in namespaces:
            if rng.random() < 0.4:
                continue
            items: list[dict[str, Any]] = []
            container: dict[str, Any] = {"type": "Container"}
            for resource in rng.sample(RESOURCES[:2], rng.randint(1, 2)):
                amount = rng.randint(1, 3)
                draw = rng.random()
                if draw < 0.7:
                    container.setdefault("default", {})[resource] = _quantity(resource, amount + 1)
                if draw < 0.5 or draw >= 0.7:
                    container.setdefault("defaultRequest", {})[resource] = _quantity(resource, amount)
                if rng.random() < 0.3:
                    container.setdefault("max", {})[resource] = _quantity(resource, rng.randint(3, 6))
                if rng.random() < 0.15:
                    container.setdefault("min", {})[resource] = _quantity(resource, 1)
            items.append(container)
            if rng.random() < 0.2:
                items.append({"type": "Pod", "max": {"cpu": str(rng.randint(4, 10))}})
            split = len(items) == 1 and rng.random() < 0.3
            second = {"type": "Container", "default": {"cpu": "3"}, "max": {"cpu": "5"}}
            for name, limits in (
                [("limits-a", items), ("limits-b", [second])] if split else [("limits", items)]
            ):
                added.append(
                    {
                        "apiVersion": "v1",
                        "kind": "LimitRange",
                        "metadata": {"name": name, "namespace": ns},
                        "spec": {"limits": limits},
                    }
                )
    runtime = rng.random() < 0.25
    if runtime:
        added.append(
            {
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "sandboxed"},
                "handler": "kata",
                "overhead": {"podFixed": {"cpu": rng.choice(["250m", "1"]), "memory": "1Gi"}},
            }
        )
    for wl in workloads:
        for pod_set in wl["spec"]["podSets"]:
            pod = pod_set["template"]["spec"]
            resources = pod["containers"][0].setdefault("resources", {})
            requests = resources.setdefault("requests", {})
            if runtime and "overhead" not in pod and rng.random() < 0.3:
                pod["runtimeClassName"] = "sandboxed" if rng.random() < 0.8 else "missing"
            draw = rng.random()
            if added and draw < 0.3 and requests:
                del requests[rng.choice(sorted(requests))]
            elif draw > 0.95 and requests.get("cpu", "0") != "0" and not resources.get("limits"):
                resources["limits"] = {"cpu": "500m"}
    # Before the ClusterQueues, as a cluster has them before anything is queued.
    docs[0:0] = added


def _pod_level(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """In about a fifth of scenarios, some pod sets ask for cpu or memory as a whole pod
    (KEP-2837: k8s ``PodRequests`` takes them over the containers' sum), as a request, a
    limit alone or, rarely, a request above its limit; and a Pod LimitRange item may then
    give them a default request (``handlePodLimitRange``)."""
    if rng.random() >= 0.2:
        return
    for doc in docs:
        if doc["kind"] == "LimitRange" and rng.random() < 0.5:
            for item in doc["spec"]["limits"]:
                if item["type"] == "Pod":
                    item["defaultRequest"] = {"memory": "1Gi"}
        if doc["kind"] != "Workload":
            continue
        for pod_set in doc["spec"]["podSets"]:
            if rng.random() >= 0.3:
                continue
            resource = rng.choice(RESOURCES[:2])
            amount = _quantity(resource, rng.randint(1, 4))
            draw = rng.random()
            if draw < 0.6:
                pod_resources = {"requests": {resource: amount}}
            elif draw < 0.9:
                pod_resources = {"limits": {resource: amount}}
            else:
                pod_resources = {"requests": {resource: _quantity(resource, 5)}, "limits": {resource: amount}}
            pod_set["template"]["spec"]["resources"] = pod_resources


def _stops(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """Some ClusterQueues stopped (``stopPolicy`` ``Hold`` or ``HoldAndDrain``) and some
    Workloads inactive (``spec.active: false``)."""
    for doc in docs:
        if doc["kind"] == "ClusterQueue" and rng.random() < 0.12:
            doc["spec"]["stopPolicy"] = rng.choice(["Hold", "HoldAndDrain"])
        elif doc["kind"] == "Workload" and rng.random() < 0.07:
            doc["spec"]["active"] = False


# Gates of Kueue 0.19 that change what the scheduler decides or writes, all on by default.
GATES = ("UnadmittedWorkloadsObservability", "PartialAdmission", "PrioritySortingWithinCohort")


def _gates(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """In about one scenario of six, one or two of :data:`GATES` turned off in the
    Configuration's ``featureGates`` (a Configuration of their own without fair sharing)."""
    if rng.random() >= 0.17:
        return
    gates = {gate: False for gate in sorted(rng.sample(GATES, rng.randint(1, 2)))}
    config = next((d for d in docs if d["kind"] == "Configuration"), None)
    if config is None:
        config = {"apiVersion": CONFIG_API, "kind": "Configuration"}
        docs.insert(0, config)
    config["featureGates"] = gates


def scenario(
    seed: int,
    *,
    preemption: bool = False,
    fair_sharing: bool = False,
    placement: bool = True,
    finishing: bool = True,
    checks: bool = True,
    shapes: bool = True,
    pod_rules: bool = True,
) -> list[dict[str, Any]]:
    """The manifests of scenario ``seed`` (the same seed gives the same scenario).

    With ``preemption``, ClusterQueues take random preemption policies, and
    about half of the Workloads, of higher priorities on the whole, arrive in a
    second wave (annotated :data:`WAVE`) once the first has settled, so that
    they find the quota taken. With ``fair_sharing``, a Configuration turns
    fair sharing on with random preemption strategies, and Cohorts and
    ClusterQueues take random weights; the rest of the scenario is the one
    the seed gives without it. ``placement=False`` leaves out node labels,
    taints, selectors and tolerations (:func:`_place`), and ``finishing=False``
    the Workloads that finish or are deleted (:func:`_finish`) and the
    ClusterQueue update (:func:`_update_quota`), and ``checks=False`` the
    admission checks (:func:`_admission_checks`), and ``shapes=False`` the
    pod shapes, stopped ClusterQueues, inactive Workloads and feature gates
    turned off (:func:`_pod_shapes`, :func:`_stops`, :func:`_gates`), and
    ``pod_rules=False`` the LimitRanges, RuntimeClasses, requests above
    limits and pod-level resources (:func:`_pod_rules`, :func:`_pod_level`),
    as scenarios were before they had them.
    """
    docs = _scenario(seed, preemption)
    if placement:
        _place(random.Random(f"placement-{seed}"), docs)  # its own draws, as fair sharing's
    if shapes:
        _pod_shapes(random.Random(f"pod-shapes-{seed}"), docs)
        _stops(random.Random(f"stops-{seed}"), docs)
    if pod_rules:
        _pod_rules(random.Random(f"pod-rules-{seed}"), docs)
        _pod_level(random.Random(f"pod-level-{seed}"), docs)
    if finishing:
        _finish(random.Random(f"finishing-{seed}"), docs)
    if checks:
        _admission_checks(random.Random(f"checks-{seed}"), docs)
    if fair_sharing:
        fair = random.Random(f"fair-sharing-{seed}")  # its own draws: the rest stays as without
        _weigh(fair, docs)
        docs.insert(0, _fair_sharing(fair))
    if shapes:
        _gates(random.Random(f"gates-{seed}"), docs)
    if finishing:
        # After the weights: the new spec keeps the ClusterQueue's weight and changes a quota only.
        _update_quota(random.Random(f"quota-update-{seed}"), docs)
    return docs


def _finish(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """About a third of the first wave's Workloads marked to finish once it has settled,
    and about one in eight to be deleted then."""
    for doc in docs:
        if doc["kind"] != "Workload":
            continue
        annotations = doc["metadata"].setdefault("annotations", {})
        draw = rng.random()
        if annotations.get(WAVE) != "2" and draw < 0.45:
            annotations[FINISH if draw < 0.33 else DELETE] = "true"
        if not annotations:
            del doc["metadata"]["annotations"]


def _admission_checks(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """In about a third of scenarios, AdmissionChecks that some ClusterQueues require.

    One or two checks; each is active, inactive, or never created (a ClusterQueue
    naming one of those two is inactive, Kueue's ``updateWithAdmissionChecks``).
    A ClusterQueue requires some of them, each on all its flavors or some
    (``admissionChecksStrategy``). About half of the Workloads are marked
    :data:`CHECKS_STATE`: Ready mostly, Retry (without ``requeueAfterSeconds``,
    so no backoff) or Rejected in about one case of six each.
    """
    if rng.random() >= 0.35:
        return
    names = [f"check-{i}" for i in range(rng.randint(1, 2))]
    created = []
    for name in names:
        draw = rng.random()
        if draw < 0.08:
            continue
        active = draw >= 0.16
        condition = {
            "type": "Active",
            "status": "True" if active else "False",
            "reason": "Active" if active else "Inactive",
            "message": "",
            "lastTransitionTime": _rfc3339(T0),
        }
        created.append(
            {
                "apiVersion": API,
                "kind": "AdmissionCheck",
                "metadata": {"name": name},
                "spec": {"controllerName": CHECK_CONTROLLER},
                "status": {"conditions": [condition]},
            }
        )
    first_queue = next(i for i, d in enumerate(docs) if d["kind"] == "ClusterQueue")
    docs[first_queue:first_queue] = created
    for doc in docs:
        if doc["kind"] == "ClusterQueue" and rng.random() < 0.5:
            flavors = sorted({f["name"] for g in doc["spec"]["resourceGroups"] for f in g["flavors"]})
            rules = []
            for name in sorted(rng.sample(names, rng.randint(1, len(names)))):
                rule: dict[str, Any] = {"name": name}
                if len(flavors) > 1 and rng.random() < 0.5:
                    rule["onFlavors"] = sorted(rng.sample(flavors, rng.randint(1, len(flavors) - 1)))
                rules.append(rule)
            doc["spec"]["admissionChecksStrategy"] = {"admissionChecks": rules}
        elif doc["kind"] == "Workload" and rng.random() < 0.5:
            state = rng.choices(["Ready", "Retry", "Rejected"], weights=[4, 1, 1])[0]
            doc["metadata"].setdefault("annotations", {})[CHECKS_STATE] = state


def _update_quota(rng: random.Random, docs: list[dict[str, Any]]) -> None:
    """In about two scenarios of five, one ClusterQueue's new spec (:data:`UPDATE`): one
    nominal quota up or down by 1 to 3, never below its lending limit; a stopped
    ClusterQueue is started again in half of them."""
    queues = [d for d in docs if d["kind"] == "ClusterQueue"]
    if rng.random() >= 0.4:
        return
    updated = copy.deepcopy(rng.choice(queues))
    quotas = [q for g in updated["spec"]["resourceGroups"] for f in g["flavors"] for q in f["resources"]]
    quota = rng.choice(quotas)
    floor = _amount(quota.get("lendingLimit", "0"))
    change = rng.choice([-3, -2, -1, 1, 2, 3])
    if quota["nominalQuota"].endswith("m"):  # milli-CPU (:func:`_pod_shapes`)
        milli = max(floor * 1000, int(quota["nominalQuota"].removesuffix("m")) + change * 1000)
        quota["nominalQuota"] = f"{milli}m"
    else:
        nominal = max(floor, _amount(quota["nominalQuota"]) + change)
        quota["nominalQuota"] = _quantity(quota["name"], nominal)
    if updated["spec"]["stopPolicy"] != "None" and rng.random() < 0.5:
        updated["spec"]["stopPolicy"] = "None"
    updated["metadata"]["annotations"] = {UPDATE: "true"}
    docs.append(updated)


def _scenario(seed: int, preemption: bool) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    flavors = [f"flavor-{i}" for i in range(rng.randint(1, 3))]
    covered = sorted(rng.sample(RESOURCES, rng.randint(1, 2)), key=RESOURCES.index)
    docs: list[dict[str, Any]] = [
        {"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": f}, "spec": {}} for f in flavors
    ]

    cohorts: list[str] = []
    for c in range(rng.randint(0, 3)):
        name = f"cohort-{c}"
        spec: dict[str, Any] = {}
        if cohorts and rng.random() < 0.5:
            spec["parentName"] = rng.choice(cohorts)
        if rng.random() < 0.4:
            spec["resourceGroups"] = _groups(
                rng, flavors, covered, nominal_max=6, limits="parentName" in spec
            )
        cohorts.append(name)
        docs.append({"apiVersion": API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec})
    # A cohort named only by ClusterQueues exists implicitly.
    cohort_names = [*cohorts, "implicit"] if cohorts else ["implicit", ""]

    namespaces = [f"ns-{i}" for i in range(rng.randint(1, 3))]
    for ns in namespaces:
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": ns, "labels": {"team": rng.choice(["a", "b"])}},
            }
        )

    queues = [f"cq-{i}" for i in range(rng.randint(1, 4))]
    for cq in queues:
        selector: dict[str, Any] = {}
        if rng.random() < 0.15:
            selector = {"matchLabels": {"team": rng.choice(["a", "b"])}}
        cohort = rng.choice(cohort_names)
        spec = {
            "namespaceSelector": selector,
            "queueingStrategy": rng.choice(["BestEffortFIFO", "BestEffortFIFO", "StrictFIFO"]),
            "resourceGroups": _groups(rng, flavors, covered, nominal_max=8, limits=bool(cohort)),
            "flavorFungibility": {
                "whenCanBorrow": rng.choice(FUNGIBILITY),
                "whenCanPreempt": rng.choice(FUNGIBILITY),
            },
            "preemption": _preemption(rng)
            if preemption
            else {
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "Never"},
                "withinClusterQueue": "Never",
            },
            "stopPolicy": "None",
        }
        if cohort:
            spec["cohortName"] = cohort
        docs.append({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cq}, "spec": spec})

    local_queues: list[tuple[str, str]] = []
    for ns in namespaces:
        for cq in rng.sample(queues, rng.randint(1, len(queues))):
            name = f"lq-{cq}"
            local_queues.append((ns, name))
            docs.append(
                {
                    "apiVersion": API,
                    "kind": "LocalQueue",
                    "metadata": {"name": name, "namespace": ns},
                    "spec": {"clusterQueue": cq},
                }
            )
    times = rng.sample(range(1000), rng.randint(1, 14))
    for w, offset in enumerate(times):
        second = preemption and rng.random() < 0.5
        ns, queue = rng.choice(local_queues)
        pod_sets = []
        for p in range(1 if rng.random() < 0.75 else 2):
            count = rng.randint(1, 4)
            requests = {r: _quantity(r, rng.randint(0 if len(covered) > 1 else 1, 3)) for r in covered}
            if rng.random() < 0.05:
                requests["example.com/other"] = "1"  # a resource no ClusterQueue covers
            pod_set: dict[str, Any] = {
                "name": f"ps-{p}",
                "count": count,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "c",
                                "image": "registry.k8s.io/pause:3.9",
                                "resources": {"requests": requests},
                            }
                        ],
                    }
                },
            }
            if count > 1 and rng.random() < 0.25:
                pod_set["minCount"] = rng.randint(1, count - 1)
            pod_sets.append(pod_set)
        workload: dict[str, Any] = {
            "apiVersion": API,
            "kind": "Workload",
            "metadata": {
                "name": f"wl-{w:02d}",
                "namespace": ns,
                "creationTimestamp": _rfc3339(T0 + offset + (1000 if second else 0)),
            },
            "spec": {
                "queueName": queue,
                "priority": rng.choice([1, 5, 5, 10] if second else [0, 0, 1, 5]),
                "active": True,
                "podSets": pod_sets,
            },
        }
        if preemption:
            # Kueue's preemption messages name the preemptor's UID.
            workload["metadata"]["uid"] = f"{seed:06d}-{w:02d}"
            if second:
                workload["metadata"]["annotations"] = {WAVE: "2"}
        docs.append(workload)
    return docs
