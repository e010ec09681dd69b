"""A client alive (and busy) in a process that forks: each child opens a
client of its own and moves bytes by RDMA. Before the extension's runtime
dropped parking_lot (whose process-wide table of parked threads a child
inherits with the parent's stale entries), such children hung or crashed
now and then."""

import os
import threading
import time
import uuid

from conftest import MIB, make_client


def _child(server, bucket, data, n):
    try:
        c = make_client(server, require_rdma=True, request_timeout=10.0)
        buf = bytearray(len(data))
        for _ in range(2):
            c.get_object(bucket, "k", buf)
            assert bytes(buf) == data
        c.put_object(bucket, f"child-{n}", data)
        c.close()
        os._exit(0)
    except BaseException:  # noqa: BLE001 - the exit status says it
        os._exit(1)


def test_children_forked_beside_a_busy_client_work(server, client):
    bucket = f"py-fork-{uuid.uuid4().hex[:8]}"
    client.create_bucket(bucket)
    data = os.urandom(MIB)
    client.put_object(bucket, "k", data)
    stop = threading.Event()

    def busy():
        buf = bytearray(len(data))
        while not stop.is_set():
            client.get_object(bucket, "k", buf)

    t = threading.Thread(target=busy, daemon=True)
    t.start()
    statuses = []
    try:
        for rnd in range(8):
            pids = []
            for w in range(2):
                pid = os.fork()
                if pid == 0:
                    _child(server, bucket, data, rnd * 2 + w)
                pids.append(pid)
            for pid in pids:
                deadline = time.monotonic() + 60
                while True:
                    done, status = os.waitpid(pid, os.WNOHANG)
                    if done:
                        statuses.append(os.waitstatus_to_exitcode(status))
                        break
                    if time.monotonic() > deadline:
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        statuses.append("hung")
                        break
                    time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert statuses == [0] * 16, statuses
    buf = bytearray(len(data))
    for n in range(16):
        client.get_object(bucket, f"child-{n}", buf)
        assert bytes(buf) == data
