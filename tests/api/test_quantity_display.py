"""One form per resource wherever the service shows a quantity (inspection API, ``/ui``, the CLI's tables):
``display_resource``. Wire formats (patches, annotations, webhooks) keep ``format_resource``, as upstream."""

from __future__ import annotations

import pytest

from app.api.quantity import display_resource, display_resource_list, format_resource, resource_value


@pytest.mark.parametrize(
    ("name", "value", "shown"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        # cpu-like resources already counted in milli-cores: plain integers, never DecimalSI's 3k
        ("kubernetes.io/batch-cpu", 3000, "3000"),
        ("kubernetes.io/batch-cpu", 4100, "4100"),
        ("kubernetes.io/mid-cpu", 1000000, "1000000"),
        ("koordinator.sh/gpu-core", 1000, "1000"),
        ("pods", 110, "110"),
        ("nvidia.com/gpu", 8, "8"),
        # bytes: BinarySI when a multiple of 1024, else plain bytes
        ("memory", 4 * 1024**3, "4Gi"),
        ("kubernetes.io/batch-memory", 12 * 1024**3, "12Gi"),
        ("kubernetes.io/batch-memory", 38225208935, "38225208935"),
        ("kubernetes.io/batch-memory", 4_000_000_000, "3906250Ki"),
        ("koordinator.sh/gpu-memory", 16 * 1024**3, "16Gi"),
        ("ephemeral-storage", 10 * 1024**3, "10Gi"),
        ("memory", 1000, "1000"),
    ],
)
def test_one_form_per_resource(name: str, value: int, shown: str) -> None:
    assert display_resource(name, value) == shown
    assert resource_value(name, shown) == value  # still a valid quantity of the same value


def test_the_wire_keeps_upstream_s_form() -> None:
    """The webhook's batch-cpu rewrite is what Go's DecimalSI String prints; only what is shown changes."""
    assert format_resource("kubernetes.io/batch-cpu", 3000) == "3k"
    assert display_resource("kubernetes.io/batch-cpu", 3000) == "3000"


def test_lists_are_sorted_and_consistent() -> None:
    shown = display_resource_list({"kubernetes.io/batch-cpu": 3000, "cpu": 6000, "memory": 24 * 1024**3})
    assert list(shown) == ["cpu", "kubernetes.io/batch-cpu", "memory"]
    assert shown == {"cpu": "6", "kubernetes.io/batch-cpu": "3000", "memory": "24Gi"}
