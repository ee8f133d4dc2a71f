"""The Kafka security flags and KUEUESTREAM_KAFKA_* variables of every Kafka-using command.

No broker is needed here: settings that cannot be used, and a broker that is
not there, end each command with one ``error:`` line per problem, no
traceback, and never the password (tests/kafka/test_sasl_ssl.py has the real
broker). Before these settings existed, ``worker`` and ``publish`` printed a
traceback quoting ``kafka://user:password@...`` when the URL did not parse.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kueuestream.agents.cli.kafka_options import OPTIONS, settings_from
from kueuestream.agents.cli.main import build_parser, main
from kueuestream.streams.kafka_settings import KafkaSettingsError

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = str(REPO / "config" / "examples" / "team-queues")
PASSWORD = "S3cr3t-pw"
# A port nothing listens on: connecting is refused at once.
REFUSED = "127.0.0.1:1"


def commands(tmp_path: Path, broker: str) -> dict[str, list[str]]:
    """Every Kafka-using command, reaching ``broker``."""
    return {
        "worker": ["worker", "--broker", broker, "--datadir", str(tmp_path / "faust")],
        "publish": ["publish", EXAMPLE, "--broker", broker],
        "replay": ["replay", broker],
        "export": ["export", "--broker", broker, "--out", str(tmp_path / "exported")],
        "import": ["import", EXAMPLE, "--broker", broker],
        "watch": ["watch", "--kubeconfig", str(tmp_path / "kubeconfig"), "--broker", broker],
        "apply": ["apply", "--kubeconfig", str(tmp_path / "kubeconfig"), "--broker", broker],
    }


# The commands that reach Kafka first; watch and apply reach the cluster first.
COMMANDS = ("worker", "publish", "replay", "export", "import")
ALL_COMMANDS = (*COMMANDS, "watch", "apply")


@pytest.fixture(autouse=True)
def no_kafka_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for option in OPTIONS:
        monkeypatch.delenv(option.env, raising=False)


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_every_kafka_command_takes_the_security_flags(tmp_path: Path, command: str) -> None:
    flags = {option.flag: f"value-of-{option.setting}" for option in OPTIONS if option.flag}
    argv = commands(tmp_path, "kafka://h:9093")[command] + [x for kv in flags.items() for x in kv]
    args = build_parser().parse_args(argv)
    assert {option.dest: getattr(args, option.dest) for option in OPTIONS if option.flag} == {
        option.dest: f"value-of-{option.setting}" for option in OPTIONS if option.flag
    }


@pytest.mark.parametrize("command", ALL_COMMANDS)
def test_unusable_settings_end_a_command_with_one_line_per_problem(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = commands(tmp_path, f"kafka://alice:{PASSWORD}@h:9093")[command]
    status = main([*argv, "--kafka-security-protocol", "SSL", "--kafka-sasl-mechanism", "OAUTH"])
    out, err = capsys.readouterr()
    source = "LOG" if command == "replay" else "--broker"
    assert status == 2
    assert err.splitlines() == [
        "error: --kafka-sasl-mechanism OAUTH: not accepted; accepted: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
        "error: --kafka-sasl-mechanism is set but the security protocol is SSL; "
        "SASL settings need SASL_SSL or SASL_PLAINTEXT",
        f"error: the userinfo of {source} kafka://***@h:9093 is set but the security protocol is SSL; "
        "SASL settings need SASL_SSL or SASL_PLAINTEXT",
    ]
    assert PASSWORD not in out + err


@pytest.mark.parametrize("command", COMMANDS)
def test_a_broker_that_is_not_there_is_one_line_without_the_password(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = commands(tmp_path, f"kafka://alice:{PASSWORD}@{REFUSED}")[command]
    status = main([*argv, "--kafka-security-protocol", "SASL_PLAINTEXT", "--kafka-sasl-mechanism", "PLAIN"])
    out, err = capsys.readouterr()
    assert status != 0
    assert err.splitlines() == [
        f"error: cannot use Kafka at {REFUSED} (SASL_PLAINTEXT, PLAIN as alice): "
        "connection refused (is a broker listening there?)"
    ]
    assert PASSWORD not in out + err


@pytest.mark.parametrize("command", ["worker", "publish"])
def test_a_broker_url_that_does_not_parse_shows_no_password(tmp_path: Path, command: str) -> None:
    """The finding: a traceback quoting the URL, password and all; now one line, exit 2."""
    argv = commands(tmp_path, f"kafka://alice:{PASSWORD}@broker:notaport")[command]
    done = subprocess.run(
        [sys.executable, "-m", "kueuestream", *argv],
        cwd=REPO,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        env={k: v for k, v in os.environ.items() if not k.startswith("KUEUESTREAM_KAFKA_")},
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: --broker: broker URL 'kafka://***@broker:notaport': item 1 is not HOST:PORT"
    ]
    assert PASSWORD not in done.stdout + done.stderr


# --- where each setting comes from ---------------------------------------------------------


def parsed(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["publish", EXAMPLE, "--broker", "kafka://h:9093", *argv])


def test_a_flag_wins_over_its_variable_and_empty_variables_are_unset(tmp_path: Path) -> None:
    password = tmp_path / "password"
    password.write_text("from-file\n")
    env = {
        "KUEUESTREAM_KAFKA_SECURITY_PROTOCOL": "",
        "KUEUESTREAM_KAFKA_SASL_MECHANISM": "SCRAM-SHA-256",
        "KUEUESTREAM_KAFKA_SASL_USERNAME": "env-user",
        "KUEUESTREAM_KAFKA_SASL_PASSWORD": "from-env",
    }
    args = parsed("--kafka-sasl-username", "flag-user", "--kafka-security-protocol", "SASL_PLAINTEXT")
    settings = settings_from(args, args.broker, environ=env)
    assert (settings.security_protocol, settings.sasl_mechanism, settings.sasl_username) == (
        "SASL_PLAINTEXT",
        "SCRAM-SHA-256",
        "flag-user",
    )
    assert settings.client_options()["sasl_plain_password"] == "from-env"
    # A password file given as a flag wins over both password variables.
    args = parsed("--kafka-sasl-password-file", str(password), "--kafka-security-protocol", "SASL_PLAINTEXT")
    both = {**env, "KUEUESTREAM_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "missing")}
    options = settings_from(args, args.broker, environ=both).client_options()
    assert options["sasl_plain_password"] == "from-file"


def test_a_password_from_two_variables_is_refused_naming_both(tmp_path: Path) -> None:
    env = {
        "KUEUESTREAM_KAFKA_SASL_MECHANISM": "PLAIN",
        "KUEUESTREAM_KAFKA_SASL_USERNAME": "u",
        "KUEUESTREAM_KAFKA_SASL_PASSWORD": PASSWORD,
        "KUEUESTREAM_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "password"),
    }
    args = parsed()
    with pytest.raises(KafkaSettingsError) as caught:
        settings_from(args, args.broker, environ=env)
    assert caught.value.problems == [
        "KUEUESTREAM_KAFKA_SASL_PASSWORD and KUEUESTREAM_KAFKA_SASL_PASSWORD_FILE both give the SASL "
        "password; give one"
    ]


def test_a_missing_setting_says_which_flag_or_variable_gives_it() -> None:
    args = parsed("--kafka-security-protocol", "SASL_SSL")
    with pytest.raises(KafkaSettingsError) as caught:
        settings_from(args, args.broker, environ={})
    assert caught.value.problems == [
        "the security protocol SASL_SSL needs a SASL mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512): "
        "set --kafka-sasl-mechanism or KUEUESTREAM_KAFKA_SASL_MECHANISM",
        "the security protocol SASL_SSL needs a SASL user name: "
        "set --kafka-sasl-username or KUEUESTREAM_KAFKA_SASL_USERNAME",
        "the security protocol SASL_SSL needs a SASL password: set KUEUESTREAM_KAFKA_SASL_PASSWORD, "
        "or a file: --kafka-sasl-password-file or KUEUESTREAM_KAFKA_SASL_PASSWORD_FILE",
    ]
