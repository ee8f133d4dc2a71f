"""Devices counted into quota: every rule of issue 3 with counts worked out by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from tests.dra.drive import drive
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


def charged(config: str, quotas: Mapping[str, int], objects: Sequence[str], pods: int) -> dict[str, str]:
    """What Workload ``w`` is charged: one pod set ``main`` of ``pods`` pods, each with claim ``c``
    from template ``t`` (which ``objects`` hold); every resource must be charged in flavor ``f``."""
    d = drive(config, dra_queue(quotas), *objects, dra_workload("w", [("main", pods, [("c", "t")])]))
    [(pod_set, usage)] = d.usage("w").items()
    assert pod_set == "main"
    assert d.flavors("w") == {"main": dict.fromkeys(usage, "f")}
    return usage


# ------------------------------------------------------------- ExactCount


@pytest.mark.parametrize(
    ("config", "quotas", "requests", "pods", "usage"),
    [
        pytest.param(
            GPU_CONFIG,
            BIG_QUOTA,
            "- {name: gpu, deviceClassName: gpu.example.com}",
            1,
            {"cpu": "1", "gpus": "1"},
            id="defaults-to-one-device",
        ),
        # Per pod: request a asks 3, request b asks 2 (same class) -> 5 devices.
        # 4 pods -> 20 gpus; cpu 1 per pod -> 4.
        pytest.param(
            GPU_CONFIG,
            BIG_QUOTA,
            """
- {name: a, deviceClassName: gpu.example.com, count: 3}
- {name: b, deviceClassName: gpu.example.com, allocationMode: ExactCount, count: 2}
""",
            4,
            {"cpu": "4", "gpus": "20"},
            id="sum-over-requests-times-pod-count",
        ),
        # gpus <- gpu.example.com (2) + mig.example.com (3) = 5; nics <- nic.example.com (1).
        # Pod set main has 2 pods: gpus 10, nics 2.
        pytest.param(
            dra_configuration({"gpus": ["gpu.example.com", "mig.example.com"], "nics": ["nic.example.com"]}),
            {"gpus": 100, "nics": 100},
            """
