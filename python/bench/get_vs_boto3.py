"""get_object into a numpy array by RDMA (hipobj) against boto3's
get_object()['Body'].read() of the same object from the same server, in
one run: 64 MiB and 1 GiB.

    python3 python/bench/get_vs_boto3.py [--server target/release/hipobj-test-server]
        [--endpoint http://host:port] [--reps 5] [--sizes 64MiB,1GiB]

Without --endpoint it starts the test server (port 0, the software RDMA
provider). Each cell is the median of --reps GETs after one warm-up; CPU
is this Python process's user + system seconds (getrusage) per GiB moved,
so it counts the client's threads (hipobj's runtime, boto3's reads), not
the server's. Also measured: hipobj without RDMA (rdma=False: plain HTTP
into the same array), to separate the transport from the API.
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

import boto3
import numpy as np
from botocore.config import Config

import hipobj

AK, SK = "hipobj-test-key", "hipobj-test-secret"
GIB = 1 << 30


def size_of(s):
    s = s.strip()
    for suffix, mul in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s.endswith(suffix):
            return int(s[: -len(suffix)]) * mul
    return int(s)


def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def measure(fn, reps):
    fn()  # warm-up (connections, registration, page faults)
    walls, cpus = [], []
    for _ in range(reps):
        c0, t0 = cpu(), time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t0)
        cpus.append(cpu() - c0)
    return statistics.median(walls), statistics.median(cpus)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint")
    ap.add_argument("--server", default="target/release/hipobj-test-server")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--sizes", default="64MiB,1GiB")
    a = ap.parse_args()
    proc = None
    endpoint = a.endpoint
    if endpoint is None:
        proc = subprocess.Popen(
            [a.server, "0", "--rdma-device", "soft0"],
            stdout=subprocess.PIPE,
            env={**os.environ, "RUST_LOG": "warn"},
        )
        endpoint = proc.stdout.readline().decode().split()[-1]
    try:
        c = hipobj.Client(endpoint=endpoint, access_key=AK, secret_key=SK, require_rdma=True)
        http = hipobj.Client(endpoint=endpoint, access_key=AK, secret_key=SK, rdma=False)
        s3 = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id=AK,
            aws_secret_access_key=SK,
            region_name="us-east-1",
            config=Config(s3={"addressing_style": "path"}),
        )
        c.create_bucket("bench")
        rows = []
        for size in [size_of(s) for s in a.sizes.split(",")]:
            key = f"obj-{size}"
            src = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8)
            c.put_object("bench", key, src)
            dst = np.zeros(size, np.uint8)

            def by_rdma():
                r = c.get_object("bench", key, dst)
                assert r.path == "rdma" and r.bytes == size

            def by_hipobj_http():
                r = http.get_object("bench", key, dst)
                assert r.bytes == size

            def by_boto3():
                body = s3.get_object(Bucket="bench", Key=key)["Body"].read()
                assert len(body) == size

            for name, fn in (
                ("hipobj get_object into numpy, RDMA", by_rdma),
                ("hipobj get_object into numpy, HTTP (rdma=False)", by_hipobj_http),
                ("boto3 get_object()['Body'].read()", by_boto3),
            ):
                wall, cpu_s = measure(fn, a.reps)
                rows.append((size, name, wall, size / wall / GIB, cpu_s / (size / GIB)))
                print(f"{size >> 20:>5} MiB  {name:<48} {wall:8.3f} s  {size / wall / GIB:6.2f} GiB/s  "
                      f"{cpu_s / (size / GIB):6.2f} CPU-s/GiB", flush=True)
            assert np.array_equal(dst, src)
            c.release(dst)
            del src, dst
            c.delete_object("bench", key)
        print()
        print("| object | client | median s | GiB/s | client CPU-s/GiB |")
        print("|---|---|---|---|---|")
        for size, name, wall, gibs, cpg in rows:
            label = f"{size >> 20} MiB" if size < GIB else f"{size // GIB} GiB"
            print(f"| {label} | {name} | {wall:.3f} | {gibs:.2f} | {cpg:.2f} |")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
