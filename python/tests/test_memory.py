"""Memory: a 1 GiB object moves without the process growing by its size,
and registrations live exactly as long as the program keeps the buffer."""

import gc
import mmap
import threading
import weakref

import numpy as np
import psutil
import pytest

import hipobj
from conftest import MIB, make_client

GIB = 1 << 30


def fill(a, seed):
    """A cheap, seed-dependent pattern (uint64 words)."""
    w = a.view(np.uint64)
    w[:] = np.arange(w.size, dtype=np.uint64)
    w *= np.uint64(0x9E3779B97F4A7C15)
    w ^= np.uint64(seed)


def same_as_pattern(a, seed):
    chunk = np.empty(64 * MIB, np.uint8)
    w = chunk.view(np.uint64)
    for off in range(0, a.size, chunk.size):
        n = min(chunk.size, a.size - off)
        w[:] = np.arange(off // 8, off // 8 + w.size, dtype=np.uint64)
        w *= np.uint64(0x9E3779B97F4A7C15)
        w ^= np.uint64(seed)
        if not np.array_equal(a[off : off + n], chunk[:n]):
            return False
    return True


class PeakRss:
    """The process's largest RSS while the block runs, sampled by a thread
    (the transfer releases the GIL, so the sampler runs during it)."""

    def __enter__(self):
        self.proc = psutil.Process()
        self.start = self.proc.memory_info().rss
        self.peak = self.start
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample)
        self.thread.start()
        return self

    def _sample(self):
        while not self.done.wait(0.005):
            self.peak = max(self.peak, self.proc.memory_info().rss)

    def __exit__(self, *exc):
        self.done.set()
        self.thread.join()
        self.peak = max(self.peak, self.proc.memory_info().rss)

    @property
    def growth(self):
        return self.peak - self.start


@pytest.fixture(scope="module")
def gib_object(server, client):
    name = "py-gib"
    client.create_bucket(name)
    # A loaded CI runner's store may take long to complete the upload of 16
    # parts: wider deadlines than the defaults (not asserted timings).
    slow = make_client(server, request_timeout=300.0, timeout_per_gib=300.0)
    src = np.empty(GIB, np.uint8)
    fill(src, 11)
    with PeakRss() as m:
        r = slow.put_object(name, "gib", src)
    assert (r.bytes, r.path, r.parts) == (GIB, "rdma", 16)
    # The PUT read the array in place.
    assert m.growth < GIB // 8, m.growth
    slow.release(src)
    del src
    yield name, "gib"
    client.delete_object(name, "gib")


@pytest.mark.parametrize("path", ["rdma", "http"])
def test_a_gib_object_moves_without_the_process_growing_by_its_size(server, client, gib_object, path):
    bucket, key = gib_object
    c = make_client(server, rdma=(path == "rdma"), request_timeout=300.0, timeout_per_gib=300.0)
    dst = np.ones(GIB, np.uint8)  # touched: its pages count before the GET
    gc.collect()
    with PeakRss() as m:
        r = c.get_object(bucket, key, dst)
    assert (r.bytes, r.path) == (GIB, path)
    assert m.growth < GIB // 8, f"RSS grew by {m.growth >> 20} MiB during a 1 GiB GET"
    assert same_as_pattern(dst, 11)
    c.release(dst)


def test_a_dropped_array_is_released_and_only_then_freed(client, bucket):
    data = np.arange(MIB, dtype=np.uint8)
    client.put_object(bucket, "k", data)
    before = client.registered_buffers
    a = np.zeros(MIB, np.uint8)
    gone = weakref.ref(a)
    client.get_object(bucket, "k", a)
    assert np.array_equal(a, data)
    assert client.registered_buffers == before + 1
    del a
    gc.collect()
    # The registration keeps the memory: it cannot be freed under it.
    assert gone() is not None
    # The next look (any call) sees the program dropped it: released, freed.
    assert client.registered_buffers == before
    assert gone() is None


def test_a_registered_bytearray_cannot_move_until_released(client, bucket):
    data = bytes(range(256)) * 4096
    client.put_object(bucket, "k", data)
    ba = bytearray(len(data))
    client.get_object(bucket, "k", ba)
    with pytest.raises(BufferError):
        ba.extend(b"x")  # a resize could move the memory: refused while registered
    assert client.release(ba)
    assert not client.release(ba)
    ba.extend(b"x" * MIB)  # moves (realloc) now
    ba[:] = b"\0" * len(ba)
    r = client.get_object(bucket, "k", ba)
    assert r.bytes == len(data) and bytes(ba[: len(data)]) == data


def test_a_registered_mmap_cannot_be_closed_until_released(client, bucket):
    data = b"m" * MIB
    client.put_object(bucket, "k", data)
    m = mmap.mmap(-1, MIB)
    client.get_object(bucket, "k", m)
    with pytest.raises(BufferError):
        m.close()
    client.release(m)
    m.close()


def test_buffers_come_and_go_without_harm(server, bucket, client):
    """Many buffers, freed, resized and reallocated (addresses get reused)
    through a client with few registrations: every byte lands right."""
    objs = {}
    for i, n in enumerate([4096, 65536, MIB, 3 * MIB + 1]):
        objs[n] = np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8).tobytes()
        client.put_object(bucket, f"o{n}", objs[n])
    c = make_client(server, max_registrations=4)
    kept = []
    for i in range(120):
        n = list(objs)[i % len(objs)]
        kind = i % 3
        if kind == 0:
            buf = bytearray(n)
        elif kind == 1:
            buf = np.zeros(n + i, np.uint8)[i:]
        else:
            buf = memoryview(bytearray(n + 7))[7:]
        r = c.get_object(bucket, f"o{n}", buf)
        assert r.bytes == n and bytes(buf) == objs[n], (i, n, kind)
        if i % 10 == 0:
            kept.append(buf)  # some stay alive (and registered, up to the limit)
        del buf
        assert c.registered_buffers <= 4
    del kept
    gc.collect()
    assert c.registered_buffers == 0


def test_without_the_client_library_nothing_is_registered(server, bucket, client):
    data = b"h" * (MIB + 5)
    client.put_object(bucket, "k", data)
    c = make_client(server, rdma=False)
    assert not c.rdma_available
    buf = bytearray(len(data))
    r = c.get_object(bucket, "k", buf)
    assert (r.path, r.bytes) == ("http", len(data)) and bytes(buf) == data
    assert c.registered_buffers == 0
    buf.extend(b"ok")  # never exported past the call
    with pytest.raises(hipobj.BufferTooSmallError):
        c.get_object(bucket, "k", bytearray(10))
