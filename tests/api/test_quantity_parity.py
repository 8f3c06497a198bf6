"""app.api.quantity parses without the kubernetes package; its results must equal the library's parse_quantity."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from kubernetes.utils import parse_quantity

from app.api.quantity import QuantityError, parse, parse_resource_list

VALUES = ["500m", "1", "2.5", "1Gi", "1536Mi", "100k", "1M", "1e3", "0.1", 7, 2.5, "123456789n", "3u", "1Ei", "1.5Ki"]
BAD = ["1ki", "x", "", "1.2.3", "1Qi", "--1"]


@pytest.mark.parametrize("value", VALUES)
def test_parse_equals_kubernetes_parse_quantity(value: Any) -> None:
    assert parse(value) == Decimal(parse_quantity(value))


@pytest.mark.parametrize("value", BAD)
def test_rejects_what_kubernetes_rejects(value: str) -> None:
    with pytest.raises(ValueError):
        parse_quantity(value)
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse(value)


@pytest.mark.parametrize("value", [True, None, [1]])
def test_non_quantities_are_refused_with_the_field(value: Any) -> None:
    with pytest.raises(QuantityError, match=r"requests\.cpu: invalid quantity"):
        parse_resource_list({"cpu": value}, field="requests")


def test_nan_is_refused_as_apimachinery_does() -> None:
    """The Python client lets ``NaN`` through; apimachinery (and so the API server) refuses it, and so do we."""
    with pytest.raises(QuantityError, match="not a finite number"):
        parse("NaN")
