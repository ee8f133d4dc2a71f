"""Partial admission finds the most pods that fit, never below minCount.

Kueue's ``PodSetReducer.Search`` (pkg/scheduler/flavorassigner/podset_reducer.go)
binary-searches the steps of ``fillPodSetSizesForSearchIndex``. When fewer
pods never fit worse, that must agree with trying every step from the full
counts down, and every admission must keep each pod set between its minCount
and its count, with usage matching the admitted count.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kueuestream.admission.podset_reducer import counts_at, search
from tests.helpers import (
    cluster_queue_manifest,
    flavor_manifest,
    local_queue_manifest,
    run_manifests,
    workload_manifest,
)

pod_set = st.tuples(st.integers(1, 12), st.integers(0, 12)).map(
    lambda t: (t[0], None if t[1] == 0 or t[1] > t[0] else t[1])
)


@given(st.lists(pod_set, min_size=1, max_size=4), st.integers(0, 60), st.lists(st.integers(1, 4), min_size=4))
def test_binary_search_agrees_with_trying_every_step(
    pod_sets: list[tuple[int, int | None]], capacity: int, cpus: list[int]
) -> None:
    """PodSetReducer.Search against a scan of every step, for a quota of ``capacity`` cpus."""
    full = [count for count, _ in pod_sets]
    minimums = [minimum for _, minimum in pod_sets]

    def cost(counts: list[int]) -> int:
        return sum(n * cpu for n, cpu in zip(counts, cpus, strict=False))

    found = search(full, minimums, lambda counts: counts if cost(counts) <= capacity else None)
    deltas = [count - (count if m is None else m) for count, m in pod_sets]
    total = sum(deltas)
    steps = [counts_at(full, deltas, step, total) for step in range(total + 1)] if total else []
    expected = next((counts for counts in steps if cost(counts) <= capacity), None)
    assert found == expected
    if found is not None:
        for count, (top, minimum) in zip(found, pod_sets, strict=True):
            assert (top if minimum is None else minimum) <= count <= top


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 3), st.integers(0, 40))
def test_an_admission_holds_between_min_count_and_count(
    count: int, minimum: int, cpu: int, quota: int
) -> None:
    """What the engine admits: the largest count on Kueue's steps that fits the quota, its
    usage that count's; nothing when even minCount does not fit."""
    minimum = min(minimum, count)
    wl = workload_manifest("w", "q", {"cpu": str(cpu)}, count=count)
    wl["spec"]["podSets"][0]["minCount"] = minimum
    r = run_manifests(
        [
            flavor_manifest("default"),
            cluster_queue_manifest("q", [(["cpu"], [("default", {"cpu": quota})])]),
            local_queue_manifest("q", "q"),
            wl,
        ]
    )
    delta = count - minimum
    steps = [counts_at([count], [delta], s, delta)[0] for s in range(delta + 1)] if delta else [count]
    fitting = [n for n in steps if n * cpu <= quota]
    if not fitting:
        assert not r.is_admitted("w")
        return
    [psa] = r.status("w")["admission"]["podSetAssignments"]
    assert psa["count"] == fitting[0]
    assert psa["resourceUsage"] == {"cpu": str(fitting[0] * cpu)}
