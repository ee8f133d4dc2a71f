"""``replay LOG --config FILE``: every name in FILE that the log never saw is warned about."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from kueuestream.agents.audit.replay import replay
from kueuestream.agents.embedded.pipeline import EmbeddedPipeline
from kueuestream.streams.file_log import FileLog
from tests.helpers import NS, cpu_queue, flavor_manifest, local_queue_manifest
from tests.pipeline.embedded_run import run_steps
from tests.pipeline.watch_streams import workload_stream

CONFIGURATION = {
    "apiVersion": "config.kueue.x-k8s.io/v1beta1",
    "kind": "Configuration",
    "resources": {
        "deviceClassMappings": [{"name": "example.com/gpu", "deviceClassNames": ["gpu.example.com"]}]
    },
}


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    directory = tmp_path / "recorded"
    with FileLog(directory) as log:
        run_steps(EmbeddedPipeline(log), workload_stream(10, seed=2).steps)
    return directory


def what_if(log: Path, changes: Path, capsys: pytest.CaptureFixture[str]) -> tuple[str, list[str]]:
    out = io.StringIO()
    assert replay(str(log), str(changes), out=out) == 0
    return out.getvalue(), capsys.readouterr().err.splitlines()


def test_names_the_log_never_saw_are_warned_about(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Configuration and objects naming what is not there: the report alone would say nothing changed."""
    changes = tmp_path / "changes.yaml"
    b1 = cpu_queue("b1", 8, "b", flavors=("default", "gpu-nodes"))
    changes.write_text(
        yaml.safe_dump_all(
            [
                CONFIGURATION,
                cpu_queue("b9", 2, "b"),  # a typo for b1
                b1,
                cpu_queue("solo", 4, "new-tree"),
                local_queue_manifest("lq-b1", "b2", NS),
            ]
        )
    )
    report, warnings = what_if(recorded, changes, capsys)
    assert "Admitted earlier: 0" in report
    prefix = f"warning: {changes}: "
    assert warnings == [
        prefix + "ClusterQueue b1 uses ResourceFlavor gpu-nodes, which is not in the log",
        prefix + "ClusterQueue b9 is not in the log, so the what-if has nothing to change with it",
        prefix + "ClusterQueue solo joins cohort new-tree, which nothing in the log names",
        prefix + "LocalQueue team/lq-b1 points to ClusterQueue b2, which is not in the log",
        prefix + "Configuration maps DeviceClass gpu.example.com to example.com/gpu, but no DeviceClass, "
        "claim or template in the log names it",
    ]


def test_names_the_log_holds_are_not_warned_about(
    recorded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    changes = tmp_path / "smaller.yaml"
    changes.write_text(
        yaml.safe_dump_all(
            [cpu_queue("b1", 2, "b"), local_queue_manifest("lq-a1", "a2", NS), flavor_manifest("spot")]
        )
    )
    report, warnings = what_if(recorded, changes, capsys)
    assert warnings == []
    assert "ClusterQueue usage at the end of the log" in report
