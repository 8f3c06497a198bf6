"""The agent's NVML layer: the few NVML calls the GPU collector makes, behind one small interface.

:class:`NVML` is what :mod:`agent.collectors.gpu` calls; :class:`PynvmlBackend` answers through
``nvidia-ml-py`` (module ``pynvml``, the optional extra ``koordinator-py[gpu]``), and
:class:`RecordedNVML` answers from a capture of a real node (the ``nvml.json`` shape: per device index,
minor, UUID, name, memory, utilization, PCI bus id, NUMA node, processes), so the collector runs the same
code on a machine without a GPU (tests, ``bench/gpu_node_check.py --nvml-capture``).

Every failed call raises :class:`NVMLError`; ``not_supported`` tells an unsupported query (a VM's
``nvmlDeviceGetNumaNodeId``) from a failure. :func:`load_nvml` never raises: without the package or
without a driver it answers why, and the agent runs on without GPUs.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger("agent.gpu")

#: Xid codes that are application errors, after which the GPU is still healthy (upstream
#: ``states_device_linux.go`` ``checkHealth``; https://docs.nvidia.com/deploy/xid-errors/).
APPLICATION_XIDS = frozenset({13, 31, 43, 45, 68, 109})

INSTALL_HINT = "pip install 'koordinator-py[gpu]'"


class NVMLError(Exception):
    """An NVML call failed.

    Attributes:
        not_supported: the query is not supported on this device or driver (``NVML_ERROR_NOT_SUPPORTED``).
    """

    def __init__(self, message: str, *, not_supported: bool = False) -> None:
        super().__init__(message)
        self.not_supported = not_supported


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """One process using a GPU: ``pid`` (host pid namespace), ``memory_used`` bytes, ``sm_util`` percent."""

    pid: int
    memory_used: int
    sm_util: int


class NVML(Protocol):
    """The NVML calls the GPU collector makes; devices are NVML indices ``0 .. device_count() - 1``.

    Every method raises :class:`NVMLError` when NVML refuses.
    """

    def driver_version(self) -> str:
        """``nvmlSystemGetDriverVersion`` (``580.159.04``)."""
        ...

    def cuda_driver_version(self) -> str:
        """``nvmlSystemGetCudaDriverVersion``: the newest CUDA version the driver supports, ``major.minor``
        (NVML's ``13000`` -> ``13.0``)."""
        ...

    def device_count(self) -> int:
        """``nvmlDeviceGetCount``."""
        ...

    def uuid(self, index: int) -> str:
        """``nvmlDeviceGetUUID`` (``GPU-ad7723cc-...``)."""
        ...

    def minor(self, index: int) -> int:
        """``nvmlDeviceGetMinorNumber`` (``/dev/nvidia<minor>``)."""
        ...

    def name(self, index: int) -> str:
        """``nvmlDeviceGetName`` (``NVIDIA H200``)."""
        ...

    def memory(self, index: int) -> tuple[int, int]:
        """``nvmlDeviceGetMemoryInfo``: ``(total, used)`` bytes."""
        ...

    def pci_bus_id(self, index: int) -> str:
        """``nvmlDeviceGetPciInfo().busId`` (NVML's form, ``00000000:00:06.0``)."""
        ...

    def numa_node(self, index: int) -> int:
        """``nvmlDeviceGetNumaNodeId`` (raises with ``not_supported`` on most VMs)."""
        ...

    def utilization(self, index: int) -> int:
        """``nvmlDeviceGetUtilizationRates().gpu``, percent."""
        ...

    def processes(self, index: int) -> list[ProcessSample]:
        """Compute processes on the device with their memory (``nvmlDeviceGetComputeRunningProcesses``) and SM
        utilisation (``nvmlDeviceGetProcessUtilization``; 0 for a process without a sample)."""
        ...

    def xid_events(self) -> list[tuple[str, int]]:
        """Critical Xid events since the last call, ``(device UUID, xid)``; UUID "" means every device.
        Never waits."""
        ...

    def shutdown(self) -> None:
        """``nvmlShutdown``."""
        ...


def cuda_version_text(value: int) -> str:
    """NVML's CUDA version integer as ``major.minor`` (``13000`` -> ``13.0``, ``12040`` -> ``12.4``), the
    ``CUDA_VERSION_MAJOR`` / ``CUDA_VERSION_MINOR`` split of ``nvml.h``."""
    return f"{value // 1000}.{value % 1000 // 10}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class PynvmlBackend:
    """:class:`NVML` through ``pynvml`` (nvidia-ml-py). Construct with :func:`load_nvml`.

    Args:
        module: the imported ``pynvml`` module (``nvmlInit`` already called).
    """

    def __init__(self, module: Any) -> None:
        self.nv = module
        self._handles: dict[int, Any] = {}
        self._events: Any = None
        self._registered: set[str] = set()
        self._last_seen = 0

    def _call(self, fn: str, *args: Any) -> Any:
        try:
            return getattr(self.nv, fn)(*args)
        except self.nv.NVMLError as exc:
            unsupported = getattr(exc, "value", None) == getattr(self.nv, "NVML_ERROR_NOT_SUPPORTED", -1)
            raise NVMLError(f"{fn}: {exc}", not_supported=unsupported) from None
        except AttributeError:
            raise NVMLError(f"{fn}: not in this nvidia-ml-py", not_supported=True) from None

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._handles[index] = self._call("nvmlDeviceGetHandleByIndex", index)
        return handle

    def driver_version(self) -> str:
        """See :class:`NVML`."""
        return _text(self._call("nvmlSystemGetDriverVersion"))

    def cuda_driver_version(self) -> str:
        """See :class:`NVML`."""
        return cuda_version_text(int(self._call("nvmlSystemGetCudaDriverVersion")))

    def device_count(self) -> int:
        """See :class:`NVML`."""
        return int(self._call("nvmlDeviceGetCount"))

    def uuid(self, index: int) -> str:
        """See :class:`NVML`."""
        return _text(self._call("nvmlDeviceGetUUID", self._handle(index)))

    def minor(self, index: int) -> int:
        """See :class:`NVML`."""
        return int(self._call("nvmlDeviceGetMinorNumber", self._handle(index)))

    def name(self, index: int) -> str:
        """See :class:`NVML`."""
        return _text(self._call("nvmlDeviceGetName", self._handle(index)))

    def memory(self, index: int) -> tuple[int, int]:
        """See :class:`NVML`."""
        info = self._call("nvmlDeviceGetMemoryInfo", self._handle(index))
        return int(info.total), int(info.used)

    def pci_bus_id(self, index: int) -> str:
        """See :class:`NVML`."""
        return _text(self._call("nvmlDeviceGetPciInfo", self._handle(index)).busId)

    def numa_node(self, index: int) -> int:
        """See :class:`NVML`."""
        return int(self._call("nvmlDeviceGetNumaNodeId", self._handle(index)))

    def utilization(self, index: int) -> int:
        """See :class:`NVML`."""
        return int(self._call("nvmlDeviceGetUtilizationRates", self._handle(index)).gpu)

    def processes(self, index: int) -> list[ProcessSample]:
        """See :class:`NVML`."""
        handle = self._handle(index)
        procs = self._call("nvmlDeviceGetComputeRunningProcesses", handle)
        try:
            samples = self._call("nvmlDeviceGetProcessUtilization", handle, self._last_seen)
        except NVMLError:  # NOT_FOUND: no sample since last_seen (an idle GPU)
            samples = []
        sm = {int(s.pid): int(s.smUtil) for s in samples}
        if samples:
            self._last_seen = max(int(s.timeStamp) for s in samples)
        return [ProcessSample(int(p.pid), int(p.usedGpuMemory or 0), sm.get(int(p.pid), 0)) for p in procs]

    def _register(self) -> None:
        if self._events is None:
            self._events = self._call("nvmlEventSetCreate")
        for index in range(self.device_count()):
            uuid = self.uuid(index)
            if uuid in self._registered:
                continue
            self._registered.add(uuid)
            try:
                self._call(
                    "nvmlDeviceRegisterEvents", self._handle(index), self.nv.nvmlEventTypeXidCriticalError, self._events
                )
            except NVMLError as exc:
                log.info("GPU %s: no Xid event reporting (%s); its health is judged by its queries only", uuid, exc)

    def xid_events(self) -> list[tuple[str, int]]:
        """See :class:`NVML`."""
        self._register()
        out: list[tuple[str, int]] = []
        while True:
            try:
                data = self.nv.nvmlEventSetWait_v2(self._events, 0)
            except self.nv.NVMLError:  # TIMEOUT: nothing waiting
                return out
            if data.eventType != self.nv.nvmlEventTypeXidCriticalError:
                continue
            try:
                uuid = _text(self.nv.nvmlDeviceGetUUID(data.device)) if data.device else ""
            except self.nv.NVMLError:
                uuid = ""
            out.append((uuid, int(data.eventData)))

    def shutdown(self) -> None:
        """See :class:`NVML`."""
        self._call("nvmlShutdown")


class RecordedNVML:
    """:class:`NVML` answering from a capture (``nvml.json``: ``driver``, ``devices[]`` with ``index``,
    ``minor``, ``uuid``, ``name``, ``memory{total,used}``, ``utilization{gpu}``, ``pci_bus_id``,
    ``cuda_driver_version`` (optional, NVML's integer form such as ``13000``),
    ``numa_node`` (an integer, or ``{"error": ...}`` for NotSupported), ``processes[]`` with ``pid``,
    ``used_memory`` and optional ``sm_util``).

    Raises:
        ValueError: the capture lacks ``devices`` or a device lacks one of the fields above.
    """

    def __init__(self, capture: dict[str, Any]) -> None:
        devices = capture.get("devices")
        if not isinstance(devices, list):
            raise ValueError("NVML capture: 'devices' must be a list")
        for i, dev in enumerate(devices):
            missing = [k for k in ("minor", "uuid", "name", "memory", "pci_bus_id") if k not in dev]
            if missing:
                raise ValueError(f"NVML capture devices[{i}]: missing {', '.join(missing)}")
        self.capture = capture
        self.devices: list[dict[str, Any]] = sorted(devices, key=lambda d: int(d.get("index", 0)))
        self.events: list[tuple[str, int]] = []

    @classmethod
    def from_file(cls, path: Path) -> RecordedNVML:
        """Load a capture file.

        Raises:
            OSError: unreadable. ValueError: not JSON or not a capture.
        """
        return cls(json.loads(Path(path).read_text()))

    def _dev(self, index: int) -> dict[str, Any]:
        if not 0 <= index < len(self.devices):
            raise NVMLError(f"no GPU at index {index}")
        return self.devices[index]

    def driver_version(self) -> str:
        """See :class:`NVML`."""
        return str(self.capture.get("driver", ""))

    def cuda_driver_version(self) -> str:
        """See :class:`NVML` (the capture's ``cuda_driver_version``, NVML's integer form; a capture without
        it answers NotSupported)."""
        value = self.capture.get("cuda_driver_version")
        if not isinstance(value, int) or isinstance(value, bool):
            raise NVMLError("nvmlSystemGetCudaDriverVersion: not in the capture", not_supported=True)
        return cuda_version_text(value)

    def device_count(self) -> int:
        """See :class:`NVML`."""
        return len(self.devices)

    def uuid(self, index: int) -> str:
        """See :class:`NVML`."""
        return str(self._dev(index)["uuid"])

    def minor(self, index: int) -> int:
        """See :class:`NVML`."""
        return int(self._dev(index)["minor"])

    def name(self, index: int) -> str:
        """See :class:`NVML`."""
        return str(self._dev(index)["name"])

    def memory(self, index: int) -> tuple[int, int]:
        """See :class:`NVML`."""
        mem = self._dev(index)["memory"]
        return int(mem["total"]), int(mem.get("used", 0))

    def pci_bus_id(self, index: int) -> str:
        """See :class:`NVML`."""
        return str(self._dev(index)["pci_bus_id"])

    def numa_node(self, index: int) -> int:
        """See :class:`NVML`."""
        value = self._dev(index).get("numa_node")
        if not isinstance(value, int) or isinstance(value, bool):
            why = value.get("error", "Not Supported") if isinstance(value, dict) else "Not Supported"
            raise NVMLError(f"nvmlDeviceGetNumaNodeId: {why}", not_supported=True)
        return value

    def utilization(self, index: int) -> int:
        """See :class:`NVML`."""
        return int((self._dev(index).get("utilization") or {}).get("gpu", 0))

    def processes(self, index: int) -> list[ProcessSample]:
        """See :class:`NVML`."""
        return [
            ProcessSample(int(p["pid"]), int(p.get("used_memory", 0)), int(p.get("sm_util", 0)))
            for p in self._dev(index).get("processes") or []
        ]

    def xid_events(self) -> list[tuple[str, int]]:
        """See :class:`NVML` (events queued on :attr:`events`)."""
        out, self.events = self.events, []
        return out

    def shutdown(self) -> None:
        """See :class:`NVML`."""


def load_nvml() -> tuple[NVML | None, str]:
    """``(backend, "")`` when NVML answers, else ``(None, why)``: nvidia-ml-py is not installed, or
    ``nvmlInit`` failed (no NVIDIA driver, no GPU). Never raises."""
    try:
        import pynvml  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None, f"nvidia-ml-py is not installed ({INSTALL_HINT}); no GPUs are reported"
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # pynvml.NVMLError (library not found, driver not loaded, ...)
        return None, f"NVML is not available ({exc}); no GPUs are reported"
    return PynvmlBackend(pynvml), ""


def open_nvml(capture: Path | None, enabled: bool, log: logging.Logger) -> NVML | None:
    """The NVML backend a command asked for: the recorded one of ``capture`` (``--nvml-capture``), else, when
    ``enabled`` (``--gpu``), the driver's through :func:`load_nvml` (None, and why logged at INFO, when it does
    not answer); None when neither.

    Raises:
        ValueError: the capture cannot be read or parsed (``--nvml-capture PATH: why``).
    """
    if capture is not None:
        try:
            return RecordedNVML.from_file(capture)
        except (OSError, ValueError) as exc:
            raise ValueError(f"--nvml-capture {capture}: {exc}") from exc
    if not enabled:
        return None
    nvml, why = load_nvml()
    if nvml is None:
        log.info("GPU discovery off: %s", why)
    return nvml
