"""Devices counted into quota: every rule of issue 3 with counts worked out by hand."""

from __future__ import annotations

import pytest

from tests.dra.drive import Drive
from tests.helpers import (
    NS,
    claim_template,
    device_class,
    dra_configuration,
    dra_queue,
    dra_workload,
    resource_slice,
)

GPU_CONFIG = dra_configuration({"gpus": ["gpu.example.com"]})
BIG_QUOTA = {"gpus": 100}


def drive(*parts: str) -> Drive:
    d = Drive()
    d.load("".join(parts))
    return d


# ------------------------------------------------------------- ExactCount


def test_exact_count_defaults_to_one_device() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com}"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "1"}}
    assert d.flavors("w") == {"main": {"cpu": "f", "gpus": "f"}}


def test_counts_sum_over_requests_and_multiply_by_pod_count() -> None:
    # Per pod: request a asks 3, request b asks 2 (same class) -> 5 devices.
    # 4 pods -> 20 gpus; cpu 1 per pod -> 4.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template(
            "t",
            """
- {name: a, deviceClassName: gpu.example.com, count: 3}
- {name: b, deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 2}
""",
        ),
        dra_workload("w", [("main", 4, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "4", "gpus": "20"}}


def test_classes_of_one_mapping_add_up_and_other_mappings_stay_apart() -> None:
    # gpus <- gpu.example.com (2) + mig.example.com (3) = 5; nics <- nic.example.com (1).
    # Pod set main has 2 pods: gpus 10, nics 2.
    d = drive(
        dra_configuration({"gpus": ["gpu.example.com", "mig.example.com"], "nics": ["nic.example.com"]}),
        dra_queue({"gpus": 100, "nics": 100}),
        claim_template(
            "t",
            """
- {name: g, deviceClassName: gpu.example.com, count: 2}
- {name: m, deviceClassName: mig.example.com, count: 3}
- {name: n, deviceClassName: nic.example.com}
""",
        ),
        dra_workload("w", [("main", 2, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "2", "gpus": "10", "nics": "2"}}


def test_every_claim_of_a_pod_counts_even_two_from_one_template() -> None:
    # Each pod claim makes its own ResourceClaim: two claims from t (2 each) plus one
    # from u (1) -> 5 per pod; 3 pods -> 15.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com, count: 2}"),
        claim_template("u", "- {name: gpu, deviceClassName: gpu.example.com}"),
        dra_workload("w", [("main", 3, [("c1", "t"), ("c2", "t"), ("c3", "u")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "3", "gpus": "15"}}


def test_each_pod_set_counts_its_own_claims() -> None:
    # driver: 1 pod x 1 gpu = 1; workers: 3 pods x 2 gpus = 6; idle: no claims.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template("one", "- {name: gpu, deviceClassName: gpu.example.com}"),
        claim_template("two", "- {name: gpu, deviceClassName: gpu.example.com, count: 2}"),
        dra_workload(
            "w",
            [("driver", 1, [("c", "one")]), ("workers", 3, [("c", "two")]), ("idle", 2, [])],
        ),
    )
    assert d.usage("w") == {
        "driver": {"cpu": "1", "gpus": "1"},
        "workers": {"cpu": "3", "gpus": "6"},
        "idle": {"cpu": "2"},
    }


def test_quota_is_enforced_on_the_counted_devices() -> None:
    # Quota gpus 5. a: 2 pods x 2 = 4 -> admitted. b: 1 pod x 2 = 2 -> 4 + 2 = 6 > 5.
    d = drive(
        GPU_CONFIG,
        dra_queue({"gpus": 5}),
        claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com, count: 2}"),
        dra_workload("a", [("main", 2, [("c", "t")])]),
        dra_workload("b", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("a") == {"main": {"cpu": "2", "gpus": "4"}}
    assert d.pending("b") == (
        "Pending",
        "couldn't assign flavors to pod set main: insufficient unused quota for gpus in flavor f, "
        "1 more needed",
    )


def test_a_counted_resource_the_cluster_queue_does_not_cover_blocks_admission() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue({}),
        claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com}"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.pending("w") == (
        "Pending",
        "couldn't assign flavors to pod set main: resource gpus unavailable in ClusterQueue",
    )


# ------------------------------------------------------------ adminAccess


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2", "v1"])
def test_admin_access_requests_are_not_counted(version: str) -> None:
    # admin: 5 devices with adminAccess -> 0; plain: adminAccess false, 2 -> 2.
    if version == "v1beta1":
        requests = """
- {name: admin, deviceClassName: gpu.example.com, count: 5, adminAccess: true}
- {name: plain, deviceClassName: gpu.example.com, count: 2, adminAccess: false}
"""
    else:
        requests = """
- {name: admin, exactly: {deviceClassName: gpu.example.com, count: 5, adminAccess: true}}
- {name: plain, exactly: {deviceClassName: gpu.example.com, count: 2, adminAccess: false}}
"""
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template("t", requests, version),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "2"}}


def test_admin_access_request_needs_no_mapping() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        claim_template("t", "- {name: admin, deviceClassName: unmapped.example.com, adminAccess: true}"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1"}}


# ----------------------------------------------------- firstAvailable (seed 004)

SEED_004_V1BETA1 = """
- name: nic
  deviceClassName: rdma-nic
- name: gpu
  firstAvailable:
  - name: big-gpu
    deviceClassName: big-gpu
  - name: mid-gpu
    deviceClassName: mid-gpu
  - name: small-gpu
    deviceClassName: small-gpu
    count: 2
"""

SEED_004_V1BETA2 = """
- name: nic
  exactly:
    deviceClassName: rdma-nic
- name: gpu
  firstAvailable:
  - name: big-gpu
    deviceClassName: big-gpu
  - name: mid-gpu
    deviceClassName: mid-gpu
  - name: small-gpu
    deviceClassName: small-gpu
    count: 2
"""

SEED_004_SHAPES = [
    ("v1beta1", SEED_004_V1BETA1),
    ("v1alpha3", SEED_004_V1BETA1),
    ("v1beta2", SEED_004_V1BETA2),
    ("v1", SEED_004_V1BETA2),
]


@pytest.mark.parametrize(("version", "requests"), SEED_004_SHAPES)
def test_seed_004_claim_counts_every_alternative_in_one_resource(version: str, requests: str) -> None:
    # nic: 1 rdma-nic. gpu: big 1 + mid 1 + small 2 = 4 gpus per pod. 3 pods: nics 3, gpus 12.
    d = drive(
        dra_configuration({"nics": ["rdma-nic"], "gpus": ["big-gpu", "mid-gpu", "small-gpu"]}),
        dra_queue({"nics": 100, "gpus": 100}),
        claim_template("device-consumer", requests, version),
        dra_workload("w", [("main", 3, [("gpu-and-nic", "device-consumer")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "3", "gpus": "12", "nics": "3"}}


@pytest.mark.parametrize(("version", "requests"), SEED_004_SHAPES)
def test_seed_004_claim_counts_each_alternative_against_its_own_class(version: str, requests: str) -> None:
    # Per pod: nic 1, big 1, mid 1, small 2. 2 pods: 2, 2, 2, 4.
    d = drive(
        dra_configuration(
            {"nics": ["rdma-nic"], "big": ["big-gpu"], "mid": ["mid-gpu"], "small": ["small-gpu"]}
        ),
        dra_queue({"nics": 100, "big": 100, "mid": 100, "small": 100}),
        claim_template("device-consumer", requests, version),
        dra_workload("w", [("main", 2, [("gpu-and-nic", "device-consumer")])]),
    )
    assert d.usage("w") == {"main": {"big": "2", "cpu": "2", "mid": "2", "nics": "2", "small": "4"}}


def test_seed_004_claim_needs_quota_for_every_alternative() -> None:
    # Quota small 1 while the small-gpu alternative alone asks 2: never admitted,
    # even though big-gpu or mid-gpu would fit (KEP-4816, "Resource Quota").
    d = drive(
        dra_configuration(
            {"nics": ["rdma-nic"], "big": ["big-gpu"], "mid": ["mid-gpu"], "small": ["small-gpu"]}
        ),
        dra_queue({"nics": 10, "big": 10, "mid": 10, "small": 1}),
        claim_template("device-consumer", SEED_004_V1BETA2, "v1beta2"),
        dra_workload("w", [("main", 1, [("gpu-and-nic", "device-consumer")])]),
    )
    assert d.pending("w") == (
        "Pending",
        "couldn't assign flavors to pod set main: insufficient quota for small in flavor f, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)",
    )


# ------------------------------------------------------- allocationMode All

ALL_V1 = "- {name: all, exactly: {deviceClassName: gpu.example.com, allocationMode: All}}"
ALL_V1BETA1 = "- {name: all, deviceClassName: gpu.example.com, allocationMode: All}"
GPU_DRIVER_CLASS = device_class("gpu.example.com", 'device.driver == "gpu.example.com"')


def test_all_counts_the_largest_pool_of_the_class_driver() -> None:
    # gpu.example.com pools: node-a 4 devices, node-b 2 + 3 = 5 (two slices of one pool).
    # other.example.com pool: 8 devices, not the class's driver. Largest: 5 per pod; 2 pods: 10.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        GPU_DRIVER_CLASS,
        resource_slice("a", "gpu.example.com", "node-a", 4),
        resource_slice("b1", "gpu.example.com", "node-b", 2),
        resource_slice("b2", "gpu.example.com", "node-b", 3),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 2, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "2", "gpus": "10"}}


def test_all_counts_only_the_newest_generation_of_a_pool() -> None:
    # Pool node-a: generation 1 has 7 devices (stale), generation 2 has 2 + 1 = 3.
    # Pool node-b: 4 devices. Largest current pool: 4.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        GPU_DRIVER_CLASS,
        resource_slice("a-old", "gpu.example.com", "node-a", 7, generation=1),
        resource_slice("a-new-1", "gpu.example.com", "node-a", 2, generation=2),
        resource_slice("a-new-2", "gpu.example.com", "node-a", 1, generation=2),
        resource_slice("b", "gpu.example.com", "node-b", 4),
        claim_template("t", ALL_V1BETA1, "v1beta1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "4"}}


def test_all_with_undecidable_selectors_counts_every_device_of_the_pool() -> None:
    # The class selects on an attribute, which is not evaluated: every pool counts,
    # so the 8-device pool of other.example.com is the worst case.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        device_class("gpu.example.com", "device.attributes['gpu.example.com'].model == 'a100'"),
        resource_slice("a", "gpu.example.com", "node-a", 4),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "8"}}


def test_all_with_a_driver_conjunct_is_narrowed_to_that_driver() -> None:
    # driver == gpu && <attribute test>: the attribute test is not evaluated, the driver is.
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        device_class(
            "gpu.example.com",
            "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model == 'x'",
        ),
        resource_slice("a", "gpu.example.com", "node-a", 4),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "4"}}


