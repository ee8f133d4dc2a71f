"""CustomResourceDefinitions for the kueue.x-k8s.io kinds Kueuestream reads, from its own models.

A cluster without Kueue installs these (``kueuestream crds``) and can then
hold ResourceFlavors, AdmissionChecks, ClusterQueues, Cohorts, LocalQueues,
WorkloadPriorityClasses and Workloads for Kueuestream to admit, and
MultiKueueConfigs and MultiKueueClusters for a MultiKueue manager. Each CRD
serves and stores v1beta2 only, with the status subresource where Kueue has
one (AdmissionCheck, ClusterQueue, Cohort, LocalQueue, Workload, MultiKueueCluster).

The schemas come from the pydantic models in ``kueuestream.admission.api``
(``model_json_schema(by_alias=True)``), made structural as the API server
requires:

- every ``$ref`` is inlined and every node has a ``type``;
- ``X | None`` becomes ``X`` with ``nullable: true``;
- quantities are ``int-or-string`` with Kubernetes' quantity pattern;
- titles, descriptions and defaults are dropped: the stored object is what
  the user wrote, and the models apply Kueue's defaults when reading it;
- every object keeps the fields the models do not read
  (``x-kubernetes-preserve-unknown-fields``). The models read a part of each
  Kueue type (and of the core/v1 pod template inside a Workload); pruning the
  rest would store something other than what the user, or Kueue's job
  integration, wrote: a v1beta2 ``priorityClassRef.group``, an admission
  check, a container's image. The fields the models do read are typed, so the
  API server refuses a wrong type there with the field's path.

``status.conditions`` of a Workload is a map keyed by ``type``, and its
``status.admissionChecks`` one keyed by ``name``, so that server-side apply
merges entries written by different managers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import core_schema

from kueuestream.admission.api.kueue import (
    AdmissionCheck,
    AdmissionCheckState,
    ClusterQueue,
    Cohort,
    Condition,
    LocalQueue,
    ResourceFlavor,
    Workload,
    WorkloadPriorityClass,
)
from kueuestream.admission.api.multikueue import MultiKueueCluster, MultiKueueConfig
from kueuestream.admission.quantity import Quantity

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"

# Kubernetes' quantity grammar: a signed decimal, then a binary or decimal
# suffix or an exponent.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
QUANTITY_SCHEMA: dict[str, Any] = {
    "anyOf": [{"type": "integer"}, {"type": "string"}],
    "pattern": QUANTITY_PATTERN,
    "x-kubernetes-int-or-string": True,
}
PRESERVE = "x-kubernetes-preserve-unknown-fields"

# Lists of these models are maps keyed by the given fields.
LIST_MAP_KEYS = {Condition.__name__: ["type"], AdmissionCheckState.__name__: ["name"]}
# Value checks that JSON schema and the API server's OpenAPI spell alike.
CHECKS = ("enum", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems")
# Root fields every object has; the API server fills them in, so they are not "required".
OBJECT_FIELDS = ("apiVersion", "kind", "metadata")


@dataclass(frozen=True, slots=True)
class CrdKind:
    model: type[BaseModel]
    plural: str
    namespaced: bool
    status: bool
    short_names: tuple[str, ...] = ()
    columns: tuple[tuple[str, str, str], ...] = ()  # name, type, jsonPath

    @property
    def kind(self) -> str:
        return self.model.__name__


CRD_KINDS: tuple[CrdKind, ...] = (
    CrdKind(ResourceFlavor, "resourceflavors", False, False, ("flavor", "flavors", "rf")),
    CrdKind(AdmissionCheck, "admissionchecks", False, True, ("ac",)),
    CrdKind(
        WorkloadPriorityClass,
        "workloadpriorityclasses",
        False,
        False,
        ("wpc",),
        (("Value", "integer", ".value"),),
    ),
    CrdKind(Cohort, "cohorts", False, True, ("co",), (("Parent", "string", ".spec.parentName"),)),
    CrdKind(
        ClusterQueue,
        "clusterqueues",
        False,
        True,
        ("cq",),
        (("Cohort", "string", ".spec.cohortName"), ("Strategy", "string", ".spec.queueingStrategy")),
    ),
    CrdKind(
        LocalQueue,
        "localqueues",
        True,
        True,
        ("queue", "queues", "lq"),
        (("ClusterQueue", "string", ".spec.clusterQueue"),),
    ),
    CrdKind(
        Workload,
        "workloads",
        True,
        True,
        ("kwl", "kueueworkload", "kueueworkloads"),
        (
            ("Queue", "string", ".spec.queueName"),
            ("Reserved in", "string", ".status.admission.clusterQueue"),
            ("Admitted", "string", ".status.conditions[?(@.type=='Admitted')].status"),
            ("Finished", "string", ".status.conditions[?(@.type=='Finished')].status"),
        ),
    ),
    CrdKind(MultiKueueConfig, "multikueueconfigs", False, False),
    CrdKind(
        MultiKueueCluster,
        "multikueueclusters",
        False,
        True,
        (),
        (("Active", "string", ".status.conditions[?(@.type=='Active')].status"),),
    ),
)


class _Generator(GenerateJsonSchema):
    """Pydantic's JSON schema, with quantities as the API server spells them."""

    def dataclass_schema(self, schema: core_schema.DataclassSchema) -> JsonSchemaValue:
        if schema["cls"] is Quantity:
            return dict(QUANTITY_SCHEMA)
        return super().dataclass_schema(schema)