- {name: g, deviceClassName: gpu.example.com, count: 2}
- {name: m, deviceClassName: mig.example.com, count: 3}
- {name: n, deviceClassName: nic.example.com}
""",
            2,
            {"cpu": "2", "gpus": "10", "nics": "2"},
            id="classes-of-one-mapping-add-up-other-mappings-stay-apart",
        ),
    ],
)
def test_exact_counts_are_charged_per_pod(
    config: str, quotas: Mapping[str, int], requests: str, pods: int, usage: dict[str, str]
) -> None:
    """An ExactCount request charges ``count`` devices (1 by default) to the logical resource its
    class maps to, for every pod (upstream: ``chargesForClaimSpec``, summed per pod set by
    ``GetResourceRequestsForResourceClaimTemplates``)."""
    assert charged(config, quotas, [claim_template("t", requests)], pods) == usage


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
        "WaitingForQuota",
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
        "NoMatchingFlavor",
        "couldn't assign flavors to pod set main: resource gpus unavailable in ClusterQueue",
    )


# ------------------------------------------------------------ adminAccess


ADMIN_AND_PLAIN_V1BETA1 = """
- {name: admin, deviceClassName: gpu.example.com, count: 5, adminAccess: true}
- {name: plain, deviceClassName: gpu.example.com, count: 2, adminAccess: false}
"""
ADMIN_AND_PLAIN = """
- {name: admin, exactly: {deviceClassName: gpu.example.com, count: 5, adminAccess: true}}
- {name: plain, exactly: {deviceClassName: gpu.example.com, count: 2, adminAccess: false}}
"""


@pytest.mark.parametrize(
    ("version", "requests", "usage"),
    [
        # admin: 5 devices with adminAccess -> 0; plain: adminAccess false, 2 -> 2.
        pytest.param("v1beta1", ADMIN_AND_PLAIN_V1BETA1, {"cpu": "1", "gpus": "2"}, id="v1beta1"),
        pytest.param("v1beta2", ADMIN_AND_PLAIN, {"cpu": "1", "gpus": "2"}, id="v1beta2"),
        pytest.param("v1", ADMIN_AND_PLAIN, {"cpu": "1", "gpus": "2"}, id="v1"),
        # An admin request of a class no mapping names is not refused: it charges nothing.
        pytest.param(
            "v1beta1",
            "- {name: admin, deviceClassName: unmapped.example.com, adminAccess: true}",
            {"cpu": "1"},
            id="needs-no-mapping",
        ),
    ],
)
def test_admin_access_requests_are_not_counted(version: str, requests: str, usage: dict[str, str]) -> None:
    """adminAccess requests are skipped before their class is looked up (upstream:
    ``chargesForClaimSpec`` with ``isAdminAccessRequest``)."""
    assert charged(GPU_CONFIG, BIG_QUOTA, [claim_template("t", requests, version)], 1) == usage


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
@pytest.mark.parametrize(
    ("mappings", "pods", "usage"),
    [
        # nic: 1 rdma-nic. gpu: big 1 + mid 1 + small 2 = 4 gpus per pod. 3 pods: nics 3, gpus 12.
        pytest.param(
            {"nics": ["rdma-nic"], "gpus": ["big-gpu", "mid-gpu", "small-gpu"]},
            3,
            {"cpu": "3", "gpus": "12", "nics": "3"},
            id="every-alternative-in-one-resource",
        ),
        # Per pod: nic 1, big 1, mid 1, small 2. 2 pods: 2, 2, 2, 4.
        pytest.param(
            {"nics": ["rdma-nic"], "big": ["big-gpu"], "mid": ["mid-gpu"], "small": ["small-gpu"]},
            2,
            {"big": "2", "cpu": "2", "mid": "2", "nics": "2", "small": "4"},
            id="each-alternative-against-its-own-class",
        ),
    ],
)
def test_seed_004_claim_counts_every_alternative(
    mappings: dict[str, list[str]], pods: int, usage: dict[str, str], version: str, requests: str
) -> None:
    """Seed 004's claim in every request shape: each firstAvailable alternative is charged, each to
    the resource its own class maps to (KEP-4816, "Resource Quota")."""
    quotas = dict.fromkeys(mappings, 100)
    d = drive(
        dra_configuration(mappings),
        dra_queue(quotas),
        claim_template("device-consumer", requests, version),
        dra_workload("w", [("main", pods, [("gpu-and-nic", "device-consumer")])]),
    )
    assert d.usage("w") == {"main": usage}


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
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for small in flavor f, "
        "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)",
    )


# ------------------------------------------------------- allocationMode All

ALL_V1 = "- {name: all, exactly: {deviceClassName: gpu.example.com, allocationMode: All}}"
ALL_V1BETA1 = "- {name: all, deviceClassName: gpu.example.com, allocationMode: All}"
GPU_DRIVER_CLASS = device_class("gpu.example.com", 'device.driver == "gpu.example.com"')


@pytest.mark.parametrize(
    ("config", "objects", "pods", "gpus"),
    [
        # gpu.example.com pools: node-a 4 devices, node-b 2 + 3 = 5 (two slices of one pool).
        # other.example.com pool: 8 devices, not the class's driver. Largest: 5 per pod; 2 pods: 10.
        pytest.param(
            GPU_CONFIG,
            [
                GPU_DRIVER_CLASS,
                resource_slice("a", "gpu.example.com", "node-a", 4),
                resource_slice("b1", "gpu.example.com", "node-b", 2),
                resource_slice("b2", "gpu.example.com", "node-b", 3),
                resource_slice("o", "other.example.com", "node-o", 8),
                claim_template("t", ALL_V1, "v1"),
            ],
            2,
            "10",
            id="largest-pool-of-the-class-driver",
        ),
        # Pool node-a: generation 1 has 7 devices (stale), generation 2 has 2 + 1 = 3.
        # Pool node-b: 4 devices. Largest current pool: 4.
        pytest.param(
            GPU_CONFIG,
            [
                GPU_DRIVER_CLASS,
                resource_slice("a-old", "gpu.example.com", "node-a", 7, generation=1),
                resource_slice("a-new-1", "gpu.example.com", "node-a", 2, generation=2),
                resource_slice("a-new-2", "gpu.example.com", "node-a", 1, generation=2),
                resource_slice("b", "gpu.example.com", "node-b", 4),
                claim_template("t", ALL_V1BETA1, "v1beta1"),
            ],
            1,
            "4",
            id="only-the-newest-generation-of-a-pool",
        ),
        # All: largest pool 3; plus an ExactCount request of 2 -> 5 per pod.
        pytest.param(
            GPU_CONFIG,
            [
                GPU_DRIVER_CLASS,
                resource_slice("a", "gpu.example.com", "node-a", 3, version="v1beta1"),
                claim_template(
                    "t",
                    """
