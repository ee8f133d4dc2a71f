"""Writing plain data (what JSON can hold) as block-style YAML, fast, in PyYAML's own layout.

The text is exactly what ``yaml.safe_dump(data, sort_keys=False,
default_flow_style=False, width=1_000_000)`` writes, except that an object
met twice is written twice instead of as an anchor and an alias. PyYAML's
representer and emitter spend microseconds on every value, most of the time
a big ``admit`` output takes; here the common shapes are written straight as
text: maps, lists of maps, numbers, booleans, null, and strings whose
quoting is certain (plain, or single-quoted when plain would read back as
another type or is not allowed). Anything else, such as a string with a line
break or a non-ASCII character, sends the item it is in (an element of a
top-level list, or the whole document) to PyYAML, with libyaml's emitter
when present. A long top-level list is written in parts on every core.
"""

from __future__ import annotations

import io
import re
from typing import Any, TextIO

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from kueuestream.admission.strict_yaml import cached_resolve
from kueuestream.agents.forked import cores, map_parts


class _Dumper(yaml.SafeDumper):
    # The emitter asks the resolver about every scalar, to know whether it may go unquoted.
    resolve = cached_resolve


_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_NULL = "tag:yaml.org,2002:null"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"

# Strings PyYAML writes plain when they read back as strings: no indicator at
# the start, none inside that matters in block context (",?[]{}" only matter in
# flow context, and so does ":" unless a space or the end follows it, as in
# image references), no space at either end, nothing outside printable ASCII.
_PLAIN = re.compile(
    r"[A-Za-z0-9_(./](?:[A-Za-z0-9_./()=+;~,?\[\]{}-]|:(?! |$))*"
    r"(?: (?:[A-Za-z0-9_./()=+;~,?\[\]{}-]|:(?! |$))+)*"
)
# Strings PyYAML writes single-quoted whenever it does not write them plain.
_SINGLE = re.compile(r"[\x20-\x7e]+")
# What keeps a one-line printable string from being plain in block context
# (a leading "---" or "..." would read as a document marker).
_NOT_PLAIN = re.compile(r"^[,\[\]{}#&*!|>'\"%@`]|^[-?:](?: |$)|^---|^\.\.\.|: |:$| #|^ | $")
# A top-level list this long (a big listing's items) is written in parts, one
# per core, each by its own process (kueuestream.agents.forked).
PARALLEL_MIN_ITEMS = 2000
# Longer keys are written as "? key" by PyYAML; longer strings may be folded.
_MAX_KEY = 100
_MAX_STRING = 100_000


# What _scalar wrote for each string so far, up to this many strings.
_SCALAR_TEXT: dict[str, str] = {}
_SCALAR_TEXT_MAX = 100_000


class _Unsure(Exception):
    """A value whose exact PyYAML text this module does not produce."""


def _scalar(value: str) -> str:
    # Keys, kinds, reasons and messages repeat in every item of a listing.
    text = _SCALAR_TEXT.get(value)
    if text is None:
        text = _scalar_text(value)
        if len(_SCALAR_TEXT) < _SCALAR_TEXT_MAX:
            _SCALAR_TEXT[value] = text
    return text


def _scalar_text(value: str) -> str:
    if len(value) > _MAX_STRING:
        raise _Unsure(value)
    if _PLAIN.fullmatch(value) and not value.startswith("..."):
        if cached_resolve(_RESOLVER, ScalarNode, value, (True, False)) == _STR:
            return value
        return f"'{value}'"
    if value and _SINGLE.fullmatch(value):
        reads_as_str = cached_resolve(_RESOLVER, ScalarNode, value, (True, False)) == _STR
        if not reads_as_str or _NOT_PLAIN.search(value):
            return "'" + value.replace("'", "''") + "'"
    raise _Unsure(value)


