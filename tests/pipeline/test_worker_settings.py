"""Settings of the Faust app that recovery after a broker outage depends on."""

from __future__ import annotations

from kueuestream.agents.faust_worker.app import build_app


def test_a_group_led_from_stale_metadata_is_assigned_again_within_seconds() -> None:
    """A worker whose consumer subscribed while the broker was down knows none of its topics;
    leading the group's rebalance once the broker is back, it assigns no partition to anyone,
    and nothing reassigns them before its metadata is fetched again (aiokafka's default: 5
    minutes, longer than the pipeline tests wait, and an outage of its own in production)."""
    app, _ = build_app("kafka://127.0.0.1:9092", app_id="settings", prefix="settings.")
    assert app.conf.consumer_metadata_max_age_ms <= 10_000