- {name: all, deviceClassName: gpu.example.com, allocationMode: All}
- {name: two, deviceClassName: gpu.example.com, count: 2}
""",
                    "v1beta1",
                ),
            ],
            1,
            "5",
            id="adds-to-exact-counts-of-the-same-class",
        ),
        # Alternatives: 1 big-gpu, or all small-gpus (largest small pool: 6). Total 1 + 6 = 7.
        pytest.param(
            dra_configuration({"gpus": ["big-gpu", "small-gpu"]}),
            [
                device_class("small-gpu", "device.driver == 'small.example.com'"),
                resource_slice("s1", "small.example.com", "p1", 6),
                resource_slice("s2", "small.example.com", "p2", 5),
                resource_slice("b", "big.example.com", "p3", 9),
                claim_template(
                    "t",
                    """
- name: gpu
  firstAvailable:
  - {name: big, deviceClassName: big-gpu}
  - {name: small, deviceClassName: small-gpu, allocationMode: All}
""",
                    "v1",
                ),
            ],
            1,
            "7",
            id="in-a-first-available-alternative",
        ),
    ],
)
def test_all_counts_its_worst_case(config: str, objects: list[str], pods: int, gpus: str) -> None:
    """allocationMode All charges, per pod, every device of the largest current pool its class's
    driver could serve, as seed 000 specifies (upstream ``chargesForClaimSpec`` refuses All)."""
    assert charged(config, BIG_QUOTA, objects, pods) == {"cpu": str(pods), "gpus": gpus}


# Two pools: 4 devices of gpu.example.com's driver, 8 of another driver.
TWO_DRIVERS = [
    resource_slice("a", "gpu.example.com", "node-a", 4),
    resource_slice("o", "other.example.com", "node-o", 8),
]


@pytest.mark.parametrize(
    ("selector", "gpus"),
    [
        # The class selects on an attribute, which is not evaluated: every pool counts,
        # so the 8-device pool of other.example.com is the worst case.
        pytest.param(
            "device.attributes['gpu.example.com'].model == 'a100'",
            "8",
            id="undecidable-selectors-count-every-pool",
        ),
        # driver == gpu && <attribute test>: the attribute test is not evaluated, the driver is.
        pytest.param(
            "device.driver == 'gpu.example.com' && device.attributes['gpu.example.com'].model == 'x'",
            "4",
            id="a-driver-conjunct-narrows-to-that-driver",
        ),
        pytest.param(
            'device.driver == "gpu.example.com" || device.driver == "x.example.com"',
            "8",
            id="a-driver-disjunction-does-not-narrow",
        ),
    ],
)
def test_all_counts_the_pools_the_class_selector_may_match(selector: str, gpus: str) -> None:
    objects = [device_class("gpu.example.com", selector), *TWO_DRIVERS, claim_template("t", ALL_V1, "v1")]
    assert charged(GPU_CONFIG, BIG_QUOTA, objects, 1) == {"cpu": "1", "gpus": gpus}


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
        *TWO_DRIVERS,
        claim_template("t", requests, "v1"),
        claim_template("u", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
        dra_workload("x", [("main", 1, [("c", "u")])]),
    )
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "4"}}
    assert d.usage("x") == {"main": {"cpu": "1", "gpus": "8"}}


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
        "Misconfigured",
        f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t: request all asks for all "
        "devices of class gpu.example.com, but no ResourceSlice has a device matching that class",
    )
    d.load(resource_slice("a", "gpu.example.com", "node-a", 3))
    # 3 devices per pod, 2 pods.
    assert d.usage("w") == {"main": {"cpu": "2", "gpus": "6"}}


@pytest.mark.parametrize(
    "objects",
    [
        pytest.param(
            [GPU_DRIVER_CLASS, resource_slice("a", "gpu.example.com", "node-a", 0)], id="an-empty-pool"
        ),
        pytest.param(
            [
                device_class(
                    "gpu.example.com", "device.driver == 'a.example.com'", "device.driver == 'b.example.com'"
                ),
                resource_slice("a", "a.example.com", "pa", 2),
                resource_slice("b", "b.example.com", "pb", 2),
            ],
            id="contradicting-driver-selectors",
        ),
    ],
)
def test_all_without_a_device_to_count_is_inadmissible(objects: list[str]) -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(BIG_QUOTA),
        *objects,
        claim_template("t", ALL_V1, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.pending("w")[0] == "Misconfigured"


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
        "ExceedsMaxQuota",
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
