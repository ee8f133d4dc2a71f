"""Seed 000's complete example, run from config/examples/dra/ (issue 3, "Done when")."""

from __future__ import annotations

from kueuestream.admission.decode import decode
from tests.dra.drive import EXAMPLE_DIR, Drive, job_name
from tests.helpers import docs_of

MSG_NO_GPU_QUOTA = (
    "couldn't assign flavors to pod set main: insufficient unused quota for whole-gpus "
    "in flavor default-gpu-flavor, 1 more needed"
)


def example_text() -> str:
    return "---\n".join(p.read_text() for p in sorted(EXAMPLE_DIR.glob("*.yaml")))


def job(name: str) -> str:
    """A copy of the example's job0, under another name."""
    text = (EXAMPLE_DIR / "05-job.yaml").read_text()
    return text.replace("name: job0", f"name: {name}")


def test_example_folder_holds_the_seed_objects() -> None:
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs_of(example_text())]
    assert kinds == [
        ("ConfigMap", "kueue-controller-manager-config"),
        ("ResourceFlavor", "default-gpu-flavor"),
        ("ClusterQueue", "gpus-cluster-queue"),
        ("LocalQueue", "user-queue"),
        ("ResourceClaimTemplate", "single-gpu"),
        ("Job", "job0"),
    ]
    for doc in docs_of(example_text()):
        decoded = decode(doc)
        assert decoded.errors == [], decoded


def test_seed_example_shows_step_5_status() -> None:
    d = Drive()
    d.load(example_text())
    name = job_name(d, "job0")
    assert d.rejected() == {}
    status = d.status(name)
    assert status["admission"] == {
        "clusterQueue": "gpus-cluster-queue",
        "podSetAssignments": [
            {
                "name": "main",
                "flavors": {
                    "cpu": "default-gpu-flavor",
                    "memory": "default-gpu-flavor",
                    "whole-gpus": "default-gpu-flavor",
                },
                "resourceUsage": {"cpu": "1", "memory": "200Mi", "whole-gpus": "1"},
                "count": 1,
            }
        ],
    }
    assert d.reserved(name)["message"] == "Quota reserved in ClusterQueue gpus-cluster-queue"


def test_third_one_gpu_job_waits_for_whole_gpus_quota() -> None:
    # Quota: cpu 9, memory 1200Mi, whole-gpus 2. Each job: cpu 1, memory 200Mi, 1 GPU.
    # Three jobs need cpu 3 <= 9 and memory 600Mi <= 1200Mi, but whole-gpus 3 > 2.
    d = Drive()
    d.load(example_text())
    d.load(job("job1"))
    d.load(job("job2"))
    first, second, third = (job_name(d, j) for j in ("job0", "job1", "job2"))
    assert d.is_admitted(first)
    assert d.is_admitted(second)
    assert d.usage(second) == {"main": {"cpu": "1", "memory": "200Mi", "whole-gpus": "1"}}
    assert d.pending(third) == ("WaitingForQuota", MSG_NO_GPU_QUOTA)
    # Deleting the first job frees its GPU: the third is admitted.
    d.delete("Job", "job0", "gpu-test1")
    assert d.is_admitted(third)
    assert d.usage(third) == {"main": {"cpu": "1", "memory": "200Mi", "whole-gpus": "1"}}


def test_seed_invalid_configuration_is_refused() -> None:
    path = EXAMPLE_DIR / "invalid" / "duplicate-device-class.yaml"
    [doc] = docs_of(path.read_text())
    decoded = decode(doc)
    assert decoded.obj is None
    assert [str(e) for e in decoded.errors] == [
        "data[config.yaml].resources.deviceClassMappings[1].deviceClassNames[0]: "
        "device class gpus.example.com is mapped by both whole-gpus "
        "(resources.deviceClassMappings[0]) and fast-gpus (resources.deviceClassMappings[1]); "
        "a device class may map to one resource name only"
    ]
    d = Drive()
    d.load(path.read_text())
    [(ref, message)] = d.rejected().items()
    assert ref == "Configuration kueue-controller-manager-config"
    assert "gpus.example.com" in message and "whole-gpus" in message and "fast-gpus" in message
