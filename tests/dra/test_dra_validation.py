"""resource.k8s.io objects decoded in every version; request shapes refused as KEP-4816 states."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kueuestream.admission.api.config import Configuration
from kueuestream.admission.api.dra import (
    DeviceAsk,
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from kueuestream.admission.decode import decode
from kueuestream.admission.validation import validate_configuration


def rct(requests: str, version: str = "v1beta1") -> dict[str, Any]:
    body = "\n".join("      " + line for line in requests.strip("\n").splitlines())
    doc: dict[str, Any] = yaml.safe_load(
        f"""
apiVersion: resource.k8s.io/{version}
kind: ResourceClaimTemplate
metadata: {{name: t, namespace: ns}}
spec:
  spec:
    devices:
      requests:
{body}
"""
    )
    return doc


def errors_of(doc: dict[str, Any]) -> list[str]:
    return [str(e) for e in decode(doc).errors]


# ---------------------------------------------------------------- versions


@pytest.mark.parametrize("version", ["v1alpha3", "v1beta1", "v1beta2", "v1"])
def test_all_four_kinds_decode_in_every_version(version: str) -> None:
    flat = version in ("v1alpha3", "v1beta1")
    request = (
        "{name: gpu, deviceClassName: gpu.example.com, count: 2}"
        if flat
        else "{name: gpu, exactly: {deviceClassName: gpu.example.com, count: 2}}"
    )
    device = "{name: d0, basic: {attributes: {model: {string: x}}}}" if flat else "{name: d0, attributes: {}}"
    docs = yaml.safe_load_all(
        f"""
apiVersion: resource.k8s.io/{version}
kind: ResourceClaimTemplate
metadata: {{name: t, namespace: ns}}
spec: {{spec: {{devices: {{requests: [{request}]}}}}}}
---
apiVersion: resource.k8s.io/{version}
kind: ResourceClaim
metadata: {{name: c, namespace: ns}}
spec: {{devices: {{requests: [{request}]}}}}
---
apiVersion: resource.k8s.io/{version}
kind: DeviceClass
metadata: {{name: gpu.example.com}}
spec: {{selectors: [{{cel: {{expression: "device.driver == 'gpu.example.com'"}}}}]}}
---
apiVersion: resource.k8s.io/{version}
kind: ResourceSlice
metadata: {{name: s}}
spec:
  driver: gpu.example.com
  nodeName: n
  pool: {{name: p, generation: 3, resourceSliceCount: 1}}
  devices: [{device}, {{name: d1}}]
"""
    )
    objs = []
    for doc in docs:
        decoded = decode(doc)
        assert decoded.errors == [], decoded
        objs.append(decoded.obj)
    template, claim, cls, slice_ = objs
    assert isinstance(template, ResourceClaimTemplate)
    assert isinstance(claim, ResourceClaim)
    assert isinstance(cls, DeviceClass)
    assert isinstance(slice_, ResourceSlice)
    asks = (DeviceAsk("gpu", "gpu.example.com", count=2),)
    assert template.device_asks() == asks
    assert claim.device_asks() == asks
    assert cls.expressions() == ("device.driver == 'gpu.example.com'",)
    assert (slice_.spec.driver, slice_.spec.pool.name, slice_.spec.pool.generation) == (
        "gpu.example.com",
        "p",
        3,
    )
    assert len(slice_.spec.devices) == 2


def test_unsupported_version_is_refused() -> None:
    assert errors_of(rct("- {name: gpu, deviceClassName: x}", "v1alpha2")) == [
        "apiVersion: unsupported apiVersion 'resource.k8s.io/v1alpha2' for ResourceClaimTemplate; "
        "accepted: resource.k8s.io/v1alpha3, resource.k8s.io/v1beta1, resource.k8s.io/v1beta2, "
        "resource.k8s.io/v1"
    ]


def test_unknown_fields_are_ignored() -> None:
    doc = rct(
        """
- name: gpu
  deviceClassName: gpu.example.com
  tolerations: [{key: k, operator: Exists}]
  somethingNew: 1
