"""How every Kafka client reaches the cluster: addresses, TLS and SASL, in one settings model.

:class:`KafkaSettings` is built once per command (from its flags and the
``KUEUESTREAM_KAFKA_*`` environment, see :mod:`kueuestream.agents.cli.kafka_options`)
and passed to every client: :class:`~kueuestream.streams.kafka_log.KafkaLog`, the
Faust app, the decision writer, the simulator. :func:`build_kafka_settings`
checks what it is given and says which flag or variable is wrong and what would
be accepted; the TLS context is built there too, once, so an unreadable
certificate is reported before anything connects.

No message of this module shows the SASL password: it is a
:class:`pydantic.SecretStr`, errors name where it came from but never its
value, and :meth:`KafkaSettings.redact` takes it (and any URL userinfo) out of
text that came from elsewhere, such as a client library's exception.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Self, TypeVar, get_args
from urllib.parse import quote

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, model_validator

from kueuestream.streams.kafka_urls import BrokerURL, redact_text, redact_url, split_broker_url

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS: tuple[SecurityProtocol, ...] = get_args(SecurityProtocol)
MECHANISMS: tuple[SaslMechanism, ...] = get_args(SaslMechanism)
TLS_PROTOCOLS = frozenset({"SSL", "SASL_SSL"})
SASL_PROTOCOLS = frozenset({"SASL_PLAINTEXT", "SASL_SSL"})

# The names of the settings :func:`build_kafka_settings` reads.
SECURITY_PROTOCOL = "security_protocol"
SSL_CAFILE = "ssl_cafile"
SSL_CERTFILE = "ssl_certfile"
SSL_KEYFILE = "ssl_keyfile"
SASL_MECHANISM = "sasl_mechanism"
SASL_USERNAME = "sasl_username"
SASL_PASSWORD = "sasl_password"
SASL_PASSWORD_FILE = "sasl_password_file"
SETTING_NAMES = (
    SECURITY_PROTOCOL,
    SSL_CAFILE,
    SSL_CERTFILE,
    SSL_KEYFILE,
    SASL_MECHANISM,
    SASL_USERNAME,
    SASL_PASSWORD,
    SASL_PASSWORD_FILE,
)
_SASL_SETTINGS = (SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD, SASL_PASSWORD_FILE)
_TLS_FILES = (SSL_CAFILE, SSL_CERTFILE, SSL_KEYFILE)


class KafkaSettingsError(ValueError):
    """Kafka settings that cannot be used; one message per problem, none showing a secret."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class Given:
    """A setting's text and where it came from: a flag, an environment variable, the broker URL."""

    value: str
    source: str

    def __str__(self) -> str:
        """The source and the value, for messages; never used for a secret (see :meth:`secret`)."""
        sep = " " if self.source.startswith("-") else "="
        return f"{self.source}{sep}{self.value}"

    @property
    def secret(self) -> str:
        """How a message names a secret: by its source only."""
        return self.source


