"""Templates are immutable; deleting and re-creating one changes only Workloads not yet admitted."""

from __future__ import annotations

from tests.dra.drive import Drive
from tests.helpers import NS, claim_template, dra_configuration, dra_queue, dra_workload

GPU_CONFIG = dra_configuration({"gpus": ["gpu.example.com"]})


def gpus(n: int) -> str:
    return f"- {{name: gpu, deviceClassName: gpu.example.com, count: {n}}}"


def more_needed(n: int) -> tuple[str, str]:
    return (
        "WaitingForQuota",
        f"couldn't assign flavors to pod set main: insufficient unused quota for gpus in flavor f, "
        f"{n} more needed",
    )


def test_recreated_template_changes_only_workloads_not_yet_admitted() -> None:
    # Quota 6. a: 2 pods x 1 GPU = 2, admitted. p: 1 pod x 5 = 5, pending (2 + 5 > 6 by 1).
    d = Drive()
    d.load(
        GPU_CONFIG
        + dra_queue({"gpus": 6})
        + claim_template("t", gpus(1), uid="uid-1")
        + dra_workload("a", [("main", 2, [("c", "t")])])
        + claim_template("big", gpus(5))
        + dra_workload("p", [("main", 1, [("c", "big")])])
    )
    assert d.usage("a") == {"main": {"cpu": "2", "gpus": "2"}}
    assert d.pending("p") == more_needed(1)

    d.delete("ResourceClaimTemplate", "t", NS)
    # a keeps the usage it was admitted with; nothing about it changes.
    assert d.usage("a") == {"main": {"cpu": "2", "gpus": "2"}}
    d.load(dra_workload("b", [("main", 1, [("c", "t")])]))
    assert d.pending("b") == (
        "Misconfigured",
        f"pod set main, resource claim c: ResourceClaimTemplate {NS}/t not found",
    )

    # Created again with 3 GPUs: b (pending) is counted with 3, a still holds 2.
    d.load(claim_template("t", gpus(3), uid="uid-2"))
    assert d.usage("a") == {"main": {"cpu": "2", "gpus": "2"}}
    # Free: 6 - 2 = 4. p (older, tried first) asks 5: 1 more needed; then b asks 3 and
    # is admitted: 2 + 3 = 5 used.
    assert d.usage("b") == {"main": {"cpu": "1", "gpus": "3"}}
    assert d.pending("p") == more_needed(1)

    # a deleted: its 2 GPUs are free again; 6 - 3 = 3 free, p asks 5: 2 more needed.
    d.delete("Workload", "a", NS)
    assert d.pending("p") == more_needed(2)


def test_pending_workload_is_recounted_when_its_template_is_recreated() -> None:
    # Quota 2. w: 1 pod x 3 GPUs -> pending. Re-created template asks 1 -> admitted.
    d = Drive()
    d.load(
        GPU_CONFIG
        + dra_queue({"gpus": 2})
        + claim_template("t", gpus(3))
        + dra_workload("w", [("main", 1, [("c", "t")])])
    )
    assert d.pending("w") == (
        "ExceedsMaxQuota",
        "couldn't assign flavors to pod set main: insufficient quota for gpus in flavor f, "
        "previously considered podsets requests (0) + current podset request (3) > maximum capacity (2)",
    )
    d.delete("ResourceClaimTemplate", "t", NS)
    assert d.pending("w")[0] == "Misconfigured"
    d.load(claim_template("t", gpus(1)))
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "1"}}


def test_changing_a_stored_template_in_place_is_ignored() -> None:
    # Templates are immutable: the API server refuses such an update and keeps the
    # stored template. A new Workload is still counted with 1 GPU, not 4.
    d = Drive()
    d.load(GPU_CONFIG + dra_queue({"gpus": 10}) + claim_template("t", gpus(1), uid="same"))
    d.load(claim_template("t", gpus(4), uid="same"))
    d.load(dra_workload("w", [("main", 1, [("c", "t")])]))
    assert d.usage("w") == {"main": {"cpu": "1", "gpus": "1"}}
    d.load(claim_template("t", gpus(4)))  # no uid at all: the same object as far as we can tell
    d.load(dra_workload("x", [("main", 1, [("c", "t")])]))
    assert d.usage("x") == {"main": {"cpu": "1", "gpus": "1"}}


def test_a_new_uid_is_a_recreated_template_even_without_its_deletion() -> None:
    # A watch can miss the deletion; the new uid says it is another object.
    d = Drive()
    d.load(GPU_CONFIG + dra_queue({"gpus": 10}) + claim_template("t", gpus(1), uid="uid-1"))
    d.load(dra_workload("a", [("main", 1, [("c", "t")])]))
    d.load(claim_template("t", gpus(4), uid="uid-2"))
    d.load(dra_workload("b", [("main", 1, [("c", "t")])]))
    assert d.usage("a") == {"main": {"cpu": "1", "gpus": "1"}}
    assert d.usage("b") == {"main": {"cpu": "1", "gpus": "4"}}


def test_same_template_in_another_version_is_not_a_change() -> None:
    d = Drive()
    d.load(GPU_CONFIG + dra_queue({"gpus": 10}) + claim_template("t", gpus(2), uid="u"))
    before = len(d.decisions)
    nested = "- {name: gpu, exactly: {deviceClassName: gpu.example.com, count: 2}}"
    assert d.load(claim_template("t", nested, version="v1", uid="u")) == []
    assert len(d.decisions) == before
