"""Kubernetes quantities for the agent, without importing the ``kubernetes`` package.

Same results as :mod:`app.api.quantity` (which parses with ``kubernetes.utils.parse_quantity``, and so
loads the whole Kubernetes client, ~9 MB resident): the agent's embedded mode must stay light. The
suffix rules follow ``parse_quantity`` (``Ki``..``Ei`` base 1024; ``n u m k M G T P E`` base 1000);
``tests/agent/test_units.py`` checks both modules agree. Internal units: ``cpu`` in milli-cores, every
other resource in its base unit (bytes for memory); values are rounded up as apimachinery does.
"""

from __future__ import annotations

import math
from decimal import Decimal, DecimalException, InvalidOperation
from functools import lru_cache
from typing import Any

CPU = "cpu"
MEMORY = "memory"

_EXPONENTS = {"n": -3, "u": -2, "m": -1, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_BINARY_PREFIXES = "KMGTPE"


class QuantityError(ValueError):
    """A quantity string is not a valid Kubernetes quantity; the message names the value."""


@lru_cache(maxsize=4096)
def _parse_cached(text: str) -> Decimal:
    number, suffix = text, ""
    if len(text) >= 2 and text[-1] == "i" and text[-2] in _EXPONENTS:
        number, suffix = text[:-2], text[-2:]
    elif text and text[-1] in _EXPONENTS:
        number, suffix = text[:-1], text[-1:]
    try:
        value = Decimal(number)
    except (InvalidOperation, ValueError):
        raise QuantityError(f"invalid quantity {text!r}: invalid number format: {number}") from None
    if not value.is_finite():
        raise QuantityError(f"invalid quantity {text!r}: not a finite number")
    if not suffix:
        return value
    if suffix.endswith("i"):
        if suffix[0] not in _BINARY_PREFIXES:
            raise QuantityError(f"invalid quantity {text!r}: {text} has unknown suffix")
        base = 1024
    else:
        base = 1000
    try:
        return value * (base ** Decimal(_EXPONENTS[suffix[0]]))
    except DecimalException as exc:
        raise QuantityError(f"invalid quantity {text!r}: {exc}") from None


def parse(value: Any) -> Decimal:
    """Parse a quantity (``"500m"``, ``"1.5Gi"``, ``2``) into a Decimal in base units.

    Raises:
        QuantityError: ``value`` is not a string or number, or not a valid quantity.
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise QuantityError(f"invalid quantity {value!r}: expected a string or a number")
    return _parse_cached(str(value))


def milli_value(value: Any) -> int:
    """Quantity in thousandths, rounded up as apimachinery's ``Quantity.MilliValue`` does.

    Raises:
        QuantityError: not a valid quantity.
    """
    return math.ceil(parse(value) * 1000)


def int_value(value: Any) -> int:
    """Quantity in base units, rounded up as apimachinery's ``Quantity.Value`` does.

    Raises:
        QuantityError: not a valid quantity.
    """
    return math.ceil(parse(value))


def parse_resource_list(raw: Any, *, field: str = "resources") -> dict[str, int]:
    """A ResourceList (``{"cpu": "2", "memory": "4Gi"}``) in internal integers (cpu milli-cores, else base units).

    Raises:
        QuantityError: ``raw`` is not a mapping, or a value is not a valid quantity; the message names
            ``field`` and the resource.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise QuantityError(f"{field}: expected a map of resource name to quantity, got {type(raw).__name__}")
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = milli_value(value) if str(name) == CPU else int_value(value)
        except QuantityError as exc:
            raise QuantityError(f"{field}.{name}: {exc}") from None
    return out


_DECIMAL_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"))
_BINARY_SUFFIXES = ((60, "Ei"), (50, "Pi"), (40, "Ti"), (30, "Gi"), (20, "Mi"), (10, "Ki"))


def _format_decimal_int(value: int) -> str:
    if value == 0:
        return "0"
    for exp, suffix in _DECIMAL_SUFFIXES:
        unit = 10**exp
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def _format_binary_int(value: int) -> str:
    if -1024 < value < 1024:
        return str(value)
    for exp, suffix in _BINARY_SUFFIXES:
        unit = 1 << exp
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def format_resource(name: str, value: int) -> str:
    """An internal integer of resource ``name`` as a quantity string: cpu as milli (``"1500m"``, ``"2"``),
    memory-like resources BinarySI when a multiple of 1024 (``"4Gi"``), anything else DecimalSI."""
    if name == CPU:
        return _format_decimal_int(value // 1000) if value % 1000 == 0 else f"{value}m"
    if name.endswith(MEMORY) and value % 1024 == 0:
        return _format_binary_int(value)
    return _format_decimal_int(value)


def format_resource_list(values: dict[str, int]) -> dict[str, str]:
    """A whole internal resource map as a ResourceList of quantity strings (keys sorted)."""
    return {name: format_resource(name, values[name]) for name in sorted(values)}