class KafkaSettings(BaseModel):
    """Where the brokers are and how to talk to them (security protocol, TLS files, SASL).

    Constructed directly, the settings are checked for consistency only; use
    :func:`build_kafka_settings` for input from a user, which also checks the
    files and names the flag or variable behind each problem.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", hide_input_in_errors=True)

    brokers: tuple[str, ...] = Field(min_length=1)
    security_protocol: SecurityProtocol = "PLAINTEXT"
    ssl_cafile: Path | None = None
    ssl_certfile: Path | None = None
    ssl_keyfile: Path | None = None
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None

    _ssl: ssl.SSLContext | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = _inconsistencies(self)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    def describe(self) -> str:
        """The brokers and how they are reached, for messages: no secret in it."""
        how: list[str] = [self.security_protocol]
        if self.uses_sasl:
            how.append(f"{self.sasl_mechanism} as {self.sasl_username}")
        return f"{','.join(self.brokers)} ({', '.join(how)})"

    def redact(self, text: str) -> str:
        """``text`` without the password (as is, or percent-encoded) and without any URL userinfo."""
        secrets: tuple[str, ...] = ()
        if self.sasl_password is not None:
            password = self.sasl_password.get_secret_value()
            secrets = (password, quote(password, safe=""))
        return redact_text(text, secrets)

    def ssl_context(self) -> ssl.SSLContext | None:
        """The TLS context of SSL and SASL_SSL (built once, verifying the broker), else None."""
        if not self.uses_tls:
            return None
        if self._ssl is None:
            self._ssl = tls_context(
                *(
                    None if path is None else Given(str(path), name)
                    for name, path in (
                        (SSL_CAFILE, self.ssl_cafile),
                        (SSL_CERTFILE, self.ssl_certfile),
                        (SSL_KEYFILE, self.ssl_keyfile),
                    )
                )
            )
        return self._ssl

    def client_options(self) -> dict[str, Any]:
        """The keyword arguments every aiokafka client (producer, consumer, admin) takes from these."""
        options: dict[str, Any] = {
            "bootstrap_servers": list(self.brokers),
            "security_protocol": self.security_protocol,
        }
        if self.uses_tls:
            options["ssl_context"] = self.ssl_context()
        if self.uses_sasl:
            assert self.sasl_password is not None
            options["sasl_mechanism"] = self.sasl_mechanism
            options["sasl_plain_username"] = self.sasl_username
            options["sasl_plain_password"] = self.sasl_password.get_secret_value()
        return options


# What a caller passes where settings are expected: settings, or broker URLs taken as they are.
KafkaTarget = KafkaSettings | str | Sequence[str]


def kafka_settings(value: KafkaTarget) -> KafkaSettings:
    """``value`` as settings: a broker URL (or several) is taken with no other setting."""
    if isinstance(value, KafkaSettings):
        return value
    urls = [value] if isinstance(value, str) else list(value)
    return build_kafka_settings([Given(url, "broker URL") for url in urls], {})


def build_kafka_settings(
    brokers: Sequence[Given], given: Mapping[str, Given], hints: Mapping[str, str] | None = None
) -> KafkaSettings:
    """Settings from broker URLs and the other settings' texts (keys: :data:`SETTING_NAMES`).

    ``hints`` says, per setting, how a user gives it (``--kafka-sasl-mechanism or
    KUEUESTREAM_KAFKA_SASL_MECHANISM``), for the message when one is missing.

    The security protocol, unless given, is SASL_SSL when any SASL setting (or
    URL userinfo) is given, SSL when a TLS file is, PLAINTEXT otherwise: SASL
    credentials never go out unencrypted unless SASL_PLAINTEXT is asked for.
    Raises :class:`KafkaSettingsError` listing every problem.
    """
    unknown = sorted(set(given) - set(SETTING_NAMES))
    if unknown:
        raise ValueError(f"unknown Kafka settings {unknown}; known: {', '.join(SETTING_NAMES)}")
    problems: list[str] = []
    given = dict(given)

    def where(name: str) -> str:
        return (hints or {}).get(name, name)

    addresses, conflict = _addresses(brokers, given, problems)

    protocol = _choice(given.get(SECURITY_PROTOCOL), PROTOCOLS, problems)
    if protocol is None and SECURITY_PROTOCOL not in given:
        if any(name in given for name in _SASL_SETTINGS):
            protocol = "SASL_SSL"
        elif any(name in given for name in _TLS_FILES):
            protocol = "SSL"
        else:
            protocol = "PLAINTEXT"
    mechanism = _choice(given.get(SASL_MECHANISM), MECHANISMS, problems)
    password = _password(given, problems)
    username = given.get(SASL_USERNAME)
    if username is not None and not username.value.strip():
        problems.append(f"{username.source} is empty; give the SASL user name")

    if protocol in SASL_PROTOCOLS:
        needed = f"the security protocol {protocol} needs"
        if SASL_MECHANISM not in given:
            accepted = ", ".join(MECHANISMS)
            problems.append(f"{needed} a SASL mechanism ({accepted}): set {where(SASL_MECHANISM)}")
        if username is None and not conflict:
            problems.append(f"{needed} a SASL user name: set {where(SASL_USERNAME)}")
        if SASL_PASSWORD not in given and SASL_PASSWORD_FILE not in given and not conflict:
            problems.append(f"{needed} a SASL password: set {where(SASL_PASSWORD)}")
    elif protocol is not None:
        for name in _SASL_SETTINGS:
            if name in given:
                problems.append(
                    f"{given[name].secret} is set but the security protocol is {protocol}; "
                    "SASL settings need SASL_SSL or SASL_PLAINTEXT"
                )
    if protocol is not None and protocol not in TLS_PROTOCOLS:
        for name in _TLS_FILES:
            if name in given:
                problems.append(
                    f"{given[name]} is set but the security protocol is {protocol}; "
                    "TLS files need SSL or SASL_SSL"
                )
    if SSL_KEYFILE in given and SSL_CERTFILE not in given:
        problems.append(
            f"{given[SSL_KEYFILE]} is set without a client certificate: set {where(SSL_CERTFILE)}"
        )

    context: ssl.SSLContext | None = None
    if protocol in TLS_PROTOCOLS:
        problems += [p for name in _TLS_FILES if name in given and (p := _unreadable(given[name]))]
        # Only then is the context worth building (loading the system's CAs takes a while).
        if not problems:
            try:
                context = tls_context(given.get(SSL_CAFILE), given.get(SSL_CERTFILE), given.get(SSL_KEYFILE))
            except KafkaSettingsError as exc:
                problems += exc.problems
    if problems or protocol is None:
        # The user name and password of a URL's userinfo share one source: one line for both.
        raise KafkaSettingsError(list(dict.fromkeys(problems)))
    settings = KafkaSettings(
        brokers=addresses,
        security_protocol=protocol,
        ssl_cafile=_path(given.get(SSL_CAFILE)),
        ssl_certfile=_path(given.get(SSL_CERTFILE)),
        ssl_keyfile=_path(given.get(SSL_KEYFILE)),
        sasl_mechanism=mechanism,
        sasl_username=username.value if username is not None else None,
        sasl_password=SecretStr(password) if password is not None else None,
    )
    settings._ssl = context
    return settings


def tls_context(cafile: Given | None, certfile: Given | None, keyfile: Given | None) -> ssl.SSLContext:
    """A client TLS context that verifies the broker's certificate and host name.

    With ``cafile`` only its certificates are trusted, else the system's. A
    client certificate (``certfile``, with its key in ``keyfile`` or in the same
    file) is presented to brokers that ask for one. The key must not be
    encrypted: nothing here could ask for its passphrase.
    """
    problems = [p for f in (cafile, certfile, keyfile) if f is not None and (p := _unreadable(f))]
    if problems:
        raise KafkaSettingsError(problems)
    try:
        context = ssl.create_default_context(cafile=str(_path(cafile)) if cafile else None)
    except ssl.SSLError as exc:
        raise KafkaSettingsError(
            [f"{cafile}: holds no CA certificate in PEM form ({_reason(exc)})"]
        ) from None
    if certfile is not None:
        _load_client_certificate(context, certfile, keyfile)
    return context


def _load_client_certificate(context: ssl.SSLContext, certfile: Given, keyfile: Given | None) -> None:
    cert_path, key_path = _path(certfile), _path(keyfile or certfile)
    assert cert_path is not None and key_path is not None
    # OpenSSL's own words for a file without the expected PEM block are "PEM lib": say it plainly.
    if b"-----BEGIN CERTIFICATE-----" not in cert_path.read_bytes():
        raise KafkaSettingsError([f"{certfile}: holds no certificate in PEM form"])
    if b"PRIVATE KEY-----" not in key_path.read_bytes():
        where = keyfile or f"{certfile} (no key file given, so the key must be in it)"
        raise KafkaSettingsError([f"{where}: holds no private key in PEM form"])
    try:
        context.load_cert_chain(str(cert_path), str(key_path) if keyfile else None, password=_no_passphrase)
    except (ssl.SSLError, _EncryptedKeyError) as exc:
        files = f"{certfile} and {keyfile}" if keyfile else str(certfile)
        reason = _reason(exc)
        if reason == "KEY_VALUES_MISMATCH":
            reason = "the key does not belong to the certificate"
        raise KafkaSettingsError(
            [f"{files}: the client certificate and its key do not load ({reason})"]
        ) from None


class _EncryptedKeyError(Exception):
    def __str__(self) -> str:
        return "the key is encrypted; give an unencrypted key file readable only by this user"


def _no_passphrase() -> str:
    # Without a callback OpenSSL would prompt on the terminal for the passphrase.
    raise _EncryptedKeyError()


def _reason(exc: Exception) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else str(exc)


def _unreadable(file: Given) -> str | None:
    path = _path(file)
    assert path is not None
    try:
        with path.open("rb") as handle:
            handle.read(1)
    except FileNotFoundError:
        return f"{file}: no such file"
    except IsADirectoryError:
        return f"{file}: is a directory, not a file"
    except OSError as exc:
        return f"{file}: cannot be read ({exc.strerror or exc})"
    return None


def _path(file: Given | None) -> Path | None:
    return None if file is None else Path(file.value).expanduser()


_Option = TypeVar("_Option", bound=str)


def _choice(value: Given | None, accepted: tuple[_Option, ...], problems: list[str]) -> _Option | None:
    if value is None:
        return None
    text = value.value.strip().upper()
    for option in accepted:
        if option == text:
            return option
    problems.append(f"{value}: not accepted; accepted: {', '.join(accepted)}")
    return None


def _addresses(
    brokers: Sequence[Given], given: dict[str, Given], problems: list[str]
) -> tuple[tuple[str, ...], bool]:
    """The addresses of every broker URL, and whether their credentials clash with others given."""
    addresses: list[str] = []
    conflict = False
    for broker in brokers:
        try:
            parsed = split_broker_url(broker.value)
        except ValueError as exc:
            problems.append(f"{broker.source}: {exc}")
            continue
        addresses += parsed.addresses
        conflict |= _url_credentials(broker, parsed, given, problems)
    if not brokers:
        problems.append("no Kafka broker given")
    return tuple(addresses), conflict


_USERINFO = "the userinfo of "


def _url_credentials(broker: Given, parsed: BrokerURL, given: dict[str, Given], problems: list[str]) -> bool:
    """The userinfo of a broker URL as the SASL user name and password; True if others are given too."""
    if parsed.username is None or parsed.password is None:
        return False
    source = f"{_USERINFO}{broker.source} {redact_url(broker.value)}"
    mine = {SASL_USERNAME: parsed.username, SASL_PASSWORD: parsed.password}
    for name in (SASL_USERNAME, SASL_PASSWORD, SASL_PASSWORD_FILE):
        other = given.get(name)
        # Several URLs may repeat the same userinfo; anything else gives credentials twice.
        if other is not None and not (other.source.startswith(_USERINFO) and other.value == mine.get(name)):
            problems.append(f"{source} and {other.secret} both give SASL credentials; give them one way")
            return True
    given[SASL_USERNAME] = Given(parsed.username, source)
    given[SASL_PASSWORD] = Given(parsed.password, source)
    return False


def _password(given: Mapping[str, Given], problems: list[str]) -> str | None:
    text, file = given.get(SASL_PASSWORD), given.get(SASL_PASSWORD_FILE)
    if text is not None and file is not None:
        problems.append(f"{text.secret} and {file.secret} both give the SASL password; give one")
        return None
    if text is not None:
        if not text.value:
            problems.append(f"{text.secret} is empty; give the SASL password")
            return None
        return text.value
    if file is None:
        return None
    unreadable = _unreadable(file)
    if unreadable:
        problems.append(unreadable)
        return None
    path = _path(file)
    assert path is not None
    try:
        content = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        problems.append(f"{file}: is not UTF-8 text")
        return None
    # One trailing line end is how files end; a password never ends with one.
    password = content.removesuffix("\n").removesuffix("\r")
    if not password:
        problems.append(f"{file}: is empty; it must hold the SASL password")
        return None
    return password


def _inconsistencies(settings: KafkaSettings) -> list[str]:
    problems = []
    protocol = settings.security_protocol
    if protocol in SASL_PROTOCOLS:
        for name in (SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD):
            if getattr(settings, name) is None:
                problems.append(f"the security protocol {protocol} needs {name}")
    else:
        problems += [
            f"{name} is set but the security protocol is {protocol}"
            for name in (SASL_MECHANISM, SASL_USERNAME, SASL_PASSWORD)
            if getattr(settings, name) is not None
        ]
    if protocol not in TLS_PROTOCOLS:
        problems += [
            f"{name} is set but the security protocol is {protocol}"
            for name in _TLS_FILES
            if getattr(settings, name) is not None
        ]
    if settings.ssl_keyfile is not None and settings.ssl_certfile is None:
        problems.append("ssl_keyfile is set without ssl_certfile")
    return problems
