"""Workloads whose devices cannot be counted: inadmissible, with pod set, claim and cause."""

from __future__ import annotations

from kueuestream.admission.engine import Engine
from kueuestream.admission.events import Event, EventType
from tests.dra.drive import drive
from tests.helpers import NS, claim_template, docs_of, dra_configuration, dra_queue, dra_workload

GPU_CONFIG = dra_configuration({"gpus": ["gpu.example.com"]})
QUOTA = {"gpus": 10}
ONE_GPU = "- {name: gpu, deviceClassName: gpu.example.com}"


def test_direct_resource_claim_is_inadmissible() -> None:
    d = drive(GPU_CONFIG, dra_queue(QUOTA), dra_workload("w", [("main", 1, [("gpu", "claim:shared-gpu")])]))
    assert d.pending("w") == (
        "Misconfigured",
        "pod set main, resource claim gpu: uses ResourceClaim shared-gpu directly (resourceClaimName), "
        "which is not supported; use a ResourceClaimTemplate (resourceClaimTemplateName)",
    )


def test_direct_resource_claim_stays_inadmissible_when_the_claim_exists() -> None:
    claim = f"""
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {{name: shared-gpu, namespace: {NS}}}
spec:
  devices:
    requests:
    - {{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}
---
"""
    d = drive(
        GPU_CONFIG, dra_queue(QUOTA), claim, dra_workload("w", [("main", 1, [("gpu", "claim:shared-gpu")])])
    )
    assert d.rejected() == {}
    assert d.pending("w")[0] == "Misconfigured"
    assert "uses ResourceClaim shared-gpu directly" in d.pending("w")[1]


def test_unmapped_device_class_is_inadmissible() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(QUOTA),
        claim_template(
            "t",
            """
- {name: gpu, deviceClassName: gpu.example.com}
- {name: fpga, deviceClassName: fpga.example.com}
""",
        ),
        dra_workload("w", [("main", 1, [("accel", "t")])]),
    )
    assert d.pending("w") == (
        "Misconfigured",
        f"pod set main, resource claim accel: ResourceClaimTemplate {NS}/t: request fpga uses device "
        "class fpga.example.com, which no resources.deviceClassMappings entry maps to a resource",
    )


def test_unmapped_alternative_names_the_subrequest() -> None:
    requests = """
- name: gpu
  firstAvailable:
  - {name: big, deviceClassName: gpu.example.com}
  - {name: tiny, deviceClassName: tiny.example.com}
"""
    d = drive(
        GPU_CONFIG,
        dra_queue(QUOTA),
        claim_template("t", requests, "v1"),
        dra_workload("w", [("main", 1, [("c", "t")])]),
    )
    assert d.pending("w") == (
        "Misconfigured",
        f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t: request gpu/tiny uses device "
        "class tiny.example.com, which no resources.deviceClassMappings entry maps to a resource",
    )


def test_mapping_added_by_a_new_configuration_makes_it_admissible() -> None:
    d = drive(
        dra_configuration({}),
        dra_queue(QUOTA),
        claim_template("t", ONE_GPU),
        dra_workload("w", [("main", 2, [("c", "t")])]),
    )
    assert d.pending("w")[0] == "Misconfigured"
    d.load(GPU_CONFIG)
    assert d.usage("w") == {"main": {"cpu": "2", "gpus": "2"}}


def test_missing_template_is_inadmissible_until_it_appears() -> None:
    d = drive(GPU_CONFIG, dra_queue(QUOTA), dra_workload("w", [("main", 3, [("gpu", "later")])]))
    assert d.pending("w") == (
        "Misconfigured",
        f"pod set main, resource claim gpu: ResourceClaimTemplate {NS}/later not found",
    )
    # The template arrives: the workload is counted and admitted without being resubmitted.
    d.load(claim_template("later", "- {name: gpu, deviceClassName: gpu.example.com, count: 2}"))
    assert d.usage("w") == {"main": {"cpu": "3", "gpus": "6"}}


def test_template_is_read_from_the_workload_namespace() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(QUOTA),
        claim_template("t", ONE_GPU, namespace="elsewhere"),
        dra_workload("w", [("main", 1, [("gpu", "t")])]),
    )
    assert d.pending("w") == (
        "Misconfigured",
        f"pod set main, resource claim gpu: ResourceClaimTemplate {NS}/t not found",
    )


def test_invalid_template_is_refused_and_its_workloads_say_why() -> None:
    bad = "- {name: gpu, deviceClassName: gpu.example.com, count: 0}"
    d = drive(
        GPU_CONFIG,
        dra_queue(QUOTA),
        claim_template("t", bad),
        dra_workload("w", [("main", 1, [("gpu", "t")])]),
    )
    assert d.rejected() == {
        f"ResourceClaimTemplate {NS}/t": (
            "spec.spec.devices.requests[0].count: must be greater than zero, got 0"
        )
    }
    assert d.pending("w") == (
        "Misconfigured",
        f"pod set main, resource claim gpu: ResourceClaimTemplate {NS}/t is invalid: "
        "spec.spec.devices.requests[0].count: must be greater than zero, got 0",
    )
    # Fixed: counted and admitted.
    d.load(claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com, count: 4}"))
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "4"}}


