"""One connection to a bootstrap broker before any client starts, to say plainly what fails.

aiokafka's clients log why a bootstrap connection failed and then raise only
"Unable to bootstrap from [...]". :func:`check_access` makes the same
connection (TCP, TLS handshake verifying the broker, SASL authentication) and,
if no bootstrap broker accepts it, raises :class:`KafkaAccessError` with one
line naming each broker and what went wrong: a refused connection, an
untrusted certificate, a rejected password. No secret is in that line.
"""

from __future__ import annotations

import asyncio
import ssl

from aiokafka.conn import create_conn
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)

from kueuestream.streams.kafka_settings import KafkaSettings
from kueuestream.streams.log import LogError


class KafkaAccessError(LogError):
    """No bootstrap broker could be reached with the settings given."""


async def check_access(settings: KafkaSettings, *, client_id: str, timeout_ms: int) -> None:
    """Return once one bootstrap broker accepts a connection with ``settings``; else raise."""
    options = settings.client_options()
    del options["bootstrap_servers"]
    failures: list[str] = []
    for address in settings.brokers:
        host, _, port = address.rpartition(":")
        try:
            connection = await create_conn(
                host.strip("[]"), int(port), client_id=client_id, request_timeout_ms=timeout_ms, **options
            )
        except (OSError, KafkaError, TimeoutError) as exc:
            reason = explain(exc, settings, timeout_ms)
            failures.append(reason if len(settings.brokers) == 1 else f"{address}: {reason}")
            continue
        connection.close()
        return
    message = f"cannot use Kafka at {settings.describe()}: {'; '.join(failures)}"
    raise KafkaAccessError(settings.redact(message))


def explain(exc: BaseException, settings: KafkaSettings, timeout_ms: int) -> str:
    """What a failed connection means, in words a user can act on."""
    if isinstance(exc, SaslAuthenticationFailed):
        # aiokafka's str() adds "[Error 58] SaslAuthenticationFailed: " to the broker's words.
        said = str(exc.args[0]) if exc.args else ""
        return f"the broker rejected the user name or password of {settings.sasl_username!r}" + (
            f" ({said})" if said else ""
        )
    if isinstance(exc, UnsupportedSaslMechanismError):
        return f"SASL mechanism {settings.sasl_mechanism} is not enabled there: {exc}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        cafile = settings.ssl_cafile
        trusted = f"the CA file {cafile}" if cafile else "the system's CA certificates"
        return f"the broker's TLS certificate is not trusted by {trusted}: {exc.verify_message}"
    if isinstance(exc, ssl.SSLError):
        return (
            f"the TLS handshake failed ({exc.reason or exc}); "
            "is this a TLS listener (security protocol SSL or SASL_SSL)?"
        )
    if isinstance(exc, KafkaConnectionError) and "closed" in str(exc):
        if settings.uses_tls and settings.ssl_certfile is None:
            return (
                "the broker closed the connection; if it requires a client certificate, give one "
                "(KUEUESTREAM_KAFKA_SSL_CERTFILE and KUEUESTREAM_KAFKA_SSL_KEYFILE, or their flags)"
            )
        if settings.uses_tls:
            return (
                "the broker closed the connection; does it accept this client certificate, "
                f"and does the listener speak {settings.security_protocol}?"
            )
        return f"the broker closed the connection; does the listener speak {settings.security_protocol}?"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (is a broker listening there?)"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return (
            f"no answer within {timeout_ms / 1000:g}s; does the listener speak {settings.security_protocol}?"
        )
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
