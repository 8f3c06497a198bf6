"""Loading the Alibaba GPU cluster trace (cluster-trace-gpu-v2023, "openb") with validation.

Node list columns: ``sn, cpu_milli, memory_mib, gpu, model``; pod list columns: ``name, cpu_milli,
memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time,
scheduled_time`` (only the first eight plus the two times are used). ``gpu_spec`` and ``qos`` may be
absent, as in the ``openb_pod_list_multigpu*`` lists (``name, cpu_milli, memory_mib, num_gpu,
gpu_milli`` only): no GPU model constraint and no QoS, and such a list has no times either, so
only the static protocol replays it. Units are the trace's:
cpu in milli-cores, memory in MiB, GPU in milli-GPUs per GPU (``gpu_milli`` 1..1000 applies to
each of ``num_gpu`` GPUs), times in seconds. Every problem raises :class:`SimInputError` naming
the file, the line and the field.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from app.sim.errors import SimInputError

NODE_COLUMNS: tuple[str, ...] = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS: tuple[str, ...] = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
#: Pod columns that may be absent (the multigpu lists): no model constraint, no QoS when missing;
#: ``job_id`` (absent from the Alibaba lists) groups a job's pods into one gang (:mod:`app.sim.gangs`).
OPTIONAL_POD_COLUMNS: tuple[str, ...] = ("gpu_spec", "qos", "job_id")
TIME_COLUMNS: tuple[str, ...] = ("creation_time", "deletion_time")

#: Why timed mode refuses a pod list without times (the multigpu lists have none).
TIMED_NEEDS = (
    "timed mode replays creation_time and deletion_time, which this pod list does not have "
    "(use --mode static: it needs only name, cpu_milli, memory_mib, num_gpu, gpu_milli)"
)

#: GPUs per node and per pod are bounded as in the trace (8-GPU servers).
MAX_GPUS = 8
MILLI_PER_GPU = 1000


@dataclass(frozen=True, slots=True)
class TraceNode:
    """One node of the node list: cpu milli-cores, memory MiB, GPU count and model ("" for none)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpu: int
    model: str


