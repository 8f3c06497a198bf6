import asyncio

from app.client.errors import Forbidden, NotFound, TooManyRequests
from app.descheduler.evictor import PodEvictor, TokenBucket


class FakeClient:
    def __init__(self, failures):
        self.failures = list(failures)
        self.evicted = []
        self.deleted = []

    async def evict(self, namespace, name, uid, reason):
        if self.failures:
            raise self.failures.pop(0)
        self.evicted.append((namespace, name, uid))

    async def delete(self, kind, name, *, namespace=None):
        self.deleted.append(name)


def _evict(client, attempts=5):
    sleeps = []

    async def sleep(s):
        sleeps.append(s)

    outcome = asyncio.run(PodEvictor(client, attempts=attempts, backoff=1.0, sleep=sleep).evict("ns", "p", "u", "r"))
    return outcome, sleeps


def test_pdb_429_is_retried_with_retry_after_then_backoff():
    client = FakeClient([TooManyRequests("pdb", retry_after=7), TooManyRequests("pdb")])
    outcome, sleeps = _evict(client)
    assert outcome.evicted and outcome.attempts == 3
    assert sleeps == [7, 2.0]
    assert client.evicted == [("ns", "p", "u")] and client.deleted == []


def test_persistent_429_gives_up_and_never_deletes():
    client = FakeClient([TooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.")] * 3)
    outcome, sleeps = _evict(client, attempts=3)
    assert not outcome.evicted and "disruption budget" in outcome.error
    assert len(sleeps) == 2 and client.deleted == [] and client.evicted == []


def test_gone_pod_counts_as_done_and_other_errors_are_reported():
    assert _evict(FakeClient([NotFound("gone")]))[0].evicted
    outcome, sleeps = _evict(FakeClient([Forbidden("rbac")]))
    assert not outcome.evicted and "rbac" in outcome.error and sleeps == []


def test_token_bucket_paces_after_the_burst():
    now = [0.0]
    bucket = TokenBucket(qps=2, burst=1, clock=lambda: now[0])
    assert bucket.delay() == 0
    assert bucket.delay() == 0.5
    now[0] = 10.0
    assert bucket.delay() == 0
    assert TokenBucket(0, 1).delay() == 0


def test_a_round_counts_evictions_by_node_namespace_and_reason():
    from prometheus_client import generate_latest

    from app.descheduler.config import parse_config
    from app.descheduler.runner import Descheduler

    from .builders import metric, node, pod, view
    from .test_cli import CONFIG

    client = FakeClient([TooManyRequests("pdb")] * 5)  # the first pod stays blocked by its PDB
    desched = Descheduler(parse_config(CONFIG), PodEvictor(client, attempts=1))
    hot = {f"default/p{i}": {"cpu": "2"} for i in range(4)}
    v = view(
        [node("hot"), node("cold")],
        [pod(f"p{i}", "hot") for i in range(4)],
        [metric("hot", {"cpu": "1"}, hot), metric("cold", {"cpu": "1"}, {})],
    )
    report = asyncio.run(desched.run_once(v))
    assert [e["evicted"] for e in report["evictions"]] == [False]
    assert "429" in report["evictions"][0]["error"] and client.deleted == []
    client.failures = []
    v.now += 1
    report = asyncio.run(desched.run_once(v))
    assert [e["evicted"] for e in report["evictions"]] == [True]
    text = generate_latest(desched.metrics.registry).decode()
    assert 'koord_descheduler_pods_evicted_total{namespace="default",node="hot",reason="LowNodeLoad"} 1.0' in text
