"""The Workload name Kueue's job framework gives an owner, character for character.

The expected names were computed with Go's crypto/sha1 over the same input as
upstream's jobframework ``getHash`` (kind, group, name, UID and, when given,
the generation, separated by newlines).
"""

from __future__ import annotations

from kueuestream.admission.api.batch import Job
from kueuestream.admission.jobs import workload_for_job, workload_name

UID = "0b6b7a1e-5c1f-4d55-9a43-2f0a7e0c1d11"
LONG = "nightly-training-run-" * 13 + "end"  # 276 characters


def test_job_names_match_get_workload_name_for_owner_with_gvk() -> None:
    """jobframework.GetWorkloadNameForOwnerWithGVK: ``<kind lower>-<owner>-<5 hex of sha1>``."""
    assert workload_name("Job", "name", "uid") == "job-name-ef3a1"


def test_other_kinds_are_named_by_their_kind_and_hashed_with_their_group() -> None:
    """GetWorkloadNameForOwnerWithGVK for a JobSet: kind lower-cased, group in the hash."""
    assert workload_name("JobSet", "train", UID, group="jobset.x-k8s.io") == "jobset-train-1684d"
    # The same owner name under another kind or group never shares a Workload.
    assert workload_name("Job", "train", UID) != workload_name("Job", "train", UID, group="example.com")


def test_generation_is_hashed_as_get_workload_name_for_owner_with_gvk_and_generation() -> None:
    """jobframework.GetWorkloadNameForOwnerWithGVKAndGeneration: the generation joins the hash only."""
    assert workload_name("Job", "name", "uid", generation=1) == "job-name-2514c"
    assert workload_name("RayJob", "train", UID, group="ray.io", generation=3) == "rayjob-train-ba9bd"


def test_long_owner_names_cut_the_prefix_but_hash_the_whole_name() -> None:
    """GenerateWorkloadNamePrefix cuts ``job-<owner>`` to 247 characters; the hash sees the full name."""
    name = workload_name("Job", LONG, "uid")
    assert len(name) == 253
    assert name == ("job-" + LONG)[:247] + "-eade9"
    # Owners alike in their first 247 characters still get their own Workloads.
    assert workload_name("Job", LONG + "x", "uid") == ("job-" + LONG)[:247] + "-59530"


def test_the_workload_made_from_a_job_carries_that_name() -> None:
    """jobframework.ConstructWorkload names the Workload with GetWorkloadNameForOwnerWithGVK."""
    job = Job.model_validate(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "name",
                "namespace": "team-a",
                "uid": "uid",
                "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            },
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
        }
    )
    assert workload_for_job(job).metadata.name == "job-name-ef3a1"