@dataclass(frozen=True, slots=True)
class TracePod:
    """One pod of the pod list.

    Attributes:
        cpu_milli, memory_mib: requests (milli-cores, MiB).
        num_gpu: GPUs requested (0..8); gpu_milli: milli-GPU per GPU (1..1000; 1000 when num_gpu > 1).
        gpu_models: allowed GPU models (``gpu_spec`` split on ``|``, deduplicated, sorted), None = any.
        qos: the trace's QoS (``LS``, ``BE``, ``Burstable``, ``Guaranteed`` ...).
        creation_time, deletion_time: seconds (None when the column is absent or empty).
        line: line number in the file (header = 1).
        job_id: the ``job_id`` column ("" when absent or empty): pods of one job form one gang.
    """

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_models: tuple[str, ...] | None
    qos: str
    creation_time: int | None
    deletion_time: int | None
    line: int
    job_id: str = ""

    @property
    def gpu_total_milli(self) -> int:
        """GPU milli requested in total (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli


def _rows(path: Path, required: tuple[str, ...], why: dict[str, str] | None = None) -> list[tuple[int, dict[str, str]]]:
    """(line, row) pairs of a CSV file that has every ``required`` column.

    ``why`` maps a column to why it is needed; the message ends with the reasons of the missing ones.

    Raises:
        SimInputError: unreadable file, empty file, or a missing column.
    """
    reasons = why or {}
    try:
        with path.open(newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames
            if not header:
                raise SimInputError(f"{path}:1: empty file: expected a header with {', '.join(required)}")
            missing = [c for c in required if c not in header]
            if missing:
                raise SimInputError(
                    f"{path}:1: missing column{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                    f"(header: {', '.join(header)})"
                    + "".join(f"; {text}" for text in dict.fromkeys(reasons[c] for c in missing if c in reasons))
                )
            return [(reader.line_num, row) for row in reader]
    except OSError as exc:
        raise SimInputError(f"{path}: cannot read: {exc.strerror}") from None
    except csv.Error as exc:
        raise SimInputError(f"{path}: not valid CSV: {exc}") from None


def _int(path: Path, line: int, row: dict[str, str], field: str, *, optional: bool = False) -> int | None:
    raw = (row.get(field) or "").strip()
    if not raw and optional:
        return None
    try:
        value = int(raw)
    except ValueError:
        try:
            as_float = float(raw)
        except ValueError:
            as_float = float("nan")
        if not as_float.is_integer():
            raise SimInputError(f"{path}:{line}: field {field}: must be a non-negative integer, got {raw!r}") from None
        value = int(as_float)
    if value < 0:
        raise SimInputError(f"{path}:{line}: field {field}: must be a non-negative integer, got {raw!r}")
    return value


def _req_int(path: Path, line: int, row: dict[str, str], field: str) -> int:
    value = _int(path, line, row, field)
    assert value is not None
    return value


def _unique_name(path: Path, line: int, row: dict[str, str], field: str, what: str, seen: set[str]) -> str:
    """The stripped ``row[field]``, added to ``seen``.

    Raises:
        SimInputError: empty (``empty <what> name``) or already seen (``duplicate <what> '<name>'``).
    """
    name = (row.get(field) or "").strip()
    if not name:
        raise SimInputError(f"{path}:{line}: field {field}: empty {what} name")
    if name in seen:
        raise SimInputError(f"{path}:{line}: field {field}: duplicate {what} {name!r}")
    seen.add(name)
    return name


def load_nodes(path: str | Path) -> list[TraceNode]:
    """Read a node list (``openb_node_list_*.csv``).

    Raises:
        SimInputError: missing columns, non-integer or negative numbers, more than 8 GPUs, a GPU
            node without a model, duplicate names, or no node at all.
    """
    path = Path(path)
    out: list[TraceNode] = []
    seen: set[str] = set()
    for line, row in _rows(path, NODE_COLUMNS):
        name = _unique_name(path, line, row, "sn", "node", seen)
        gpu = _req_int(path, line, row, "gpu")
        if gpu > MAX_GPUS:
            raise SimInputError(f"{path}:{line}: field gpu: at most {MAX_GPUS} GPUs per node, got {gpu}")
        model = (row.get("model") or "").strip()
        if model.lower() == "nan":
            model = ""
        if gpu > 0 and not model:
            raise SimInputError(f"{path}:{line}: field model: a node with {gpu} GPUs needs a GPU model")
        out.append(
            TraceNode(name, _req_int(path, line, row, "cpu_milli"), _req_int(path, line, row, "memory_mib"), gpu, model)
        )
    if not out:
        raise SimInputError(f"{path}: no nodes")
    return out


def load_pods(path: str | Path, known_models: set[str], *, need_times: bool = False) -> list[TracePod]:
    """Read a pod list (``openb_pod_list_*.csv``); ``known_models`` are the node list's GPU models.

    Args:
        need_times: require ``creation_time`` and ``deletion_time`` columns (timed mode); a
            ``deletion_time`` may be empty (the pod never leaves). Without them (the multigpu
            lists) the message says that timed mode needs them and static mode takes the list.

    ``gpu_spec``, ``qos`` and ``job_id`` are optional columns: absent, a pod has no model constraint
    (``gpu_models`` None), no QoS (``qos`` "", no QoS label) and no job (``job_id`` "").

    Raises:
        SimInputError: missing columns, non-integer or negative numbers, ``num_gpu`` above 8,
            ``gpu_milli`` outside 1..1000 for a GPU pod (exactly 1000 when ``num_gpu`` > 1, 0
            for a CPU pod), a ``gpu_spec`` naming a model no node has, a deletion before the
            creation, duplicate names, or no pod at all.
    """
    path = Path(path)
    required = POD_COLUMNS + (TIME_COLUMNS if need_times else ())
    out: list[TracePod] = []
    seen: set[str] = set()
    for line, row in _rows(path, required, dict.fromkeys(TIME_COLUMNS, TIMED_NEEDS)):
        name = _unique_name(path, line, row, "name", "pod", seen)
        num_gpu = _req_int(path, line, row, "num_gpu")
        gpu_milli = _req_int(path, line, row, "gpu_milli")
        if num_gpu > MAX_GPUS:
            raise SimInputError(f"{path}:{line}: field num_gpu: at most {MAX_GPUS} GPUs per pod, got {num_gpu}")
        if num_gpu == 0 and gpu_milli != 0:
            raise SimInputError(f"{path}:{line}: field gpu_milli: must be 0 when num_gpu is 0, got {gpu_milli}")
        if num_gpu > 0 and not 0 < gpu_milli <= MILLI_PER_GPU:
            raise SimInputError(f"{path}:{line}: field gpu_milli: must be in 1..1000 for a GPU pod, got {gpu_milli}")
        if num_gpu == 1 and gpu_milli % 10:
            raise SimInputError(
                f"{path}:{line}: field gpu_milli: a GPU share is requested in whole percent "
                f"(a multiple of 10 milli), got {gpu_milli}"
            )
        if num_gpu > 1 and gpu_milli != MILLI_PER_GPU:
            raise SimInputError(
                f"{path}:{line}: field gpu_milli: a pod of {num_gpu} GPUs takes whole GPUs (1000), got {gpu_milli}"
            )
        spec = (row.get("gpu_spec") or "").strip()
        models: tuple[str, ...] | None = None
        if spec and spec.lower() != "nan":
            models = tuple(sorted({m.strip() for m in spec.split("|") if m.strip()}))
            unknown = [m for m in models if m not in known_models]
            if unknown:
                raise SimInputError(
                    f"{path}:{line}: field gpu_spec: unknown GPU model {unknown[0]!r} "
                    f"(node models: {', '.join(sorted(known_models)) or 'none'})"
                )
        created = _int(path, line, row, "creation_time", optional=not need_times)
        deleted = _int(path, line, row, "deletion_time", optional=True) if "deletion_time" in row else None
        if created is not None and deleted is not None and deleted < created:
            raise SimInputError(f"{path}:{line}: field deletion_time: {deleted} is before creation_time {created}")
        out.append(
            TracePod(
                name,
                _req_int(path, line, row, "cpu_milli"),
                _req_int(path, line, row, "memory_mib"),
                num_gpu,
                gpu_milli,
                models,
                (row.get("qos") or "").strip(),
                created,
                deleted,
                line,
                (row.get("job_id") or "").strip(),
            )
        )
    if not out:
        raise SimInputError(f"{path}: no pods")
    return out
