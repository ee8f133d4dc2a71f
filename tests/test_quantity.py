from __future__ import annotations

from fractions import Fraction

import pytest

from kueuestream.admission.quantity import (
    Format,
    Quantity,
    QuantityError,
    format_quantity,
    format_value,
    parse_quantity,
    resource_quantity,
    resource_value,
)

BIN, DEC, EXP = Format.BinarySI, Format.DecimalSI, Format.DecimalExponent
KI, MI, GI, TI, PI, EI = (1024**n for n in range(1, 7))
INT64_MAX = 2**63 - 1

EXPECTED = "expected a number with an optional suffix such as 500m, 2, 1.5Gi, 1200Mi or 1e3"


# --- parsing ---------------------------------------------------------------

PARSE_CASES: list[tuple[str, Fraction | int, Format]] = [
    # zero in every family keeps the family
    ("0", 0, DEC),
    ("0n", 0, DEC),
    ("0m", 0, DEC),
    ("0k", 0, DEC),
    ("0Ki", 0, BIN),
    ("0Gi", 0, BIN),
    ("0e3", 0, EXP),
    ("-0", 0, DEC),
    ("000", 0, DEC),
    # binary SI
    ("1Ki", KI, BIN),
    ("8Ki", 8 * KI, BIN),
    ("7Mi", 7 * MI, BIN),
    ("6Gi", 6 * GI, BIN),
    ("5Ti", 5 * TI, BIN),
    ("4Pi", 4 * PI, BIN),
    ("3Ei", 3 * EI, BIN),
    ("1200Mi", 1200 * MI, BIN),
    ("1.5Gi", 1536 * MI, BIN),
    ("0.5Mi", 512 * KI, BIN),
    ("100.035Ki", Fraction(10243584, 100), BIN),
    ("0.05Gi", Fraction(536870912, 10), BIN),
    # decimal SI
    ("5n", Fraction(5, 10**9), DEC),
    ("4u", Fraction(4, 10**6), DEC),
    ("3m", Fraction(3, 1000), DEC),
    ("100m", Fraction(1, 10), DEC),
    ("9", 9, DEC),
    ("8k", 8000, DEC),
    ("50k", 50000, DEC),
    ("7M", 7 * 10**6, DEC),
    ("6G", 6 * 10**9, DEC),
    ("5T", 5 * 10**12, DEC),
    ("2P", 2 * 10**15, DEC),
    ("1E", 10**18, DEC),
    ("12E", 12 * 10**18, DEC),
    ("1.01E", 101 * 10**16, DEC),
    # decimal exponent
    ("1e3", 1000, EXP),
    ("1E3", 1000, EXP),
    ("1E-3", Fraction(1, 1000), EXP),
    ("1E-2", Fraction(1, 100), EXP),
    ("1e+6", 10**6, EXP),
    ("1.3E+6", 1300000, EXP),
    ("1.2e3", 1200, EXP),
    ("0.5e0", Fraction(1, 2), EXP),
    ("0.5e-2", Fraction(5, 1000), EXP),
    ("12e6", 12 * 10**6, EXP),
    ("1e007", 10**7, EXP),
    # signs and decimal points
    ("+1", 1, DEC),
    ("-1", -1, DEC),
    ("-1.5Gi", -1536 * MI, BIN),
    ("+100m", Fraction(1, 10), DEC),
    ("-1e3", -1000, EXP),
    ("0.5", Fraction(1, 2), DEC),
    ("0.1", Fraction(1, 10), DEC),
    (".001", Fraction(1, 1000), DEC),
    ("-.5", Fraction(-1, 2), DEC),
    ("1.", 1, DEC),
    ("1.G", 10**9, DEC),
    ("0.0005k", Fraction(1, 2), DEC),
    ("100.035k", 100035, DEC),
    ("6.987654321G", 6987654321, DEC),
    ("0.50000", Fraction(1, 2), DEC),
    ("007", 7, DEC),
]


@pytest.mark.parametrize(("text", "value", "fmt"), PARSE_CASES)
def test_parse(text: str, value: Fraction | int, fmt: Format) -> None:
    q = parse_quantity(text)
    assert q.value == value
    assert isinstance(q.value, Fraction)
    assert q.format is fmt


