"""Bad input is recorded with a clear error and skipped; what follows it still flows."""

from __future__ import annotations

from kueuestream.agents.embedded.memory_log import MemoryLog
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from tests.helpers import T0, cpu_workload, two_trees
from tests.pipeline.embedded_run import decisions, errors, run_steps
from tests.pipeline.watch_streams import Stream, bad_watch_values


def test_bad_events_are_recorded_and_skipped() -> None:
    stream = Stream()
    stream.listing(two_trees())
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)
    pipeline.submit_raw(bad_watch_values())
    after = Stream(time_ms=T0 + 10_000)
    after.event(cpu_workload("good", "lq-solo", 2))
    run_steps(pipeline, after.steps)

    found = errors(pipeline.log)
    assert [str(e.source) for e in found] == [f"kueue.watch[0]@{i}" for i in range(14, 18)]
    malformed, unknown, invalid, no_object = (e.error for e in found)
    assert malformed.startswith("malformed watch event: cannot decode WatchEvent: malformed JSON")
    assert unknown.startswith("Service team/web (v1): unknown kind, not one Kueuestream reads")
    assert invalid.startswith("Workload team/broken: spec.podSets[0].count: expected an integer")
    assert "three" in invalid
    assert "object is required for a ADDED event" in no_object
    assert found[0].raw == '{"cluster": "local", "kind": '

    # The Workload after them is admitted; nothing was decided about the bad ones.
    by_name = {d.ref.name: d for part in decisions(pipeline.log) for d in part}
    assert by_name["good"].action.value == "Admitted"
    assert "broken" not in by_name and "web" not in by_name


def test_errors_are_not_recorded_again_after_a_restart() -> None:
    stream = Stream()
    stream.listing(two_trees())
    pipeline = run_steps(EmbeddedPipeline(MemoryLog()), stream.steps)
    pipeline.submit_raw(bad_watch_values())
    pipeline.pump()
    restarted = EmbeddedPipeline(pipeline.log)
    restarted.pump()
    assert len(errors(pipeline.log)) == 4
    assert restarted.stats.errors == 0
