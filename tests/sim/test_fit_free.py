"""NodeFit.feasible keeps free resources per resource row, updated by add/remove, instead of computing
allocatable - requested per call: it must answer exactly as the plain computation over the arrays does,
through any sequence of pods added and removed (hypothesis), with and without a model constraint."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from app.sim.fit import NodeFit, pod_vector
from app.sim.trace import TraceNode, TracePod

MODELS = ("T4", "V100M16", "A100")


def plain_feasible(fit: NodeFit, pod: TracePod, vector: npt.NDArray[np.int64]) -> list[int]:
    """The rows where ``pod`` fits, from allocatable - requested as the sim computed it before."""
    free = fit.allocatable - fit.requested
    wanted = vector > 0
    ok = (free[:, wanted] >= vector[wanted]).all(axis=1)
    mask = fit.model_mask(pod.gpu_models)
    if mask is not None:
        ok &= mask
    return np.flatnonzero(ok).tolist()


nodes_st = st.lists(
    st.builds(
        lambda i, cpu, mem, gpu, model: TraceNode(f"n{i}", cpu, mem, gpu, model),
        st.integers(0, 10**6),
        st.integers(0, 64000),
        st.integers(0, 262144),
        st.integers(0, 8),
        st.sampled_from(MODELS),
    ),
    min_size=1,
    max_size=12,
    unique_by=lambda n: n.name,
)
pods_st = st.builds(
    lambda cpu, mem, gpus, milli, models: TracePod(
        "p", cpu, mem, gpus, 1000 if gpus > 1 else milli, models, "LS", 0, None, 2
    ),
    st.integers(0, 32000),
    st.integers(0, 131072),
    st.integers(0, 8),
    st.integers(1, 1000),
    st.none() | st.lists(st.sampled_from(MODELS), min_size=1, max_size=2, unique=True).map(lambda m: tuple(sorted(m))),
)


@settings(max_examples=120, deadline=None)
@given(nodes_st, st.lists(st.tuples(pods_st, st.integers(0, 11), st.booleans()), max_size=25), pods_st)
def test_feasible_matches_allocatable_minus_requested(
    nodes: list[TraceNode], ops: list[tuple[TracePod, int, bool]], probe: TracePod
) -> None:
    fit = NodeFit(nodes)
    placed: list[tuple[int, npt.NDArray[np.int64]]] = []
    for pod, row, remove in ops:
        if remove and placed:
            fit.remove(*placed.pop(row % len(placed)))
        else:
            vector = pod_vector(pod)
            placed.append((row % len(nodes), vector))
            fit.add(row % len(nodes), vector)  # may overcommit: free goes negative, still compared
        assert fit.feasible(pod, pod_vector(pod)).tolist() == plain_feasible(fit, pod, pod_vector(pod))
    vector = pod_vector(probe)
    assert fit.feasible(probe, vector).tolist() == plain_feasible(fit, probe, vector)
    # the free rows handed out (reasons and the sim's fragmentation read them) are the same arrays, read-only
    free = fit.free_by_resource()
    assert free.tolist() == (fit.allocatable - fit.requested).T.tolist()
    assert not free.flags.writeable
    # the cached model mask is not narrowed by a call
    if probe.gpu_models is not None:
        mask = fit.model_mask(probe.gpu_models)
        assert mask is not None and mask.tolist() == [n.model in probe.gpu_models for n in nodes]


def test_one_node_cluster_keeps_its_allocatable() -> None:
    """With one node, ``allocatable.T`` is already contiguous: the free rows must still be a copy, or an
    ``add`` would lower the allocatable itself (found by the property test above)."""
    fit = NodeFit([TraceNode("n0", 6, 0, 0, "T4")])
    pod = TracePod("p", 3, 0, 0, 1, None, "LS", 0, None, 2)
    fit.add(0, pod_vector(pod))
    assert fit.allocatable.tolist() == [[6, 0, 0, 0, 0]]
    assert fit.feasible(pod, pod_vector(pod)).tolist() == [0]
    fit.add(0, pod_vector(pod))
    assert fit.feasible(pod, pod_vector(pod)).tolist() == []
