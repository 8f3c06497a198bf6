"""kube-scheduler's DefaultPreemption pieces (``filterPodsWithPDBViolation``, ``SelectVictimsOnNode``) as
upstream's table tests: name, input, expected."""

from __future__ import annotations

from typing import Any

import pytest

from app.cache.podinfo import PodInfo, parse_pod
from app.framework.preemption import NO_VICTIMS_MESSAGE, filter_pods_with_pdb_violation, select_victims_on_node


def _pod(name: str, priority: int, cpu: int = 1, labels: dict[str, str] | None = None, ns: str = "default") -> PodInfo:
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}},
            "spec": {
                "nodeName": "n1",
                "priority": priority,
                "containers": [{"name": "c", "resources": {"requests": {"cpu": str(cpu)}}}],
            },
        }
    )


def _pdb(allowed: int, selector: dict[str, Any] | None, ns: str = "default", disrupted: tuple[str, ...] = ()) -> Any:
    status: dict[str, Any] = {"disruptionsAllowed": allowed}
    if disrupted:
        status["disruptedPods"] = dict.fromkeys(disrupted, "2026-01-01T00:00:00Z")
    return {"metadata": {"name": "b", "namespace": ns}, "spec": {"selector": selector}, "status": status}


DB = {"matchLabels": {"app": "db"}}


@pytest.mark.parametrize(
    ("name", "pdbs", "violating"),
    [
        ("budget of one: the second matching pod violates", [_pdb(1, DB)], ["db-2"]),
        ("budget of zero: every matching pod violates", [_pdb(0, DB)], ["db-1", "db-2"]),
        ("other namespace: no match", [_pdb(0, DB, ns="other")], []),
        ("empty selector matches nothing", [_pdb(0, {})], []),
        ("nil selector matches nothing", [_pdb(0, None)], []),
        ("a pod already disrupted does not count", [_pdb(0, DB, disrupted=("db-1",))], ["db-2"]),
        ("malformed budgets are ignored", [{"metadata": [], "spec": "x", "status": 3}, {"spec": {"selector": 7}}], []),
    ],
)
def test_filter_pods_with_pdb_violation(name: str, pdbs: list[Any], violating: list[str]) -> None:
    pods = [_pod("db-1", 1, labels={"app": "db"}), _pod("db-2", 1, labels={"app": "db"}), _pod("plain", 1)]
    bad, fine = filter_pods_with_pdb_violation(pods, pdbs)
    assert [p.name for p in bad] == violating, name
    assert [p.name for p in fine] == [p.name for p in pods if p.name not in violating], name


def _fits_with(free: int, need: int, pods: list[PodInfo]) -> Any:
    """A node with ``free`` milli-cpu free besides ``pods``; the preemptor needs ``need``."""

    def fits(removed: list[PodInfo]) -> list[str]:
        return [] if free + sum(p.requests.get("cpu", 0) for p in removed) >= need else ["Insufficient cpu"]

    return fits


def test_select_victims_reprieves_the_most_important_and_never_takes_equal_or_higher_priority() -> None:
    pods = [_pod("low", 100), _pod("mid", 500), _pod("keep", 1000), _pod("same", 9000), _pod("top", 10000)]
    victims, violations, why = select_victims_on_node(9000, pods, _fits_with(0, 2000, pods), [], lambda p: 0.0)
    assert ([v.name for v in victims], violations, why) == (["mid", "low"], 0, [])


def test_select_victims_prefers_sparing_pdb_protected_pods() -> None:
    pods = [_pod("guarded", 100, labels={"app": "db"}), _pod("plain", 500)]
    victims, violations, _ = select_victims_on_node(9000, pods, _fits_with(0, 1000, pods), [_pdb(0, DB)], lambda p: 0)
    assert [v.name for v in victims] == ["plain"] and violations == 0
    victims, violations, _ = select_victims_on_node(9000, pods, _fits_with(0, 2000, pods), [_pdb(0, DB)], lambda p: 0)
    assert [v.name for v in victims] == ["guarded", "plain"] and violations == 1


def test_select_victims_without_lower_priority_pods_or_room() -> None:
    pods = [_pod("same", 9000)]
    assert select_victims_on_node(9000, pods, _fits_with(0, 1000, pods), [], lambda p: 0) == (
        [],
        0,
        [NO_VICTIMS_MESSAGE],
    )
    pods = [_pod("low", 1)]
    assert select_victims_on_node(9000, pods, _fits_with(0, 5000, pods), [], lambda p: 0) == (
        [],
        0,
        ["Insufficient cpu"],
    )
