"""Quota tree: borrowing, lending limits and cohort quotas, worked out by hand."""

from __future__ import annotations

from tests.helpers import cluster_queue, flavor, run, workload


def test_borrowing_stops_at_the_borrowing_limit() -> None:
    # a has 4 cpu and may borrow 2 of b's 6: 6 in all. Three 2-cpu workloads fit (6),
    # a fourth would need 8 > 4 + 2.
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 4, borrowingLimit: 2}]", cohort="c")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 6}]", cohort="c")
        + "".join(workload(f"w{i}", "a", cpu="2", created=f"2024-01-01T00:00:0{i}Z") for i in range(4))
    )
    r = run(text)
    assert r.admitted() == ["w0", "w1", "w2"]
    assert r.pending_message("w3") == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu "
        "in flavor default, 2 more needed"
    )


def test_without_borrowing_limit_a_queue_takes_all_the_cohort_lends() -> None:
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 4}]", cohort="c")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 6}]", cohort="c")
        + workload("big", "a", cpu="10")
    )
    r = run(text)
    assert r.admitted() == ["big"]


def test_lending_limit_holds_quota_back() -> None:
    # b lends only 2 of its 6 cpu, so a (4 cpu) can reach 6 at most: 7 does not fit,
    # and the maximum capacity is reported.
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 4}]", cohort="c")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 6, lendingLimit: 2}]", cohort="c")
        + workload("six", "a", cpu="6", created="2024-01-01T00:00:00Z")
        + workload("one", "b", cpu="1", created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.admitted() == ["one", "six"]
    r2 = run(
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 4}]", cohort="c")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 6, lendingLimit: 2}]", cohort="c")
        + workload("seven", "a", cpu="7")
    )
    assert r2.admitted() == []
    assert r2.pending_message("seven") == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, "
        "previously considered podsets requests (0) + current podset request (7) > maximum capacity (6)"
    )


def test_lent_quota_stays_guaranteed_to_its_owner() -> None:
    # b keeps 4 of its 6 cpu for itself; a borrows the 2 lent. b can still use its 4.
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 0}]", cohort="c")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 6, lendingLimit: 2}]", cohort="c")
        + workload("borrower", "a", cpu="2", created="2024-01-01T00:00:00Z")
        + workload("owner", "b", cpu="4", created="2024-01-01T00:00:01Z")
        + workload("extra", "b", cpu="1", created="2024-01-01T00:00:02Z")
    )
    r = run(text)
    assert r.admitted() == ["borrower", "owner"]
    assert "1 more needed" in r.pending_message("extra")


def test_quota_of_a_parent_cohort() -> None:
    # Cohort "team" sits under "org", which holds 8 cpu of its own. A queue in "team"
    # with 2 cpu can use 2 + 8 = 10.
    text = (
        flavor("default")
        + """
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: org}
spec:
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: default
      resources: [{name: cpu, nominalQuota: 8}]
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: Cohort
metadata: {name: team}
spec: {parentName: org}
---"""
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 2}]", cohort="team")
        + workload("ten", "a", cpu="10", created="2024-01-01T00:00:00Z")
        + workload("more", "a", cpu="1", created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.admitted() == ["ten"]
    assert "1 more needed" in r.pending_message("more")


def test_implicit_cohort_named_only_by_queues() -> None:
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 1}]", cohort="implicit")
        + cluster_queue("b", "default: [{name: cpu, nominalQuota: 3}]", cohort="implicit")
        + workload("w", "a", cpu="4")
    )
    assert run(text).admitted() == ["w"]


def test_usage_released_by_a_finished_workload_admits_the_next() -> None:
    text = (
        flavor("default")
        + cluster_queue("a", "default: [{name: cpu, nominalQuota: 2}]")
        + workload("first", "a", cpu="2", created="2024-01-01T00:00:00Z")
        + workload("second", "a", cpu="2", created="2024-01-01T00:00:01Z")
    )
    r = run(text)
    assert r.admitted() == ["first"]
    r.tick()
    r.finish("default", "first")
    assert r.admitted() == ["second"]
    assert r.condition("first", "Finished")["status"] == "True"
