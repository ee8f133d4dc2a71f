"""The Kafka security flags of every Kafka-using command, and the ``KUEUESTREAM_KAFKA_*`` variables.

Each setting is a flag or an environment variable; the flag wins. The SASL
password has no flag of its own, since a command line is visible to every user
of the machine: it comes from ``KUEUESTREAM_KAFKA_SASL_PASSWORD``, from a file
(``--kafka-sasl-password-file`` or ``KUEUESTREAM_KAFKA_SASL_PASSWORD_FILE``),
or from the broker URL's ``USER:PASSWORD@``. The settings are built once per
command, by :func:`settings_from`, and passed to every Kafka client it starts.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kueuestream.agents.kafka_commands import EXIT_INVALID, report_invalid
from kueuestream.streams.kafka_settings import (
    MECHANISMS,
    PROTOCOLS,
    SASL_MECHANISM,
    SASL_PASSWORD,
    SASL_PASSWORD_FILE,
    SASL_USERNAME,
    SECURITY_PROTOCOL,
    SSL_CAFILE,
    SSL_CERTFILE,
    SSL_KEYFILE,
    Given,
    KafkaSettings,
    KafkaSettingsError,
    build_kafka_settings,
)
from kueuestream.streams.kafka_urls import redact_text

ENV_PREFIX = "KUEUESTREAM_KAFKA_"


@dataclass(frozen=True, slots=True)
class Option:
    """One setting: its flag (None for the password itself) and its environment variable."""

    setting: str
    flag: str | None
    metavar: str
    help: str

    @property
    def env(self) -> str:
        return ENV_PREFIX + self.setting.upper()

    @property
    def dest(self) -> str:
        return f"kafka_{self.setting}"

    def how(self) -> str:
        return f"{self.flag} or {self.env}" if self.flag else self.env


OPTIONS = (
    Option(
        SECURITY_PROTOCOL,
        "--kafka-security-protocol",
        "PROTOCOL",
        f"{', '.join(PROTOCOLS)}; by default SASL_SSL when a SASL setting is given, "
        "SSL when a TLS file is, else PLAINTEXT",
    ),
    Option(
        SSL_CAFILE,
        "--kafka-ssl-cafile",
        "FILE",
        "PEM CA certificates that the brokers' certificates chain to",
    ),
    Option(
        SSL_CERTFILE, "--kafka-ssl-certfile", "FILE", "PEM client certificate, for brokers that require one"
    ),
    Option(SSL_KEYFILE, "--kafka-ssl-keyfile", "FILE", "unencrypted PEM key of the client certificate"),
    Option(SASL_MECHANISM, "--kafka-sasl-mechanism", "MECHANISM", ", ".join(MECHANISMS)),
    Option(SASL_USERNAME, "--kafka-sasl-username", "USER", "the SASL user name"),
    Option(SASL_PASSWORD_FILE, "--kafka-sasl-password-file", "FILE", "a file holding the SASL password"),
    Option(SASL_PASSWORD, None, "", "the SASL password (environment only)"),
)


def add_broker_options(
    parser: argparse.ArgumentParser, *, topic_prefix_help: str = "prefix of the topic names (default none)"
) -> None:
    """``--broker`` (required), ``--topic-prefix`` and the Kafka security flags."""
    parser.add_argument("--broker", required=True, metavar="kafka://HOST:PORT")
    parser.add_argument("--topic-prefix", default="", help=topic_prefix_help)
    add_kafka_options(parser)


def add_kafka_options(parser: argparse.ArgumentParser) -> None:
    """The Kafka security flags, in a group of their own in ``--help``."""
    group = parser.add_argument_group(
        "Kafka security",
        "Each flag can also be set by the environment variable in brackets; the flag wins. "
        f"The SASL password comes from {ENV_PREFIX}SASL_PASSWORD, from a file "
        f"(--kafka-sasl-password-file or {ENV_PREFIX}SASL_PASSWORD_FILE), "
        "or from the broker URL's USER:PASSWORD@.",
    )
    for option in OPTIONS:
        if option.flag is not None:
            group.add_argument(
                option.flag, dest=option.dest, metavar=option.metavar, help=f"{option.help} [{option.env}]"
            )


def settings_from(
    args: argparse.Namespace,
    broker: str,
    *,
    broker_source: str = "--broker",
    environ: Mapping[str, str] | None = None,
) -> KafkaSettings:
    """The settings of the broker URL ``broker``, the command's flags and the environment."""
    env = os.environ if environ is None else environ
    given: dict[str, Given] = {}
    for option in OPTIONS:
        value = getattr(args, option.dest, None) if option.flag else None
        if value is not None:
            given[option.setting] = Given(value, option.flag or option.env)
    # The password is one setting with two forms: a flag for either wins over both variables.
    from_flags = SASL_PASSWORD in given or SASL_PASSWORD_FILE in given
    for option in OPTIONS:
        if option.setting in given or (from_flags and option.setting in (SASL_PASSWORD, SASL_PASSWORD_FILE)):
            continue
        value = env.get(option.env, "")
        if value:
            given[option.setting] = Given(value, option.env)
    hints = {option.setting: option.how() for option in OPTIONS}
    hints[SASL_PASSWORD] = (
        f"{ENV_PREFIX}SASL_PASSWORD, or a file: --kafka-sasl-password-file or {ENV_PREFIX}SASL_PASSWORD_FILE"
    )
    return build_kafka_settings([Given(broker, broker_source)], given, hints)


def settings_or_report(
    args: argparse.Namespace, broker: str, *, broker_source: str = "--broker"
) -> KafkaSettings | None:
    """:func:`settings_from`, or None after one ``error:`` line per problem on stderr."""
    try:
        return settings_from(args, broker, broker_source=broker_source)
    except KafkaSettingsError as exc:
        report_invalid(exc)
        return None


@dataclass(frozen=True, slots=True)
class LogSettings:
    """The Kafka settings of a command's LOG argument: ``kafka`` is None for an embedded log
    folder, and ``valid`` is False once the settings were refused (the ``error:`` lines printed)."""

    kafka: KafkaSettings | None
    valid: bool = True

    def redact(self, text: str) -> str:
        """``text`` without the SASL password or any URL's user information."""
        return self.kafka.redact(text) if self.kafka is not None else redact_text(text)


def log_settings_or_report(args: argparse.Namespace) -> LogSettings:
    """The settings for ``args.log``: those of its broker and the flags when it is ``kafka://...``."""
    from kueuestream.agents.audit.replay import is_kafka

    if not is_kafka(args.log):
        return LogSettings(None)
    settings = settings_or_report(args, args.log, broker_source="LOG")
    return LogSettings(settings, valid=settings is not None)


def with_broker_settings(args: argparse.Namespace, body: Callable[[KafkaSettings], int]) -> int:
    """``body`` given the settings of ``args.broker`` and the flags; 2 when they cannot be used."""
    settings = settings_or_report(args, args.broker)
    if settings is None:
        return EXIT_INVALID
    return body(settings)
