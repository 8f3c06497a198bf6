"""Benchmark of the pod admission webhooks over real HTTP at 100 concurrent reviews.

What it measures
    ``POST /mutate-pod`` and ``POST /validate-pod`` served by the real app (``create_app`` on the
    embedded example cluster, which holds a ClusterColocationProfile) under a real uvicorn server
    (one worker, httptools, uvloop) in a child process. The client keeps ``--concurrency`` keep-alive
    connections busy at once (raw asyncio streams, HTTP/1.1), each sending AdmissionReviews built from
    the captured wire sample (``tests/fixtures/wire-samples/admissionreview.json``): half of
    the mutating reviews match the profile (a JSONPatch is computed and answered), half do not.

    ``server_ms``: time the app spends on one review (ASGI call to last body byte, measured inside
    the server), i.e. the per-review cost the API server's webhook timeout sees on top of the
    network. ``client_ms``: round trip seen by the client, which includes queueing behind the other
    in-flight reviews of the single worker.

Target
    server p99 <= 5 ms per review at 100 concurrent reviews (``meets_target``).

Run from the repository root::

    .venv/bin/python bench/webhook.py [--concurrency 100] [--reviews 5000]

The result is one JSON object on stdout; a wrong answer exits non-zero with the reason.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import multiprocessing
import socket
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import orjson

REPO = Path(__file__).resolve().parents[1]
WIRE = REPO / "tests" / "fixtures" / "wire-samples" / "admissionreview.json"
TARGET_P99_MS = 5.0


def _serve(port: int, ready: Any, stats: Any) -> None:
    """Child process: the app, wrapped to time each request, under uvicorn."""
    import uvicorn

    sys.path.insert(0, str(REPO))
    from app.server.app import create_app
    from app.sources.files import FileSource

    app = create_app(FileSource(REPO / "examples" / "cluster", poll_interval=0, restamp_interval=0))
    timings: list[float] = []

    async def timed(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == "/bench-stats":
            body = orjson.dumps(timings)
            timings.clear()
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-length", str(len(body)).encode())],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        start = time.perf_counter()

        async def send_timed(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                timings.append(time.perf_counter() - start)

        await app(scope, receive, send_timed)

    config = uvicorn.Config(
        timed, host="127.0.0.1", port=port, log_level="warning", http="httptools", loop="uvloop", lifespan="on"
    )
    server = uvicorn.Server(config)

    async def main() -> None:
        task = asyncio.create_task(server.serve())
        while not server.started:
            await asyncio.sleep(0.01)
        gc.freeze()  # the loaded cluster is long-lived: keep it out of every GC pass, as a service would
        ready.set()
        await task

    asyncio.run(main())


def _bodies() -> list[tuple[str, bytes, bool]]:
    """(path, body, expects a patch) for the review mix."""
    base = orjson.loads(WIRE.read_text())
    plain = copy.deepcopy(base)
    batch = copy.deepcopy(base)
    pod = batch["request"]["object"]
    pod["metadata"]["namespace"] = batch["request"]["namespace"] = "batch"
    pod["metadata"]["labels"]["koordinator.sh/enable-colocation"] = "true"
    out = []
    for i in range(200):
        for path, body, expect in (
            ("/mutate-pod", plain, False),
            ("/mutate-pod", batch, True),
            ("/validate-pod", plain, False),
        ):
            b = copy.deepcopy(body)
            b["request"]["uid"] = f"bench-{i}-{path}-{expect}"
            out.append((path, orjson.dumps(b), expect))
    return out


async def _request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, path: str, body: bytes
) -> tuple[int, bytes]:
    writer.write(
        f"POST {path}?timeout=5s HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return status, await reader.readexactly(length)


async def _client(port: int, concurrency: int, reviews: int, warmup: int) -> tuple[list[float], float]:
    bodies = _bodies()
    latencies: list[float] = []
    counter = iter(range(warmup + reviews))
    started = time.perf_counter()

    async def worker() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for n in counter:
            path, body, expect = bodies[n % len(bodies)]
            t0 = time.perf_counter()
            status, answer = await _request(reader, writer, path, body)
            elapsed = time.perf_counter() - t0
            if status != 200:
                raise SystemExit(f"{path} answered HTTP {status}: {answer[:200]!r}")
            response = orjson.loads(answer)["response"]
            if response["allowed"] is not True or ("patch" in response) != expect:
                raise SystemExit(f"{path}: unexpected answer {response}")
            if n >= warmup:
                latencies.append(elapsed)
        writer.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies, time.perf_counter() - started


def _stats(values: list[float]) -> dict[str, float]:
    arr = np.asarray(values) * 1000
    return {
        "p50_ms": round(float(np.percentile(arr, 50)), 3),
        "p99_ms": round(float(np.percentile(arr, 99)), 3),
        "max_ms": round(float(arr.max()), 3),
    }


def main() -> None:
    """Run the benchmark and print its JSON result."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--reviews", type=int, default=5000)
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_serve, args=(port, ready, None), daemon=True)
    proc.start()
    try:
        if not ready.wait(60):
            raise SystemExit("server did not start")
        latencies, wall = asyncio.run(_client(port, args.concurrency, args.reviews, args.warmup))

        async def fetch_stats() -> list[float]:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /bench-stats HTTP/1.1\r\nHost: bench\r\n\r\n")
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(x.split(b":", 1)[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length")
            )
            data: list[float] = orjson.loads(await reader.readexactly(length))
            writer.close()
            return data

        server = asyncio.run(fetch_stats())[args.warmup :]
    finally:
        proc.terminate()
        proc.join(10)
    server_stats = _stats(server)
    result = {
        "concurrency": args.concurrency,
        "reviews": args.reviews,
        "server_ms": server_stats,
        "client_ms": _stats(latencies),
        "reviews_per_second": round(len(latencies) / wall, 1),
        "target_p99_ms": TARGET_P99_MS,
        "meets_target": server_stats["p99_ms"] <= TARGET_P99_MS,
    }
    sys.stdout.write(orjson.dumps(result).decode() + "\n")


if __name__ == "__main__":
    main()
