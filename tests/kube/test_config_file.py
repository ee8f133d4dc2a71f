"""The Configuration file of ``kueuestream watch --config``: read once at start, sent when it changed.

- a valid file becomes one watch event of kind Configuration, decoded as Kueue
  would read it; starting again with the same file sends nothing;
- a changed file is sent again, as MODIFIED;
- a file that is not exactly one valid Configuration is refused before
  anything is sent, with the file, the field and what is wrong.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kueuestream.admission.decode import decode
from kueuestream.agents.kube.config_file import ConfigFileError, config_file_event
from kueuestream.agents.kube.watch_ledger import WatchLedger
from kueuestream.streams.schemas import WatchEventType

CONFIG = """\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
resources:
  quotaCheck: {check}
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare]
"""


def test_sent_once_then_again_only_when_changed(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(CONFIG.format(check="OnlyDeclared"))
    ledger = WatchLedger("c1")

    first = config_file_event(path, ledger, 100)
    assert first is not None
    assert (first.kind, first.name, first.type, first.cluster) == (
        "Configuration",
        "configuration",
        WatchEventType.ADDED,
        "c1",
    )
    assert first.resourceVersion.startswith("sha256:")
    decoded = decode(first.object)
    assert decoded.errors == [] and decoded.obj.quota_check == "OnlyDeclared"  # type: ignore[union-attr]
    ledger.record(first)

    assert config_file_event(path, ledger, 200) is None  # a restart with the same file

    path.write_text(CONFIG.format(check="All"))
    second = config_file_event(path, ledger, 300)
    assert second is not None and second.type == WatchEventType.MODIFIED
    assert second.resourceVersion != first.resourceVersion


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (CONFIG.format(check="Sometimes"), r"config.yaml:0: Configuration.*resources.quotaCheck.*'All'"),
        ("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n", r"found 1 document\(s\), 0 of them"),
        (CONFIG.format(check="All") + "---\n" + CONFIG.format(check="All"), r"found 2 document"),
        ("kind: [unclosed\n", r"config.yaml:0: not valid YAML: line 2"),
    ],
)
def test_an_unusable_file_is_refused_with_where_and_why(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError, match=message):
        config_file_event(path, WatchLedger("c1"), 100)