def test_all_with_a_driver_disjunction_is_not_narrowed() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        device_class(
            "gpu.example.com", 'device.driver == "gpu.example.com" || device.driver == "x.example.com"'
        ),
        resource_slice("a", "gpu.example.com", "node-a", 4),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "8"}}


def test_all_honours_a_driver_selector_on_the_request_itself() -> None:
    # No DeviceClass object exists, so the class's own selectors are unknown and every
    # pool could match: x (plain request) counts the 8-device pool. w's request adds
    # device.driver == "gpu.example.com", which narrows it to the 4-device pool.
    requests = """
- name: all
  exactly:
    deviceClassName: gpu.example.com
    allocationMode: All
    selectors:
    - cel: {expression: 'device.driver == "gpu.example.com"'}
"""
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        resource_slice("a", "gpu.example.com", "node-a", 4),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", requests, "v1"),
        claim_template("u", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
        dra_workload("x", [("main", 1, [("c", "u")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "4"}}
    assert d.usage("x") == {"main": {"cpu": "1", "gpus": "8"}}


def test_all_adds_to_exact_counts_of_the_same_class() -> None:
    # All: largest pool 3; plus an ExactCount request of 2 -> 5 per pod.
    requests = """
- {name: all, deviceClassName: gpu.example.com, allocationMode: All}
- {name: two, deviceClassName: gpu.example.com, count: 2}
"""
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        GPU_DRIVER_CLASS,
        resource_slice("a", "gpu.example.com", "node-a", 3, version="v1beta1"),
        claim_template("t", requests, "v1beta1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "5"}}


def test_all_in_a_first_available_alternative_counts_its_worst_case() -> None:
    # Alternatives: 1 big-gpu, or all small-gpus (largest small pool: 6). Total 1 + 6 = 7.
    requests = """
- name: gpu
  firstAvailable:
  - {name: big, deviceClassName: big-gpu}
  - {name: small, deviceClassName: small-gpu, allocationMode: All}
"""
    d = drive(
        dra_configuration({"gpus": ["big-gpu", "small-gpu"]}),
        dra_queue(BIG_QUOTA),
        device_class("small-gpu", "device.driver == 'small.example.com'"),
        resource_slice("s1", "small.example.com", "p1", 6),
        resource_slice("s2", "small.example.com", "p2", 5),
        resource_slice("b", "big.example.com", "p3", 9),
        claim_template("t", requests, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "7"}}


def test_all_without_a_matching_slice_is_inadmissible_until_one_appears() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        GPU_DRIVER_CLASS,
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 2, [("c", "t")])]),
    )
    assert d.pending("w") == (
        "Inadmissible",
        f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t: request all asks for all "
        "devices of class gpu.example.com, but no ResourceSlice has a device matching that class",
    )
    d.load(resource_slice("a", "gpu.example.com", "node-a", 3))
    # 3 devices per pod, 2 pods.
    assert d.usage("w") == {"main": {"cpu": "2", "gpus": "6"}}