@pytest.mark.parametrize(
    ("text", "value", "fmt", "printed"),
    [
        # finer than nano rounds away from zero to the next nano
        ("0.1n", Fraction(1, 10**9), DEC, "1n"),
        ("0.9n", Fraction(1, 10**9), DEC, "1n"),
        ("-0.1n", Fraction(-1, 10**9), DEC, "-1n"),
        ("3.001n", Fraction(4, 10**9), DEC, "4n"),
        ("1.1E-9", Fraction(2, 10**9), EXP, "2e-9"),
        ("0.0000000001", Fraction(1, 10**9), DEC, "1n"),
        ("0.00000000050", Fraction(1, 10**9), DEC, "1n"),
        ("0.00000012345", Fraction(124, 10**9), DEC, "124n"),
        ("0.00000012354", Fraction(124, 10**9), DEC, "124n"),
        ("1e-100000000", Fraction(1, 10**9), EXP, "1e-9"),
        ("-1e-100000000", Fraction(-1, 10**9), EXP, "-1e-9"),
        # a binary amount below one switches to DecimalSI, after rounding
        ("0.000000000001Ki", Fraction(2, 10**9), DEC, "2n"),
        (".001Ki", Fraction(1024, 1000), BIN, "1024m"),
        (".000001Ki", Fraction(1024, 10**6), DEC, "1024u"),
        (".000000001Ki", Fraction(1024, 10**9), DEC, "1024n"),
        # a binary amount is capped at the int64 maximum, silently, as upstream does
        ("9Ei", INT64_MAX, BIN, "9223372036854775807"),
        ("8Ei", INT64_MAX, BIN, "9223372036854775807"),
        ("9223372036854775807Ki", INT64_MAX, BIN, "9223372036854775807"),
        ("-9Ei", -INT64_MAX, BIN, "-9223372036854775807"),
        ("7Ei", 7 * EI, BIN, "7Ei"),
        # decimal amounts are not capped
        ("18446744073709551616", 2**64, DEC, "18446744073709551616"),
        ("1000E", 10**21, DEC, "1e21"),
    ],
)
def test_parse_rounds_and_caps(text: str, value: Fraction | int, fmt: Format, printed: str) -> None:
    q = parse_quantity(text)
    assert (q.value, q.format, str(q)) == (value, fmt, printed)