def _simple(value: Any) -> str | None:
    """The text of a scalar, or None for a collection."""
    kind = type(value)
    if kind is str:
        return _scalar(value)
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is dict:
        if not value:
            return "{}"
        return None
    if kind is list:
        if not value:
            return "[]"
        return None
    raise _Unsure(value)


def _mapping(value: dict[Any, Any], indent: int, out: list[str], first_prefix: str | None) -> None:
    """Entries at ``indent``; the first one after ``first_prefix`` when it opens a list item."""
    pad = " " * indent
    for i, (key, item) in enumerate(value.items()):
        if type(key) is not str or len(key) > _MAX_KEY:
            raise _Unsure(key)
        head = (first_prefix if i == 0 and first_prefix is not None else pad) + _scalar(key)
        text = _simple(item)
        if text is not None:
            out.append(f"{head}: {text}\n")
        elif type(item) is dict:
            out.append(f"{head}:\n")
            _mapping(item, indent + 2, out, None)
        else:
            out.append(f"{head}:\n")
            _sequence(item, indent, out)


def _sequence(value: list[Any], indent: int, out: list[str]) -> None:
    pad = " " * indent
    for item in value:
        text = _simple(item)
        if text is not None:
            out.append(f"{pad}- {text}\n")
        elif type(item) is dict:
            _mapping(item, indent + 2, out, pad + "- ")
        else:
            raise _Unsure(item)  # a list right inside a list


def _node(value: Any, representer: yaml.representer.SafeRepresenter) -> Node:
    kind = type(value)
    if kind is str:
        return ScalarNode(_STR, value)
    if kind is dict:
        pairs = [(_node(k, representer), _node(v, representer)) for k, v in value.items()]
        return MappingNode(_MAP, pairs, flow_style=False)
    if kind is list or kind is tuple:
        return SequenceNode(_SEQ, [_node(v, representer) for v in value], flow_style=False)
    if kind is bool:
        return ScalarNode(_BOOL, "true" if value else "false")
    if kind is int:
        return ScalarNode(_INT, str(value))
    if value is None:
        return ScalarNode(_NULL, "null")
    node: Node = representer.represent_data(value)  # floats and anything rarer
    return node


def _pyyaml(data: Any, stream: TextIO) -> None:
    dumper = _Dumper(stream, default_flow_style=False, sort_keys=False, width=1_000_000)
    try:
        dumper.open()
        dumper.serialize(_node(data, dumper))
        dumper.close()
    finally:
        dumper.dispose()


def _fast(data: Any) -> str:
    out: list[str] = []
    _mapping(data, 0, out, None)
    return "".join(out)


def write_yaml(data: Any, stream: TextIO) -> None:
    if type(data) is not dict or not data:
        _pyyaml(data, stream)
        return
    for key, value in data.items():
        part = {key: value}
        if type(value) is not list or not value:
            try:
                stream.write(_fast(part))
            except _Unsure:
                _pyyaml(part, stream)
            continue
        # A top-level list (a kind: List's items): each element on its own, so one
        # unusual string sends only its element to PyYAML.
        try:
            if type(key) is not str or len(key) > _MAX_KEY:
                raise _Unsure(key)
            stream.write(f"{_scalar(key)}:\n")
        except _Unsure:
            _pyyaml(part, stream)
            continue
        if len(value) >= PARALLEL_MIN_ITEMS and cores() > 1:
            count = cores()
            size = -(-len(value) // count)
            parts = [value[i : i + size] for i in range(0, len(value), size)]
            for text in map_parts(_items_text, parts):
                stream.write(text)
        else:
            _write_items(value, stream)


def _write_items(items: list[Any], stream: TextIO) -> None:
    for item in items:
        try:
            out: list[str] = []
            _sequence([item], 0, out)
            stream.write("".join(out))
        except _Unsure:
            _pyyaml([item], stream)


def _items_text(items: list[Any]) -> str:
    stream = io.StringIO()
    _write_items(items, stream)
    return stream.getvalue()


_RESOLVER = yaml.resolver.Resolver()
