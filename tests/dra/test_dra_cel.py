"""Which CEL selectors decide a device's driver; every other selector is assumed to match."""

from __future__ import annotations

import pytest

from kueuestream.admission.dra import required_drivers


@pytest.mark.parametrize(
    ("expression", "drivers"),
    [
        ('device.driver == "gpu.example.com"', {"gpu.example.com"}),
        ("device.driver=='gpu.example.com'", {"gpu.example.com"}),
        ("'gpu.example.com' == device.driver", {"gpu.example.com"}),
        ('  (device.driver == "a")  ', {"a"}),
        ('device.driver == "a" && device.attributes["a"].model == "x"', {"a"}),
        ('device.attributes["a"].model == "x" &&\n  device.driver == "a"', {"a"}),
        ('(device.driver == "a") && (device.capacity["a"].memory.compareTo(quantity("1Gi")) >= 0)', {"a"}),
        ('((device.driver == "a" && true))', {"a"}),
        ('device.driver == "a" && device.driver == "b"', {"a", "b"}),
        ('device.driver == "a&&b"', {"a&&b"}),
        ('device.driver == "a" && "x||y" == device.attributes["a"].s', {"a"}),
    ],
)
def test_driver_equalities_in_a_conjunction_are_decided(expression: str, drivers: set[str]) -> None:
    assert required_drivers(expression) == frozenset(drivers)


@pytest.mark.parametrize(
    "expression",
    [
        'device.driver == "a" || device.driver == "b"',
        'device.driver == "a" && x || y',  # (a && x) || y
        '(device.driver == "a") || (b)',
        'c ? device.driver == "a" : false',
        '!(device.driver == "a")',
        'device.driver != "a"',
        'device.driver == "a" == true',
        'device.driver == "a" + "b"',
        'device.driver.startsWith("a")',
        'device.driver in ["a", "b"]',
        '"""a""" == device.driver',
        'device.driver == "a\\"b"',
        'device.driver == "a',  # unterminated string
        '(device.driver == "a"',  # unbalanced
        'device.attributes["a"].model == "x"',
        "true",
        "",
    ],
)
def test_other_selectors_are_not_decided(expression: str) -> None:
    assert required_drivers(expression) == frozenset()
