"""The fragmentation ratio of Weng et al. (ATC'23) over the simulated cluster.

The per-node measure F_n(M) comes from the DeviceShare plugin's shared interface
(``app.plugins.deviceshare.fragmentation.node_fragmentation``); this module binds it to the
trace's target workload M (the distribution of the trace's pod shapes, as the paper defines it)
and turns it into the ratio the simulator reports: fragmented GPU milli over free GPU milli of
healthy GPUs, in percent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from app.sim.policies import TYPICAL_POPULARITY_PERCENT, trace_workload
from app.sim.trace import TracePod

#: (free cpu milli (N,), free memory bytes (N,), free milli per GPU slot (N, G; -1 none), models (N,))
#: -> expected fragmented GPU milli per node (N,).
FragmentationFn = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], Sequence[str]], npt.NDArray[np.float64]
]


def deviceshare_fragmentation(
    pods: Sequence[TracePod], popularity_percent: float = TYPICAL_POPULARITY_PERCENT
) -> FragmentationFn | None:
    """F_n of the DeviceShare plugin bound to the typical pod shapes of ``pods``
    (:func:`app.sim.policies.trace_workload` at ``popularity_percent``: the target workload that
    FragmentationAware is given, as the authors measure with the same typical pods they schedule
    by); None while the plugin does not provide ``app.plugins.deviceshare.fragmentation`` yet."""
    try:
        from app.plugins.deviceshare.args import decode_args
        from app.plugins.deviceshare.fragmentation import node_fragmentation
    except ImportError:
        return None
    entries = trace_workload(pods, popularity_percent)
    workload = decode_args({"fragmentationAware": {"workload": entries}}).workload
    if workload is None:
        return None

    def measure(
        cpu: npt.NDArray[np.int64],
        memory: npt.NDArray[np.int64],
        gpu_free: npt.NDArray[np.int64],
        models: Sequence[str],
    ) -> npt.NDArray[np.float64]:
        return np.asarray(node_fragmentation(workload, cpu, memory, gpu_free, models), dtype=np.float64)

    return measure


def fragmentation_ratio(
    fn: FragmentationFn,
    free_cpu: npt.NDArray[np.int64],
    free_memory: npt.NDArray[np.int64],
    gpu_free: npt.NDArray[np.int64],
    models: Sequence[str],
) -> float:
    """Percent of the free GPU milli (healthy GPUs) that is fragmented; 0.0 when nothing is free."""
    free = float(np.clip(gpu_free, 0, None).sum())
    if free <= 0:
        return 0.0
    return float(np.asarray(fn(free_cpu, free_memory, gpu_free, models)).sum()) / free * 100.0
