"""Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity), exactly.

Values are held as `Fraction` and never touch a float: "0.1" must stay one tenth,
or quota sums drift away from what Kueue computes with its fixed-point integers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "Format",
    "Quantity",
    "QuantityError",
    "exact_resource_value",
    "format_quantity",
    "format_value",
    "parse_quantity",
    "resource_quantity",
    "resource_value",
]


class QuantityError(ValueError):
    """A string that Kubernetes would not accept as a quantity."""


class Format(StrEnum):
    BinarySI = "BinarySI"  # 12Mi = 12 * 2^20
    DecimalSI = "DecimalSI"  # 12M = 12 * 10^6
    DecimalExponent = "DecimalExponent"  # 12e6


@dataclass(frozen=True, slots=True, order=True)
class Quantity:
    """An exact amount plus the notation it is printed in.

    Equality, ordering and hashing look at the value only, as apimachinery's Cmp
    does: "1Ki" == "1024".
    """

    value: Fraction
    format: Format = field(default=Format.DecimalSI, compare=False)

    def __str__(self) -> str:
        return format_quantity(self)


_EXPECTED = "expected a number with an optional suffix such as 500m, 2, 1.5Gi, 1200Mi or 1e3"

_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip
_BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_DECIMAL_BY_EXPONENT = {exp: suffix for suffix, exp in _DECIMAL_SUFFIXES.items()}
_KNOWN_SUFFIXES = [*_BINARY_SUFFIXES, *(s for s in _DECIMAL_SUFFIXES if s)]

# The documented grammar. apimachinery's hand-written scanner also lets "+", "-"
# and "." through as zero; the CRD schema pattern rejects them and so do we.
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)")
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)")

_NANO = 10**9
# Upstream silently caps a BinarySI amount at the int64 maximum: "9Ei" is 2^63-1.
_MAX_BINARY = 2**63 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Python refuses to convert ints of more than 4300 digits to or from text; these
# limits keep every accepted quantity printable, far beyond any real resource.
_MAX_LENGTH = 1000
_MAX_INTEGER_DIGITS = 1000


def _error(text: str, hint: str = "") -> QuantityError:
    message = f'"{text}" is not a quantity: {_EXPECTED}'
    return QuantityError(f"{message}; {hint}" if hint else message)


def _hint(text: str) -> str:
    if not text:
        return "it is empty"
    if text != text.strip():
        return "remove the surrounding spaces"
    number = _NUMBER_RE.match(text)
    if number is None:
        return ""
    suffix = text[number.end() :]
    # A bare lower-case "e" is a truncated exponent, not a miscased "E" (exa).
    for candidate in (suffix, suffix.removesuffix("B").removesuffix("b")):
        for known in _KNOWN_SUFFIXES:
            if candidate not in ("", "e") and candidate.lower() == known.lower():
                return f'suffixes are case-sensitive, no "B": did you mean "{number[0]}{known}"?'
    if suffix[:1] in ("e", "E"):
        return "a decimal exponent must be a whole number, such as 1e3 or 5e-1"
    return ""


def parse_quantity(value: str | int | float) -> Quantity:
    """Parse a quantity the way the API server does (resource.ParseQuantity).

    YAML hands over ints and floats too; a float is read from its shortest repr
    ("0.1"), never through binary float arithmetic.
    """
    if isinstance(value, bool):
        raise QuantityError(f"{str(value).lower()} is not a quantity: {_EXPECTED}")
    if isinstance(value, float):
        return _parse_text(repr(value))
    if isinstance(value, int):
        return _parse_text(str(value))
    return _parse_text(value)


@lru_cache(maxsize=8192)
def _parse_text(text: str) -> Quantity:
    if len(text) > _MAX_LENGTH:
        raise _error(text[:40] + "...", f"it is longer than {_MAX_LENGTH} characters")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise _error(text, _hint(text))
    sign, whole, fraction, suffix = match.groups()
    fraction = fraction or ""
    if not whole and not fraction:
        raise _error(text, "the number has no digits" if text else "it is empty")

    digits = whole + fraction
    scale = -len(fraction)  # value = int(digits) * 10^scale * 2^binary_power
    binary_power = 0
    if suffix in _BINARY_SUFFIXES:
        fmt = Format.BinarySI
        binary_power = _BINARY_SUFFIXES[suffix]
    elif suffix in _DECIMAL_SUFFIXES:
        fmt = Format.DecimalSI
        scale += _DECIMAL_SUFFIXES[suffix]
    else:
        fmt = Format.DecimalExponent
        scale += int(suffix[1:])

    significant = digits.lstrip("0")
    if not significant:
        return Quantity(Fraction(0), fmt)
    if len(significant) + scale > _MAX_INTEGER_DIGITS:
        raise _error(text, f"it is larger than 1e{_MAX_INTEGER_DIGITS}")

    amount = int(significant) << binary_power
    # apimachinery keeps nano precision and rounds anything finer away from zero,
    # so that asking for a sliver of a resource still asks for some of it.
    if scale >= -9:
        nanos = amount * 10 ** (scale + 9)
    else:
        dropped = -9 - scale
        # Beyond its digit count the divisor exceeds the amount: what is left is 1n.
        nanos = 1 if dropped > len(str(amount)) else -(-amount // 10**dropped)
    if fmt is Format.BinarySI:
        nanos = min(nanos, _MAX_BINARY * _NANO)
        if nanos < _NANO:
            # A binary fraction of one would only print as a rounded-up "1"; upstream
            # switches such values to DecimalSI at parse time.
            fmt = Format.DecimalSI
    return Quantity(Fraction(-nanos if sign == "-" else nanos, _NANO), fmt)


def _nanos_away_from_zero(value: Fraction) -> int:
    numerator, denominator = value.numerator, value.denominator
    if _NANO % denominator == 0:
        return numerator * (_NANO // denominator)
    nanos = -(-abs(numerator) * _NANO // denominator)
    return nanos if numerator > 0 else -nanos


def format_quantity(q: Quantity) -> str:
    """The canonical string apimachinery prints (Quantity.String / CanonicalizeBytes).

    Upstream's String() returns the parsed text verbatim when it already looks
    canonical (so "+1" stays "+1"); this always returns the canonical form.
    """
    nanos = _nanos_away_from_zero(q.value)
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    nanos = abs(nanos)
    fmt = q.format

    if fmt is Format.BinarySI:
        if nanos < 1024 * _NANO or nanos % _NANO:
            # Small or fractional binary amounts would lose precision as Ki/Mi/...
            fmt = Format.DecimalSI
        else:
            units, power = nanos // _NANO, 0
            # Stopping at Ei keeps values beyond the parse cap exact instead of
            # printing them with no suffix.
            while units % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
                units //= 1024
                power += 1
            return f"{sign}{units}{_BINARY_BY_POWER[power]}"

    text = str(nanos)
    mantissa = text.rstrip("0")
    exponent = -9 + len(text) - len(mantissa)
    # Suffixes come in steps of 1000: shift digits into the mantissa until the
    # exponent is a multiple of three (1.5 -> 1500m, 12e5 -> 1200e3).
    shift = exponent % 3
    mantissa += "0" * shift
    exponent -= shift

    if fmt is Format.DecimalSI and exponent in _DECIMAL_BY_EXPONENT:
        return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
    # DecimalExponent, and DecimalSI past "E" where no SI suffix exists.
    return f"{sign}{mantissa}e{exponent}" if exponent else f"{sign}{mantissa}"


def resource_value(resource_name: str, q: Quantity) -> int:
    """The int64 Kueue keeps for a quantity: millicores for cpu, whole units otherwise.

    Rounds up (away from zero) like MilliValue()/Value(), and saturates at the
    int64 bounds like Kueue's SafeMilliValue/SafeValue.
    """
    return exact_resource_value(resource_name, q.value)


def exact_resource_value(resource_name: str, value: Fraction) -> int:
    """:func:`resource_value` of an exact amount."""
    numerator, denominator = value.numerator, value.denominator
    if resource_name == "cpu":
        numerator *= 1000
    # Python's divmod floors, which is already away from zero for negative amounts.
    result, remainder = divmod(numerator, denominator)
    if remainder and numerator > 0:
        result += 1
    return max(_INT64_MIN, min(_INT64_MAX, result))


def _uses_binary_si(resource_name: str) -> bool:
    return resource_name in ("memory", "ephemeral-storage") or resource_name.startswith("hugepages-")


# Every admitted Workload's status prints its usage; the same amounts come back again and again.
@lru_cache(maxsize=8192)
def resource_quantity(resource_name: str, value: int) -> str:
    """The quantity Kueue writes back for an int64 amount (pkg/resources ResourceQuantity)."""
    if resource_name == "cpu":
        return format_quantity(Quantity(Fraction(value, 1000), Format.DecimalSI))
    if _uses_binary_si(resource_name):
        # Kueue round-trips BinarySI through the string so the result re-parses to
        # itself: 200Mi stays binary, but 100000 has no binary suffix and becomes 100k.
        binary = format_quantity(Quantity(Fraction(value), Format.BinarySI))
        return format_quantity(_parse_text(binary))
    return format_quantity(Quantity(Fraction(value), Format.DecimalSI))


format_value = resource_quantity