""",
    )
    doc["spec"]["spec"]["devices"]["constraints"] = [{"requests": ["gpu"], "matchAttribute": "x"}]
    doc["spec"]["spec"]["devices"]["config"] = [{"opaque": {"driver": "d", "parameters": {}}}]
    assert errors_of(doc) == []


def test_template_needs_a_namespace() -> None:
    doc = rct("- {name: gpu, deviceClassName: gpu.example.com}")
    del doc["metadata"]["namespace"]
    assert errors_of(doc) == ["metadata.namespace: required: ResourceClaimTemplate is namespaced"]


def test_seed_004_shapes_give_the_same_asks() -> None:
    v1beta1 = rct(
        """
- {name: nic, deviceClassName: rdma-nic}
- name: gpu
  firstAvailable:
  - {name: big-gpu, deviceClassName: big-gpu}
  - {name: mid-gpu, deviceClassName: mid-gpu}
  - {name: small-gpu, deviceClassName: small-gpu, count: 2}
"""
    )
    v1beta2 = rct(
        """
- {name: nic, exactly: {deviceClassName: rdma-nic}}
- name: gpu
  firstAvailable:
  - {name: big-gpu, deviceClassName: big-gpu}
  - {name: mid-gpu, deviceClassName: mid-gpu}
  - {name: small-gpu, deviceClassName: small-gpu, count: 2}
""",
        "v1beta2",
    )
    expected = (
        DeviceAsk("nic", "rdma-nic"),
        DeviceAsk("gpu/big-gpu", "big-gpu"),
        DeviceAsk("gpu/mid-gpu", "mid-gpu"),
        DeviceAsk("gpu/small-gpu", "small-gpu", count=2),
    )
    for doc in (v1beta1, v1beta2):
        obj = decode(doc).obj
        assert isinstance(obj, ResourceClaimTemplate)
        assert obj.device_asks() == expected


# ---------------------------------------------------------- request shapes

P = "spec.spec.devices.requests"


@pytest.mark.parametrize(
    ("version", "requests", "errors"),
    [
        # v1beta2 / v1: exactly one of exactly and firstAvailable.
        (
            "v1beta2",
            """
- name: gpu
  exactly: {deviceClassName: a}
  firstAvailable: [{name: x, deviceClassName: a}]
""",
            [f"{P}[0]: exactly one of exactly and firstAvailable may be set, got both"],
        ),
        (
            "v1",
            "- {name: gpu}",
            [f"{P}[0]: exactly one of exactly and firstAvailable must be set, got neither"],
        ),
        (
            "v1",
            "- {name: gpu, deviceClassName: a}",
            [
                f"{P}[0]: exactly one of exactly and firstAvailable must be set, got neither "
                "(deviceClassName directly on the request is the v1beta1 shape; "
                "v1beta2 and v1 put it under exactly)"
            ],
        ),
        (
            "v1",
            "- {name: gpu, exactly: {count: 1}}",
            [f"{P}[0].exactly.deviceClassName: required field is missing"],
        ),
        # v1beta1: either deviceClassName or firstAvailable.
        (
            "v1beta1",
            "- {name: gpu}",
            [f"{P}[0].deviceClassName: required: a request needs either deviceClassName or firstAvailable"],
        ),
        (
            "v1beta1",
            "- {name: gpu, exactly: {deviceClassName: a}}",
            [
                f"{P}[0].deviceClassName: required: a request needs either deviceClassName or "
                "firstAvailable (exactly is the v1beta2/v1 shape; this apiVersion puts deviceClassName "
                "on the request)"
            ],
        ),
        (
            "v1beta1",
            """
- name: gpu
  deviceClassName: a
  count: 2
  allocationMode: ExactCount
  adminAccess: false
  selectors: []
  firstAvailable: [{name: x, deviceClassName: a}]
