"""Kubernetes quantities: parse and format as apimachinery does.

Parsing follows ``kubernetes.utils.parse_quantity`` (suffixes ``Ki``..``Ei`` base 1024, ``n u m k M G T P E``
base 1000, exponent notation) without importing the ``kubernetes`` package, which loads the whole client
(~9 MB resident): the node agent uses this module too. ``tests/api/test_quantity_parity.py`` checks the
results against ``parse_quantity`` itself.

Internal units: ``cpu`` in milli-cores, every other resource in its base unit (bytes for memory,
counts for pods and extended resources). An internal value must fit int64 (the cache keeps them in
numpy int64 columns, as upstream keeps ``int64`` milli-values): a quantity beyond it
(``"9223372036854775808"``, ``"1e400"``, ``"99999999999999999999Ei"``) is refused like ``NaN``.
``kubernetes.io/batch-cpu`` and ``kubernetes.io/mid-cpu`` are already integer milli-cores in their
quantity, so they use the base-unit path, as upstream's ``getResourceValue`` does
(``pkg/scheduler/plugins/loadaware/helper.go``).
"""

from __future__ import annotations

import math
from decimal import Decimal, DecimalException, InvalidOperation
from functools import lru_cache
from typing import Any

CPU = "cpu"
MEMORY = "memory"


class QuantityError(ValueError):
    """A quantity string is not a valid Kubernetes quantity; the message names the value."""


_EXPONENTS = {"n": -3, "u": -2, "m": -1, "K": 1, "k": 1, "M": 2, "G": 3, "T": 4, "P": 5, "E": 6}
_BINARY_PREFIXES = "KMGTPE"


@lru_cache(maxsize=65536)
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


#: The int64 range every internal value must fit.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _int64(value: Any, scaled: Decimal) -> int:
    """``ceil(scaled)`` when it fits int64 (compared before converting: ``1e999999999`` must not build
    a billion-digit int).

    Raises:
        QuantityError: out of the int64 range.
    """
    if not INT64_MIN <= scaled <= INT64_MAX:
        raise QuantityError(f"invalid quantity {value!r}: out of the int64 range")
    out = math.ceil(scaled)
    if out > INT64_MAX:
        raise QuantityError(f"invalid quantity {value!r}: out of the int64 range")
    return out


def milli_value(value: Any) -> int:
    """Quantity in thousandths, rounded up as apimachinery's ``Quantity.MilliValue`` does.

    Raises:
        QuantityError: not a valid quantity, or its milli-value does not fit int64.
    """
    number = parse(value)
    if not INT64_MIN <= number <= INT64_MAX:  # before scaling: 1e999999 * 1000 overflows Decimal's context
        raise QuantityError(f"invalid quantity {value!r}: out of the int64 range")
    return _int64(value, number * 1000)


def int_value(value: Any) -> int:
    """Quantity in base units, rounded up as apimachinery's ``Quantity.Value`` does.

    Raises:
        QuantityError: not a valid quantity, or its value does not fit int64.
    """
    return _int64(value, parse(value))


def resource_value(name: str, value: Any) -> int:
    """Internal integer for resource ``name``: milli-cores for ``cpu``, base units otherwise.

    String quantities are remembered per (cpu or not, text): every pod of a Deployment repeats the
    same few, and each parse is a Decimal scale and round (a few microseconds, four to eight per pod
    and watch event).

    Raises:
        QuantityError: not a valid quantity, or its internal value does not fit int64.
    """
    if type(value) is str:
        return _string_value(name == CPU, value)
    return milli_value(value) if name == CPU else int_value(value)


@lru_cache(maxsize=65536)
def _string_value(milli: bool, text: str) -> int:
    return milli_value(text) if milli else int_value(text)


def parse_resource_list(raw: Any, *, field: str = "resources") -> dict[str, int]:
    """Parse a ResourceList (``{"cpu": "2", "memory": "4Gi"}``) into internal integers.

    Raises:
        QuantityError: ``raw`` is not a mapping, or a value is not a valid quantity; the
            message names ``field`` and the resource.
    """
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise QuantityError(f"{field}: expected a map of resource name to quantity, got {type(raw).__name__}")
    out: dict[str, int] = {}
    for name, value in raw.items():
        try:
            out[str(name)] = resource_value(str(name), value)
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


def format_milli(value: int) -> str:
    """Format milli units as ``resource.NewMilliQuantity(v, DecimalSI).String()`` does: ``250m``, ``2``."""
    if value % 1000 == 0:
        return _format_decimal_int(value // 1000)
    return f"{value}m"


def format_resource(name: str, value: int) -> str:
    """Format an internal integer of resource ``name`` as a Kubernetes quantity string.

    cpu as milli (``"1500m"``, ``"2"``), memory-like resources (``memory``, ``kubernetes.io/batch-memory``,
    ...) as BinarySI when a multiple of 1024 (``"4Gi"``), anything else as DecimalSI, mirroring
    upstream's ``getResourceQuantity`` (``pkg/scheduler/plugins/loadaware/helper.go``).
    """
    if name == CPU:
        return format_milli(value)
    if name.endswith(MEMORY) and value % 1024 == 0:
        return _format_binary_int(value)
    return _format_decimal_int(value)


def format_resource_list(values: dict[str, int]) -> dict[str, str]:
    """Format a whole internal resource map as a ResourceList of quantity strings (keys sorted)."""
    return {name: format_resource(name, values[name]) for name in sorted(values)}


#: Resources counted in bytes besides the ``*memory`` ones: shown in BinarySI when a multiple of 1024.
_BYTE_RESOURCES = frozenset({"ephemeral-storage", "storage"})


def is_byte_resource(name: str) -> bool:
    """Whether resource ``name`` counts bytes (``memory``, ``kubernetes.io/batch-memory``,
    ``koordinator.sh/gpu-memory``, ``ephemeral-storage``, ...)."""
    return name.endswith(MEMORY) or name.rsplit("/", 1)[-1] in _BYTE_RESOURCES


def display_resource(name: str, value: int) -> str:
    """The one form a quantity of resource ``name`` is shown in by the inspection API, ``/ui`` and the
    CLI's tables, whatever its value (wire formats keep :func:`format_resource`, as upstream writes them).

    - ``cpu`` (internal milli-cores): cores or milli-cores as Kubernetes prints them, ``2``, ``1500m``;
    - byte resources (:func:`is_byte_resource`): BinarySI when a whole multiple of 1024 (``4Gi``), else
      plain bytes (``38225208935``), as a BinarySI Quantity prints either;
    - anything else (counts, and cpu-like resources already in milli-cores such as
      ``kubernetes.io/batch-cpu`` or ``koordinator.sh/gpu-core``): the plain integer, ``3000`` beside
      ``4100`` (DecimalSI's ``3k`` would read as another unit).
    """
    if name == CPU:
        return format_milli(value)
    if is_byte_resource(name):
        return _format_binary_int(value) if value % 1024 == 0 else str(value)
    return str(value)


def display_resource_list(values: dict[str, int]) -> dict[str, str]:
    """:func:`display_resource` over a whole internal resource map (keys sorted)."""
    return {name: display_resource(name, values[name]) for name in sorted(values)}
