"""config/topics.yaml says what the code creates (docker-compose.yml is checked in tests/test_compose.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kueuestream.streams.topics import TOPICS

REPO = Path(__file__).resolve().parents[2]


def test_topics_file_matches_the_code() -> None:
    doc = yaml.safe_load((REPO / "config" / "topics.yaml").read_text())
    listed = {t["name"]: (t["partitions"], t["key"], dict(t["config"])) for t in doc["topics"]}
    assert listed == {t.name: (t.partitions, t.key, dict(t.kafka_config)) for t in TOPICS}
