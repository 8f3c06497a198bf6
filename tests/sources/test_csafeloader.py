"""Cluster files, configs and explain's pod go through PyYAML's C loader where PyYAML has libyaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from app.api import manifests
from app.api.manifests import SafeLoader, load_objects


def test_the_c_loader_is_used_where_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not getattr(yaml, "__with_libyaml__", False):
        pytest.skip("PyYAML is built without libyaml here")
    assert SafeLoader is yaml.CSafeLoader
    used: list[object] = []
    real = yaml.load_all

    def spy(stream: str, Loader: object) -> object:
        used.append(Loader)
        return real(stream, Loader=Loader)  # type: ignore[arg-type]

    monkeypatch.setattr(manifests.yaml, "load_all", spy)
    (tmp_path / "n.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")
    objects = load_objects(tmp_path)
    assert used == [yaml.CSafeLoader] and "n1" in objects["Node"]


def test_the_c_loader_stays_safe() -> None:
    with pytest.raises(yaml.constructor.ConstructorError):
        yaml.load("!!python/object/apply:os.system ['true']", Loader=SafeLoader)
