"""Which cpus BE pods keep under the cpuset suppress policy.

Follows ``calculateBESuppressCPUSetPolicy`` of upstream ``qosmanager/plugins/cpusuppress/cpu_suppress.go``:
cpus are bucketed per (NUMA node, socket), each bucket sorted by (core, cpu id), buckets by size desc
then first cpu id; hyper-thread sibling pairs are taken round-robin over the buckets first, then
single cpus round-robin.
"""

from __future__ import annotations

import logging

from agent.collectors.node import ProcessorInfo

log = logging.getLogger("agent.qos")


def pick_cpus(count: int, processors: list[ProcessorInfo]) -> list[int]:
    """``count`` cpu ids from ``processors`` (empty when fewer are available), in picking order."""
    n = len(processors)
    if n < count:
        log.warning("cannot pick %d BE cpus from %d available", count, n)
        return []
    buckets_by_node: dict[int, list[ProcessorInfo]] = {}
    for p in processors:
        buckets_by_node.setdefault((p.node_id + n) * (p.socket_id + 1), []).append(p)
    buckets = [sorted(b, key=lambda p: (p.core_id, p.cpu_id)) for b in buckets_by_node.values()]
    buckets.sort(key=lambda b: (-len(b), b[0].cpu_id))
    picked: list[int] = []
    used: set[int] = set()
    need = count
    i, prev_need = 0, -1
    while buckets:
        if need <= 1:
            break
        if i == 0:
            if prev_need == need:
                break
            prev_need = need
        bucket = buckets[i]
        for j in range(len(bucket) - 1):
            if bucket[j].cpu_id in used:
                continue
            if bucket[j].core_id == bucket[j + 1].core_id:
                picked += [bucket[j].cpu_id, bucket[j + 1].cpu_id]
                used.update((bucket[j].cpu_id, bucket[j + 1].cpu_id))
                need -= 2
                break
        i = (i + 1) % len(buckets)
    start, prev_need = i, -1
    while buckets:
        if need <= 0:
            break
        if i == start:
            if prev_need == need:
                break
            prev_need = need
        for p in buckets[i]:
            if p.cpu_id not in used:
                picked.append(p.cpu_id)
                used.add(p.cpu_id)
                need -= 1
                break
        i = (i + 1) % len(buckets)
    return picked