@pytest.mark.parametrize(
    ("value", "expected", "printed"),
    [
        (5, Quantity(Fraction(5)), "5"),
        (-3, Quantity(Fraction(-3)), "-3"),
        (0, Quantity(Fraction(0)), "0"),
        (2000, Quantity(Fraction(2000)), "2k"),
        (10**30, Quantity(Fraction(10**30)), "1e30"),
        (0.1, Quantity(Fraction(1, 10)), "100m"),
        (0.5, Quantity(Fraction(1, 2)), "500m"),
        (2.5, Quantity(Fraction(5, 2)), "2500m"),
        (1.0, Quantity(Fraction(1)), "1"),
        (-0.0, Quantity(Fraction(0)), "0"),
        (1e-05, Quantity(Fraction(1, 10**5), EXP), "10e-6"),
        (1e16, Quantity(Fraction(10**16), EXP), "10e15"),
        (0.30000000000000004, Quantity(Fraction(300000001, 10**9)), "300000001n"),
    ],
)
def test_parse_yaml_numbers(value: int | float, expected: Quantity, printed: str) -> None:
    q = parse_quantity(value)
    assert (q.value, q.format) == (expected.value, expected.format)
    assert str(q) == printed


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("12x", ""),
        ("aoeu", ""),
        ("1.1.M", ""),
        ("1+1.0M", ""),
        ("0.1am", ""),
        (".5i", ""),
        ("1i", ""),
        ("1,5", ""),
        ("0x10", ""),
        ("1_000", ""),
        ("\u0661", ""),  # ARABIC-INDIC DIGIT ONE: only ASCII digits count
        ("1\n", "remove the surrounding spaces"),
        ("", "it is empty"),
        (" 1", "remove the surrounding spaces"),
        ("1 ", "remove the surrounding spaces"),
        (".", "the number has no digits"),
        ("+", "the number has no digits"),
        ("-", "the number has no digits"),
        ("-.", "the number has no digits"),
        ("Ki", "the number has no digits"),
        ("e3", "the number has no digits"),
        ("1e", "a decimal exponent must be a whole number, such as 1e3 or 5e-1"),
        ("-3.01e-", "a decimal exponent must be a whole number, such as 1e3 or 5e-1"),
        ("1e1.5", "a decimal exponent must be a whole number, such as 1e3 or 5e-1"),
        ("1gi", 'did you mean "1Gi"?'),
        ("0.1mi", 'did you mean "0.1Mi"?'),
        ("1ki", 'did you mean "1Ki"?'),
        ("1K", 'did you mean "1k"?'),
        ("1ei", 'did you mean "1Ei"?'),
        ("1GB", 'did you mean "1G"?'),
        ("512MiB", 'did you mean "512Mi"?'),
        ("2gib", 'did you mean "2Gi"?'),
        ("1e99999", "it is larger than 1e1000"),
        ("1" * 1001, "it is longer than 1000 characters"),
    ],
)
def test_rejects(text: str, hint: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(text)
    message = str(info.value)
    assert EXPECTED in message
    assert message.endswith(hint)
    assert isinstance(info.value, ValueError)


def test_rejection_message_is_exact() -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity("12x")
    assert str(info.value) == f'"12x" is not a quantity: {EXPECTED}'


@pytest.mark.parametrize("value", [True, False])
def test_rejects_bools(value: bool) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(value)


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_rejects_non_finite_floats(value: float) -> None:
    with pytest.raises(QuantityError, match="is not a quantity"):
        parse_quantity(value)


def test_parse_is_cached() -> None:
    assert parse_quantity("1536Mi") is parse_quantity("1536Mi")


# --- canonical printing ----------------------------------------------------

ROUND_TRIPS = [
    ("0.5", "500m"),
    ("1000", "1k"),
    ("1500", "1500"),
    ("1.5", "1500m"),
    ("2000000", "2M"),
    ("0", "0"),
    ("0.1n", "1n"),
    ("1200Mi", "1200Mi"),
    ("2048Mi", "2Gi"),
    ("1536", "1536"),
    ("1024", "1024"),
    ("1e3", "1e3"),
    ("2Gi", "2Gi"),
    ("100m", "100m"),
    ("1.5Gi", "1536Mi"),
    ("0.1", "100m"),
    ("1Ki", "1Ki"),
    ("1Mi", "1Mi"),
    ("1024Mi", "1Gi"),
    ("1024Ki", "1Mi"),
    ("1025Ki", "1025Ki"),
    ("1000M", "1G"),
    ("1000m", "1"),
    ("1200m", "1200m"),
    ("12e6", "12e6"),
    ("1E6", "1e6"),
    ("1.5e3", "1500"),
    ("1.5e4", "15e3"),
    ("5e-1", "500e-3"),
    ("0.5e0", "500e-3"),
    ("1e0", "1"),
    ("1E-3", "1e-3"),
    ("80e-3", "80e-3"),
    ("1.08", "1080m"),
    ("1080000000n", "1080m"),
    ("1000u", "1m"),
    ("0.001T", "1G"),
    ("300Mi", "300Mi"),
    ("307200Ki", "300Mi"),
    ("1025024Mi", "1001Gi"),
    ("1024Gi", "1Ti"),
    ("1024Pi", "1Ei"),
    ("5Ki", "5Ki"),
    ("0.5Ki", "512"),
    ("1023", "1023"),
    ("1.5Ki", "1536"),
    ("1.0001Ki", "1024102400u"),
    ("1E", "1E"),
    ("1000E", "1e21"),
    ("5000E", "5e21"),
    ("+1", "1"),
    ("01", "1"),
    ("1.500", "1500m"),
    ("-1.5Gi", "-1536Mi"),
    ("-500m", "-500m"),
    ("-1e3", "-1e3"),
    ("-1Ki", "-1Ki"),
    ("-1023Ki", "-1023Ki"),
    ("-1000", "-1k"),
]


@pytest.mark.parametrize(("text", "printed"), ROUND_TRIPS)
def test_canonical_printing(text: str, printed: str) -> None:
    q = parse_quantity(text)
    assert str(q) == printed
    assert format_quantity(q) == printed
    again = parse_quantity(printed)
    assert again == q
    assert str(again) == printed


@pytest.mark.parametrize(
    ("value", "fmt", "printed"),
    [
        # apimachinery's TestQuantityString table
        (GI, BIN, "1Gi"),
        (300 * MI, BIN, "300Mi"),
        (6 * KI, BIN, "6Ki"),
        (1001 * GI, BIN, "1001Gi"),
        (TI, BIN, "1Ti"),
        (5, BIN, "5"),
        (Fraction(1, 2), BIN, "500m"),
        (10**9, DEC, "1G"),
        (Fraction(1, 1000), DEC, "1m"),
        (Fraction(80, 1000), DEC, "80m"),
        (Fraction(1080, 1000), DEC, "1080m"),
        (300 * 10**6, DEC, "300M"),
        (10**12, DEC, "1T"),
        (10**18, DEC, "1E"),
        (10**21, DEC, "1e21"),
        (5 * 10**21, DEC, "5e21"),
        (10**24, DEC, "1e24"),
        (1234567 * 10**6, DEC, "1234567M"),
        (Fraction(1234567, 1000), BIN, "1234567m"),
        (3000, DEC, "3k"),
        (1025, BIN, "1025"),
        (0, DEC, "0"),
        (0, BIN, "0"),
        (0, EXP, "0"),
        (10**9, EXP, "1e9"),
        (Fraction(1, 1000), EXP, "1e-3"),
        (Fraction(1, 10**9), EXP, "1e-9"),
        (Fraction(80, 1000), EXP, "80e-3"),
        (300 * 10**6, EXP, "300e6"),
        (10**12, EXP, "1e12"),
        (3000, EXP, "3e3"),
        (Fraction(1, 10**9), DEC, "1n"),
        (Fraction(80, 10**9), DEC, "80n"),
        (Fraction(1080, 10**9), DEC, "1080n"),
        (Fraction(1, 10**6), DEC, "1u"),
        (Fraction(1080, 10**6), DEC, "1080u"),
        # NewMilliQuantity / NewQuantity tables
        (Fraction(1024, 1000), BIN, "1024m"),
        (Fraction(1024 * 1024, 1000), BIN, "1048576m"),
        (1234000, DEC, "1234k"),
        (10**6, EXP, "1e6"),
        # a non-integral binary amount prints in DecimalSI rather than round
        (1024 + Fraction(1, 2), BIN, "1024500m"),
        (2048 + Fraction(1, 10**9), BIN, "2048000000001n"),
        # binary amounts outside -1024..1024 that are not multiples of 1024
        (1536, BIN, "1536"),
        (100000, BIN, "100000"),
        # past Ei the mantissa grows rather than losing the suffix
        (1024 * EI, BIN, "1024Ei"),
    ],
)
def test_format_constructed(value: Fraction | int, fmt: Format, printed: str) -> None:
    q = Quantity(Fraction(value), fmt)
    assert format_quantity(q) == printed
    if value:
        assert format_quantity(Quantity(-Fraction(value), fmt)) == "-" + printed


@pytest.mark.parametrize(
    ("value", "printed"),
    [
        # finer than nano, or not decimal at all: round away from zero to nano first
        (Fraction(1, 3), "333333334n"),
        (Fraction(-1, 3), "-333333334n"),
        (Fraction(2, 3), "666666667n"),
        (Fraction(1, 10**12), "1n"),
        (Fraction(10800, 10**10), "1080n"),
        (Fraction(1023999999999, 10**9) + Fraction(1, 10**12), "1024"),
    ],
)
def test_format_rounds_up_to_nano(value: Fraction, printed: str) -> None:
    assert format_quantity(Quantity(value)) == printed


def test_binary_rounded_to_1024_prints_binary() -> None:
    almost = Quantity(Fraction(1023999999999, 10**9) + Fraction(1, 10**12), BIN)
    assert str(almost) == "1Ki"


# --- value semantics -------------------------------------------------------


def test_equality_and_hash_by_value() -> None:
    assert parse_quantity("1Ki") == parse_quantity("1024")
    assert hash(parse_quantity("1Ki")) == hash(parse_quantity("1024"))
    assert parse_quantity("1e3") == parse_quantity("1k") == Quantity(Fraction(1000), BIN)
    assert len({parse_quantity(s) for s in ["1", "1000m", "1e0", "0.001k"]}) == 1
    assert parse_quantity("1") != parse_quantity("1001m")


def test_ordering() -> None:
    texts = ["1Gi", "100m", "1G", "-1", "0", "1n", "1000Mi"]
    ordered = sorted(parse_quantity(t) for t in texts)
    assert [str(q) for q in ordered] == ["-1", "0", "1n", "100m", "1G", "1000Mi", "1Gi"]
    assert parse_quantity("10000T") > parse_quantity("100Gi")
    assert parse_quantity("50m") < parse_quantity("100m") <= parse_quantity("0.1")


def test_frozen() -> None:
    q = parse_quantity("1")
    with pytest.raises(AttributeError):
        q.value = Fraction(2)  # type: ignore[misc]


def test_format_is_a_string_enum() -> None:
    assert Format.BinarySI == "BinarySI"
    assert Format.DecimalSI == "DecimalSI"
    assert Format.DecimalExponent == "DecimalExponent"
    assert Quantity(Fraction(1)).format is Format.DecimalSI


# --- Kueue int64 amounts ---------------------------------------------------


@pytest.mark.parametrize(
    ("resource", "text", "value"),
    [
        ("cpu", "1", 1000),
        ("cpu", "100m", 100),
        ("cpu", "1.5", 1500),
        ("cpu", "0.1", 100),
        ("cpu", "1e3", 1000000),
        ("cpu", "0.1n", 1),  # MilliValue rounds up
        ("cpu", "1001u", 2),
        ("cpu", "2000m", 2000),
        ("cpu", "0", 0),
        ("cpu", "-1.5m", -2),  # rounding is away from zero
        ("memory", "1Gi", GI),
        ("memory", "1200Mi", 1200 * MI),
        ("memory", "1.5Gi", 1536 * MI),
        ("memory", "0.5", 1),  # Value rounds up
        ("memory", "1G", 10**9),
        ("memory", "100m", 1),
        ("memory", "1000m", 1),
        ("memory", "1001m", 2),
        ("ephemeral-storage", "10Gi", 10 * GI),
        ("hugepages-2Mi", "4Mi", 4 * MI),
        ("nvidia.com/gpu", "2", 2),
        ("nvidia.com/gpu", "1500m", 2),
        ("pods", "-1.5", -2),
        # Kueue saturates at the int64 bounds instead of overflowing
        ("cpu", "9Ei", INT64_MAX),
        ("cpu", "9223372036854775807m", INT64_MAX),
        ("cpu", "9223372036854775808m", INT64_MAX),
        ("memory", "1e30", INT64_MAX),
        ("memory", "-1e30", -(2**63)),
        ("cpu", "-1e30", -(2**63)),
    ],
)
def test_resource_value(resource: str, text: str, value: int) -> None:
    assert resource_value(resource, parse_quantity(text)) == value


@pytest.mark.parametrize(
    ("resource", "value", "printed"),
    [
        ("cpu", 1000, "1"),
        ("cpu", 500, "500m"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("cpu", 100, "100m"),
        ("cpu", 2000000, "2k"),
        ("cpu", -500, "-500m"),
        ("memory", 209715200, "200Mi"),
        ("memory", GI, "1Gi"),
        ("memory", 1536 * MI, "1536Mi"),
        ("memory", 1024, "1Ki"),
        ("memory", 0, "0"),
        # no binary suffix fits: Kueue's round trip through the string makes it DecimalSI
        ("memory", 100000, "100k"),
        ("memory", 1536, "1536"),
        ("memory", 1000, "1k"),
        ("memory", 10**9, "1G"),
        ("memory", INT64_MAX, "9223372036854775807"),
        ("ephemeral-storage", 10 * GI, "10Gi"),
        ("ephemeral-storage", 5 * 10**9, "5G"),
        ("hugepages-2Mi", 4 * MI, "4Mi"),
        ("hugepages-1Gi", 2 * GI, "2Gi"),
        ("pods", 1, "1"),
        ("pods", 2000, "2k"),
        ("pods", 1500, "1500"),
        ("nvidia.com/gpu", 8, "8"),
        ("example.com/bytes", 1024, "1024"),
        ("example.com/foo", 10**6, "1M"),
    ],
)
def test_resource_quantity(resource: str, value: int, printed: str) -> None:
    assert resource_quantity(resource, value) == printed
    assert format_value(resource, value) == printed


@pytest.mark.parametrize(
    ("resource", "text"),
    [
        ("cpu", "100m"),
        ("cpu", "2"),
        ("cpu", "1500m"),
        ("memory", "1200Mi"),
        ("memory", "1Gi"),
        ("memory", "1G"),
        ("ephemeral-storage", "500Mi"),
        ("hugepages-2Mi", "8Mi"),
        ("pods", "110"),
        ("nvidia.com/gpu", "4"),
    ],
)
def test_resource_round_trip(resource: str, text: str) -> None:
    amount = resource_value(resource, parse_quantity(text))
    printed = resource_quantity(resource, amount)
    assert printed == str(parse_quantity(text))
    assert resource_value(resource, parse_quantity(printed)) == amount
