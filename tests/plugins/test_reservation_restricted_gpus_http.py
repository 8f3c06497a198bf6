"""Restricted for GPUs, over real HTTP: an owner of a ``Restricted`` Reservation holding GPUs gets GPUs only
from the Reservation (an ``Aligned`` one lets it take the node's other free GPUs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.sources.files import FileSource
from tests.conftest import LiveServer
from tests.plugins.reservation.fixtures import (
    bind_call,
    filter_call,
    phase_is,
    pod,
    reservation,
    wait_for,
    write_cluster,
)
from tests.plugins.test_deviceshare import device
from tests.plugins.test_deviceshare import node as gpu_node

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
TRAINER = {"app": "trainer"}


def _gpu_pod(name: str, core: str) -> dict[str, Any]:
    obj = pod(name, "1", "1Gi", labels=TRAINER)
    obj["spec"]["containers"][0]["resources"]["requests"].update(
        {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory-ratio": core}
    )
    return obj


@pytest.mark.parametrize(
    ("policy", "whole_gpu_verdict"),
    [("Restricted", "Reservation(s) Insufficient gpu devices"), ("Aligned", None)],
)
def test_owner_of_a_restricted_reservation_gets_gpus_only_from_it(
    tmp_path: Path, policy: str, whole_gpu_verdict: str | None
) -> None:
    """n1 has two GPUs; the Reservation holds GPU 0 (and 4 cpu) for trainers. half-1 takes half of GPU 0
    from it; whole-1 then asks a whole GPU: only GPU 1 is free, which Restricted forbids."""
    owners = [{"labelSelector": {"matchLabels": TRAINER}}]
    gpu = {"nvidia.com/gpu": "1"}
    resv = reservation("gpu-hold", cpu="4", memory="4Gi", extra=gpu, owners=owners, policy=policy, allocate_once=False)
    objs = [gpu_node("n1", 2), device("n1", 2), resv, _gpu_pod("half-1", "50"), _gpu_pod("whole-1", "100")]
    with LiveServer(FileSource(write_cluster(tmp_path / "c", objs), poll_interval=0)) as srv:
        wait_for(lambda: phase_is(srv, "gpu-hold", "Available"))
        annotations = srv.service.cache.objects["Reservation"]["gpu-hold"]["metadata"]["annotations"]
        [held] = json.loads(annotations[ALLOCATED])["gpu"]
        pods = srv.service.cache.pod_objects
        assert filter_call(srv, pods["uid-half-1"], ["n1"])["NodeNames"] == ["n1"]
        assert bind_call(srv, pods["uid-half-1"], "n1")["Error"] == ""
        got = wait_for(lambda: srv.service.cache.pods["uid-half-1"].annotations.get(ALLOCATED))
        assert [g["minor"] for g in json.loads(got)["gpu"]] == [held["minor"]]
        result = filter_call(srv, pods["uid-whole-1"], ["n1"])
        if whole_gpu_verdict is None:
            assert result["NodeNames"] == ["n1"]
        else:
            assert result["FailedNodes"] == {"n1": whole_gpu_verdict}
            bound = bind_call(srv, pods["uid-whole-1"], "n1")["Error"]
            assert whole_gpu_verdict in bound
