"""``kueuestream worker --instance-id``: what the broker would refuse is refused on the command line.

Kafka takes a ``group.instance.id`` under the rule for topic names (1-249 of
letters, digits, '.', '_' and '-', not '.' or '..'); an id it refuses would
otherwise surface as a broker error after the worker started.
"""

from __future__ import annotations

import pytest

from kueuestream.agents.cli.main import build_parser

BASE = ["worker", "--broker", "kafka://127.0.0.1:9092"]


@pytest.mark.parametrize(
    "ident", ["worker-0", "kueuestream-worker-7d9f8-abcde", "a", "x" * 249, "a.b_c-9", "..."]
)
def test_an_id_kafka_accepts_is_taken(ident: str) -> None:
    assert build_parser().parse_args([*BASE, "--instance-id", ident]).instance_id == ident


def test_without_an_id_the_worker_is_a_dynamic_member() -> None:
    assert build_parser().parse_args(BASE).instance_id is None


@pytest.mark.parametrize("ident", ["", ".", "..", "x" * 250, "worker 0", "worker/0", "wörker", "w\n0"])
def test_an_id_kafka_refuses_is_an_error_naming_the_option_and_the_rule(
    ident: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args([*BASE, "--instance-id", ident])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "--instance-id" in err
    assert f"{ident!r} is not a group instance id" in err
    assert "1-249 letters, digits, '.', '_' or '-'" in err
