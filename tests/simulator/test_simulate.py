"""The simulator: Kueue's generator format, virtual time, summaries, ranges and plots."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from kueuestream.agents.simulator.command import run_simulate
from kueuestream.agents.simulator.generator import GeneratorError, build_scenario, load_generator
from kueuestream.agents.simulator.pipeline import EmbeddedSimPipeline
from kueuestream.agents.simulator.scenario_run import run_scenario
from tests.helpers import TWO_JOBS

SCENARIOS = Path(__file__).resolve().parents[2] / "config" / "simulator" / "kueue-perf"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_generator_names_and_times_follow_kueue(tmp_path: Path) -> None:
    scenario = build_scenario(load_generator(SCENARIOS / "baseline" / "generator.yaml"))
    queues = [q.name for q in scenario.queues]
    assert len(queues) == 30
    assert queues[0] == "cq-0-0-cohort-0"
    assert {q.cohort for q in scenario.queues} == {f"cohort-{i}" for i in range(5)}
    assert len(scenario.workloads) == 30 * (350 + 100 + 50)
    first = [w for w in scenario.workloads if w.namespace == "cq-0-0-cohort-0"]
    small = sorted((w for w in first if w.class_name == "small"), key=lambda w: w.created_ms)
    # One workload every creationIntervalMs, the first after one interval.
    assert [w.created_ms for w in small[:3]] == [100, 200, 300]
    assert small[0].name == "small-0-0-0"
    large = sorted((w for w in first if w.class_name == "large"), key=lambda w: w.created_ms)
    assert large[-1].created_ms == 50 * 1200
    cq = next(o for o in scenario.objects if o["kind"] == "ClusterQueue")
    assert cq["spec"]["preemption"] == {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"}
    assert cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0] == {
        "name": "cpu",
        "nominalQuota": "20",
        "borrowingLimit": "100",
    }


def test_a_generator_that_is_not_one_is_refused_clearly(tmp_path: Path) -> None:
    path = _write(tmp_path, "bad.yaml", "cohorts:\n- className: c\n  count: two\n  queuesSets: []\n")
    with pytest.raises(
        GeneratorError, match=r"bad.yaml: not a Kueue scheduler-performance generator: .*count"
    ):
        load_generator(path)


def test_two_jobs_hand_computed(tmp_path: Path) -> None:
    # Two 1-cpu jobs of 1 s on a 2-cpu queue, created at 100 ms and 200 ms: both start at
    # once and finish at 1100 and 1200. cpu used = 2 x 1000 mCPU x 1000 ms; monitored from
    # 0 to 1200 ms against 2000 mCPU: 2e6 x 100 / (2000 x 1200) = 83.33%.
    scenario = build_scenario(load_generator(_write(tmp_path, "g.yaml", TWO_JOBS)))
    result = run_scenario(scenario, EmbeddedSimPipeline(tmp_path / "log"))
    cq = result.summary.cluster_queue_classes["cq"]
    assert (cq.cpu_used, cq.nominal_quota) == (2_000_000, 2000)
    assert round(cq.usage_percent, 2) == 83.33
    job = result.summary.workload_classes["job"]
    assert (job.count, job.average_time_to_admission_ms, job.average_time_to_finish_ms) == (2, 0, 1000)
    assert result.virtual_ms == 1200


def test_summary_has_kueue_shape_and_ranges_are_checked(tmp_path: Path) -> None:
    generator = _write(tmp_path, "g.yaml", TWO_JOBS)
    passing = _write(
        tmp_path,
        "ok.yaml",
        "clusterQueueClassesMinUsage: {cq: 80}\nwlClassesMaxAvgTimeToAdmissionMs: {job: 10}\n",
    )
    out = io.StringIO()
    assert run_simulate(str(generator), rangespec=str(passing), out=str(tmp_path / "o"), stream=out) == 0
    summary = yaml.safe_load((tmp_path / "o" / "summary.yaml").read_text())
    assert set(summary) == {"clusterQueueClasses", "workloadClasses"}
    assert set(summary["clusterQueueClasses"]["cq"]) == {
        "cpuUsed",
        "cpuAverageUsage",
        "nominalQuota",
        "firstEventTime",
        "lastEventTime",
    }
    assert set(summary["workloadClasses"]["job"]) == {
        "count",
        "totalEvictions",
        "averageTimeToAdmissionMs",
        "averageTimeToFinishMs",
    }
    for plot in ("usage.png", "time-to-admission.png"):
        assert (tmp_path / "o" / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ok    ClusterQueue class cq: usage" in out.getvalue()

    failing = _write(tmp_path, "fail.yaml", "clusterQueueClassesMinUsage: {cq: 90}\n")
    out = io.StringIO()
    assert run_simulate(str(generator), rangespec=str(failing), out=str(tmp_path / "o2"), stream=out) == 1
    assert "FAIL  ClusterQueue class cq: usage" in out.getvalue()


def test_two_configurations_side_by_side(tmp_path: Path) -> None:
    generator = _write(tmp_path, "g.yaml", TWO_JOBS)
    a = _write(tmp_path, "plain.yaml", "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n")
    b = _write(
        tmp_path,
        "fair.yaml",
        "apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\n"
        "fairSharing: {preemptionStrategies: [LessThanInitialShare]}\n",
    )
    out = io.StringIO()
    assert run_simulate(str(generator), configs=[str(a), str(b)], out=str(tmp_path / "o"), stream=out) == 0
    header = out.getvalue().splitlines()[2]
    assert "plain" in header and "fair" in header
    assert (tmp_path / "o" / "plain" / "summary.yaml").exists()
    assert (tmp_path / "o" / "fair" / "summary.yaml").exists()


def test_the_simulation_log_replays_decision_for_decision(tmp_path: Path) -> None:
    from kueuestream.agents.audit.replay import replay

    generator = _write(
        tmp_path,
        "g.yaml",
        TWO_JOBS.replace("count: 2\n      creationIntervalMs", "count: 6\n      creationIntervalMs"),
    )
    assert run_simulate(str(generator), out=str(tmp_path / "o"), stream=io.StringIO()) == 0
    out = io.StringIO()
    assert replay(str(tmp_path / "o" / "log"), out=out) == 0, out.getvalue()


PREEMPTION = """
cohorts:
- className: cohort
  count: 1
  queuesSets:
  - className: cq
    count: 1
    nominalQuota: 1
    withinClusterQueue: LowerPriority
    workloadsSets:
    - count: 1
      creationIntervalMs: 100
      workloads:
      - {className: low, runtimeMs: 1000, priority: 0, request: 1}
    - count: 1
      creationIntervalMs: 200
      workloads:
      - {className: high, runtimeMs: 500, priority: 10, request: 1}
"""


def test_an_evicted_workload_runs_again_and_finishes(tmp_path: Path) -> None:
    # low starts at 100; high arrives at 200 and preempts it; low's job stops at once, is
    # tried again at once and waits (high holds the quota). Kueue moves parked workloads
    # back a second after capacity first frees, here when low stopped at 200, and high's
    # finish at 700 rides along: low is admitted again at 1200 and finishes at 2200, so
    # time to (latest) admission 1100, to finish 2100.
    scenario = build_scenario(load_generator(_write(tmp_path, "g.yaml", PREEMPTION)))
    result = run_scenario(scenario, EmbeddedSimPipeline(tmp_path / "log"))
    assert result.recorder.unfinished() == 0
    low = result.summary.workload_classes["low"]
    high = result.summary.workload_classes["high"]
    assert (low.total_evictions, low.average_time_to_admission_ms, low.average_time_to_finish_ms) == (
        1,
        1100,
        2100,
    )
    assert (high.total_evictions, high.average_time_to_admission_ms) == (0, 0)
    assert result.virtual_ms == 2200