def test_all_with_an_empty_pool_is_inadmissible() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        GPU_DRIVER_CLASS,
        resource_slice("a", "gpu.example.com", "node-a", 0),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.pending("w")[0] == "Inadmissible"


def test_all_with_contradicting_driver_selectors_matches_nothing() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        device_class(
            "gpu.example.com", "device.driver == 'a.example.com'", "device.driver == 'b.example.com'"
        ),
        resource_slice("a", "a.example.com", "pa", 2),
        resource_slice("b", "b.example.com", "pb", 2),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.pending("w")[0] == "Inadmissible"


def test_all_is_recounted_when_slices_and_classes_change() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue({"gpus": 1}),  # too small for the workload: it stays pending and is recounted
        GPU_DRIVER_CLASS,
        resource_slice("a", "gpu.example.com", "node-a", 3),
        resource_slice("o", "other.example.com", "node-o", 8),
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    more_needed = "couldn't assign flavors to pod set main: insufficient quota for gpus in flavor f, "
    assert d.pending("w") == (
        "Pending",
        more_needed + "previously considered podsets requests (0) + current podset request (3) "
        "> maximum capacity (1)",
    )
    # A new generation of pool node-a publishes 5 devices: the old 3 no longer count.
    d.load(resource_slice("a2", "gpu.example.com", "node-a", 5, generation=2))
    assert d.pending("w")[1].endswith("current podset request (5) > maximum capacity (1)")
    # The class no longer names a driver: other.example.com's 8 devices count too.
    d.load(device_class("gpu.example.com"))
    assert d.pending("w")[1].endswith("current podset request (8) > maximum capacity (1)")
    d.delete("ResourceSlice", "o")
    assert d.pending("w")[1].endswith("current podset request (5) > maximum capacity (1)")
