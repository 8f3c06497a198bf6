"""Label selectors as ``metav1.LabelSelectorAsSelector`` evaluates them.

Used by the ClusterColocationProfile webhook (namespace and pod selectors) and by the
slo-controller configuration (``nodeConfigs`` / ``nodeStrategies`` node selectors). Follows
``k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go`` and ``pkg/labels/selector.go``:

- ``None`` (no selector) matches nothing; ``{}`` matches everything;
- ``matchLabels`` and ``matchExpressions`` are ANDed;
- ``In``/``NotIn`` need at least one value, ``Exists``/``DoesNotExist`` none; ``NotIn`` and
  ``DoesNotExist`` match objects without the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class SelectorError(ValueError):
    """A label selector is malformed; the message says which part (as apimachinery words it)."""


_OPERATORS = {"In", "NotIn", "Exists", "DoesNotExist"}


def _requirements(selector: Mapping[str, Any]) -> list[tuple[str, str, frozenset[str]]]:
    out: list[tuple[str, str, frozenset[str]]] = []
    match_labels = selector.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise SelectorError("matchLabels: expected a map of label key to value")
    for key, value in match_labels.items():
        out.append((str(key), "In", frozenset([str(value)])))
    expressions = selector.get("matchExpressions") or []
    if not isinstance(expressions, list):
        raise SelectorError("matchExpressions: expected a list")
    for expr in expressions:
        if not isinstance(expr, Mapping):
            raise SelectorError("matchExpressions: expected a list of objects")
        op = expr.get("operator")
        key = str(expr.get("key") or "")
        values = expr.get("values") or []
        if op not in _OPERATORS:
            raise SelectorError(f'"{op}" is not a valid label selector operator')
        if op in ("In", "NotIn") and not values:
            raise SelectorError("for 'in', 'notin' operators, values set can't be empty")
        if op in ("Exists", "DoesNotExist") and values:
            raise SelectorError("values set must be empty for exists and does not exist")
        out.append((key, str(op), frozenset(str(v) for v in values)))
    return out


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy ``selector`` (a ``metav1.LabelSelector`` as a JSON-shaped dict).

    Args:
        selector: ``{"matchLabels": {...}, "matchExpressions": [...]}``; ``None`` matches nothing.
        labels: the object's labels (``None`` = no labels).

    Raises:
        SelectorError: unknown operator, or values given / missing against the operator's rule.
    """
    if selector is None:
        return False
    if not isinstance(selector, Mapping):
        raise SelectorError(f"expected a label selector object, got {type(selector).__name__}")
    labels = labels or {}
    for key, op, values in _requirements(selector):
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def selector_is_empty(selector: Mapping[str, Any]) -> bool:
    """True for ``{}`` (no requirement at all): such a selector matches everything."""
    return not (selector.get("matchLabels") or selector.get("matchExpressions"))
