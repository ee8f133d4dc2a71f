"""Pipeline lag: per topic and partition, the records in the log the agents have not processed yet."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

# (topic, partition, log end offset, next offset the agent will process)
Positions = Callable[[], list[tuple[str, int, int, int]]]


class PipelineLag(Collector):
    """``kueuestream_pipeline_lag_records{topic,partition}``, read from ``positions`` at each scrape."""

    def __init__(self, positions: Positions) -> None:
        self.positions = positions

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "kueuestream_pipeline_lag_records",
            "Records in the log not yet processed by the agent that reads them, per topic and partition",
            labels=["topic", "partition"],
        )
        for topic, partition, end, processed in self.positions():
            family.add_metric([topic, str(partition)], max(0, end - processed))
        yield family
