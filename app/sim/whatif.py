"""``koord sim whatif``: place the same pods on identical copies of a cluster under several configurations.

Each configuration gets its own in-process service (:class:`~app.sim.service.InProcessService`) started on
the snapshot's cluster files, read afresh, so every run starts from the same cluster. The pods to place
(the snapshot's pending pods, or a workload file's: :mod:`app.sim.whatifworkload`) go in kube-scheduler's
queue order through a scheduling cycle each, as kube-scheduler with our extender would run it:
kube-scheduler's own filters (:class:`~app.sim.kubefit.KubeFit`, which stops once it found
``percentageOfNodesToScore`` of the nodes feasible, as kube-scheduler does), ``POST /filter`` with the nodes that
passed, ``POST /prioritize`` when more than one is left, the best extender score wins (ties: uniformly at
random, kube-scheduler's ``selectHost``, seeded by ``--seed``), ``POST /bind``. A gang's members are
scheduled one after another, each ``/bind`` left waiting at Permit until its gang is complete (as
:mod:`app.sim.run` replays gangs); a failed member ends its gang's attempt. A failed pod is not retried.

Why a pod failed is worded as ``koord explain`` words it, ``Plugin: reason``: kube-scheduler's filters
by the reason most nodes failed with; past them, the service's ``POST /apis/v1/explain`` on the nodes
kube-scheduler let through (a failing PreFilter, else the first failing filter of each node, the most
common one).

What each run measured is in :class:`~app.sim.whatifresult.ConfigurationResult` (:mod:`app.sim.whatifreport`
computes the figures and draws the table and the plot).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from operator import itemgetter
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from app.framework.config import SchedulerConfig
from app.sim.kubefit import KubeFit
from app.sim.service import InProcessService, settle
from app.sim.transport import AsyncPoster
from app.sim.whatifreport import measure_cluster
from app.sim.whatifresult import ConfigurationResult, WhatIfResult
from app.sim.whatifworkload import gang_of, is_pending, queue_order

#: How a pod is named in results: ``namespace/name``.
_HOST = itemgetter("Host")
_SCORE = itemgetter("Score")
#: Seconds between two looks at whether the service holds a gang member at Permit.
PERMIT_POLL_SECONDS = 0.0005
#: Seconds a service may take to load the snapshot's files.
LOAD_TIMEOUT = 600.0
#: Reason of a gang member not tried because an earlier member of its gang failed.
GANG_NOT_TRIED = "Coscheduling: not tried, an earlier member of its gang failed"


class WhatIfError(RuntimeError):
    """A verb answered with an HTTP error, or the service could not be started (the message says which)."""


@dataclass(frozen=True, slots=True)
class Configuration:
    """A named plugin configuration to run."""

    name: str
    config: SchedulerConfig


def _key(pod: dict[str, Any]) -> str:
    meta = pod["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


@dataclass(frozen=True, slots=True)
class RunOptions:
    """How every configuration places the pods.

    Attributes:
        seed: seed of kube-scheduler's tie-breaks (the same for every configuration).
        percentage: kube-scheduler's ``percentageOfNodesToScore`` (0: its adaptive default; 100: every node).
        scheduler_names: the snapshot's pending pods placed are those whose ``spec.schedulerName`` (absent:
            ``default-scheduler``) is one of these; empty: every pending pod.
        prepare: a coroutine function run on the service's loop with its state once the cluster is loaded and
            before any pod is placed, e.g. writing the nodes' mid resources (``koord sim whatif --mid-tier``,
            which injects it from the CLI: app.sim does not import the manager). Module-level, so it pickles
            to the worker processes.
    """

    seed: int = 42
    percentage: int = 0
    scheduler_names: tuple[str, ...] = ()
    prepare: Callable[[Any], Coroutine[Any, Any, None]] | None = None

    def places(self, pod: dict[str, Any]) -> bool:
        """Whether a pending pod is one this run places (by its scheduler name)."""
        if not self.scheduler_names:
            return True
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in self.scheduler_names


class WhatIfRun:
    """One configuration's run on a started service (its coroutine :meth:`run` runs on the server's loop).

    Args:
        service: the started service, its cluster loaded.
        name: the configuration's name.
        created: pods to create before placing them (a workload), or None: place the cluster's pending pods.
        options: seed, ``percentageOfNodesToScore`` and which pending pods (:class:`RunOptions`).
        progress: called with (pods done, pods in all) now and then.
    """

    def __init__(
        self,
        service: InProcessService,
        name: str,
        created: list[dict[str, Any]] | None,
        options: RunOptions,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.options = options
        self.service = service
        self.created = created
        self.rng = np.random.default_rng(options.seed)
        self.progress = progress
        self.result = ConfigurationResult(name)
        self._poster = AsyncPoster("127.0.0.1", service.port)
        self._gang_posters: list[AsyncPoster] = []
        self._placed: dict[str, list[str]] = {}  # node -> uids placed by this run

    async def _post(self, path: str, body: dict[str, Any], poster: AsyncPoster | None = None) -> Any:
        status, content = await (poster or self._poster).post(path, orjson.dumps(body))
        if status != 200:
            raise WhatIfError(f"{path} answered {status}: {content.decode(errors='replace')}")
        return orjson.loads(content)

    async def run(self) -> ConfigurationResult:
        """Place every pod and measure the cluster; returns :attr:`result`.

        Raises:
            WhatIfError: a verb answered with an HTTP error.
        """
        cache = self.service.state.cache
        source = self.service.source
        if self.created is not None:
            for pod in self.created:
                await source.create_or_update(pod)
            pods = queue_order(self.created, created_in_order=True)
        else:
            pending = [
                uid
                for uid, p in cache.pods.items()
                if not p.node_name and not p.terminated and uid not in cache.assumed
            ]
            pods = queue_order(
                [
                    o
                    for uid in pending
                    if (o := cache.pod_objects.get(uid)) is not None and is_pending(o) and self.options.places(o)
                ]
            )
        await settle()
        names = sorted(cache.nodes)
        fit = KubeFit(cache, names, self.options.percentage)
        self._positions = {n: i for i, n in enumerate(names)}
        node_names = np.array(names, dtype=object)
        start = time.perf_counter()
        try:
            i = 0
            while i < len(pods):
                gang = gang_of(pods[i])
                if gang is None:
                    await self._schedule_one(pods[i], fit, node_names)
                    i += 1
                else:
                    j = i
                    while j < len(pods) and gang_of(pods[j]) == gang:
                        j += 1
                    await self._schedule_gang(pods[i:j], fit, node_names)
                    i = j
                if self.progress is not None:
                    self.progress(i, len(pods))
        finally:
            await self._poster.aclose()
            for poster in self._gang_posters:
                await poster.aclose()
        self.result.wall_seconds = time.perf_counter() - start
        await settle()
        self.result.figures = await measure_cluster(self.service, self._placed)
        return self.result

    def _current(self, pod: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
        """The cache's parse and object of ``pod`` (what kube-scheduler's informer holds), or None."""
        cache = self.service.state.cache
        meta = pod["metadata"]
        info = cache.find_pod(str(meta.get("uid") or ""), meta.get("namespace") or "default", meta["name"])
        if info is None:
            return None
        obj = cache.pod_objects.get(info.uid)
        return info, obj if obj is not None else pod

    async def _choose(self, pod: dict[str, Any], fit: KubeFit, node_names: Any) -> tuple[str | None, str, Any]:
        """One scheduling cycle up to the choice: (node, "", the pod's parse) or (None, the reason, parse)."""
        current = self._current(pod)
        if current is None:
            return None, "the service rejected the pod (see its log)", None
        info, obj = current
        positions, kube_reasons = fit.feasible(info, obj.get("spec") or {})
        if not len(positions):
            reason = min(kube_reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0] if kube_reasons else "no nodes"
            return None, reason, info
        sent: list[str] = node_names[positions].tolist()
        answer = await self._post("/filter", {"Pod": obj, "Nodes": None, "NodeNames": sent})
        if answer.get("Error"):
            return None, f"filter: {answer['Error']}", info
        survivors: list[str] = answer.get("NodeNames") or []
        if not survivors:
            return None, await self._explain(obj, sent), info
        if len(survivors) == 1:
            return survivors[0], "", info
        scores = await self._post("/prioritize", {"Pod": obj, "Nodes": None, "NodeNames": survivors})
        hosts: list[str] = list(map(_HOST, scores))
        values = np.fromiter(map(_SCORE, scores), dtype=np.int64, count=len(scores))
        top = np.flatnonzero(values == values.max())
        return hosts[int(top[self.rng.integers(len(top))])], "", info

    async def _explain(self, obj: dict[str, Any], names: list[str]) -> str:
        """Why no node passed the service's filters, as ``koord explain`` words it (module docstring)."""
        answer = await self._post("/apis/v1/explain", {"Pod": obj, "Nodes": None, "NodeNames": names})
        for plugin, verdict in (answer.get("preFilter") or {}).items():
            if verdict.get("status") not in ("Success", "Skip"):
                return f"{plugin}: {verdict.get('reason') or verdict.get('status')}"
        reasons: Counter[str] = Counter()
        for info in (answer.get("nodes") or {}).values():
            for plugin, verdict in (info.get("filter") or {}).items():
                if verdict.get("status") not in ("Success", "Skip"):
                    reasons[f"{plugin}: {verdict.get('reason') or verdict.get('status')}"] += 1
                    break
        if not reasons:
            return "filter: no node passed"
        return min(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[0]

    def _record(self, pod: dict[str, Any], node: str | None, reason: str, uid: str = "") -> None:
        key = _key(pod)
        self.result.placements[key] = node
        if node is None:
            self.result.reasons[key] = reason
        else:
            self._placed.setdefault(node, []).append(uid)

    async def _schedule_one(self, pod: dict[str, Any], fit: KubeFit, node_names: Any) -> None:
        node, reason, info = await self._choose(pod, fit, node_names)
        if node is None:
            self._record(pod, None, reason)
            return
        body = {"PodName": info.name, "PodNamespace": info.namespace, "PodUID": info.uid, "Node": node}
        bound = await self._post("/bind", body)
        await settle()
        if bound.get("Error"):
            self._record(pod, None, f"bind: {bound['Error']}")
        else:
            fit.assume(self._positions[node])
            self._record(pod, node, "", info.uid)

    async def _schedule_gang(self, members: list[dict[str, Any]], fit: KubeFit, node_names: Any) -> None:
        """Every member of one gang, each ``/bind`` on its own connection held at Permit (module docstring)."""
        self.result.gangs["planned"] += 1
        while len(self._gang_posters) < len(members):
            self._gang_posters.append(AsyncPoster("127.0.0.1", self.service.port, timeout=960.0))
        inflight: list[tuple[dict[str, Any], str, str, asyncio.Task[tuple[int, bytes]]]] = []
        failed = False
        waiting = self.service.state.framework.waiting_pods
        for pod in members:
            if failed:
                self._record(pod, None, GANG_NOT_TRIED)
                continue
            node, reason, info = await self._choose(pod, fit, node_names)
            if node is None:
                failed = True
                self._record(pod, None, reason)
                continue
            body = {"PodName": info.name, "PodNamespace": info.namespace, "PodUID": info.uid, "Node": node}
            poster = self._gang_posters[len(inflight)]
            task = asyncio.ensure_future(poster.post("/bind", orjson.dumps(body)))
            fit.assume(self._positions[node])  # kube-scheduler assumes the pod before its binding cycle
            while not task.done():  # the next member's /filter must see this one assumed
                await settle()
                if waiting.get(info.uid) is not None:
                    break
                await asyncio.sleep(PERMIT_POLL_SECONDS)
            inflight.append((pod, node, info.uid, task))
        for pod, node, uid, task in inflight:
            status, content = await task
            if status != 200:
                raise WhatIfError(f"/bind answered {status}: {content.decode(errors='replace')}")
            error = orjson.loads(content).get("Error")
            if error:
                failed = True
                fit.forget(self._positions[node])
                self._record(pod, None, f"bind: {error}")
            else:
                self._record(pod, node, "", uid)
        await settle()
        self.result.gangs["failed" if failed else "completed"] += 1


def run_configuration(
    cluster: Path,
    configuration: Configuration,
    created: list[dict[str, Any]] | None,
    options: RunOptions,
    progress: Callable[[int, int], None] | None = None,
) -> ConfigurationResult:
    """Start a service with ``configuration`` on the cluster files at ``cluster``, place the pods (``created``,
    or the cluster's pending pods when None), measure, stop the service.

    Raises:
        ConfigError: the configuration is invalid.
        ServiceError: the service did not start (e.g. the cluster files cannot be loaded).
        WhatIfError: a verb answered with an HTTP error.
    """
    t0, cpu0 = time.perf_counter(), time.process_time()
    gc.disable()  # the load allocates millions of long-lived objects: collections meanwhile only cost
    try:
        # a start that fails (malformed files) is reported by the caller, naming the file: no uvicorn traceback
        service = InProcessService(
            configuration.config, cluster=cluster, start_timeout=LOAD_TIMEOUT, log_level="critical"
        ).__enter__()
    finally:
        gc.enable()
    try:
        if options.prepare is not None:
            service.call(functools.partial(options.prepare, service.state))
        loaded = time.perf_counter() - t0
        run = WhatIfRun(service, configuration.name, created, options, progress)
        result = service.call(run.run)
        result.cpu_seconds = time.process_time() - cpu0
    finally:
        service.close()
        gc.unfreeze()  # the service froze its cluster after the load: let this run's objects go
        gc.collect()
    result.load_seconds = loaded
    return result


def _run_one(
    cluster: Path, configuration: Configuration, created: list[dict[str, Any]] | None, options: RunOptions
) -> ConfigurationResult:
    """:func:`run_configuration` without progress (a worker process's entry point).

    Raises:
        WhatIfError: any failure of the run, its message kept (the typed errors do not all survive pickling).
    """
    from app.framework.config import ConfigError
    from app.sim.service import ServiceError

    try:
        return run_configuration(cluster, configuration, created, options, None)
    except ConfigError as exc:
        raise WhatIfError(f"invalid config {configuration.name}: {exc}") from None
    except ServiceError as exc:
        raise WhatIfError(str(exc)) from None


def run_whatif(
    cluster: Path,
    configurations: list[Configuration],
    created: list[dict[str, Any]] | None,
    options: RunOptions,
    progress: Callable[[str, int, int], None] | None = None,
    jobs: int = 1,
) -> WhatIfResult:
    """Run every configuration on its own copy of the cluster (see :func:`run_configuration`): one after
    another in this process (``jobs`` 1: ``progress`` gets each pod), or at once in up to ``jobs`` worker
    processes (``progress`` hears of each configuration when it is done). Results in the order given.

    Raises:
        as :func:`run_configuration`.
    """
    if jobs > 1 and len(configurations) > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(jobs, len(configurations)), mp_context=context) as pool:
            futures = [pool.submit(_run_one, cluster, c, created, options) for c in configurations]
            out = []
            for configuration, future in zip(configurations, futures, strict=True):
                out.append(future.result())
                if progress is not None:
                    progress(configuration.name, 1, 1)
        return WhatIfResult(out)
    results = []
    for configuration in configurations:

        def report(done: int, total: int, name: str = configuration.name) -> None:
            if progress is not None:
                progress(name, done, total)

        results.append(run_configuration(cluster, configuration, created, options, report))
    return WhatIfResult(results)
