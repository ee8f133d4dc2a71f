"""config/examples/multikueue/: valid manifests that make an active MultiKueue check."""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.admission.multikueue import names
from kueuestream.agents.cli.main import main
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.agents.sources.manifests import load_paths
from kueuestream.agents.sources.watch_events import listing_events
from kueuestream.streams import codec
from kueuestream.streams.file_log import FileLog
from kueuestream.streams.schemas import MultiKueueAction, MultiKueueDecision, WatchEvent, WatchEventType

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "examples" / "multikueue"
T0 = 1_700_000_000_000


@pytest.mark.parametrize("cluster", ["manager", "worker"])
def test_the_example_is_valid(cluster: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLE / cluster)]) == 0
    counts = {"manager": 10, "worker": 4}
    assert capsys.readouterr().err == f"{counts[cluster]} objects valid\n"


def test_the_examples_check_is_active_once_both_workers_connect(tmp_path: Path) -> None:
    """admissionCheckReconciler over the example's objects: NoUsableClusters until the workers connect."""
    loaded = load_paths([str(EXAMPLE / "manager")])
    events, problems = listing_events([d.manifest for d in loaded.docs], T0)
    assert not problems and not loaded.errors

    def connected(worker: str) -> WatchEvent:
        return WatchEvent(
            cluster=names.worker_cluster(worker),
            kind=names.CLUSTER_CONNECTION_KIND,
            apiVersion=names.CLUSTER_CONNECTION_API_VERSION,
            name=worker,
            type=WatchEventType.MODIFIED,
            object={"connected": True, "reason": "Active", "message": "Connected"},
            timestamp=T0 + 1,
        )

    with FileLog(tmp_path / "log") as log:
        pipeline = EmbeddedPipeline(log)
        pipeline.submit([*events, connected("worker1"), connected("worker2")])
        pipeline.pump()
        assert list(log.read_sync("kueue.errors", 0)) == []
        decisions = [codec.decode(r.value, MultiKueueDecision) for r in log.read_sync("kueue.multikueue", 0)]
    active = [
        (d.name, d.active, d.reason) for d in decisions if d.action is MultiKueueAction.SET_CHECK_ACTIVE
    ]
    assert active == [
        ("multikueue", False, "NoUsableClusters"),
        ("multikueue", True, "SomeActiveClusters"),
        ("multikueue", True, "Active"),
    ]
    clusters = [(d.name, d.active) for d in decisions if d.action is MultiKueueAction.SET_CLUSTER_STATUS]
    assert clusters == [("worker1", True), ("worker2", True)]