class SchemaError(ValueError):
    """A model has a shape that a structural schema cannot express."""


def _def_name(ref: str) -> str:
    prefix = "#/$defs/"
    if not ref.startswith(prefix):
        raise SchemaError(f"unexpected reference {ref!r}")
    return ref[len(prefix) :]


class _Structural:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def convert(self, node: dict[str, Any], path: str) -> dict[str, Any]:
        if "$ref" in node:
            return self.convert(self.defs[_def_name(node["$ref"])], path)
        if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
            options = [o for o in node["anyOf"] if o.get("type") != "null"]
            if len(options) != 1:
                raise SchemaError(f"{path}: a union of {len(options)} types has no structural schema")
            single = self.convert(options[0], path)
            if len(options) < len(node["anyOf"]):
                single["nullable"] = True
            return single
        if "const" in node:
            return {"type": node.get("type", "string"), "enum": [node["const"]]}
        if node.get("x-kubernetes-int-or-string"):
            return {k: v for k, v in node.items() if k in QUANTITY_SCHEMA}
        kind = node.get("type")
        if kind is None:
            # Any: whatever the user wrote is kept.
            return {PRESERVE: True}
        out: dict[str, Any] = {"type": kind}
        for key in CHECKS:
            if key in node:
                out[key] = node[key]
        if kind == "array":
            items = node.get("items", {})
            out["items"] = self.convert(items, f"{path}[]")
            if "$ref" in items and _def_name(items["$ref"]) in LIST_MAP_KEYS:
                out["x-kubernetes-list-type"] = "map"
                out["x-kubernetes-list-map-keys"] = LIST_MAP_KEYS[_def_name(items["$ref"])]
        elif kind == "object":
            props = node.get("properties", {})
            extra = node.get("additionalProperties")
            if props and extra:
                raise SchemaError(f"{path}: both fields and a map of values")
            if props:
                out["properties"] = {k: self.convert(v, f"{path}.{k}") for k, v in props.items()}
                if node.get("required"):
                    out["required"] = list(node["required"])
                out[PRESERVE] = True
            elif isinstance(extra, dict) and extra:
                out["additionalProperties"] = self.convert(extra, f"{path}.*")
            else:
                out[PRESERVE] = True  # a mapping of anything
        return out


def openapi_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a kind's objects."""
    raw = model.model_json_schema(by_alias=True, schema_generator=_Generator)
    converter = _Structural(raw.get("$defs", {}))
    props = raw["properties"]
    out: dict[str, Any] = {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            # The API server validates metadata itself; a CRD may say nothing more.
            "metadata": {"type": "object"},
        },
    }
    for field, node in props.items():
        if field not in OBJECT_FIELDS:
            out["properties"][field] = converter.convert(node, field)
    required = [f for f in raw.get("required", []) if f not in OBJECT_FIELDS]
    if required:
        out["required"] = required
    # A tree of its own: shared sub-schemas would print as YAML anchors and aliases.
    tree: dict[str, Any] = orjson.loads(orjson.dumps(out))
    return tree


def crd(spec: CrdKind) -> dict[str, Any]:
    schema = openapi_schema(spec.model)
    if spec.status and "status" not in schema["properties"]:
        # Kueue writes it (and so do we, for fair sharing); its shape is not read here.
        schema["properties"]["status"] = {"type": "object", PRESERVE: True}
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
    }
    if spec.status:
        version["subresources"] = {"status": {}}
    columns = [{"name": n, "type": t, "jsonPath": p} for n, t, p in spec.columns]
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    version["additionalPrinterColumns"] = columns
    names: dict[str, Any] = {
        "kind": spec.kind,
        "listKind": f"{spec.kind}List",
        "plural": spec.plural,
        "singular": spec.kind.lower(),
        "categories": ["kueue"],
    }
    if spec.short_names:
        names["shortNames"] = list(spec.short_names)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{spec.plural}.{GROUP}",
            "labels": {"app.kubernetes.io/managed-by": "kueuestream"},
        },
        "spec": {
            "group": GROUP,
            "names": names,
            "scope": "Namespaced" if spec.namespaced else "Cluster",
            "versions": [version],
        },
    }


def all_crds() -> list[dict[str, Any]]:
    """One CustomResourceDefinition per kueue.x-k8s.io kind Kueuestream reads."""
    return [crd(spec) for spec in CRD_KINDS]
