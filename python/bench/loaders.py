"""Data loaders and checkpoints over one server, in one run: hipobj (RDMA)
against s3torchconnector, boto3 and s3fs (plain HTTP) reading the same
objects.

    PYTHONPATH=target/py-torch python3 python/bench/loaders.py            # full size
    PYTHONPATH=target/py-torch python3 python/bench/loaders.py \\
        --small-count 500 --large-count 8 --large-size 16MiB --ckpt-size 128MiB  # reduced

Workloads: an epoch over --small-count objects of --small-size (default
10,000 x 128 KiB) and one over --large-count objects of --large-size
(default 64 x 64 MiB), each through a torch DataLoader (--workers 4,
batch_size=None, map-style datasets: each worker reads its objects one
after the other, as the sampler hands them out; the item that crosses back
to the main process is the object's length, so the loaders' own cost is
measured, not the pickling of bytes), and a torch.distributed.checkpoint
save + load of a --ckpt-size state dict (tensors of at most 64 MiB) by
hipobj.torch's S3RdmaStorageWriter/Reader, by torch's FsspecWriter/Reader
over s3fs and by s3torchconnector's S3StorageWriter/Reader (--threads each).

Without --endpoint it starts the test server (target/release if built,
else target/debug; port 0, the software RDMA provider) and measures its CPU
too. MiB/s is bytes over wall time; CPU is seconds per GiB moved: the
client's (this process plus its DataLoader workers, user + system) and the
server's. Each cell is one run after one warm-up epoch of the same loader
over the small set's first 200 objects.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import hipobj

AK, SK = "hipobj-test-key", "hipobj-test-secret"
MIB, GIB = 1 << 20, 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def size_of(s):
    s = s.strip()
    for suffix, mul in (("GiB", GIB), ("MiB", MIB), ("KiB", 1 << 10)):
        if s.endswith(suffix):
            return int(s[: -len(suffix)]) * mul
    return int(s)


def client_cpu():
    """User + system seconds of this process and its reaped children
    (the DataLoader workers, once joined)."""
    a = resource.getrusage(resource.RUSAGE_SELF)
    b = resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


class ServerCpu:
    def __init__(self, pid):
        self.pid = pid

    def __call__(self):
        if self.pid is None:
            return 0.0
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# --------------------------------------------------------------- datasets
# Map-style, one per client library; each opens its client lazily in the
# process that uses it (DataLoader workers fork).


def obj_len(obj):
    if obj.path != "rdma":
        raise AssertionError(f"{obj.key} came by {obj.path}, not RDMA")
    return obj.size


class Boto3Dataset:
    def __init__(self, endpoint, bucket, keys):
        self.endpoint, self.bucket, self.keys = endpoint, bucket, keys
        self._s3, self._pid = None, None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        if self._pid != os.getpid():
            import boto3
            from botocore.config import Config

            self._s3 = boto3.client(
                "s3",
                endpoint_url=self.endpoint,
                aws_access_key_id=AK,
                aws_secret_access_key=SK,
                region_name="us-east-1",
                config=Config(s3={"addressing_style": "path"}, max_pool_connections=16),
            )
            self._pid = os.getpid()
        return len(self._s3.get_object(Bucket=self.bucket, Key=self.keys[i])["Body"].read())


class S3fsDataset:
    def __init__(self, endpoint, bucket, keys):
        self.endpoint, self.bucket, self.keys = endpoint, bucket, keys
        self._fs, self._pid = None, None

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        if self._pid != os.getpid():
            self._fs = s3fs_filesystem(self.endpoint)
            self._pid = os.getpid()
        return len(self._fs.cat_file(f"{self.bucket}/{self.keys[i]}"))


def s3fs_filesystem(endpoint):
    import s3fs

    return s3fs.S3FileSystem(**s3fs_options(endpoint))


def s3fs_options(endpoint):
    return dict(
        key=AK,
        secret=SK,
        endpoint_url=endpoint,
        client_kwargs={"region_name": "us-east-1"},
        config_kwargs={"s3": {"addressing_style": "path"}},
        skip_instance_cache=True,
        use_listings_cache=False,
    )


def make_dataset(kind, endpoint, bucket, keys):
    if kind == "hipobj":
        from hipobj.torch import S3MapDataset

        return S3MapDataset.from_objects(
            [(bucket, k) for k in keys], transform=obj_len, endpoint=endpoint, access_key=AK, secret_key=SK
        )
    if kind == "s3torchconnector":
        from s3torchconnector import S3ClientConfig, S3MapDataset

        return S3MapDataset.from_objects(
            [f"s3://{bucket}/{k}" for k in keys],
            region="us-east-1",
            endpoint=endpoint,
            transform=lambda r: len(r.read()),
            s3client_config=S3ClientConfig(force_path_style=True),
        )
    if kind == "boto3":
        return Boto3Dataset(endpoint, bucket, keys)
    if kind == "s3fs":
        return S3fsDataset(endpoint, bucket, keys)
    raise ValueError(kind)


def epoch(ds, workers):
    from torch.utils.data import DataLoader

    total = 0
    for n in DataLoader(ds, batch_size=None, num_workers=workers, shuffle=False):
        total += int(n)
    return total


# --------------------------------------------------------------- checkpoints


def ckpt_state(size):
    import torch

    per = min(64 * MIB, max(MIB, size // 8))
    g = torch.Generator().manual_seed(0)
    return {f"layer{i}.weight": torch.randn(per // 4, generator=g) for i in range(max(1, size // per))}


def ckpt_io(kind, endpoint, bucket, state, threads):
    """(save seconds, load seconds): the state saved, then loaded into zeros
    and compared."""
    import torch
    import torch.distributed.checkpoint as dcp

    prefix = f"ckpt-{kind}-{uuid.uuid4().hex[:8]}"
    if kind == "hipobj":
        from hipobj.torch import S3RdmaStorageReader, S3RdmaStorageWriter

        opts = dict(endpoint=endpoint, access_key=AK, secret_key=SK)
        writer = S3RdmaStorageWriter(f"s3://{bucket}/{prefix}", thread_count=threads, **opts)
        reader = S3RdmaStorageReader(f"s3://{bucket}/{prefix}", thread_count=threads, **opts)
    elif kind == "s3fs":
        from torch.distributed.checkpoint import FsspecReader, FsspecWriter

        so = s3fs_options(endpoint)
        writer = FsspecWriter(f"s3://{bucket}/{prefix}", thread_count=threads, sync_files=False, **so)
        reader = FsspecReader(f"s3://{bucket}/{prefix}", **so)
    elif kind == "s3torchconnector":
        from s3torchconnector import S3ClientConfig
        from s3torchconnector.dcp import S3StorageReader, S3StorageWriter

        cfg = S3ClientConfig(force_path_style=True)
        os.environ["AWS_ENDPOINT_URL"] = endpoint
        writer = S3StorageWriter("us-east-1", f"s3://{bucket}/{prefix}", s3client_config=cfg, thread_count=threads)
        reader = S3StorageReader("us-east-1", f"s3://{bucket}/{prefix}", s3client_config=cfg)
    else:
        raise ValueError(kind)
    t0 = time.perf_counter()
    dcp.save(state, storage_writer=writer)
    t1 = time.perf_counter()
    out = {k: torch.zeros_like(v) for k, v in state.items()}
    dcp.load(out, storage_reader=reader)
    t2 = time.perf_counter()
    for k in state:
        if not torch.equal(out[k], state[k]):
            raise AssertionError(f"{kind}: {k} differs after the load")
    return t1 - t0, t2 - t1


# --------------------------------------------------------------- main


def start_server(binary):
    tmp = os.environ.get("TMPDIR", "/tmp")
    log = open(os.path.join(tmp, f"loaders-bench-server-{os.getpid()}.log"), "ab")
    env = dict(os.environ, RUST_LOG="warn")
    p = subprocess.Popen([binary, "0", "--rdma-device", "soft0"], stdout=subprocess.PIPE, stderr=log, env=env)
    line = p.stdout.readline().decode()
    if "http://" not in line:
        p.kill()
        raise SystemExit(f"{binary} did not start: {line!r}")
    return p, line.strip().rsplit(" ", 1)[-1].rstrip("/")


def upload(client, bucket, prefix, count, size):
    rng = np.random.default_rng(count)
    blob = rng.integers(0, 256, size + count, dtype=np.uint8)
    keys = [f"{prefix}/{i:06d}.bin" for i in range(count)]

    def put(i):
        client.put_object(bucket, keys[i], blob[i : i + size])

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(put, range(count)))
    return keys


def have(module):
    try:
        __import__(module)
        return True
    except Exception as e:  # an install that does not import
        print(f"# {module}: not usable here ({type(e).__name__}: {e})", file=sys.stderr)
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--endpoint")
    ap.add_argument("--server")
    ap.add_argument("--small-count", type=int, default=10_000)
    ap.add_argument("--small-size", default="128KiB")
    ap.add_argument("--large-count", type=int, default=64)
    ap.add_argument("--large-size", default="64MiB")
    ap.add_argument("--ckpt-size", default="1GiB")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--clients", default="hipobj,s3torchconnector,boto3,s3fs")
    args = ap.parse_args()

    clients = [c for c in args.clients.split(",") if c == "hipobj" or have(c)]
    server = None
    if args.endpoint:
        endpoint, server_cpu = args.endpoint, ServerCpu(None)
    else:
        binary = args.server
        if binary is None:
            rel = os.path.join(ROOT, "target/release/hipobj-test-server")
            binary = rel if os.access(rel, os.X_OK) else os.path.join(ROOT, "target/debug/hipobj-test-server")
        server, endpoint = start_server(binary)
        server_cpu = ServerCpu(server.pid)
        print(f"# server: {binary} at {endpoint}", file=sys.stderr)
    os.environ.setdefault("AWS_ACCESS_KEY_ID", AK)  # s3torchconnector's credentials
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", SK)
    os.environ.setdefault("AWS_REGION", "us-east-1")

    rows = []
    try:
        c = hipobj.Client(endpoint=endpoint, access_key=AK, secret_key=SK)
        bucket = f"loaders-{uuid.uuid4().hex[:8]}"
        c.create_bucket(bucket)
        small_size, large_size = size_of(args.small_size), size_of(args.large_size)
        sets = [
            (f"{args.small_count} x {args.small_size}", upload(c, bucket, "small", args.small_count, small_size)),
            (f"{args.large_count} x {args.large_size}", upload(c, bucket, "large", args.large_count, large_size)),
        ]
        sizes = {sets[0][0]: small_size, sets[1][0]: large_size}
        del c
        gc.collect()
        print(f"# rdma available: {hipobj.Client(endpoint=endpoint, access_key=AK, secret_key=SK).rdma_available}", file=sys.stderr)
        for kind in clients:
            epoch(make_dataset(kind, endpoint, bucket, sets[0][1][:200]), args.workers)  # warm-up
        for name, keys in sets:
            for kind in clients:
                ds = make_dataset(kind, endpoint, bucket, keys)
                gc.collect()
                c0, s0, t0 = client_cpu(), server_cpu(), time.perf_counter()
                n = epoch(ds, args.workers)
                del ds
                gc.collect()
                wall, cc, sc = time.perf_counter() - t0, client_cpu() - c0, server_cpu() - s0
                want = len(keys) * sizes[name]
                if n != want:
                    raise AssertionError(f"{kind} read {n} bytes of {want}")
                rows.append((f"epoch {name}", kind, n, wall, cc, sc))
                print(f"# {rows[-1]}", file=sys.stderr)
        state = ckpt_state(size_of(args.ckpt_size))
        nbytes = sum(t.numel() * t.element_size() for t in state.values())
        for kind in [k for k in clients if k in ("hipobj", "s3fs", "s3torchconnector")]:
            c0, s0 = client_cpu(), server_cpu()
            save, load = ckpt_io(kind, endpoint, bucket, state, args.threads)
            cc, sc = client_cpu() - c0, server_cpu() - s0
            rows.append((f"checkpoint {args.ckpt_size} save+load", kind, 2 * nbytes, save + load, cc, sc))
            rows.append(("  save / load MiB/s", kind, None, (nbytes / MIB / save, nbytes / MIB / load), None, None))
            print(f"# {rows[-2]}", file=sys.stderr)
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)

    print("| workload | client | MiB/s | client CPU s/GiB | server CPU s/GiB |")
    print("| --- | --- | ---: | ---: | ---: |")
    for work, kind, n, wall, cc, sc in rows:
        if n is None:
            print(f"| {work} | {kind} | {wall[0]:.0f} / {wall[1]:.0f} | | |")
            continue
        gib = n / GIB
        srv = f"{sc / gib:.2f}" if server is not None else "-"
        print(f"| {work} | {kind} | {n / MIB / wall:.0f} | {cc / gib:.2f} | {srv} |")


if __name__ == "__main__":
    main()
