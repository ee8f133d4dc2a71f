"""Broker URLs: ``kafka://[USER:PASSWORD@]HOST[:PORT]``, several separated by ``,`` or ``;``.

Parsed with :func:`urllib.parse.urlsplit`. A URL may carry SASL credentials as
its userinfo; they are returned apart from the addresses, percent-decoded, and
no message of this module ever shows them: :func:`redact_url` replaces the
userinfo of every item with ``***`` before a URL is put into a message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import SplitResult, unquote, urlsplit

DEFAULT_PORT = 9092
SCHEME = "kafka"
REDACTED = "***"

_SEPARATORS = re.compile(r"[,;]")
# The userinfo of a URL inside free text: "scheme://USERINFO@". It stops at
# characters no userinfo holds unencoded, so it never swallows the next URL.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_USERINFO_IN_TEXT = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s,;'\"<>]+@")


@dataclass(frozen=True, slots=True)
class BrokerURL:
    """What a broker URL says: ``HOST:PORT`` addresses and the credentials of its userinfo, if any."""

    addresses: tuple[str, ...]
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def redact_url(url: str) -> str:
    """``url`` with every userinfo replaced by ``***`` (``kafka://***@host:9092``).

    Whatever precedes the last ``@`` after the first ``://`` (or from the start
    of the text) is taken as userinfo, since no host holds an ``@``: a password
    with an unencoded ``,``, ``;``, ``@`` or ``://`` stays hidden, at the cost
    of hiding the hosts written before it. Only a valid scheme (RFC 3986) counts
    as one, so a ``://`` inside a password of a URL without a scheme hides that
    password too.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        scheme, sep, rest = "", "", url
    if "@" in rest:
        rest = f"{REDACTED}@{rest.rpartition('@')[2]}"
    return f"{scheme}{sep}{rest}"


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """``text`` (a message, an exception) without any URL userinfo or any of ``secrets``."""
    text = _USERINFO_IN_TEXT.sub(lambda m: f"{m.group('scheme')}{REDACTED}@", text)
    for secret in sorted(secrets, key=len, reverse=True):
        if secret:
            text = text.replace(secret, REDACTED)
    return text


def parse_broker_url(url: str) -> list[str]:
    """``host:port`` bootstrap addresses from ``kafka://HOST:PORT`` or ``HOST:PORT``.

    Several brokers may be given separated by ``,`` or ``;`` (Faust's broker URL
    uses ``;``), each with or without the ``kafka://`` scheme. The port defaults
    to 9092; IPv6 hosts are written in brackets (``[::1]:9092``). Credentials in
    the URL are accepted and left out; :func:`split_broker_url` returns them.
    """
    return list(split_broker_url(url).addresses)


def split_broker_url(url: str) -> BrokerURL:
    """The addresses of a broker URL and the SASL credentials of its userinfo.

    Every item that carries userinfo must carry the same, with both a user and
    a password. Errors are :class:`ValueError` whose message shows the URL
    redacted.
    """
    shown = redact_url(url)
    addresses: list[str] = []
    userinfos: set[tuple[str, str | None]] = set()
    items = [part.strip() for part in _SEPARATORS.split(url)]
    for number, item in enumerate(items, start=1):
        if not item:
            continue
        # A password with an unencoded separator would show in its item: with
        # any "@" in the URL, items are named by position instead.
        secret = "@" in url
        label = f"item {number}" if secret else repr(item)
        parts = _split_item(item, shown, label, secret)
        addresses.append(_address(parts, shown, label))
        if parts.username is not None:
            password = None if parts.password is None else unquote(parts.password)
            userinfos.add((unquote(parts.username), password))
    if not addresses:
        raise ValueError(f"broker URL {shown!r} names no broker")
    if not userinfos:
        return BrokerURL(tuple(addresses))
    if len(userinfos) > 1:
        raise ValueError(f"broker URL {shown!r}: its items carry different credentials; give them once")
    ((username, password),) = userinfos
    if not username or not password:
        raise ValueError(
            f"broker URL {shown!r}: credentials in a URL are USER:PASSWORD@ with both parts non-empty"
        )
    return BrokerURL(tuple(addresses), username, password)


def _split_item(item: str, shown: str, label: str, secret: bool) -> SplitResult:
    text = item if "://" in item else f"{SCHEME}://{item}"
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unbalanced "[" of an IPv6 host
        # urlsplit's words quote the URL: only for one without credentials.
        detail = "" if secret else f" ({exc})"
        raise ValueError(f"broker URL {shown!r}: {label} is not HOST:PORT{detail}") from None
    if parts.scheme.lower() != SCHEME:
        raise ValueError(f"broker URL {shown!r}: scheme must be {SCHEME}://, not {parts.scheme}://")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError(f"broker URL {shown!r}: {label} is not HOST:PORT (it has a path or a query)")
    return parts


def _address(parts: SplitResult, shown: str, label: str) -> str:
    host = parts.hostname
    hostport = parts.netloc.rpartition("@")[2]
    if not host or not _plain_host(host, hostport) or hostport.endswith(":"):
        raise ValueError(f"broker URL {shown!r}: {label} is not HOST:PORT")
    try:
        port = parts.port
    except ValueError:
        port_text = hostport.rpartition("]")[2].partition(":")[2]
        if port_text.isdigit():
            raise ValueError(f"broker URL {shown!r}: port {port_text} is out of range") from None
        raise ValueError(f"broker URL {shown!r}: {label} is not HOST:PORT") from None
    if port == 0:
        raise ValueError(f"broker URL {shown!r}: port 0 is out of range")
    # urlsplit lowercases the host and drops an IPv6 host's brackets.
    shown_host = f"[{host}]" if ":" in host else host
    return f"{shown_host}:{port if port is not None else DEFAULT_PORT}"


_NAME = re.compile(r"[A-Za-z0-9._-]+")
_IPV6 = re.compile(r"\[[0-9A-Fa-f:.]+\]")


def _plain_host(host: str, hostport: str) -> bool:
    """A DNS name or IPv4 address, or a bracketed IPv6 address: nothing else passes for a host."""
    if hostport.startswith("["):
        return _IPV6.fullmatch(hostport.partition("]")[0] + "]") is not None
    return _NAME.fullmatch(host) is not None
