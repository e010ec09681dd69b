"""The GIL is released while bytes move: two transfers are in flight at
once while a third thread runs Python; the asyncio API runs calls
concurrently; a buffer in use cannot be released."""

import asyncio
import threading

import numpy as np
import pytest

import hipobj
import hipobj.aio
from conftest import MIB, make_client


def is_rdma_get(method, path, headers, prefix=""):
    """Whether a request starts an RDMA GET of a key under `prefix`: the
    handshake flow's GET with a token, or a hipobj-rc-v2 PREPARE of a GET
    (its target, `/bucket/key`, in a header)."""
    if method == "GET" and "x-amz-rdma-token" in headers:
        return f"/{prefix}" in path
    if method == "POST" and path == "/.hipobj-rc/prepare" and headers.get("x-amz-rdma-op") == "GET":
        return f"/{prefix}" in (headers.get("x-amz-rdma-target") or "")
    return False


def gate_transfers(proxy, prefix, parties):
    """Holds each RDMA GET of a key under `prefix` at a barrier of
    `parties` (the held requests and the test's own thread)."""
    barrier = threading.Barrier(parties, timeout=120)

    def gate(method, path, headers):
        if is_rdma_get(method, path, headers, prefix):
            barrier.wait()

    proxy.gate = gate
    return barrier


def test_two_transfers_in_flight_while_a_third_thread_runs_python(proxy_factory, client, bucket):
    data = {i: np.random.default_rng(i).integers(0, 256, 4 * MIB, dtype=np.uint8) for i in (1, 2)}
    for i, d in data.items():
        client.put_object(bucket, f"gil-{i}", d)
    proxy = proxy_factory()
    c = make_client(proxy.url, require_rdma=True)
    # Both GETs must reach the proxy, and this thread must run Python, before
    # any of them goes on: if a call held the GIL, neither the proxy's
    # threads nor this one could run and the barrier would break.
    barrier = gate_transfers(proxy, f"{bucket}/gil-", 3)
    out = {i: np.zeros(4 * MIB, np.uint8) for i in data}
    results, errors = {}, []

    def fetch(i):
        try:
            results[i] = c.get_object(bucket, f"gil-{i}", out[i])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=fetch, args=(i,)) for i in data]
    for t in threads:
        t.start()
    progressed = sum(i * i for i in range(200_000))  # Python work meanwhile
    barrier.wait()
    for t in threads:
        t.join()
    assert not errors, errors
    assert progressed == sum(i * i for i in range(200_000))
    for i in data:
        assert results[i].path == "rdma" and np.array_equal(out[i], data[i])


def test_a_buffer_in_use_cannot_be_released(proxy_factory, client, bucket):
    client.put_object(bucket, "busy", b"b" * MIB)
    proxy = proxy_factory()
    c = make_client(proxy.url)
    arrived, go = threading.Event(), threading.Event()

    def gate(method, path, headers):
        if is_rdma_get(method, path, headers):
            arrived.set()
            assert go.wait(120)

    proxy.gate = gate
    buf = bytearray(MIB)
    done = []
    t = threading.Thread(target=lambda: done.append(c.get_object(bucket, "busy", buf)))
    t.start()
    assert arrived.wait(120)
    # The transfer is held at the proxy: its registration is in use.
    with pytest.raises(BufferError, match="in use"):
        c.release(buf)
    assert c.release_all() == 0
    go.set()
    t.join()
    assert done[0].bytes == MIB and bytes(buf) == b"b" * MIB
    assert c.release(buf)
    assert c.registered_buffers == 0


def test_asyncio_calls_run_concurrently(proxy_factory, client, bucket):
    data = [np.random.default_rng(10 + i).integers(0, 256, 2 * MIB, dtype=np.uint8) for i in range(3)]
    for i, d in enumerate(data):
        client.put_object(bucket, f"aio-{i}", d)
    proxy = proxy_factory()
    barrier = gate_transfers(proxy, f"{bucket}/aio-", 4)

    async def main():
        async with hipobj.aio.Client(endpoint=proxy.url, access_key="hipobj-test-key", secret_key="hipobj-test-secret") as c:
            out = [np.zeros(2 * MIB, np.uint8) for _ in data]
            gets = [c.get_object(bucket, f"aio-{i}", o) for i, o in enumerate(out)]
            # The loop stays free: it waits at the barrier in a thread of its own.
            rs = await asyncio.gather(*gets, asyncio.to_thread(barrier.wait))
            for r, o, d in zip(rs, out, data):
                assert r.path == "rdma" and np.array_equal(o, d)
            info = await c.head_object(bucket, "aio-0")
            assert info.size == 2 * MIB
            keys = [o.key async for o in c.list_all(bucket, prefix="aio-")]
            assert keys == ["aio-0", "aio-1", "aio-2"]
            r = await c.put_object(bucket, "aio-put", data[0])
            assert r.path == "rdma"
            with pytest.raises(hipobj.NotFoundError):
                await c.head_object(bucket, "nope")
            assert c.rdma_available

    asyncio.run(main())
