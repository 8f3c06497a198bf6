"""The paper authors' published results (kubernetes-scheduler-simulator ``expected_results``).

``analysis_allo_discrete.csv`` (GPU allocation ratio, percent) and
``analysis_frag_ratio_discrete.csv`` (fragmentation ratio, percent) hold one row per workload
(trace file stem), policy (``01-Random`` ... ``06-FGD``) and seed, with one column per arrived
workload percent 0..130. They live next to the trace: ``<trace dir>/../expected_results/``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

ALLOCATION_FILE = "analysis_allo_discrete.csv"
FRAG_RATIO_FILE = "analysis_frag_ratio_discrete.csv"


@dataclass(frozen=True, slots=True)
class Published:
    """Per (workload, sc_policy): seed -> per-percent values (index = arrived percent)."""

    allocation: dict[tuple[str, str], dict[int, list[float]]]
    frag_ratio: dict[tuple[str, str], dict[int, list[float]]]

    def mean(self, table: str, workload: str, policy: str, percent: int) -> float | None:
        """Mean over the published seeds of ``table`` (``allocation`` or ``frag_ratio``) at ``percent``."""
        runs = (self.allocation if table == "allocation" else self.frag_ratio).get((workload, policy), {})
        values = [r[percent] for r in runs.values() if percent < len(r)]
        return sum(values) / len(values) if values else None

    def mean_curve(self, workload: str, policy: str) -> list[float]:
        """Mean allocation ratio over seeds at each arrived percent (empty when unpublished)."""
        runs = list(self.allocation.get((workload, policy), {}).values())
        if not runs:
            return []
        n = min(len(r) for r in runs)
        return [sum(r[i] for r in runs) / len(runs) for i in range(n)]


def _read(path: Path) -> dict[tuple[str, str], dict[int, list[float]]]:
    out: dict[tuple[str, str], dict[int, list[float]]] = {}
    try:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                percents = sorted(int(k) for k in row if k and k.isdigit())
                values = [float(row[str(p)]) for p in percents if row.get(str(p))]
                out.setdefault((row["workload"], row["sc_policy"]), {})[int(row["seed"])] = values
    except (OSError, KeyError, ValueError):
        return {}
    return out


def find_published(pods_csv: Path) -> Published | None:
    """The published results next to ``pods_csv`` (``../expected_results/``), or None when absent."""
    base = pods_csv.resolve().parent.parent / "expected_results"
    allocation = _read(base / ALLOCATION_FILE)
    if not allocation:
        return None
    return Published(allocation, _read(base / FRAG_RATIO_FILE))
