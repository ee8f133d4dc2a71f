"""``explain kafka://HOST:PORT``: the same timeline from Kafka topics as from the embedded log."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest

from kueuestream.agents.audit.explain import UnknownWorkload, explain_json
from kueuestream.agents.audit.transfer import import_log
from kueuestream.agents.embedded.runtime import run_source
from tests.helpers import cluster_queue, flavor, workload

pytestmark = pytest.mark.kafka


def test_explain_reads_the_kafka_topics(kafka_bootstrap: str, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    cq = cluster_queue(
        "q",
        "default: [{name: cpu, nominalQuota: 4}]",
        spec_extra="  preemption: {withinClusterQueue: LowerPriority}",
    )
    (src / "q.yaml").write_text(flavor("default") + cq)
    (src / "low.yaml").write_text(workload("low", "q", cpu="4", priority=1))
    log = tmp_path / "log"
    assert run_source(str(src), str(tmp_path / "status"), str(log), once=True, out=io.StringIO()) == 0
    (src / "high.yaml").write_text(
        workload("high", "q", cpu="4", priority=10, created="2024-01-01T01:00:00Z")
    )
    assert run_source(str(src), str(tmp_path / "status"), str(log), once=True, out=io.StringIO()) == 0
    prefix = f"explain-{uuid.uuid4().hex[:8]}."
    broker = f"kafka://{kafka_bootstrap}"
    assert import_log(str(log), broker, prefix=prefix) == 0
    for name in ("low", "high"):
        from_kafka = explain_json(broker, "default", name, prefix=prefix)
        assert from_kafka == explain_json(str(log), "default", name)
    low = explain_json(broker, "default", "low", prefix=prefix)
    preempted = next(e for e in low["timeline"] if e["event"] == "Preempted")
    assert (preempted["preemptor"], preempted["policy"]) == ("default/high", "InClusterQueue")
    with pytest.raises(UnknownWorkload, match="closest: default/low"):
        explain_json(broker, "default", "lowe", prefix=prefix)
