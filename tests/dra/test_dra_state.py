"""DraState on its own: what store, refuse and delete report, and order-independent counting."""

from __future__ import annotations

import itertools

import yaml

from kueuestream.admission.api.base import ApiModel
from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.kueue import Workload
from kueuestream.admission.decode import decode
from kueuestream.admission.dra import Counted, DraState
from kueuestream.admission.errors import FieldError
from kueuestream.admission.events import ObjectRef
from tests.helpers import NS, claim_template, device_class, dra_workload, resource_slice

CONFIG = Configuration.model_validate(
    {"resources": {"deviceClassMappings": [{"name": "gpus", "deviceClassNames": ["gpu.example.com"]}]}}
)


def obj(text: str) -> ApiModel:
    decoded = decode(yaml.safe_load(text.replace("---", "")))
    assert decoded.errors == [], decoded
    assert decoded.obj is not None
    return decoded.obj


def wl(text: str) -> Workload:
    w = obj(text)
    assert isinstance(w, Workload)
    return w


ALL = "- {name: all, exactly: {deviceClassName: gpu.example.com, allocationMode: All}}"


def test_store_reports_changes_only() -> None:
    s = DraState()
    t = obj(claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com}"))
    assert s.store(t) is True
    assert s.store(t) is False
    c = obj(device_class("gpu.example.com", "device.driver == 'a'"))
    assert s.store(c) is True
    assert s.store(c) is False
    sl = obj(resource_slice("s", "a", "p", 2))
    assert s.store(sl) is True
    assert s.store(sl) is False
    assert s.store(obj(resource_slice("s", "a", "p", 3))) is True
    assert s.delete(ObjectRef("ResourceSlice", "", "s")) is True
    assert s.delete(ObjectRef("ResourceSlice", "", "s")) is False
    assert s.delete(ObjectRef("DeviceClass", "", "gpu.example.com")) is True
    assert s.delete(ObjectRef("ResourceClaimTemplate", NS, "t")) is True
    assert s.delete(ObjectRef("ResourceClaimTemplate", NS, "t")) is False
    assert s.delete(ObjectRef("Workload", NS, "t")) is False


def test_refusals_are_remembered_for_templates_only() -> None:
    s = DraState()
    errors = [FieldError("spec.spec.devices.requests[0].count", "must be greater than zero, got 0")]
    assert s.refuse(ObjectRef("ResourceClaimTemplate", NS, "t"), errors) is True
    assert s.refuse(ObjectRef("ResourceClaimTemplate", NS, "t"), errors) is False
    assert s.refuse(ObjectRef("ResourceSlice", "", "s"), errors) is False
    w = wl(dra_workload("w", [("main", 1, [("c", "t")])]))
    assert s.count(w, CONFIG) == Counted(
        {},
        f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t is invalid: "
        "spec.spec.devices.requests[0].count: must be greater than zero, got 0",
    )
    assert s.delete(ObjectRef("ResourceClaimTemplate", NS, "t")) is True
    assert (
        s.count(w, CONFIG).problem
        == f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t not found"
    )


def test_count_is_per_pod_and_per_pod_set() -> None:
    s = DraState()
    s.store(obj(claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com, count: 3}")))
    w = wl(dra_workload("w", [("a", 5, [("c", "t")]), ("b", 2, [])]))
    # Per pod: 3; the engine multiplies by the pod count.
    assert s.count(w, CONFIG) == Counted({"a": {"gpus": 3}}, "")


def test_all_count_does_not_depend_on_the_order_objects_arrive() -> None:
    objects = [
        obj(device_class("gpu.example.com", 'device.driver == "d1"')),
        obj(resource_slice("s1", "d1", "p1", 3, generation=1)),
        obj(resource_slice("s2", "d1", "p1", 2, generation=2)),
        obj(resource_slice("s3", "d1", "p2", 1, generation=5)),
        obj(resource_slice("s4", "d2", "p1", 9)),
        obj(claim_template("t", ALL, "v1")),
    ]
    w = wl(dra_workload("w", [("main", 1, [("c", "t")])]))
    results = set()
    for order in itertools.permutations(objects):
        s = DraState()
        for o in order:
            s.store(o)
        results.add(repr(s.count(w, CONFIG)))
    # d1 pools: p1 newest generation 2 -> 2 devices; p2 -> 1. Worst case 2.
    assert results == {repr(Counted({"main": {"gpus": 2}}, ""))}


def test_a_mapping_named_cpu_is_held_in_millicores() -> None:
    config = Configuration.model_validate(
        {"resources": {"deviceClassMappings": [{"name": "cpu", "deviceClassNames": ["cpu.example.com"]}]}}
    )
    s = DraState()
    s.store(obj(claim_template("t", "- {name: c, deviceClassName: cpu.example.com, count: 2}")))
    assert s.count(wl(dra_workload("w", [("main", 1, [("c", "t")])])), config) == Counted(
        {"main": {"cpu": 2000}}, ""
    )
