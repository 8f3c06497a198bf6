"""The pynvml adapter (PynvmlBackend) against a stand-in ``pynvml`` module that answers the way nvidia-ml-py
13 does (bytes or str, NVMLError with ``value``, event sets that time out): the calls it makes, its error
mapping and its Xid draining, without a GPU."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from agent.collectors.nvml import NVMLError, ProcessSample, PynvmlBackend, load_nvml

NOT_SUPPORTED, TIMEOUT, NOT_FOUND = 3, 10, 6
XID_CRITICAL = 8


class FakePynvml:
    """The nvidia-ml-py functions PynvmlBackend calls, over two GPUs."""

    NVML_ERROR_NOT_SUPPORTED = NOT_SUPPORTED
    nvmlEventTypeXidCriticalError = XID_CRITICAL

    class NVMLError(Exception):
        def __init__(self, value: int) -> None:
            super().__init__(f"NVML error {value}")
            self.value = value

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.inited = False
        self.events: list[Any] = []
        self.registered: list[Any] = []
        self.lost: set[int] = set()

    def nvmlInit(self) -> None:
        self.inited = True

    def nvmlShutdown(self) -> None:
        self.inited = False

    def nvmlSystemGetDriverVersion(self) -> bytes:
        return b"580.159.04"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> Any:
        self.calls.append(f"handle{i}")
        return SimpleNamespace(i=i)

    def _h(self, h: Any) -> int:
        if h.i in self.lost:
            raise self.NVMLError(15)  # GPU_IS_LOST
        return int(h.i)

    def nvmlDeviceGetUUID(self, h: Any) -> str:
        return f"GPU-{self._h(h)}"

    def nvmlDeviceGetMinorNumber(self, h: Any) -> int:
        return self._h(h) + 4

    def nvmlDeviceGetName(self, h: Any) -> bytes:
        self._h(h)
        return b"NVIDIA H200"

    def nvmlDeviceGetMemoryInfo(self, h: Any) -> Any:
        self._h(h)
        return SimpleNamespace(total=150_754_820_096, used=644_939_776, free=0)

    def nvmlDeviceGetPciInfo(self, h: Any) -> Any:
        return SimpleNamespace(busId=f"00000000:0{self._h(h)}:00.0")

    def nvmlDeviceGetNumaNodeId(self, h: Any) -> int:
        raise self.NVMLError(NOT_SUPPORTED)

    def nvmlDeviceGetUtilizationRates(self, h: Any) -> Any:
        return SimpleNamespace(gpu=37, memory=5)

    def nvmlDeviceGetComputeRunningProcesses(self, h: Any) -> list[Any]:
        return [SimpleNamespace(pid=10, usedGpuMemory=1 << 30), SimpleNamespace(pid=11, usedGpuMemory=None)]

    def nvmlDeviceGetProcessUtilization(self, h: Any, last_seen: int) -> list[Any]:
        self.calls.append(f"util{last_seen}")
        if h.i == 1:
            raise self.NVMLError(NOT_FOUND)  # no sample since last_seen
        return [SimpleNamespace(pid=10, smUtil=42, timeStamp=123)]

    def nvmlEventSetCreate(self) -> str:
        return "set"

    def nvmlDeviceRegisterEvents(self, h: Any, types: int, event_set: Any) -> None:
        if h.i == 1:
            raise self.NVMLError(NOT_SUPPORTED)
        self.registered.append((h.i, types, event_set))

    def nvmlEventSetWait_v2(self, event_set: Any, timeout: int) -> Any:
        assert timeout == 0
        if not self.events:
            raise self.NVMLError(TIMEOUT)
        return self.events.pop(0)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> FakePynvml:
    mod = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    return mod


def test_load_nvml_inits_and_answers_every_query(fake: FakePynvml) -> None:
    nvml, why = load_nvml()
    assert why == "" and isinstance(nvml, PynvmlBackend) and fake.inited
    assert nvml.driver_version() == "580.159.04" and nvml.device_count() == 2
    assert (nvml.uuid(1), nvml.minor(1), nvml.name(1)) == ("GPU-1", 5, "NVIDIA H200")
    assert nvml.memory(0) == (150_754_820_096, 644_939_776)
    assert nvml.pci_bus_id(1) == "00000000:01:00.0"
    assert nvml.utilization(0) == 37
    with pytest.raises(NVMLError) as info:
        nvml.numa_node(0)
    assert info.value.not_supported
    assert fake.calls.count("handle1") == 1, "handles are looked up once"
    nvml.shutdown()
    assert not fake.inited


def test_processes_join_memory_and_sm_samples(fake: FakePynvml) -> None:
    nvml, _ = load_nvml()
    assert nvml is not None
    assert nvml.processes(0) == [ProcessSample(10, 1 << 30, 42), ProcessSample(11, 0, 0)]
    assert nvml.processes(1) == [ProcessSample(10, 1 << 30, 0), ProcessSample(11, 0, 0)]  # no samples: 0 %
    assert "util123" in fake.calls, "the next query asks only for samples newer than the last one seen"


def test_a_lost_gpu_raises_and_xids_are_drained_without_waiting(fake: FakePynvml) -> None:
    nvml, _ = load_nvml()
    assert nvml is not None
    fake.lost = {1}
    with pytest.raises(NVMLError, match="nvmlDeviceGetUUID") as info:
        nvml.uuid(1)
    assert not info.value.not_supported
    fake.lost = set()
    assert nvml.xid_events() == []
    assert fake.registered == [(0, XID_CRITICAL, "set")]  # GPU 1 cannot report Xids: judged by its queries
    dev0 = SimpleNamespace(i=0)
    fake.events = [
        SimpleNamespace(eventType=XID_CRITICAL, eventData=79, device=dev0),
        SimpleNamespace(eventType=1, eventData=0, device=dev0),  # not an Xid
        SimpleNamespace(eventType=XID_CRITICAL, eventData=48, device=None),
    ]
    assert nvml.xid_events() == [("GPU-0", 79), ("", 48)]
    assert nvml.xid_events() == []
