"""The pipeline's topic names, optionally behind a prefix.

Production uses :mod:`kueuestream.streams.topics`' names as they are. A prefix lets several
pipelines share one Kafka cluster (tests run each scenario on fresh topics, a
staging pipeline can sit beside production) without touching the names the
rest of the code knows.
"""

from __future__ import annotations

from dataclasses import dataclass

from kueuestream.streams import topics as t


@dataclass(frozen=True, slots=True)
class TopicNames:
    prefix: str = ""

    def _name(self, base: str) -> str:
        return t.validate_topic_name(f"{self.prefix}{base}")

    @property
    def watch(self) -> str:
        return self._name(t.WATCH)

    @property
    def admission(self) -> str:
        return self._name(t.ADMISSION)

    @property
    def decisions(self) -> str:
        return self._name(t.DECISIONS)

    @property
    def applied(self) -> str:
        return self._name(t.APPLIED)

    @property
    def errors(self) -> str:
        return self._name(t.ERRORS)

    @property
    def multikueue(self) -> str:
        return self._name(t.MULTIKUEUE)

    @property
    def multikueue_applied(self) -> str:
        return self._name(t.MULTIKUEUE_APPLIED)

    def all(self) -> tuple[str, ...]:
        return (
            self.watch,
            self.admission,
            self.decisions,
            self.applied,
            self.errors,
            self.multikueue,
            self.multikueue_applied,
        )

    def partition_counts(self) -> dict[str, int]:
        """Partition counts of the prefixed topics (streams' defaults know the bare names only)."""
        return {self._name(spec.name): spec.partitions for spec in t.TOPICS}

    def base_of(self, topic: str) -> str:
        """The unprefixed name of one of our topics."""
        return topic[len(self.prefix) :] if self.prefix and topic.startswith(self.prefix) else topic
