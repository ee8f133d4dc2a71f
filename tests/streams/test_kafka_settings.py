"""Kafka security settings: checked once, with a clear message per problem, never showing the password.

The TLS files are made here with openssl (a test CA, a client certificate it
signs, an encrypted copy of the key, an unrelated key), so these tests need no
broker; tests/kafka/test_sasl_ssl.py uses the settings against a real one.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.streams.kafka_settings import (
    Given,
    KafkaSettings,
    KafkaSettingsError,
    build_kafka_settings,
    kafka_settings,
)

SECRET_LETTERS = "ΑΒΓΔΕΖΗΘΙΚΛΜ"


# One EC key per certificate, no passphrase unless asked; {ec} is filled in below.
OPENSSL = (
    "req -x509 {ec} -keyout ca.key -out ca.pem -subj /CN=test-ca -days 2",
    "req {ec} -keyout client.key -out client.csr -subj /CN=client",
    "x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2",
    "pkey -in client.key -aes256 -passout pass:phrase -out encrypted.key",
    "req -x509 {ec} -keyout other.key -out other.pem -subj /CN=other -days 2",
)
EC = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the test certificates", pytrace=False)
    d = tmp_path_factory.mktemp("pem")
    for command in OPENSSL:
        subprocess.run(
            ["openssl", *command.format(ec=EC).split()],
            cwd=d,
            check=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
    (d / "combined.pem").write_text((d / "client.pem").read_text() + (d / "client.key").read_text())
    (d / "password").write_text("s3cret-Δ\n")
    (d / "empty").write_text("\n")
    return d


def build(broker: str = "kafka://h:9093", **given: str) -> KafkaSettings:
    return build_kafka_settings(
        [Given(broker, "--broker")], {name: Given(value, f"--{name}") for name, value in given.items()}
    )


def problems(broker: str = "kafka://h:9093", **given: str) -> list[str]:
    with pytest.raises(KafkaSettingsError) as caught:
        build(broker, **given)
    return caught.value.problems


# --- what is chosen ------------------------------------------------------------------


def test_the_security_protocol_follows_what_is_given(pem: Path) -> None:
    assert build().security_protocol == "PLAINTEXT"
    assert build(ssl_cafile=str(pem / "ca.pem")).security_protocol == "SSL"
    sasl = {"sasl_mechanism": "scram-sha-512", "sasl_username": "u", "sasl_password": "p"}
    assert build(**sasl).security_protocol == "SASL_SSL"
    assert build(**sasl, security_protocol="sasl_plaintext").security_protocol == "SASL_PLAINTEXT"
    assert build(**sasl).sasl_mechanism == "SCRAM-SHA-512"


def test_client_options_carry_tls_and_sasl_to_every_client(pem: Path) -> None:
    settings = build(
        "kafka://b1:9093,kafka://b2:9093",
        ssl_cafile=str(pem / "ca.pem"),
        ssl_certfile=str(pem / "client.pem"),
        ssl_keyfile=str(pem / "client.key"),
        sasl_mechanism="PLAIN",
        sasl_username="alice",
        sasl_password_file=str(pem / "password"),
    )
    options = settings.client_options()
    context = options.pop("ssl_context")
    assert options == {
        "bootstrap_servers": ["b1:9093", "b2:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "alice",
        # One trailing newline of the file is not part of the password.
        "sasl_plain_password": "s3cret-Δ",
    }
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # Built once: every client shares the context.
    assert settings.ssl_context() is context
    assert settings.describe() == "b1:9093,b2:9093 (SASL_SSL, PLAIN as alice)"


def test_the_broker_url_userinfo_gives_the_credentials() -> None:
    settings = build("kafka://alice:p%40ss@h:9093", sasl_mechanism="SCRAM-SHA-256")
    assert (settings.security_protocol, settings.sasl_username) == ("SASL_SSL", "alice")
    assert settings.sasl_password is not None and settings.sasl_password.get_secret_value() == "p@ss"
    assert kafka_settings("kafka://h:1").brokers == ("h:1",)


# --- what is refused ------------------------------------------------------------------


def test_sasl_without_what_it_needs_says_what_is_missing_and_how_to_give_it() -> None:
    hints = {"sasl_mechanism": "--kafka-sasl-mechanism or KUEUESTREAM_KAFKA_SASL_MECHANISM"}
    with pytest.raises(KafkaSettingsError) as caught:
        build_kafka_settings(
            [Given("kafka://h:1", "--broker")],
            {"security_protocol": Given("SASL_SSL", "KUEUESTREAM_KAFKA_SECURITY_PROTOCOL")},
            hints,
        )
    assert caught.value.problems == [
        "the security protocol SASL_SSL needs a SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): "
        "set --kafka-sasl-mechanism or KUEUESTREAM_KAFKA_SASL_MECHANISM",
        "the security protocol SASL_SSL needs a SASL user name: set sasl_username",
        "the security protocol SASL_SSL needs a SASL password: set sasl_password",
    ]


def test_values_that_are_not_accepted_are_named_with_what_is() -> None:
    assert problems(security_protocol="TLS", sasl_mechanism="GSSAPI") == [
        "--security_protocol TLS: not accepted; accepted: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL",
        "--sasl_mechanism GSSAPI: not accepted; accepted: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    ]


def test_settings_that_the_protocol_would_ignore_are_refused(pem: Path) -> None:
    assert problems(security_protocol="PLAINTEXT", ssl_cafile=str(pem / "ca.pem"), sasl_username="u") == [
        "--sasl_username is set but the security protocol is PLAINTEXT; "
        "SASL settings need SASL_SSL or SASL_PLAINTEXT",
        f"--ssl_cafile {pem / 'ca.pem'} is set but the security protocol is PLAINTEXT; "
        "TLS files need SSL or SASL_SSL",
    ]
    sasl = {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p"}
    assert problems(security_protocol="SASL_PLAINTEXT", ssl_cafile=str(pem / "ca.pem"), **sasl) == [
        f"--ssl_cafile {pem / 'ca.pem'} is set but the security protocol is SASL_PLAINTEXT; "
        "TLS files need SSL or SASL_SSL"
    ]


def test_credentials_given_twice_are_refused() -> None:
    assert problems("kafka://alice:pw@h:1", sasl_mechanism="PLAIN", sasl_username="bob") == [
        "the userinfo of --broker kafka://***@h:1 and --sasl_username both give SASL credentials; "
        "give them one way"
    ]
    assert problems(sasl_mechanism="PLAIN", sasl_username="u", sasl_password="p", sasl_password_file="f") == [
        "--sasl_password and --sasl_password_file both give the SASL password; give one"
    ]


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({"ssl_cafile": "missing.pem"}, "--ssl_cafile {d}/missing.pem: no such file"),
        ({"ssl_cafile": "."}, "--ssl_cafile {d}: is a directory, not a file"),
        (
            {"ssl_cafile": "client.key"},
            "--ssl_cafile {d}/client.key: holds no CA certificate in PEM form (NO_CERTIFICATE_OR_CRL_FOUND)",
        ),
        ({"ssl_certfile": "client.key"}, "--ssl_certfile {d}/client.key: holds no certificate in PEM form"),
        (
            {"ssl_certfile": "client.pem"},
            "--ssl_certfile {d}/client.pem (no key file given, so the key must be in it): "
            "holds no private key in PEM form",
        ),
        (
            {"ssl_certfile": "client.pem", "ssl_keyfile": "ca.pem"},
            "--ssl_keyfile {d}/ca.pem: holds no private key in PEM form",
        ),
        (
            {"ssl_certfile": "client.pem", "ssl_keyfile": "other.key"},
            "--ssl_certfile {d}/client.pem and --ssl_keyfile {d}/other.key: the client certificate and its "
            "key do not load (the key does not belong to the certificate)",
        ),
        (
            {"ssl_certfile": "client.pem", "ssl_keyfile": "encrypted.key"},
            "--ssl_certfile {d}/client.pem and --ssl_keyfile {d}/encrypted.key: the client certificate and "
            "its key do not load (the key is encrypted; "
            "give an unencrypted key file readable only by this user)",
        ),
        (
            {"ssl_keyfile": "client.key"},
            "--ssl_keyfile {d}/client.key is set without a client certificate: set ssl_certfile",
        ),
    ],
)
def test_tls_files_that_cannot_be_used_are_named_with_the_reason(
    pem: Path, files: dict[str, str], message: str
) -> None:
    # An encrypted key must never make OpenSSL prompt on the terminal: stdin is not read.
    assert problems(**{k: str(pem / v) for k, v in files.items()}) == [message.format(d=pem)]


def test_a_certificate_with_its_key_in_the_same_file_loads(pem: Path) -> None:
    settings = build(ssl_cafile=str(pem / "ca.pem"), ssl_certfile=str(pem / "combined.pem"))
    assert settings.security_protocol == "SSL" and settings.ssl_context() is not None


@pytest.mark.parametrize(
    ("password", "message"),
    [
        ({"sasl_password_file": "missing"}, "--sasl_password_file {d}/missing: no such file"),
        (
            {"sasl_password_file": "empty"},
            "--sasl_password_file {d}/empty: is empty; it must hold the SASL password",
        ),
        ({"sasl_password": ""}, "--sasl_password is empty; give the SASL password"),
    ],
)
def test_a_password_that_cannot_be_used_is_refused(pem: Path, password: dict[str, str], message: str) -> None:
    given = {k: (str(pem / v) if k.endswith("_file") else v) for k, v in password.items()}
    assert problems(sasl_mechanism="PLAIN", sasl_username="u", **given) == [message.format(d=pem)]


# --- the password never shows -----------------------------------------------------------


@settings(deadline=None)
@given(password=st.text(alphabet=SECRET_LETTERS + "%@:;", min_size=1, max_size=20))
def test_the_password_shows_in_no_message_repr_or_dump(password: str) -> None:
    def leaks(text: str) -> bool:
        return any(c in SECRET_LETTERS for c in text)

    # SASL_PLAINTEXT: no TLS context to build, which keeps a hundred examples quick.
    sasl = {"sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": password}
    built = build(security_protocol="SASL_PLAINTEXT", **sasl)
    for text in (repr(built), str(built), built.describe(), built.model_dump_json()):
        assert not leaks(text), text
    assert not leaks(built.redact(f"broker said: bad password {password} for u"))
    # Errors about other settings given with the password name the password's source only.
    with pytest.raises(KafkaSettingsError) as caught:
        build(security_protocol="SSL", **sasl)
    assert not leaks(str(caught.value))
    assert "--sasl_password is set but the security protocol is SSL" in str(caught.value)


def test_direct_construction_is_checked_without_showing_the_password() -> None:
    with pytest.raises(ValueError) as caught:
        KafkaSettings(brokers=("h:1",), security_protocol="PLAINTEXT", sasl_password="ΑΒΓ")
    assert "sasl_password is set but the security protocol is PLAINTEXT" in str(caught.value)
    assert "ΑΒΓ" not in str(caught.value)
