"""Shared pydantic plumbing for the Kubernetes API models.

Objects are read the way the API server reads them: unknown fields are
pruned (ignored), wrong types and invalid values are errors.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, Strict
from pydantic.alias_generators import to_camel

from kueuestream.admission.quantity import Quantity, QuantityError, parse_quantity


class ApiModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
        strict=False,
        # A model's validator is built when first used, not at import: a command
        # reads a few kinds, and building every one slowed each command's start.
        defer_build=True,
    )


def _quantity(value: Any) -> Quantity:
    if isinstance(value, Quantity):
        return value
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"expected a quantity such as 500m, 2, 1.5Gi or 1200Mi, got {type(value).__name__}")
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise ValueError(str(err)) from None


QuantityValue = Annotated[
    Quantity, BeforeValidator(_quantity), PlainSerializer(lambda q: str(q), return_type=str)
]
ResourceList = dict[str, QuantityValue]


def _strict_str(value: Any) -> Any:
    # YAML turns `name: 123` or `name: true` into non-strings; Kubernetes rejects them.
    if value is not None and not isinstance(value, str):
        raise ValueError(f"expected a string, got {type(value).__name__} {value!r}")
    return value


Str = Annotated[str, BeforeValidator(_strict_str)]


def _strict_int(value: Any) -> Any:
    # `count: "3"` or `count: true` is a type error for the API server, not a number.
    if isinstance(value, (bool, str)):
        raise ValueError(f"expected an integer, got {type(value).__name__} {value!r}")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Int = Annotated[int, BeforeValidator(_strict_int)]
# `active: "yes"` is a string to the API server; only true and false are booleans.
Bool = Annotated[bool, Strict()]


class ObjectMeta(ApiModel):
    name: Str = ""
    namespace: Str = ""
    labels: dict[str, Str] = Field(default_factory=dict)
    annotations: dict[str, Str] = Field(default_factory=dict)
    creation_timestamp: Str | None = None
    uid: Str = ""
    generation: Int = 0


class LabelSelectorRequirement(ApiModel):
    key: Str
    operator: Str
    values: list[Str] = Field(default_factory=list)


class LabelSelector(ApiModel):
    match_labels: dict[str, Str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)
