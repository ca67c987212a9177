from fractions import Fraction

import pytest

from reconciler.core.primitives.quantity import QuantityError, format_amount, parse_quantity, to_amount


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1", Fraction(1)),
        ("500m", Fraction(1, 2)),
        ("16Gi", Fraction(16 * 1024**3)),
        ("1.5", Fraction(3, 2)),
        ("1e3", Fraction(1000)),
        ("2k", Fraction(2000)),
        ("100u", Fraction(1, 10_000)),
        (".5", Fraction(1, 2)),
        ("-1Ki", Fraction(-1024)),
        (3, Fraction(3)),
    ],
)
def test_parse_exact(text: str | int, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "1 Gi", "1GiB", "abc", "1e"])
def test_parse_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="not a quantity"):
        parse_quantity(text)


def test_no_float_rounding() -> None:
    # 0.1 + 0.2 in floats is 0.30000000000000004; here it is exact.
    total = parse_quantity("0.1") + parse_quantity("0.2")
    assert total == parse_quantity("0.3")
    assert to_amount("cpu", total) == 300


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [("cpu", "500m", 500), ("cpu", "1u", 1), ("memory", "1.5", 2), ("nvidia.com/gpu", "2", 2)],
)
def test_amounts_round_up_like_kueue(resource: str, text: str, amount: int) -> None:
    assert to_amount(resource, parse_quantity(text)) == amount


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 500, "500m"),
        ("cpu", 2000, "2"),
        ("cpu", 0, "0"),
        ("memory", 16 * 1024**3, "16Gi"),
        ("memory", 1536 * 1024**2, "1536Mi"),
        ("memory", 1536, "1536"),
        ("memory", 1000, "1k"),
        ("memory", 1_500_000_000, "1500000000"),
        ("nvidia.com/gpu", 1, "1"),
        ("nvidia.com/gpu", 2000, "2k"),
        ("hugepages-2Mi", 2 * 1024**2, "2Mi"),
    ],
)
def test_format_matches_apimachinery(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text
