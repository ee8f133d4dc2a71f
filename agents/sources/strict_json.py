"""JSON manifests read the way the API server reads them.

orjson takes a key given twice as last-wins, and so does ``json.loads``
unless told otherwise; the API server's strict field validation refuses it.
So JSON is read with :func:`json.loads` and a pairs hook that refuses a
duplicate key, naming it and its path. The other limits are those of YAML
(:mod:`kueuestream.admission.strict_yaml`): nesting depth and object size. An
integer beyond 64 bits keeps its text, as in YAML; ``NaN`` and ``Infinity``
(not JSON) and lone UTF-16 surrogates (not text) are refused.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from kueuestream.admission.errors import join_path
from kueuestream.admission.strict_yaml import INT64_MAX, INT64_MIN, MAX_DEPTH, MAX_OBJECT_BYTES

# An escaped UTF-16 surrogate (\ud800 to \udfff); only these can make a lone one.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abAB]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonProblem(ValueError):
    """Why a JSON text cannot be taken in; the message says where.

    ``syntax`` is set when the text is not JSON at all.
    """

    def __init__(self, message: str, *, syntax: bool = False) -> None:
        super().__init__(message)
        self.syntax = syntax


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class _Marked(dict[str, Any]):
    """The object holding a duplicate key, found again on a second read to name its path."""


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Duplicate(key)
            seen.add(key)
    return out


def _mark_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    return _Marked(out) if len(out) != len(pairs) else out


def _int(text: str) -> int | str:
    number = int(text)
    return number if INT64_MIN <= number <= INT64_MAX else text


def _constant(name: str) -> Any:
    raise JsonProblem(f"{name} is not a JSON value; write numbers as digits, or a string", syntax=True)


def _walk(value: Any) -> tuple[int, list[str | int] | None, list[str | int] | None]:
    """Depth of ``value``; the path to a duplicate-key object and to a string with a lone surrogate."""
    deepest = 0
    marked: list[str | int] | None = None
    surrogate: list[str | int] | None = None
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    while stack:
        item, path = stack.pop()
        depth = len(path) + 1
        if isinstance(item, dict):
            deepest = max(deepest, depth)
            if marked is None and isinstance(item, _Marked):
                marked = path
            if depth <= MAX_DEPTH:
                stack.extend((v, [*path, k]) for k, v in item.items())
        elif isinstance(item, list):
            deepest = max(deepest, depth)
            if depth <= MAX_DEPTH:
                stack.extend((v, [*path, i]) for i, v in enumerate(item))
        else:
            deepest = max(deepest, depth)
            if surrogate is None and isinstance(item, str) and _SURROGATE.search(item):
                surrogate = path
    return deepest, marked, surrogate


def _objects(value: Any) -> list[Any]:
    if isinstance(value, dict) and value.get("kind") == "List" and isinstance(value.get("items"), list):
        return list(value["items"])
    return [value]


def load_json(text: str) -> Any:
    """The value of one JSON document; raises :class:`JsonProblem`."""
    try:
        value = json.loads(
            text, object_pairs_hook=_refuse_duplicates, parse_int=_int, parse_constant=_constant
        )
    except _Duplicate as dup:
        marked = json.loads(
            text, object_pairs_hook=_mark_duplicates, parse_int=_int, parse_constant=_constant
        )
        path = _walk(marked)[1] or []
        raise JsonProblem(
            f"{join_path(*path, dup.key)}: duplicate key {dup.key!r}; a key may appear once in an object, "
            "as the API server's strict field validation requires"
        ) from None
    except json.JSONDecodeError as err:
        raise JsonProblem(f"line {err.lineno}, column {err.colno}: {err.msg}", syntax=True) from None
    except RecursionError:
        raise JsonProblem(f"nested more than {MAX_DEPTH} levels deep") from None
    depth, _, surrogate = _walk(value) if _SURROGATE_ESCAPE.search(text) else (_depth(value), None, None)
    if depth > MAX_DEPTH:
        raise JsonProblem(f"nested more than {MAX_DEPTH} levels deep")
    if surrogate is not None:
        raise JsonProblem(f"{join_path(*surrogate) or '<root>'}: a lone UTF-16 surrogate escape is not text")
    if len(text) * 4 > MAX_OBJECT_BYTES:  # a character is at most 4 bytes of UTF-8
        for index, obj in enumerate(_objects(value)):
            size = len(orjson.dumps(obj))
            if size > MAX_OBJECT_BYTES:
                where = f"items[{index}]: " if obj is not value else ""
                raise JsonProblem(
                    f"{where}the object is {size:,} bytes; the API server takes at most "
                    f"{MAX_OBJECT_BYTES:,} bytes (3 MiB) per object"
                )
    return value


def _depth(value: Any) -> int:
    """Nesting depth, counting no further than one past :data:`MAX_DEPTH`."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > MAX_DEPTH:
            continue
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest
