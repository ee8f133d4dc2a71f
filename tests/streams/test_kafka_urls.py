"""Broker URLs are parsed with urlsplit, and no message about one ever shows its userinfo."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kueuestream.streams.kafka_urls import (
    BrokerURL,
    parse_broker_url,
    redact_text,
    redact_url,
    split_broker_url,
)

# Passwords drawn from letters no message of ours holds, plus every separator a
# URL knows: any of these letters in a message is a leaked piece of a password.
SECRET_LETTERS = "ΑΒΓΔΕΖΗΘΙΚΛΜ"
secret_passwords = st.text(alphabet=SECRET_LETTERS + ":@;,/?#[]% ", min_size=1, max_size=24).filter(
    lambda p: any(c in SECRET_LETTERS for c in p)
)


def leaks(text: str) -> bool:
    return any(c in SECRET_LETTERS for c in text)


def test_userinfo_gives_the_sasl_credentials_percent_decoded() -> None:
    parsed = split_broker_url(
        "kafka://alice:p%40ss%3Bw0rd@broker-1:9093,kafka://alice:p%40ss%3Bw0rd@broker-2"
    )
    assert parsed == BrokerURL(("broker-1:9093", "broker-2:9092"), "alice", "p@ss;w0rd")
    assert "p@ss" not in repr(parsed)
    assert split_broker_url("alice:pw@[::1]:9093") == BrokerURL(("[::1]:9093",), "alice", "pw")
    # The addresses alone, as every client's bootstrap list.
    assert parse_broker_url("kafka://alice:pw@broker-1:9093") == ["broker-1:9093"]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("kafka://alice@h:1", r"USER:PASSWORD@ with both parts non-empty"),
        ("kafka://:pw@h:1", r"USER:PASSWORD@ with both parts non-empty"),
        ("kafka://a:x@h:1;kafka://a:y@h2:1", r"different credentials"),
        ("kafka://h:1/topic", r"'kafka://h:1/topic' is not HOST:PORT \(it has a path or a query\)"),
        ("kafka://h:1?x=1", r"is not HOST:PORT \(it has a path or a query\)"),
        ("kafka://h:", r"'kafka://h:' is not HOST:PORT"),
        ("kafka://h_x!:1", r"is not HOST:PORT"),
        ("kafka://[::1:1", r"is not HOST:PORT \(Invalid IPv6 URL\)"),
        ("kafka://h:0", r"port 0 is out of range"),
        ("kafka://h:-1", r"is not HOST:PORT"),
    ],
)
def test_a_broker_url_that_is_not_one_is_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        split_broker_url(url)


@pytest.mark.parametrize("url", ["kafka://u:pa;ss@h:1", "kafka://u:[pa;ss@h:1"])
def test_an_item_next_to_credentials_is_named_by_its_position(url: str) -> None:
    # "pa;ss" splits the URL in two: showing the first item, or urlsplit's words
    # about it, would show "pa".
    with pytest.raises(ValueError) as caught:
        split_broker_url(url)
    assert str(caught.value) == "broker URL 'kafka://***@h:1': item 1 is not HOST:PORT"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("kafka://u:pw@h:1", "kafka://***@h:1"),
        ("u:pw@h:1", "***@h:1"),
        # A password may hold "://" itself: a host before it in the URL is hidden too.
        ("kafka://h:1;kafka://u:p@w@h2:2", "kafka://***@h2:2"),
        ("kafka://a:x;y://@h:1", "kafka://***@h:1"),
        # Without a scheme, a "://" in the password is not taken for one.
        ("u:\u0391://@h:1", "***@h:1"),
        ("u:p w://@h:1", "***@h:1"),
        ("kafka://u:pa;ss@h:1;kafka://h2:2", "kafka://***@h:1;kafka://h2:2"),
        ("kafka://h:1", "kafka://h:1"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_redact_text_takes_out_userinfo_and_the_secrets_named() -> None:
    text = "failed: kafka://alice:hunter2@h:1 said 'bad password hunter2' (kafka://h2:2)"
    assert redact_text(text, ("hunter2",)) == "failed: kafka://***@h:1 said 'bad password ***' (kafka://h2:2)"


@settings(deadline=None)
@given(user=st.text(alphabet="abcdef", min_size=1, max_size=5), password=secret_passwords)
def test_no_error_about_a_url_shows_any_part_of_its_password(user: str, password: str) -> None:
    for url in (
        f"kafka://{user}:{password}@host-a:9092",
        f"kafka://{user}:{quote(password, safe='')}@host-a:9092;kafka://host-b:notaport",
        f"{user}:{password}@host-a:70000",
        f"http://{user}:{password}@host-a:1",
    ):
        assert not leaks(redact_url(url))
        try:
            parsed = split_broker_url(url)
        except ValueError as exc:
            assert not leaks(str(exc)), str(exc)
        else:
            assert not leaks(repr(parsed))
