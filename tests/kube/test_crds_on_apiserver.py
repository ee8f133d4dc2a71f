"""``kueuestream crds`` on a real kube-apiserver: installed, and validating Kueue's objects.

- the CRDs install (server-side apply) and become Established, served at
  kueue.x-k8s.io/v1beta2;
- every ResourceFlavor, WorkloadPriorityClass, Cohort, ClusterQueue,
  LocalQueue and Workload of ``config/examples`` is accepted, and what the
  server stores decodes to the very object the file decodes to: nothing we
  read is pruned, and fields we do not read (a v1beta2 ``priorityClassRef.group``,
  a container's image) are kept as written;
- a wrong type in a field we read is refused by the server, naming the field;
- a Workload's status is a subresource: writing the object leaves it alone,
  ``/status`` writes it, and a condition with a status Kueue does not know is
  refused.

Upstream: Kueue's generated CRDs (config/components/crd/bases) serve v1beta2
as the storage version with ``subresources.status`` on ClusterQueue, Cohort,
LocalQueue and Workload, and ``status.conditions`` as a list map keyed by type.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import orjson
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from kueuestream.admission.decode import decode
from kueuestream.agents.kube.api_calls import get_json
from kueuestream.agents.kube.crds import all_crds
from kueuestream.agents.sources.manifests import load_paths
from tests.kube.rig import KUEUE, call, cluster, create, merge_patch, namespace, unique

pytestmark = pytest.mark.kube

REPO = Path(__file__).resolve().parents[2]
CRD_KINDS = {c["spec"]["names"]["kind"]: c for c in all_crds()}
# What the server adds to any object; not part of what the user wrote.
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "creationTimestamp", "managedFields")
# Objects a `run` on this server would act on; the examples of them are deleted after.
MULTIKUEUE_KINDS = ("AdmissionCheck", "MultiKueueConfig", "MultiKueueCluster")


def examples() -> list[dict[str, Any]]:
    """The v1beta2 examples of our kinds: the CRDs serve v1beta2 only (no conversion webhook)."""
    docs = load_paths([str(REPO / "config" / "examples")]).docs
    return [
        d.manifest
        for d in docs
        if isinstance(d.manifest, dict)
        and d.manifest.get("kind") in CRD_KINDS
        and d.manifest.get("apiVersion") == "kueue.x-k8s.io/v1beta2"
    ]


def path_of(manifest: dict[str, Any]) -> str:
    plural = CRD_KINDS[manifest["kind"]]["spec"]["names"]["plural"]
    ns = manifest["metadata"].get("namespace")
    return f"{KUEUE}/namespaces/{ns}/{plural}" if ns else f"{KUEUE}/{plural}"


def comparable(manifest: dict[str, Any]) -> Any:
    """The decoded object, without the fields the server fills in."""
    decoded = decode(manifest)
    assert decoded.errors == [], decoded.errors
    assert decoded.obj is not None
    data = decoded.obj.model_dump()
    for field in ("uid", "generation", "creation_timestamp"):
        data["metadata"].pop(field, None)
    return data


async def test_crds_are_served_and_every_example_round_trips(kube_config: str) -> None:
    async with cluster(kube_config) as conn:
        served = await get_json(conn.api, KUEUE)
        names = {r["kind"]: r for r in served["resources"] if "/" not in r["name"]}
        assert set(CRD_KINDS) <= set(names)
        assert names["Workload"]["namespaced"] and not names["ClusterQueue"]["namespaced"]
        assert "kwl" in names["Workload"].get("shortNames", [])

        ns = await namespace(conn, "examples")
        created: list[str] = []
        cohort = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Cohort",
            "metadata": {"name": "org"},
            "spec": {"parentName": "root", "fairSharing": {"weight": "2"}},
        }
        manifests = [*examples(), cohort]
        assert {"ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue", "Workload"} <= {
            m["kind"] for m in manifests
        }
        try:
            await round_trip(conn, manifests, ns, created)
        finally:
            # A MultiKueue example left on this shared server would make every later
            # `run` on it link to the example's workers and write their status.
            for path in reversed(created):
                await call(conn, "DELETE", path, None)


async def round_trip(conn: Any, manifests: list[dict[str, Any]], ns: str, created: list[str]) -> None:
    """Create each manifest, then check the server stores what Kueuestream reads.

    The paths of the MultiKueue objects created are appended to ``created``.
    """
    suffix = unique("x")
    for i, original in enumerate(manifests):
        sent = copy.deepcopy(original)
        meta = sent["metadata"]
        # Cluster-scoped names are shared by every test on this server, and
        # examples of different folders share names.
        meta["name"] = f"{meta['name']}-{suffix}-{i}"
        if CRD_KINDS[sent["kind"]]["spec"]["scope"] == "Namespaced":
            meta["namespace"] = ns
        meta.pop("creationTimestamp", None)
        stored = await create(conn, path_of(sent), sent)
        if sent["kind"] in MULTIKUEUE_KINDS:
            created.append(f"{path_of(sent)}/{meta['name']}")
        if sent.get("status"):
            # Status is a subresource: written on its own, as Kueue writes it.
            path = f"{path_of(sent)}/{meta['name']}/status"
            stored = await merge_patch(conn, path, {"status": sent["status"]})
        assert comparable(stored) == comparable(sent), f"{sent['kind']} {meta['name']}"
        # Fields Kueuestream does not read are stored as written.
        stored_spec = stored.get("spec")
        for key, value in (sent.get("spec") or {}).items():
            assert stored_spec[key] == value, f"{sent['kind']} {meta['name']}: spec.{key}"


def workload(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"namespace": ns, "name": name},
        "spec": {
            "queueName": "main",
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "batch"},
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "terminationGracePeriodSeconds": 5,
                            "containers": [
                                {
                                    "name": "c",
                                    "image": "registry.example/trainer:1",
                                    "command": ["train", "--epochs=3"],
                                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}},
                                }
                            ],
                        }
                    },
                }
            ],
        },
    }


async def refused(conn: Any, method: str, path: str, body: Any, **kw: Any) -> str:
    with pytest.raises(ApiException) as caught:
        await call(conn, method, path, body, **kw)
    assert caught.value.status == 422, caught.value.body
    message: str = orjson.loads(caught.value.body)["message"]
    return message


async def test_workloads_validate_and_keep_what_they_carry(kube_config: str) -> None:
    async with cluster(kube_config) as conn:
        ns = await namespace(conn, "wl")
        name = unique("wl")
        sent = workload(ns, name)
        stored = await create(conn, f"{KUEUE}/namespaces/{ns}/workloads", sent)
        assert stored["spec"]["priorityClassRef"]["group"] == "kueue.x-k8s.io"
        assert stored["spec"]["podSets"][0]["template"] == sent["spec"]["podSets"][0]["template"]

        bad = workload(ns, unique("wl"))
        bad["spec"]["podSets"][0]["count"] = "two"
        message = await refused(conn, "POST", f"{KUEUE}/namespaces/{ns}/workloads", bad)
        assert "spec.podSets[0].count" in message and "integer" in message

        bad = workload(ns, unique("wl"))
        bad["spec"]["podSets"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = (
            "lots"
        )
        message = await refused(conn, "POST", f"{KUEUE}/namespaces/{ns}/workloads", bad)
        assert "spec.podSets[0].template.spec.containers[0].resources.requests.cpu" in message

        cq = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": unique("cq")},
            "spec": {
                "queueingStrategy": "Sometimes",
                "resourceGroups": [
                    {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu"}]}]}
                ],
            },
        }
        message = await refused(conn, "POST", f"{KUEUE}/clusterqueues", cq)
        assert 'spec.queueingStrategy: Unsupported value: "Sometimes"' in message
        assert "StrictFIFO" in message and "BestEffortFIFO" in message
        assert "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota: Required value" in message


async def test_workload_status_is_a_subresource(kube_config: str) -> None:
    async with cluster(kube_config) as conn:
        ns = await namespace(conn, "status")
        name = unique("wl")
        path = f"{KUEUE}/namespaces/{ns}/workloads/{name}"
        sent = workload(ns, name)
        sent["status"] = {"conditions": [{"type": "Admitted", "status": "True", "reason": "Sneaky"}]}
        stored = await create(conn, f"{KUEUE}/namespaces/{ns}/workloads", sent)
        assert stored.get("status") in (None, {})  # the main resource does not write status

        status = {
            "status": {
                "admission": {
                    "clusterQueue": "cq-a",
                    "podSetAssignments": [
                        {
                            "name": "main",
                            "flavors": {"cpu": "default"},
                            "resourceUsage": {"cpu": "1"},
                            "count": 2,
                        }
                    ],
                },
                "conditions": [
                    {
                        "type": "QuotaReserved",
                        "status": "True",
                        "reason": "QuotaReserved",
                        "message": "Quota reserved in ClusterQueue cq-a",
                        "lastTransitionTime": "2026-11-23T10:00:00Z",
                    }
                ],
            }
        }
        written = await merge_patch(conn, f"{path}/status", status)
        assert written["status"] == status["status"]

        # Writing the object again leaves the status as it is.
        again = await merge_patch(conn, path, {"spec": {"active": False}, "status": {"conditions": []}})
        assert again["status"] == status["status"] and again["spec"]["active"] is False

        wrong = {
            "status": {"conditions": [{"type": "Admitted", "status": "Maybe", "reason": "X", "message": ""}]}
        }
        message = await refused(
            conn, "PATCH", f"{path}/status", wrong, content_type="application/merge-patch+json"
        )
        assert "status.conditions[0].status" in message and '"Unknown"' in message
