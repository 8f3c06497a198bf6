"""``topology_hint.admit`` leaves out the masks that cannot fit (NUMA nodes lacking a requested resource,
sizes whose largest amounts fall short) and still answers exactly as trying every mask in order does: the
same admission, hint and score, on random NUMA machines and pods (hypothesis, bounded examples).

The reference below is the plain search: every combination of NUMA ids, narrowest first, in
``itertools.combinations`` order, the first fitting one (Filter) or the best scored one, ties to the first.
"""

from __future__ import annotations

import time
from itertools import combinations
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.plugins.nodenumaresource import names as n
from app.plugins.nodenumaresource.args import LEAST_ALLOCATED, MOST_ALLOCATED, ScoringStrategy
from app.plugins.nodenumaresource.cpu_manager import CPU, MEMORY, NUMA_RESOURCES, ResourceOptions
from app.plugins.nodenumaresource.scoring import Scorer
from app.plugins.nodenumaresource.topology_hint import Admission, admit

GiB = 1 << 30
POLICIES = [n.NUMA_POLICY_BEST_EFFORT, n.NUMA_POLICY_RESTRICTED, n.NUMA_POLICY_SINGLE_NUMA_NODE]


def _reference(
    policy: str,
    requests: dict[str, int],
    available: dict[int, dict[str, int]],
    total: dict[int, dict[str, int]],
    scorer: Scorer,
    choose: bool,
) -> tuple[bool, tuple[int, ...] | None, int]:
    ids = sorted(total)
    requested = [r for r in NUMA_RESOURCES if requests.get(r) and any(r in total[i] for i in ids)]
    max_size = 1 if policy == n.NUMA_POLICY_SINGLE_NUMA_NODE else len(ids)
    best: tuple[int, ...] | None = None
    best_score = -1
    for size in range(1, max_size + 1):
        for mask in combinations(ids, size):
            if any(not available.get(i, {}).get(r) for r in requested for i in mask):
                continue
            if any(sum(available[i].get(r, 0) for i in mask) < requests[r] for r in requested):
                continue
            if not choose:
                return True, mask, 0
            alloc = {r: sum(total[i].get(r, 0) for i in mask) for r in NUMA_RESOURCES}
            taken = {r: alloc[r] - sum(available[i].get(r, 0) for i in mask) for r in NUMA_RESOURCES}
            score = scorer.score(taken, alloc, requests)
            if score > best_score:
                best, best_score = mask, score
        if best is not None:
            return True, best, best_score
    return (True, None, 0) if policy == n.NUMA_POLICY_BEST_EFFORT else (False, None, 0)


def _admit(
    policy: str,
    requests: dict[str, int],
    available: dict[int, dict[str, int]],
    total: dict[int, dict[str, int]],
    scorer: Scorer,
    choose: bool,
) -> Admission:
    opts: Any = SimpleNamespace(numa_nodes=lambda: sorted(total), cpu=None)
    ro = ResourceOptions(
        num_cpus=requests.get(CPU, 0) // 1000, requests=requests, bind=False, policy="", required=False
    )
    return admit(opts, policy, ro, {i: dict(a) for i, a in available.items()}, total, frozenset(), scorer, choose)


@st.composite
def _machines(draw: st.DrawFn) -> tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """(available, total) per NUMA node: 1-12 nodes, some lacking cpu or memory, some partly taken."""
    available, total = {}, {}
    for i in range(draw(st.integers(1, 12))):
        cpu = draw(st.sampled_from([0, 1000, 2000, 4000, 8000]))
        mem = draw(st.sampled_from([0, 1, 2, 4, 8])) * GiB
        total[i] = {CPU: cpu or 4000, MEMORY: mem or 4 * GiB}
        available[i] = {CPU: cpu, MEMORY: mem}
    return available, total


@settings(max_examples=300, deadline=None)
@given(
    machine=_machines(),
    cpu=st.sampled_from([0, 500, 1000, 3000, 8000, 20000, 64000]),
    mem=st.sampled_from([0, 1, 3, 9, 40]),
    policy=st.sampled_from(POLICIES),
    strategy=st.sampled_from([LEAST_ALLOCATED, MOST_ALLOCATED]),
    choose=st.booleans(),
)
def test_pruned_search_answers_as_every_mask_does(
    machine: tuple[dict[int, dict[str, int]], dict[int, dict[str, int]]],
    cpu: int,
    mem: int,
    policy: str,
    strategy: str,
    choose: bool,
) -> None:
    available, total = machine
    requests = {CPU: cpu, MEMORY: mem * GiB}
    scorer = Scorer(ScoringStrategy(type=strategy))
    got = _admit(policy, requests, available, total, scorer, choose)
    want = _reference(policy, requests, available, total, scorer, choose)
    assert (got.admit, got.hint, got.score) == want


def test_a_pod_larger_than_a_machine_of_many_numa_nodes_is_refused_without_trying_every_mask() -> None:
    """20 NUMA nodes of 1 cpu each, a pod of 24 cpus: 2^20 masks to try before; refused at once now."""
    total = {i: {CPU: 1000, MEMORY: GiB} for i in range(20)}
    scorer = Scorer(ScoringStrategy())
    t0 = time.process_time()
    got = _admit(n.NUMA_POLICY_RESTRICTED, {CPU: 24000, MEMORY: GiB}, total, total, scorer, choose=False)
    assert not got.admit and got.reason.startswith("Unaligned NUMA Hint")
    assert time.process_time() - t0 < 0.5