""",
            [
                f"{P}[0].deviceClassName: must not be set when firstAvailable is set",
                f"{P}[0].selectors: must not be set when firstAvailable is set",
                f"{P}[0].allocationMode: must not be set when firstAvailable is set",
                f"{P}[0].count: must not be set when firstAvailable is set",
                f"{P}[0].adminAccess: must not be set when firstAvailable is set",
            ],
        ),
        # Counts greater than zero, wherever they are.
        (
            "v1beta1",
            "- {name: gpu, deviceClassName: a, count: 0}",
            [f"{P}[0].count: must be greater than zero, got 0"],
        ),
        (
            "v1",
            "- {name: gpu, exactly: {deviceClassName: a, count: -1}}",
            [f"{P}[0].exactly.count: must be greater than zero, got -1"],
        ),
        (
            "v1beta2",
            """
- {name: ok, exactly: {deviceClassName: a}}
- name: gpu
  firstAvailable:
  - {name: x, deviceClassName: a, count: 0}
""",
            [f"{P}[1].firstAvailable[0].count: must be greater than zero, got 0"],
        ),
        # Allocation modes: ExactCount or All, and All takes no count.
        (
            "v1beta1",
            "- {name: gpu, deviceClassName: a, allocationMode: Some}",
            [f"{P}[0].allocationMode: unsupported value 'Some'; accepted values: ExactCount, All"],
        ),
        (
            "v1",
            """
- name: gpu
  firstAvailable:
  - {name: x, deviceClassName: a, allocationMode: Any}
""",
            [
                f"{P}[0].firstAvailable[0].allocationMode: unsupported value 'Any'; "
                "accepted values: ExactCount, All"
            ],
        ),
        (
            "v1",
            "- {name: gpu, exactly: {deviceClassName: a, allocationMode: All, count: 2}}",
            [f"{P}[0].exactly.count: must not be set when allocationMode is All"],
        ),
        # Subrequests: at most 8, none nested, no adminAccess, a class each.
        (
            "v1beta2",
            "- name: gpu\n  firstAvailable:\n"
            + "".join(f"  - {{name: s{i}, deviceClassName: a}}\n" for i in range(9)),
            [f"{P}[0].firstAvailable: at most 8 subrequests, got 9"],
        ),
        (
            "v1beta1",
            """
- name: gpu
  firstAvailable:
  - name: x
    deviceClassName: a
    firstAvailable: [{name: y, deviceClassName: a}]
""",
            [
                f"{P}[0].firstAvailable[0].firstAvailable: must not be set: "
                "firstAvailable cannot be nested in a subrequest"
            ],
        ),
        (
            "v1",
            """
- name: gpu
  firstAvailable:
  - {name: x, deviceClassName: a}
  - {name: y, deviceClassName: a, adminAccess: true}
""",
            [
                f"{P}[0].firstAvailable[1].adminAccess: must not be set: adminAccess is only allowed on "
                "a request without firstAvailable"
            ],
        ),
        (
            "v1",
            "- name: gpu\n  firstAvailable:\n  - {name: x}\n",
            [f"{P}[0].firstAvailable[0].deviceClassName: required field is missing"],
        ),
    ],
)
def test_request_shape_errors(version: str, requests: str, errors: list[str]) -> None:
    assert errors_of(rct(requests, version)) == errors


def test_eight_subrequests_and_all_without_count_are_fine() -> None:
    requests = (
        "- name: gpu\n  firstAvailable:\n"
        + "".join(f"  - {{name: s{i}, deviceClassName: a}}\n" for i in range(7))
        + "  - {name: s7, deviceClassName: a, allocationMode: All}\n"
    )
    assert errors_of(rct(requests, "v1")) == []


def test_resource_claim_errors_use_its_own_paths() -> None:
    doc = yaml.safe_load(
        """
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ns}
spec:
  devices:
    requests:
    - {name: gpu, exactly: {deviceClassName: a, count: 0}}
