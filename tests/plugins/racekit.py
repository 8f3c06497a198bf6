"""kube-scheduler's interleaving of the extender verbs, played against the real HTTP service.

kube-scheduler runs one scheduling cycle at a time (``/filter``, ``/prioritize``, then it assumes the pod in its
own cache) and hands the pod to a binding goroutine that calls ``/bind``, while the next pod's scheduling cycle
already runs. :class:`SchedulerLoop` does the same: the scheduling cycles run one after the other in the calling
thread; every ``/bind`` runs on a pool of threads, so pod N+1 is filtered and scored while pod N's ``/bind`` is in
flight, and several binds race each other. :class:`SlowWrites` keeps each bind in flight for a while: the source's
pod writes (the PreBind annotations and the Binding) wait a seeded random delay before they apply.

kube-scheduler's own part is played too: its NodeResourcesFit over cpu, memory and pods, with the pods it assumed
(it knows nothing of Reservations, which live in the extender only); a failed ``/bind`` forgets the assumption and
requeues the pod, as ``handleBindingCycleError`` does.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from app.api.quantity import resource_value
from app.sources.files import FileSource

#: The resources kube-scheduler's own NodeResourcesFit checks here (the rest are the extender's).
KUBE_RESOURCES = ("cpu", "memory")


class SlowWrites(FileSource):
    """A file source whose pod writes (Binding, PreBind patches) apply after a seeded random delay of
    ``min_delay``..``max_delay`` seconds, so a ``/bind`` stays in flight while other verbs are served."""

    def __init__(self, path: Path, *, seed: int, min_delay: float = 0.002, max_delay: float = 0.03, **kw: Any) -> None:
        super().__init__(path, **kw)
        self._rng = random.Random(seed)
        self._delays = (min_delay, max_delay)

    async def _pause(self) -> None:
        await asyncio.sleep(self._rng.uniform(*self._delays))

    async def bind(self, namespace: str, name: str, uid: str, node: str) -> None:
        await self._pause()
        await super().bind(namespace, name, uid, node)

    async def patch(
        self,
        kind: str,
        name: str,
        patch: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        if kind == "Pod":
            await self._pause()
        return await super().patch(kind, name, patch, namespace=namespace, subresource=subresource)


def requests_of(pod: dict[str, Any]) -> dict[str, int]:
    """Σ container requests of ``pod`` in internal units (milli-cores for cpu, bytes, counts)."""
    out: dict[str, int] = {}
    for c in pod["spec"].get("containers") or []:
        for res, q in ((c.get("resources") or {}).get("requests") or {}).items():
            out[res] = out.get(res, 0) + resource_value(res, q)
    return out


@dataclass
class Outcome:
    """What the loop saw: ``bound`` pod name -> node, ``attempts`` per pod, the ``/bind`` errors, and the
    ``/bind`` calls that were in flight while another pod was filtered (the interleaving actually played)."""

    bound: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)
    bind_errors: list[str] = field(default_factory=list)
    overlapped: int = 0


class SchedulerLoop:
    """Plays kube-scheduler over ``url`` (see the module docstring).

    Args:
        url: the service's base URL.
        nodes: the Node objects kube-scheduler lists.
        seed: tie-breaks among the best-scored nodes and the order of the queue.
        binders: binding goroutines (threads) at once.
        bind_delay: seconds (drawn uniformly, seeded) a binding goroutine waits before its ``/bind``, as
            kube-scheduler's runs the Permit and PreBind of its own plugins first: the next pods are filtered
            and scored meanwhile, with the pod still absent from the extender's view.
    """

    def __init__(
        self,
        url: str,
        nodes: list[dict[str, Any]],
        seed: int,
        binders: int = 8,
        bind_delay: tuple[float, float] = (0.0, 0.02),
    ) -> None:
        self.url = url
        self.rng = random.Random(seed)
        self.bind_delay = bind_delay
        self.alloc = {
            n["metadata"]["name"]: {
                r: resource_value(r, n["status"]["allocatable"][r]) for r in (*KUBE_RESOURCES, "pods")
            }
            for n in nodes
        }
        self.used = {name: dict.fromkeys((*KUBE_RESOURCES, "pods"), 0) for name in self.alloc}
        self.lock = threading.Lock()
        self.in_flight = 0
        self.pool = ThreadPoolExecutor(max_workers=binders)
        self.local = threading.local()
        self.client = httpx.Client(base_url=url, timeout=30.0)

    def close(self) -> None:
        """Stop the binders and close the clients."""
        self.pool.shutdown(wait=True)
        self.client.close()

    def _fits(self, name: str, req: dict[str, int]) -> bool:
        used, alloc = self.used[name], self.alloc[name]
        if used["pods"] + 1 > alloc["pods"]:
            return False
        return all(used[r] + req.get(r, 0) <= alloc[r] for r in KUBE_RESOURCES)

    def _charge(self, name: str, req: dict[str, int], sign: int) -> None:
        used = self.used[name]
        used["pods"] += sign
        for r in KUBE_RESOURCES:
            used[r] += sign * req.get(r, 0)

    def _bind_client(self) -> httpx.Client:
        client = getattr(self.local, "client", None)
        if client is None:
            client = self.local.client = httpx.Client(base_url=self.url, timeout=30.0)
        return client

    def _bind(self, pod: dict[str, Any], node: str, delay: float) -> str:
        meta = pod["metadata"]
        body = {"PodName": meta["name"], "PodNamespace": meta["namespace"], "PodUID": meta["uid"], "Node": node}
        try:
            time.sleep(delay)
            resp = self._bind_client().post("/bind", json=body)
            assert resp.status_code == 200, resp.text
            return str(resp.json().get("Error") or "")
        finally:
            with self.lock:
                self.in_flight -= 1

    def run(self, pods: list[dict[str, Any]], rounds: int = 6) -> Outcome:
        """Schedule ``pods`` until every one is bound or ``rounds`` passes over the queue bind nothing new."""
        out = Outcome()
        queue = list(pods)
        idle = 0
        while queue and idle < rounds:
            self.rng.shuffle(queue)
            futures: list[tuple[dict[str, Any], str, dict[str, int], Future[str]]] = []
            for pod in queue:
                name = pod["metadata"]["name"]
                out.attempts[name] = out.attempts.get(name, 0) + 1
                req = requests_of(pod)
                with self.lock:
                    feasible = [n for n in sorted(self.alloc) if self._fits(n, req)]
                    if self.in_flight:
                        out.overlapped += 1
                if not feasible:
                    continue
                body = {"Pod": pod, "Nodes": None, "NodeNames": feasible}
                resp = self.client.post("/filter", json=body)
                assert resp.status_code == 200, resp.text
                passing = resp.json().get("NodeNames") or []
                if not passing:
                    continue
                body = {"Pod": pod, "Nodes": None, "NodeNames": passing}
                resp = self.client.post("/prioritize", json=body)
                assert resp.status_code == 200, resp.text
                scores = {e["Host"]: e["Score"] for e in resp.json()}
                top = max(scores.get(n, 0) for n in passing)
                node = self.rng.choice([n for n in passing if scores.get(n, 0) == top])
                with self.lock:
                    self._charge(node, req, +1)  # kube-scheduler's assume
                    self.in_flight += 1
                futures.append(
                    (pod, node, req, self.pool.submit(self._bind, pod, node, self.rng.uniform(*self.bind_delay)))
                )
            retry = []
            progressed = False
            for pod, node, req, fut in futures:
                error = fut.result()
                if error:
                    out.bind_errors.append(error)
                    with self.lock:
                        self._charge(node, req, -1)  # forget, requeue
                    retry.append(pod)
                else:
                    out.bound[pod["metadata"]["name"]] = node
                    progressed = True
            done = set(out.bound)
            queue = [p for p in queue if p["metadata"]["name"] not in done]
            idle = 0 if progressed else idle + 1
        return out
