"""Canonical JSON encoding of log records.

Replaying a recorded log must reproduce byte-identical decisions, so the bytes
of a record may depend only on its content: keys are sorted (dict insertion
order is an accident of how a record was built) and floats are refused (their
text form is where serialisers and platforms disagree; Kubernetes quantities
such as ``cpu: 0.5`` are strings in the API anyway). YAML parsers still produce
floats for such values, so input manifests go through :func:`normalize_manifest`
first; the schemas in :mod:`kueuestream.streams.schemas` do this for their ``object``
fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import orjson
import pydantic

from kueuestream.admission.errors import join_path

M = TypeVar("M", bound=pydantic.BaseModel)

# Sorted keys make the bytes independent of how a dict was built.
_DUMPS_OPTIONS = orjson.OPT_SORT_KEYS


class EncodeError(ValueError):
    """A value cannot be encoded canonically (a float, a non-string key, ...)."""


class DecodeError(ValueError):
    """Bytes are not valid JSON or do not match the expected schema.

    ``problems`` lists one ``(field path, reason)`` per problem found, so callers
    that write an :class:`~kueuestream.streams.schemas.ErrorRecord` can keep them apart.
    """

    def __init__(self, message: str, problems: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


def normalize_manifest(obj: Any) -> Any:
    """Return ``obj`` with every float replaced by its shortest round-trip text.

    ``repr`` of a Python float is the shortest string that parses back to the
    same double, and it is the same on every platform, so ``0.5 -> "0.5"`` and
    ``1e21 -> "1e+21"`` (both valid Kubernetes quantities). Dicts, lists and
    tuples are rebuilt (tuples become lists, as JSON has no tuples); every
    other value, including ints, bools and strings, is left as it is. The input
    is not modified.
    """
    if isinstance(obj, float):
        return repr(obj)
    if isinstance(obj, dict):
        return {key: normalize_manifest(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [normalize_manifest(item) for item in obj]
    return obj


def find_float(obj: Any, path: tuple[str | int, ...] = ()) -> tuple[str | int, ...] | None:
    """The path of the first float inside ``obj`` (dict keys in sorted order), or None."""
    if isinstance(obj, float):
        return path
    if isinstance(obj, Mapping):
        # Sorted so the reported path does not depend on insertion order either.
        for key in sorted(obj, key=str):
            found = find_float(obj[key], (*path, key))
            if found is not None:
                return found
    elif isinstance(obj, list | tuple):
        for index, item in enumerate(obj):
            found = find_float(item, (*path, index))
            if found is not None:
                return found
    return None


def contains_float(obj: Any) -> bool:
    """Whether a float is anywhere inside ``obj``.

    This runs on every encoded record, so it is an explicit stack walk with
    exact type checks first (several times faster than :func:`find_float`,
    which builds paths); :func:`find_float` only runs to explain a hit.
    """
    stack = [obj]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is str or kind is int or kind is bool or item is None:
            continue
        if kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif isinstance(item, float):
            return True
        elif isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def encode_json(obj: Any, *, what: str = "value") -> bytes:
    """Canonical bytes of a plain JSON-like value; raises :class:`EncodeError`."""
    _refuse_floats(obj, what)
    return _dumps(obj, what)


def _refuse_floats(obj: Any, what: str) -> None:
    float_path = find_float(obj) if contains_float(obj) else None
    if float_path is not None:
        where = join_path(*(p if isinstance(p, int) else str(p) for p in float_path)) or "<root>"
        raise EncodeError(
            f"cannot encode {what}: float at {where}; floats are not allowed in log records "
            "because their text form is not canonical (pass manifests through "
            "normalize_manifest, or use an int or a string)"
        )


def _dumps(obj: Any, what: str) -> bytes:
    try:
        encoded = orjson.dumps(obj, option=_DUMPS_OPTIONS)
    except orjson.JSONEncodeError as exc:  # e.g. a non-string dict key or an int beyond 64 bits
        raise EncodeError(f"cannot encode {what}: {exc}") from exc
    # orjson's result keeps the whole buffer it wrote into (4 KiB at least) however
    # short the text: ten times the size of a typical record, for as long as a log
    # held in memory keeps it. A copy holds the bytes alone.
    return bytes(memoryview(encoded))


def encode(model: pydantic.BaseModel) -> bytes:
    """Canonical bytes of a record: sorted keys, no floats, UTF-8 JSON.

    The fields a record type lists in ``normalized_fields`` had their floats
    replaced when it was validated, and a record is frozen: they are written as
    they are, neither copied nor searched for floats again.
    """
    kind = type(model)
    what = kind.__name__
    normalized: tuple[str, ...] = getattr(kind, "normalized_fields", ())
    # mode="python", not "json": the latter turns NaN and infinities into null
    # without a word, hiding the floats this must refuse. orjson writes the
    # enums by value and tuples as arrays itself.
    if not normalized:
        return encode_json(model.model_dump(mode="python", by_alias=True), what=what)
    data = model.model_dump(mode="python", by_alias=True, exclude=set(normalized))
    _refuse_floats(data, what)
    for name in normalized:
        data[kind.model_fields[name].serialization_alias or name] = getattr(model, name)
    return _dumps(data, what)


def decode(data: bytes | bytearray | memoryview | str, model_type: type[M]) -> M:
    """Parse and validate one record; raises :class:`DecodeError` naming what is wrong."""
    name = model_type.__name__
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise DecodeError(
            f"cannot decode {name}: malformed JSON at line {exc.lineno} column {exc.colno} "
            f"(char {exc.pos}): {exc.msg}",
            (("", f"malformed JSON: {exc.msg}"),),
        ) from exc
    if not isinstance(obj, dict):
        kind = "null" if obj is None else type(obj).__name__
        raise DecodeError(
            f"cannot decode {name}: expected a JSON object, got {kind}",
            (("", f"expected a JSON object, got {kind}"),),
        )
    try:
        return model_type.model_validate(obj)
    except pydantic.ValidationError as exc:
        problems = tuple(_describe(error) for error in exc.errors(include_url=False))
        listed = "; ".join(f"{path or '<root>'}: {reason}" for path, reason in problems)
        raise DecodeError(f"cannot decode {name}: {listed}", problems) from exc


def reread(model: M, raw: bytes, fields: tuple[str, ...] = ("object",)) -> M:
    """What ``decode(raw, type(model))`` gives for ``raw = encode(model)``, without validating again.

    For a process that wrote a record and reads it back (the embedded
    pipeline): the model was valid when built, so decoding its bytes would
    only run the same checks again. What the round trip does change is in the
    plain JSON values (dicts come back with sorted keys, tuples as lists):
    ``fields`` names the model's fields that hold them, and those are taken
    from ``raw``.
    """
    data = orjson.loads(raw)
    return model.model_copy(update={name: data.get(name) for name in fields})


def _describe(error: Any) -> tuple[str, str]:
    """``(field path, reason)`` for one pydantic error, the input shown when short."""
    path = join_path(*(p if isinstance(p, int) else str(p) for p in error["loc"]))
    reason = str(error["msg"])
    if error["type"] not in {"missing", "extra_forbidden"}:
        shown = repr(error.get("input"))
        if len(shown) <= 80:
            reason = f"{reason} (got {shown})"
    return path, reason
