"""Owner matching and the owner index, case by case as ``pkg/util/reservation/reservation.go`` decides."""

from __future__ import annotations

from typing import Any

import pytest

from app.cache.podinfo import PodInfo, parse_pod
from app.plugins.reservation.affinity import AffinityError, exact_match, parse_affinity, parse_exact_match
from app.plugins.reservation.owners import OwnerError, OwnerIndex, matches_owners, parse_owners


def _pod(labels: dict[str, str] | None = None, owner: dict[str, Any] | None = None) -> PodInfo:
    meta: dict[str, Any] = {"name": "web-0", "namespace": "prod", "uid": "u-1", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return parse_pod({"metadata": meta, "spec": {"containers": [{"name": "c"}]}})


RS = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "rs-1", "controller": True}


@pytest.mark.parametrize(
    ("owners", "pod", "matched"),
    [
        ([], _pod(), False),  # no owners: nothing
        ([{}], _pod(), True),  # one empty owner: everything
        ([{"object": {"name": "web-0", "namespace": "prod"}}], _pod(), True),
        ([{"object": {"name": "web-0", "namespace": "dev"}}], _pod(), False),
        ([{"object": {"uid": "u-2"}}], _pod(), False),
        ([{"object": {"name": "web-0", "kind": "Deployment"}}], _pod(), True),  # kind is ignored
        ([{"controller": {"name": "web-5d8f", "kind": "ReplicaSet"}}], _pod(owner=RS), True),
        ([{"controller": {"name": "web-5d8f", "controller": False}}], _pod(owner=RS), False),
        ([{"controller": {"uid": "rs-1", "namespace": "dev"}}], _pod(owner=RS), False),
        ([{"controller": {"name": "web-5d8f"}}], _pod(), False),  # no ownerReferences
        ([{"labelSelector": {"matchLabels": {"app": "web"}}}], _pod({"app": "web"}), True),
        ([{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "Exists"}]}}], _pod(), False),
        # inside one owner the parts are ANDed, owners are ORed
        ([{"object": {"name": "web-0"}, "labelSelector": {"matchLabels": {"app": "db"}}}], _pod({"app": "web"}), False),
        ([{"object": {"name": "x"}}, {"labelSelector": {"matchLabels": {"app": "web"}}}], _pod({"app": "web"}), True),
    ],
)
def test_owner_matching(owners: list[dict[str, Any]], pod: PodInfo, matched: bool) -> None:
    terms = parse_owners(owners)
    assert matches_owners(pod, terms) is matched
    index = OwnerIndex()
    index.add("r", terms)
    # the index never loses a reservation that matches (it may return extra candidates)
    assert ("r" in index.candidates(pod)) or not matched


def test_malformed_owners_name_the_field() -> None:
    with pytest.raises(OwnerError, match=r"spec.owners\[0\].labelSelector"):
        parse_owners([{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}])
    with pytest.raises(OwnerError, match=r"spec.owners\[1\]: expected an object"):
        parse_owners([{}, "web"])
    with pytest.raises(OwnerError, match=r"spec.owners\[0\].controller.controller: expected a boolean"):
        parse_owners([{"controller": {"controller": "yes"}}])


def test_index_finds_candidates_by_the_most_selective_key_and_forgets() -> None:
    index = OwnerIndex()
    index.add("by-label", parse_owners([{"labelSelector": {"matchLabels": {"app": "web"}}}]))
    index.add("by-uid", parse_owners([{"object": {"uid": "u-1"}}]))
    index.add("everyone", parse_owners([{}]))
    assert index.candidates(_pod({"app": "web"})) == {"by-label", "by-uid", "everyone"}
    assert index.candidates(_pod({"app": "db"})) == {"by-uid", "everyone"}
    index.remove("everyone")
    index.remove("by-uid")
    assert index.candidates(_pod({"app": "db"})) == set()
    assert len(index) == 1


def test_affinity_and_exact_match_annotations() -> None:
    key = "scheduling.koordinator.sh/reservation-affinity"
    aff = parse_affinity({key: '{"reservationSelector": {"team": "ml"}}'})
    assert aff is not None and aff.matches("r", {"team": "ml"}) and not aff.matches("r", {"team": "db"})
    terms = (
        '{"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": '
        '[{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}]}]}}'
    )
    aff = parse_affinity({key: terms})
    assert aff is not None and aff.matches("r", {"gen": "4"}) and not aff.matches("r", {"gen": "2"})
    assert parse_affinity({}) is None
    with pytest.raises(AffinityError, match=r"invalid scheduling\.koordinator\.sh/reservation-affinity"):
        parse_affinity({key: "[1]"})
    names = parse_exact_match({"scheduling.koordinator.sh/exact-match-reservation": '{"resourceNames": ["cpu"]}'})
    assert names == ("cpu",)
    assert exact_match({"cpu": 2000}, {"cpu": 2000, "memory": 1}, names)
    assert not exact_match({"cpu": 1000}, {"cpu": 2000}, names)
    assert exact_match({}, {"memory": 1}, names)  # absent on both sides: equal, as upstream
