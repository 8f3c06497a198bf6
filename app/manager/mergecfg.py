"""``util.MergeCfg``: merge a JSON-shaped config over another as Go's marshal/unmarshal round trip does.

Objects merge key by key (recursively), ``None`` values are skipped (Go drops nil pointers with
``omitempty``), lists and scalars replace. Used for every "cluster strategy over defaults" and
"node strategy over cluster strategy" merge of the slo-controller (``pkg/util/utils.go``).
"""

from __future__ import annotations

import copy
from typing import Any


def merge_cfg(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A new dict: ``old`` with ``new`` merged over it (neither is modified)."""
    out = copy.deepcopy(old)
    for key, value in new.items():
        if value is None:
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_cfg(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out
