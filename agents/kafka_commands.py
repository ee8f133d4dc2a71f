"""What the Kafka-using commands share: their settings, and one redacted line per failure."""

from __future__ import annotations

import sys
from collections.abc import Callable

from kueuestream.streams.kafka_settings import KafkaSettings, KafkaSettingsError, KafkaTarget, kafka_settings

EXIT_FAILED = 1
EXIT_INVALID = 2


def run_with_kafka(
    broker: KafkaTarget,
    body: Callable[[KafkaSettings], int],
    failures: tuple[type[Exception], ...],
) -> int:
    """``body(settings)``'s exit status; on one of ``failures``, an ``error:`` line on stderr and 1.

    Settings that cannot be used print one line per problem and give 2. The
    line never shows the SASL password or a URL's userinfo.
    """
    try:
        settings = kafka_settings(broker)
    except KafkaSettingsError as exc:
        report_invalid(exc)
        return EXIT_INVALID
    try:
        return body(settings)
    except failures as exc:
        print(f"error: {settings.redact(str(exc))}", file=sys.stderr)
        return EXIT_FAILED


def report_invalid(exc: KafkaSettingsError) -> None:
    for problem in exc.problems:
        print(f"error: {problem}", file=sys.stderr)
