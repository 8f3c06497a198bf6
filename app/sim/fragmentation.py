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

from app.sim.fit import MIB
from app.sim.trace import TracePod

#: (free cpu milli (N,), free memory bytes (N,), free milli per GPU slot (N, G; -1 none), models (N,))
#: -> expected fragmented GPU milli per node (N,).
FragmentationFn = Callable[
    [npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], Sequence[str]], npt.NDArray[np.float64]
]


def deviceshare_fragmentation(pods: Sequence[TracePod]) -> FragmentationFn | None:
    """F_n of the DeviceShare plugin bound to the workload of ``pods``; None while the plugin does not
    provide ``app.plugins.deviceshare.fragmentation`` yet."""
    try:
        from app.plugins.deviceshare.fragmentation import PodShape, Workload, node_fragmentation
    except ImportError:
        return None
    shapes = []
    for p in pods:
        model: str | tuple[str, ...] | None = None
        if p.gpu_models is not None:
            model = p.gpu_models[0] if len(p.gpu_models) == 1 else p.gpu_models
        shapes.append(PodShape(p.cpu_milli, p.memory_mib * MIB, p.gpu_total_milli, model))
    workload = Workload.from_shapes(shapes)

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
