"""Gang jobs in ``koord sim`` (issue 14): grouping by ``--gang-size`` and job ids, whole gangs bound over
real HTTP with their binds in flight together, the fail-fast count, held GPU-seconds, and bad options."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from app.api import coscheduling as n
from app.cli.main import cli
from app.cli.sim import sim
from app.sim.errors import SimInputError
from app.sim.experiment import load_trace, run_one
from app.sim.gangs import DEFAULT_GANG_WAIT, check_gang_size, gang_annotations, plan_gangs
from app.sim.policies import builtin_policy
from app.sim.run import FAIL_FAST_REASON, GANG_BROKEN_REASON, GANG_NOT_TRIED_REASON
from app.sim.trace import TracePod
from app.sim.workload import Arrival, EventKind, SimEvent

NODES = "sn,cpu_milli,memory_mib,gpu,model\n"


def _pod(name: str, gpus: int, job: str = "") -> TracePod:
    milli = 1000 if gpus > 1 else 500 * gpus
    return TracePod(name, 1000, 1024, gpus, milli, None, "", 0, None, 2, job)


def _arrivals(pods: list[TracePod]) -> list[SimEvent]:
    return [SimEvent(0, EventKind.ARRIVE, Arrival(p, p.name, f"uid-{p.name}")) for p in pods]


POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli"


def _write(tmp_path: Path, nodes: list[str], pods: list[str], header: str = POD_HEADER) -> tuple[Path, Path]:
    nodes_csv, pods_csv = tmp_path / "nodes.csv", tmp_path / "pods.csv"
    nodes_csv.write_text(NODES + "".join(f"{row}\n" for row in nodes))
    pods_csv.write_text(header + "\n" + "".join(f"{row}\n" for row in pods))
    return nodes_csv, pods_csv


def test_gang_size_groups_consecutive_multi_gpu_arrivals() -> None:
    pods = [_pod("a", 8), _pod("b", 1), _pod("c", 4), _pod("d", 2), _pod("e", 0), _pod("f", 8)]
    gangs = plan_gangs(_arrivals(pods), 2)
    assert {uid: g.name for uid, g in gangs.items()} == {
        "uid-a": "gang-0",
        "uid-c": "gang-0",  # the single-GPU pod between does not break the group
        "uid-d": "gang-1",
        "uid-f": "gang-1",
    }
    partial = plan_gangs(_arrivals(pods), 3)
    assert [m.name for m in partial["uid-f"].members] == ["f"]  # the last group is smaller
    assert gang_annotations(partial["uid-f"], 2.5) == {
        n.ANNOTATION_GANG_NAME: "gang-1",
        n.ANNOTATION_GANG_MIN_NUM: "1",
        n.ANNOTATION_GANG_TOTAL_NUM: "1",
        n.ANNOTATION_GANG_MODE: "Strict",
        n.ANNOTATION_GANG_WAIT_TIME: "2.5s",
    }
    assert plan_gangs(_arrivals(pods), None) == {}


def test_job_ids_group_their_pods_and_resampled_copies_separately() -> None:
    pods = [_pod("a", 1, "j1"), _pod("b", 8), _pod("c", 2, "j1"), _pod("d", 2, "j2")]
    events = _arrivals(pods)
    events.append(SimEvent(0, EventKind.ARRIVE, Arrival(pods[0], "a-clone-1", "uid-a-clone-1")))
    gangs = plan_gangs(events, None)
    assert {uid: g.name for uid, g in gangs.items()} == {
        "uid-a": "job-j1",
        "uid-c": "job-j1",
        "uid-d": "job-j2",
        "uid-a-clone-1": "job-j1-clone-1",
    }
    with_size = plan_gangs(events, 1)  # pods with a job id keep their job's gang
    assert with_size["uid-a"].name == "job-j1" and with_size["uid-b"].name == "gang-0"


@pytest.mark.parametrize("size", [0, -3])
def test_bad_gang_size_is_refused(size: int) -> None:
    with pytest.raises(SimInputError, match=f"--gang-size: must be at least 1, got {size}"):
        check_gang_size(size)


def test_gangs_complete_and_one_fails_fast(tmp_path: Path) -> None:
    # 24 GPUs; two gangs of two 8-GPU pods: the first takes 16, the second needs 16 with 8 free and is
    # refused at /filter by the capacity check before anything of it waits
    nodes, pods = _write(
        tmp_path,
        [f"n{i},64000,262144,8,V100M32" for i in range(3)],
        [f"p{i},8000,16384,8,1000" for i in range(4)] + ["small,1000,1024,1,500"],
    )
    trace = load_trace(nodes, pods, "static")
    result = run_one(trace, builtin_policy("MostAllocated"), 42, inflate=0.5, gang_size=2)
    assert result.problems == []
    assert result.gangs is not None
    record = result.to_json()["gangs"]
    assert {k: record[k] for k in ("planned", "completed", "failed", "fail_fast")} == {
        "planned": 2,
        "completed": 1,
        "failed": 1,
        "fail_fast": 1,
    }
    assert record["waiting_gpu_seconds"] >= 0
    assert result.scheduled_pods == 3  # the completed gang and the GPU share
    assert result.failed == {FAIL_FAST_REASON: 1, GANG_NOT_TRIED_REASON: 1}


def test_every_gang_completes_with_its_binds_in_flight_together(tmp_path: Path) -> None:
    nodes, pods = _write(
        tmp_path,
        [f"n{i},64000,262144,8,V100M32" for i in range(4)],
        [f"p{i},8000,16384,4,1000" for i in range(8)],
    )
    trace = load_trace(nodes, pods, "static")
    result = run_one(trace, builtin_policy("FragmentationAware"), 7, inflate=0.5, gang_size=4)
    assert result.problems == [] and not result.failed
    assert result.gangs is not None
    assert (result.gangs.planned, result.gangs.completed, result.gangs.failed) == (2, 2, 0)
    assert result.scheduled_pods == 8 and result.allocation_at(100) == 100.0
    # the first three members of each gang held their 4 GPUs while the rest were scheduled
    assert result.gangs.waiting_gpu_seconds > 0


def test_job_id_column_makes_gangs_without_gang_size(tmp_path: Path) -> None:
    nodes, pods = _write(
        tmp_path,
        [f"n{i},64000,262144,8,V100M32" for i in range(3)],
        ["a,1000,1024,8,1000,j1", "b,1000,1024,8,1000,j1", "c,1000,1024,1,500,"],
        header="name,cpu_milli,memory_mib,num_gpu,gpu_milli,job_id",
    )
    trace = load_trace(nodes, pods, "static")
    result = run_one(trace, builtin_policy("MostAllocated"), 1, inflate=0.1)
    assert result.gangs is not None and (result.gangs.planned, result.gangs.completed) == (1, 1)
    assert result.scheduled_pods == 3 and not result.failed


def test_member_refused_by_kube_schedulers_fit_leaves_the_others_waiting_until_the_gang_wait(tmp_path: Path) -> None:
    # 16 GPUs free in total (the capacity check passes) but only one node has 8: the second member fits
    # no node in kube-scheduler's own fit, the extender is not asked, the first waits out --gang-wait
    nodes, pods = _write(
        tmp_path,
        ["big,64000,262144,8,V100M32", "s1,64000,262144,4,V100M32", "s2,64000,262144,4,V100M32"],
        ["p0,8000,16384,8,1000", "p1,8000,16384,8,1000"],
    )
    trace = load_trace(nodes, pods, "static")
    result = run_one(trace, builtin_policy("MostAllocated"), 3, inflate=0.5, gang_size=2, gang_wait=0.5)
    assert result.problems == [] and result.scheduled_pods == 0
    assert result.gangs is not None
    assert (result.gangs.completed, result.gangs.failed, result.gangs.fail_fast) == (0, 1, 0)
    assert result.gangs.waiting_gpu_seconds >= 8 * 0.4  # 8 GPUs held for about the 0.5 s wait
    reasons = dict(result.failed)
    assert reasons.pop("bind: Coscheduling: rejected due to timeout after waiting 500ms at plugin Coscheduling") == 1
    assert list(reasons) == ["node-fit: Insufficient nvidia.com/gpu"]


def test_a_member_leaving_before_its_gang_is_complete_fails_the_gang(tmp_path: Path) -> None:
    nodes, pods = _write(
        tmp_path,
        ["n0,64000,262144,8,V100M32"],
        ["p0,1000,1024,2,1000,0,5", "p1,1000,1024,2,1000,10,20"],
        header="name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time",
    )
    trace = load_trace(nodes, pods, "timed")
    result = run_one(trace, builtin_policy("MostAllocated"), 1, mode="timed", gang_size=2)
    assert result.gangs is not None and (result.gangs.failed, result.gangs.completed) == (1, 0)
    assert result.failed == {GANG_BROKEN_REASON: 2} and result.problems == []


def test_runs_without_gangs_report_no_gangs_key(tmp_path: Path) -> None:
    nodes, pods = _write(tmp_path, ["n0,64000,262144,8,V100M32"], ["p0,1000,1024,8,1000"])
    result = run_one(load_trace(nodes, pods, "static"), builtin_policy("MostAllocated"), 1, inflate=0.5)
    assert result.gangs is None and "gangs" not in result.to_json()


def test_cli_gang_size_reports_gangs_and_refuses_bad_values(tmp_path: Path) -> None:
    nodes, pods = _write(
        tmp_path,
        [f"n{i},64000,262144,8,V100M32" for i in range(2)],
        [f"p{i},8000,16384,8,1000" for i in range(2)],
    )
    runner = CliRunner()
    base = ["sim", "--nodes", str(nodes), "--pods", str(pods), "--policy", "MostAllocated", "--quiet"]
    out = tmp_path / "out.json"
    result = runner.invoke(cli, [*base, "--inflate", "0.5", "--gang-size", "2", "--jobs", "1", "-o", str(out)])
    assert result.exit_code == 0, result.output
    (record,) = json.loads(out.read_text())
    assert set(record["gangs"]) == {"planned", "completed", "failed", "fail_fast", "waiting_gpu_seconds"}
    assert (record["gangs"]["planned"], record["gangs"]["completed"]) == (1, 1)
    for args, message in [
        (["--gang-size", "0"], "--gang-size: must be at least 1, got 0"),
        (["--gang-size", "-2"], "--gang-size: must be at least 1, got -2"),
        (["--gang-wait", "0"], "--gang-wait: must be in (0, 900] seconds, got 0"),
        (["--gang-wait", "901"], "--gang-wait: must be in (0, 900] seconds, got 901"),
    ]:
        result = runner.invoke(cli, [*base, *args])
        assert result.exit_code == 2, result.output
        assert message in result.output.replace("\n", "") and "Traceback" not in result.output


def test_cli_gang_wait_default_is_the_simulators() -> None:
    assert inspect.signature(sim).parameters["gang_wait"].default == DEFAULT_GANG_WAIT
