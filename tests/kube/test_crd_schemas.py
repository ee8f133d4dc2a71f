"""The CRDs of ``kueuestream crds`` are structural, as an API server requires (no server needed).

The API server refuses a CRD whose schema is not structural; these checks
name the offending node, where the server would only say the CRD is invalid.
Whether the server accepts them, and validates and prunes objects with them,
is tested against a real one in ``test_crds_on_apiserver.py``.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from kueuestream.agents.cli.main import main
from kueuestream.agents.kube.crds import PRESERVE, SchemaError, all_crds, openapi_schema

KINDS = {
    "ResourceFlavor",
    "AdmissionCheck",
    "WorkloadPriorityClass",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
    "MultiKueueConfig",
    "MultiKueueCluster",
}


def structural_problems(node: Any, path: str = "") -> list[str]:
    """Every node that breaks the rules of a structural schema."""
    if not isinstance(node, dict):
        return [f"{path}: not a schema object"]
    problems = []
    for key in ("$ref", "$defs", "title", "default", "const", "allOf", "oneOf", "not"):
        if key in node:
            problems.append(f"{path}: has {key}")
    int_or_string = node.get("x-kubernetes-int-or-string") is True
    if "type" not in node and not node.get(PRESERVE) and not int_or_string:
        problems.append(f"{path}: no type")
    if "anyOf" in node and not int_or_string:
        problems.append(f"{path}: anyOf outside int-or-string")
    if node.get("x-kubernetes-list-type") == "map":
        keys = node.get("x-kubernetes-list-map-keys") or []
        required = node["items"].get("required") or []
        problems += [f"{path}: list map key {k} is not required" for k in keys if k not in required]
    for name, child in (node.get("properties") or {}).items():
        problems += structural_problems(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        problems += structural_problems(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        problems += structural_problems(node["items"], f"{path}[]")
    return problems


def test_every_crd_is_structural_v1beta2_with_its_status_subresource() -> None:
    crds = all_crds()
    assert {c["spec"]["names"]["kind"] for c in crds} == KINDS
    for crd in crds:
        kind = crd["spec"]["names"]["kind"]
        assert crd["metadata"]["name"] == f"{crd['spec']['names']['plural']}.kueue.x-k8s.io"
        [version] = crd["spec"]["versions"]
        assert (version["name"], version["served"], version["storage"]) == ("v1beta2", True, True)
        schema = version["schema"]["openAPIV3Schema"]
        assert structural_problems(schema, kind) == []
        # The API server owns metadata; a CRD may not constrain it beyond name.
        assert schema["properties"]["metadata"] == {"type": "object"}
        has_status = kind in {
            "AdmissionCheck",
            "ClusterQueue",
            "Cohort",
            "LocalQueue",
            "Workload",
            "MultiKueueCluster",
        }
        assert ("subresources" in version) == has_status
        assert ("status" in schema["properties"]) == has_status


def test_workload_schema_reads_like_kueue_v1beta2() -> None:
    [workload] = [c for c in all_crds() if c["spec"]["names"]["kind"] == "Workload"]
    assert workload["spec"]["scope"] == "Namespaced"
    schema = workload["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    pod_set = schema["properties"]["spec"]["properties"]["podSets"]["items"]
    assert pod_set["properties"]["count"]["type"] == "integer"
    # The models read a part of each type: what they do not read is kept, not pruned.
    template = pod_set["properties"]["template"]
    container = template["properties"]["spec"]["properties"]["containers"]["items"]
    for node in (schema["properties"]["spec"], pod_set, template, container, schema["properties"]["status"]):
        assert node[PRESERVE] is True
    cpu = container["properties"]["resources"]["properties"]["requests"]["additionalProperties"]
    assert cpu["x-kubernetes-int-or-string"] is True
    conditions = schema["properties"]["status"]["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    # Each check's controller writes its own entry: a map keyed by the check's name.
    checks = schema["properties"]["status"]["properties"]["admissionChecks"]
    assert (checks["x-kubernetes-list-type"], checks["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    usage = schema["properties"]["status"]["properties"]["admission"]["properties"]["podSetAssignments"]
    assert usage["items"]["properties"]["resourceUsage"]["additionalProperties"]["x-kubernetes-int-or-string"]
    cq = next(c for c in all_crds() if c["spec"]["names"]["kind"] == "ClusterQueue")
    cq_spec = cq["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    # v1beta2's name for the field; v1beta1's `cohort` is not served.
    assert "cohortName" in cq_spec and "cohort" not in cq_spec
    quota = cq_spec["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"]["resources"]
    limit = quota["items"]["properties"]["borrowingLimit"]
    assert limit["nullable"] is True and limit["x-kubernetes-int-or-string"] is True
    assert quota["items"]["required"] == ["name", "nominalQuota"]


def test_a_model_without_a_structural_schema_is_refused_by_name() -> None:
    class Odd(BaseModel):
        value: int | str

    with pytest.raises(SchemaError, match=r"value: a union of 2 types"):
        openapi_schema(Odd)


def test_crds_command_prints_one_document_per_kind(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crds"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["CustomResourceDefinition"] * len(KINDS)
    assert docs == all_crds()
