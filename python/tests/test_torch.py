"""hipobj.torch: datasets through DataLoader workers (fork and spawn) and
torch.distributed.checkpoint save/load, against the test server. Skipped
without torch (CI installs it into target/py-torch: python/requirements-torch.txt)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import AK, SK, importorskip

torch = importorskip("torch")
from torch.utils.data import DataLoader  # noqa: E402

from hipobj.torch import (  # noqa: E402
    S3IterableDataset,
    S3MapDataset,
    S3Object,
    S3RdmaStorageReader,
    S3RdmaStorageWriter,
)

N = 24


def _opts(server):
    return dict(endpoint=server, access_key=AK, secret_key=SK)


def _payload(i):
    # sizes from 0 up to past the 1 MiB staging buffer's first size
    n = 0 if i == 0 else (i * 97_531) % (3 << 20) + 1
    return np.random.default_rng(i).integers(0, 256, n, dtype=np.uint8).tobytes()


@pytest.fixture
def objects(client, bucket):
    keys = [f"train/{i:04d}.bin" for i in range(N)]
    for i, k in enumerate(keys):
        client.put_object(bucket, k, _payload(i))
    client.put_object(bucket, "other/x", b"not in the prefix")
    return bucket, keys


def pid_and_bytes(obj):
    """A transform (module-level: spawned workers import it)."""
    assert obj.path in (None, "rdma"), obj.path
    return obj.key, os.getpid(), obj.read()


def test_importing_hipobj_does_not_import_torch():
    code = "import sys, hipobj, hipobj.fsspec; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_map_dataset_in_process(server, objects):
    bucket, keys = objects
    ds = S3MapDataset.from_prefix(f"s3://{bucket}/train/", **_opts(server))
    assert len(ds) == N
    for i in (0, 1, 5, N - 1):
        obj = ds[i]
        assert isinstance(obj, S3Object)
        assert (obj.bucket, obj.key) == (bucket, keys[i])
        assert obj.read() == _payload(i)
        assert obj.size == len(_payload(i))
        assert obj.path == (None if i == 0 else "rdma")
    obj = ds[3]
    assert obj.read(10) == _payload(3)[:10] and obj.tell() == 10
    obj.seek(-4, 2)
    assert obj.read() == _payload(3)[-4:]
    t = ds[7].tensor(device="cpu")
    assert t.dtype == torch.uint8 and bytes(t.numpy()) == _payload(7)
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert ds[7].tensor().device.type == want
    # a key list, objects larger than the staging buffer learnt on the way
    ds2 = S3MapDataset.from_objects([f"s3://{bucket}/{k}" for k in reversed(keys)], **_opts(server))
    assert [ds2[i].read() for i in range(N)] == [_payload(i) for i in reversed(range(N))]


# Forked workers are tested in a fresh interpreter: this one holds the
# session's hipobj.Client (conftest), and a native client alive in a process
# that forks can hang or crash the child's new client (README: "PyTorch
# datasets"); the datasets' own clients are dropped before a fork.
FORKED = r"""
import json, os, sys
from torch.utils.data import DataLoader
from hipobj.torch import S3IterableDataset, S3MapDataset

endpoint, ak, sk, bucket, kind, start = sys.argv[1:7]
opts = dict(endpoint=endpoint, access_key=ak, secret_key=sk)

def pid_and_bytes(obj):
    assert obj.path in (None, "rdma"), obj.path
    return obj.key, os.getpid(), obj.read().hex()

out = []
for epoch in range(2):
    if kind == "map":
        ds = S3MapDataset.from_prefix(f"s3://{bucket}/train/", transform=pid_and_bytes, **opts)
        assert ds[0][0] == "train/0000.bin"  # the parent's client is open when the workers fork
        dl = DataLoader(ds, batch_size=None, shuffle=True, num_workers=2, multiprocessing_context=start, timeout=120)
        out.append([list(x) for x in dl])
    else:
        for rank in range(2):
            ds = S3IterableDataset.from_prefix(
                f"s3://{bucket}/train/", shuffle=True, seed=7, rank=rank, world_size=2, transform=pid_and_bytes, **opts
            )
            ds.set_epoch(epoch)
            dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=start, timeout=120)
            out.append([list(x) for x in dl])
