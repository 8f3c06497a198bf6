"""Trace loading: every bad input names the file, the line and the field (table tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.sim.errors import SimInputError
from app.sim.experiment import load_trace
from app.sim.objects import LABEL_POD_QOS, pod_object
from app.sim.trace import load_nodes, load_pods
from tests.sim.conftest import DATA, NODES_CSV, require_trace

NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model\n"
POD_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
)
GOOD_NODE = "n0,64000,262144,2,P100\n"
GOOD_POD = "p0,6000,12288,1,460,,LS,Running,10,20,10\n"

NODE_CASES: list[tuple[str, str, str]] = [
    ("missing column", "sn,cpu_milli,memory_mib,gpu\nn0,1,1,1\n", ":1: missing column model"),
    ("negative cpu", NODE_HEADER + "n0,-64000,262144,2,P100\n", ":2: field cpu_milli: must be a non-negative integer"),
    ("not a number", NODE_HEADER + GOOD_NODE + "n1,64000,lots,2,P100\n", ":3: field memory_mib: must be a non-neg"),
    ("fractional", NODE_HEADER + "n0,64000.5,262144,2,P100\n", ":2: field cpu_milli"),
    ("too many gpus", NODE_HEADER + "n0,64000,262144,9,P100\n", ":2: field gpu: at most 8 GPUs"),
    ("gpu without model", NODE_HEADER + "n0,64000,262144,2,\n", ":2: field model: a node with 2 GPUs needs"),
    ("duplicate", NODE_HEADER + GOOD_NODE + GOOD_NODE, ":3: field sn: duplicate node 'n0'"),
    ("empty name", NODE_HEADER + ",64000,262144,2,P100\n", ":2: field sn: empty node name"),
    ("empty file", "", ":1: empty file"),
    ("no rows", NODE_HEADER, ": no nodes"),
]


@pytest.mark.parametrize(("name", "text", "expected"), NODE_CASES, ids=[c[0] for c in NODE_CASES])
def test_bad_node_lists(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / "nodes.csv"
    path.write_text(text)
    with pytest.raises(SimInputError) as err:
        load_nodes(path)
    assert str(err.value).startswith(str(path))
    assert expected in str(err.value)


POD_CASES: list[tuple[str, str, str]] = [
    ("missing columns", "name,cpu_milli\np0,1\n", ":1: missing columns memory_mib, num_gpu, gpu_milli (header"),
    ("negative memory", POD_HEADER + "p0,6000,-1,1,460,,LS,Running,10,20,10\n", ":2: field memory_mib: must be a non"),
    ("negative gpu_milli", POD_HEADER + "p0,6000,1,1,-5,,LS,Running,10,20,10\n", ":2: field gpu_milli: must be a"),
    ("unknown model", POD_HEADER + GOOD_POD + "p1,1,1,1,500,V100M16|H100,LS,R,1,2,1\n", ":3: field gpu_spec: unknown"),
    ("share above one gpu", POD_HEADER + "p0,1,1,1,1500,,LS,R,1,2,1\n", ":2: field gpu_milli: must be in 1..1000"),
    ("gpu_milli without gpu", POD_HEADER + "p0,1,1,0,500,,LS,R,1,2,1\n", ":2: field gpu_milli: must be 0 when"),
    ("multi-gpu share", POD_HEADER + "p0,1,1,2,500,,LS,R,1,2,1\n", ":2: field gpu_milli: a pod of 2 GPUs takes whole"),
    (
        "share not in percent",
        POD_HEADER + "p0,1,1,1,455,,LS,R,1,2,1\n",
        ":2: field gpu_milli: a GPU share is requested",
    ),
    ("too many gpus", POD_HEADER + "p0,1,1,9,1000,,LS,R,1,2,1\n", ":2: field num_gpu: at most 8 GPUs per pod"),
    ("deleted before created", POD_HEADER + "p0,1,1,1,500,,LS,R,20,10,1\n", ":2: field deletion_time: 10 is before"),
    ("duplicate", POD_HEADER + GOOD_POD + GOOD_POD, ":3: field name: duplicate pod 'p0'"),
]


@pytest.mark.parametrize(("name", "text", "expected"), POD_CASES, ids=[c[0] for c in POD_CASES])
def test_bad_pod_lists(tmp_path: Path, name: str, text: str, expected: str) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(text)
    with pytest.raises(SimInputError) as err:
        load_pods(path, {"P100", "V100M16"})
    assert str(err.value).startswith(str(path))
    assert expected in str(err.value)


def test_timed_mode_requires_creation_time(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(POD_HEADER + "p0,1,1,1,500,,LS,R,,20,1\n")
    assert load_pods(path, set())[0].creation_time is None  # static mode does not need it
    with pytest.raises(SimInputError, match=r"pods.csv:2: field creation_time: must be a non-negative integer"):
        load_pods(path, set(), need_times=True)


def test_good_lists_parse(tmp_path: Path) -> None:
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(NODE_HEADER + GOOD_NODE + "cpu0,32000,65536,0,nan\n")
    pods = tmp_path / "pods.csv"
    pods.write_text(POD_HEADER + GOOD_POD + "p1,88000,327680,8,1000,V100M16|P100|P100,BE,Running,5,,5\n")
    parsed_nodes = load_nodes(nodes)
    assert [(n.name, n.gpu, n.model) for n in parsed_nodes] == [("n0", 2, "P100"), ("cpu0", 0, "")]
    p0, p1 = load_pods(pods, {"P100", "V100M16"})
    assert (p0.num_gpu, p0.gpu_milli, p0.gpu_models, p0.gpu_total_milli) == (1, 460, None, 460)
    assert (p1.gpu_models, p1.gpu_total_milli, p1.deletion_time, p1.line) == (("P100", "V100M16"), 8000, None, 3)


MULTIGPU_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"  # the openb_pod_list_multigpu* shape


def test_multigpu_shape_loads_without_model_or_qos(tmp_path: Path) -> None:
    pods = tmp_path / "multigpu.csv"
    pods.write_text(MULTIGPU_HEADER + "p0,12000,16384,1,1000\np1,6000,12288,1,460\np2,88000,327680,4,1000\n")
    p0, p1, p2 = load_pods(pods, {"P100"})
    assert [(p.num_gpu, p.gpu_milli, p.gpu_models, p.qos) for p in (p0, p1, p2)] == [
        (1, 1000, None, ""),
        (1, 460, None, ""),
        (4, 1000, None, ""),
    ]
    assert (p2.creation_time, p2.deletion_time, p2.line) == (None, None, 4)
    # the object the sim writes: no QoS label, no model affinity
    obj = pod_object(p1, "p1", "uid-1")
    assert LABEL_POD_QOS not in (obj["metadata"].get("labels") or {})
    assert "affinity" not in obj["spec"]


def test_multigpu_shape_is_still_validated(tmp_path: Path) -> None:
    pods = tmp_path / "multigpu.csv"
    pods.write_text(MULTIGPU_HEADER + "p0,12000,16384,2,500\n")
    with pytest.raises(SimInputError, match=r"multigpu.csv:2: field gpu_milli: a pod of 2 GPUs takes whole"):
        load_pods(pods, set())


def test_timed_mode_refuses_a_list_without_times(tmp_path: Path) -> None:
    pods = tmp_path / "multigpu.csv"
    pods.write_text(MULTIGPU_HEADER + "p0,12000,16384,1,1000\n")
    with pytest.raises(SimInputError) as err:
        load_pods(pods, set(), need_times=True)
    message = str(err.value)
    assert message.startswith(f"{pods}:1: missing columns creation_time, deletion_time (header: name, cpu_milli")
    assert "timed mode replays creation_time and deletion_time" in message
    assert "use --mode static" in message
    assert "gpu_spec" not in message.split("(header")[0]  # the optional columns are not demanded


def test_every_pod_list_of_the_dataset_loads() -> None:
    """All pod lists of the shared trace load in static mode, the multigpu ones included; timed mode
    refuses exactly the lists without times."""
    require_trace()
    lists = sorted(DATA.glob("openb_pod_list_*.csv"))
    assert len(lists) >= 20
    multigpu = [p for p in lists if p.stem.startswith("openb_pod_list_multigpu")]
    assert len(multigpu) == 4
    for path in lists:
        trace = load_trace(NODES_CSV, path, "static")
        assert len(trace.pods) > 1000
        if path in multigpu:
            assert all(p.gpu_models is None and p.qos == "" for p in trace.pods)
            assert any(p.num_gpu > 1 for p in trace.pods)
    with pytest.raises(SimInputError, match="timed mode replays creation_time and deletion_time"):
        load_trace(NODES_CSV, multigpu[0], "timed")
    assert load_trace(NODES_CSV, DATA / "openb_pod_list_default.csv", "timed").pods[0].creation_time is not None
