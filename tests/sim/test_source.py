"""The simulator's embedded source stamps resourceVersion as an API server does."""

from __future__ import annotations

from pathlib import Path

from app.sim.source import SimSource


async def test_each_write_gets_the_next_resource_version_and_the_given_object_is_untouched(tmp_path: Path) -> None:
    source = SimSource(tmp_path)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": {}}
    first = await source.create_or_update(pod)
    second = await source.create_or_update({**pod, "metadata": {"name": "q", "namespace": "default"}})
    assert (first["metadata"]["resourceVersion"], second["metadata"]["resourceVersion"]) == ("1", "2")
    assert "resourceVersion" not in pod["metadata"]