json.dump({"parent": os.getpid(), "epochs": out}, sys.stdout)
"""


def _in_fresh_interpreter(server, bucket, kind, start):
    out = subprocess.run(
        [sys.executable, "-c", FORKED, server, AK, SK, bucket, kind, start],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    import json

    return json.loads(out.stdout)


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_map_dataset_workers(server, objects, start):
    bucket, keys = objects
    want = {k: _payload(i) for i, k in enumerate(keys)}
    if start == "fork":
        run = _in_fresh_interpreter(server, bucket, "map", start)
        for items in run["epochs"]:
            assert {k: bytes.fromhex(h) for k, _, h in items} == want and len(items) == N
            pids = {pid for _, pid, _ in items}
            assert run["parent"] not in pids and len(pids) == 2
        return
    ds = S3MapDataset.from_prefix(f"s3://{bucket}/train/", transform=pid_and_bytes, **_opts(server))
    assert ds[0][2] == _payload(0)
    dl = DataLoader(ds, batch_size=None, shuffle=True, num_workers=2, multiprocessing_context=start, timeout=120)
    got = {}
    pids = set()
    for key, pid, data in dl:
        got[key] = data
        pids.add(pid)
    assert got == want
    assert os.getpid() not in pids and len(pids) == 2


@pytest.mark.parametrize("start", ["fork", "spawn"])
def test_iterable_dataset_workers_and_ranks(server, objects, start):
    bucket, keys = objects
    want = {k: _payload(i) for i, k in enumerate(keys)}
    if start == "fork":
        run = _in_fresh_interpreter(server, bucket, "iterable", start)
        shards = [[(k, bytes.fromhex(h)) for k, _, h in items] for items in run["epochs"]]
    else:
        shards = []
        for rank in range(2):
            ds = S3IterableDataset.from_prefix(
                f"s3://{bucket}/train/", shuffle=True, seed=7, rank=rank, world_size=2, **_opts(server)
            )
            dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context=start, timeout=120)
            shards.append([(o.key, o.read()) for o in dl])
    # each epoch: rank 0's share and rank 1's
    for r0, r1 in zip(shards[0::2], shards[1::2]):
        assert len(r0) == len(r1) == N // 2
        seen = dict(r0)
        assert not seen.keys() & dict(r1).keys()  # shards are disjoint across ranks and workers
        seen.update(r1)
        assert seen == want


def test_iterable_shuffle_and_epochs(server, objects):
    bucket, keys = objects
    ds = S3IterableDataset.from_objects([(bucket, k) for k in keys], shuffle=True, seed=3, **_opts(server))
    e0 = [o.key for o in ds]
    assert sorted(e0) == keys and e0 != keys
    assert [o.key for o in ds] == e0
    ds.set_epoch(1)
    e1 = [o.key for o in ds]
    assert sorted(e1) == keys and e1 != e0
    plain = S3IterableDataset.from_objects([(bucket, k) for k in keys], prefetch=1, transform=lambda o: o.read(), **_opts(server))
    assert list(plain) == [_payload(i) for i in range(N)]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 128)
        self.b = torch.nn.Linear(128, 32, bias=False)
        self.norm = torch.nn.LayerNorm(32)
        self.emb = torch.nn.Embedding(100, 16, dtype=torch.bfloat16)
        self.register_buffer("counts", torch.arange(10, dtype=torch.int64))

    def forward(self, x):
        return self.norm(self.b(torch.relu(self.a(x)))).sum() + self.emb.weight.float().sum()


def _trained(seed):
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(8, 64)).backward()
        opt.step()
    return model, opt


def test_distributed_checkpoint_round_trip(server, client, bucket):
    dcp = importorskip("torch.distributed.checkpoint")
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    model, opt = _trained(0)
    msd, osd = get_state_dict(model, opt)
    uri = f"s3://{bucket}/ckpt/step-3"
    dcp.save({"model": msd, "optim": osd, "extra": {"epoch": 3, "note": "hi"}}, storage_writer=S3RdmaStorageWriter(uri, **_opts(server)))
    names = [o.key for o in client.list_objects_v2(bucket, prefix="ckpt/step-3/").objects]
    assert "ckpt/step-3/.metadata" in names and sum(n.endswith(".distcp") for n in names) > 10

    fresh, fopt = _trained(1)  # other weights and optimizer state
    fmsd, fosd = get_state_dict(fresh, fopt)
    assert not torch.equal(fmsd["a.weight"], msd["a.weight"])
    state = {"model": fmsd, "optim": fosd, "extra": {"epoch": 0, "note": ""}}
    dcp.load(state, storage_reader=S3RdmaStorageReader(uri, **_opts(server)))
    set_state_dict(fresh, fopt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    assert state["extra"] == {"epoch": 3, "note": "hi"}

    ref_m, got_m = model.state_dict(), fresh.state_dict()
    assert ref_m.keys() == got_m.keys()
    for k in ref_m:
        assert ref_m[k].dtype == got_m[k].dtype and torch.equal(ref_m[k], got_m[k]), k
    ref_o, got_o = opt.state_dict(), fopt.state_dict()
    assert ref_o["param_groups"] == got_o["param_groups"]
    assert ref_o["state"].keys() == got_o["state"].keys()
    for p in ref_o["state"]:
        for k, v in ref_o["state"][p].items():
            assert torch.equal(v, got_o["state"][p][k]), (p, k)
    # training goes on from the same place
    x = torch.randn(8, 64)
    assert torch.equal(model(x), fresh(x))


def _why(exc):
    """The message of an exception, or of the ranks' exceptions that a
    CheckpointException carries."""
    failures = getattr(exc, "failures", None)
    if failures:
        return " ".join(str(f[0] if isinstance(f, tuple) else f) for f in failures.values())
    return str(exc)


def test_checkpoint_overwrite_and_missing(server, bucket):
    dcp = importorskip("torch.distributed.checkpoint")
    uri = f"s3://{bucket}/ck2"
    sd = {"w": torch.arange(12.0).reshape(3, 4)}
    dcp.save(sd, storage_writer=S3RdmaStorageWriter(uri, **_opts(server)))
    from torch.distributed.checkpoint.api import CheckpointException  # a BaseException

    with pytest.raises(CheckpointException) as e:
        dcp.save(sd, storage_writer=S3RdmaStorageWriter(uri, overwrite=False, **_opts(server)))
    assert "overwrite=False" in _why(e.value)
    out = {"w": torch.zeros(3, 4)}
    dcp.load(out, storage_reader=S3RdmaStorageReader(uri, **_opts(server)))
    assert torch.equal(out["w"], sd["w"])
    # a destination that is not contiguous: staged, then copied
    out = {"w": torch.zeros(4, 3).t()}
    dcp.load(out, storage_reader=S3RdmaStorageReader(uri, **_opts(server)))
    assert torch.equal(out["w"], sd["w"])
    with pytest.raises(CheckpointException) as e:
        dcp.load(out, storage_reader=S3RdmaStorageReader(f"s3://{bucket}/nothing", **_opts(server)))
    assert "no checkpoint metadata" in _why(e.value)
    assert S3RdmaStorageWriter.validate_checkpoint_id("s3://b/p")
    assert not S3RdmaStorageReader.validate_checkpoint_id("/tmp/ckpt")