"""
    )
    assert errors_of(doc) == ["spec.devices.requests[0].exactly.count: must be greater than zero, got 0"]


def test_wrong_field_types_are_field_errors() -> None:
    assert errors_of(rct("- {name: gpu, deviceClassName: a, count: many}")) == [
        "spec.spec.devices.requests[0].count: expected an integer, got 'many'"
    ]


# ------------------------------------------------------- configuration


def config_errors(mappings: list[dict[str, Any]]) -> list[str]:
    config = Configuration.model_validate({"resources": {"deviceClassMappings": mappings}})
    return [str(e) for e in validate_configuration(config)]


def test_seed_configurations_are_valid() -> None:
    assert (
        config_errors(
            [
                {"name": "whole-gpus", "deviceClassNames": ["gpu.example.com"]},
                {
                    "name": "shared-gpus",
                    "deviceClassNames": ["ts-shard-gpus.example.com", "sp-shared-gpus.example.com"],
                },
                {"name": "example.com/fast-gpus", "deviceClassNames": ["fast-gpus.example.com"]},
            ]
        )
        == []
    )


def test_one_class_in_two_mappings_is_refused_naming_both() -> None:
    assert config_errors(
        [
            {"name": "whole-gpus", "deviceClassNames": ["gpus.example.com"]},
            {"name": "fast-gpus", "deviceClassNames": ["other.example.com", "gpus.example.com"]},
        ]
    ) == [
        "resources.deviceClassMappings[1].deviceClassNames[1]: device class gpus.example.com is mapped by "
        "both whole-gpus (resources.deviceClassMappings[0]) and fast-gpus "
        "(resources.deviceClassMappings[1]); a device class may map to one resource name only"
    ]


def test_class_listed_twice_and_mapping_name_used_twice_are_refused() -> None:
    assert config_errors(
        [
            {"name": "gpus", "deviceClassNames": ["a.example.com", "a.example.com"]},
            {"name": "gpus", "deviceClassNames": ["b.example.com"]},
        ]
    ) == [
        "resources.deviceClassMappings[0].deviceClassNames[1]: device class a.example.com is listed twice "
        "in mapping gpus",
        "resources.deviceClassMappings[1].name: duplicate mapping name gpus, already used by "
        "resources.deviceClassMappings[0]",
    ]


def test_names_must_be_qualified_and_at_most_253_characters() -> None:
    long_class = ("a" * 60 + ".") * 4 + "b" * 10  # 254 characters
    assert len(long_class) == 254
    ok_long = ("a" * 60 + ".") * 4 + "b" * 9  # 253 characters
    assert config_errors([{"name": "gpus", "deviceClassNames": [ok_long]}]) == []
    assert config_errors(
        [
            {"name": "Whole_GPUs", "deviceClassNames": [long_class, "-bad.example.com", "a/b/c", "ok"]},
            {"name": "", "deviceClassNames": []},
            {"name": "example.com/" + "x" * 64, "deviceClassNames": ["ex ample"]},
        ]
    ) == [
        "resources.deviceClassMappings[0].name: name 'Whole_GPUs' must consist of lower-case alphanumerics, "
        "'-' and '.', starting and ending with an alphanumeric",
        "resources.deviceClassMappings[0].deviceClassNames[0]: must be no more than 253 characters, got 254",
        "resources.deviceClassMappings[0].deviceClassNames[1]: name '-bad.example.com' must consist of "
        "lower-case alphanumerics, '-' and '.', starting and ending with an alphanumeric",
        "resources.deviceClassMappings[0].deviceClassNames[2]: prefix 'a/b' must be a DNS subdomain: "
        "lower-case alphanumerics, '-' and '.', starting and ending with an alphanumeric",
        "resources.deviceClassMappings[1].name: must not be empty",
        "resources.deviceClassMappings[1].deviceClassNames: must list at least one device class",
        "resources.deviceClassMappings[2].name: name '" + "x" * 64 + "' after the prefix must be no more "
        "than 63 characters, got 64",
        "resources.deviceClassMappings[2].deviceClassNames[0]: name 'ex ample' must consist of lower-case "
        "alphanumerics, '-' and '.', starting and ending with an alphanumeric",
    ]