def test_invalid_update_of_a_stored_template_keeps_the_stored_one() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue({"gpus": 1}),
        claim_template("t", ONE_GPU),
        dra_workload("a", [("main", 1, [("gpu", "t")])]),
    )
    d.load(claim_template("t", "- {name: gpu, allocationMode: Some, deviceClassName: gpu.example.com}"))
    assert f"ResourceClaimTemplate {NS}/t" in d.rejected()
    d.load(dra_workload("b", [("main", 1, [("gpu", "t")])]))
    # b is counted with the stored template (1 GPU) and waits for quota, not for a fix.
    assert d.pending("b") == (
        "WaitingForQuota",
        "couldn't assign flavors to pod set main: insufficient unused quota for gpus in flavor f, "
        "1 more needed",
    )


def test_every_problem_of_a_workload_is_reported_in_spec_order() -> None:
    d = drive(
        GPU_CONFIG,
        dra_queue(QUOTA),
        claim_template("unmapped", "- {name: x, deviceClassName: x.example.com}"),
        dra_workload(
            "w",
            [
                ("launcher", 1, [("a", "claim:direct"), ("b", "missing")]),
                ("workers", 2, [("c", "unmapped")]),
            ],
        ),
    )
    assert d.pending("w") == (
        "Misconfigured",
        "pod set launcher, resource claim a: uses ResourceClaim direct directly (resourceClaimName), "
        "which is not supported; use a ResourceClaimTemplate (resourceClaimTemplateName); "
        f"pod set launcher, resource claim b: ResourceClaimTemplate {NS}/missing not found; "
        f"pod set workers, resource claim c: ResourceClaimTemplate {NS}/unmapped: request x uses "
        "device class x.example.com, which no resources.deviceClassMappings entry maps to a resource",
    )


# ----------------------------------------------------------- feature gate


def test_gate_off_ignores_claims() -> None:
    # With the gate off, neither the direct claim nor the missing template nor the
    # unmapped class matters: only cpu is counted (2 pods -> 2).
    for gate in ("DynamicResourceAllocation", "KueueDRAIntegration"):
        d = drive(
            dra_configuration({"gpus": ["gpu.example.com"]}, gates={gate: False}),
            dra_queue(QUOTA),
            claim_template("unmapped", "- {name: x, deviceClassName: x.example.com}"),
            claim_template("t", ONE_GPU),
            dra_workload(
                "w", [("main", 2, [("a", "claim:direct"), ("b", "missing"), ("c", "unmapped"), ("d", "t")])]
            ),
        )
        assert d.usage("w") == {"main": {"cpu": "2"}}, gate


def test_gate_is_on_by_default_and_alias_turns_it_on() -> None:
    for gates in (None, {"KueueDRAIntegration": True}):
        d = drive(
            dra_configuration({"gpus": ["gpu.example.com"]}, gates=gates),
            dra_queue(QUOTA),
            claim_template("t", ONE_GPU),
            dra_workload("w", [("main", 2, [("c", "t")])]),
        )
        assert d.usage("w") == {"main": {"cpu": "2", "gpus": "2"}}


def test_gate_turned_off_later_recounts_pending_workloads() -> None:
    d = drive(GPU_CONFIG, dra_queue(QUOTA), dra_workload("w", [("main", 1, [("gpu", "missing")])]))
    assert d.pending("w")[0] == "Misconfigured"
    d.load(dra_configuration({"gpus": ["gpu.example.com"]}, gates={"DynamicResourceAllocation": False}))
    assert d.usage("w") == {"main": {"cpu": "1"}}


# ----------------------------------------------------------- determinism


def test_decisions_are_the_same_on_replay() -> None:
    text = "".join(
        [
            GPU_CONFIG,
            dra_queue({"gpus": 3}),
            claim_template("t", "- {name: gpu, deviceClassName: gpu.example.com, count: 2}"),
            dra_workload("a", [("main", 1, [("c", "t")])]),
            dra_workload("b", [("main", 1, [("c", "t")])]),
            dra_workload("c", [("main", 1, [("c", "missing")])]),
        ]
    )

    def replay() -> list[tuple[str, str, object, str]]:
        e = Engine()
        docs = docs_of(text)
        out = []
        for i, doc in enumerate(docs):
            out += e.apply(Event(EventType.UPSERT, 5_000, manifest=doc, batch=i < len(docs) - 1))
        return [(str(x.ref), str(x.action), x.status, x.message) for x in out]

    first = replay()
    assert first == replay()
    assert sorted((ref, action) for ref, action, _, _ in first) == [
        (f"Workload {NS}/a", "Admitted"),
        (f"Workload {NS}/b", "Pending"),
        (f"Workload {NS}/c", "Pending"),
    ]
