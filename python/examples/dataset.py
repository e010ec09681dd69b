"""A PyTorch-style dataset that reads S3 objects by RDMA into preallocated
buffers: the server writes each sample straight into memory the loader
owns, with no copy through Python bytes.

    python3 python/examples/dataset.py --endpoint http://127.0.0.1:9000

- ``S3Samples`` is map-style (``__len__``/``__getitem__``), for a
  ``torch.utils.data.DataLoader`` with its own workers; each worker process
  makes its own client on first use.
- ``S3Stream`` is an iterable with ``depth`` buffers in flight: reads run in
  threads (hipobj releases the GIL while bytes move), and each yielded
  sample is a view of a preallocated slot, valid until ``depth`` more
  samples have been taken.

The buffers are torch tensors (pinned when CUDA is there, so a
``.to("cuda", non_blocking=True)`` needs no staging copy) when torch is
installed, numpy arrays otherwise. Registration happens once per buffer:
the slots are reused, so the client keeps them registered.
"""

import argparse
import concurrent.futures
import os

import numpy as np

import hipobj

try:
    import torch
except ImportError:  # numpy buffers
    torch = None


def alloc(nbytes):
    """A preallocated sample buffer: a (pinned) torch tensor, else numpy."""
    if torch is not None:
        pin = torch.cuda.is_available()
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=pin)
    return np.empty(nbytes, np.uint8)


class S3Samples:
    """Map-style: sample ``i`` is object ``keys[i]`` (at most
    ``sample_bytes``), read into a buffer of its own slot."""

    def __init__(self, bucket, keys, sample_bytes, **client_args):
        self.bucket, self.keys, self.sample_bytes = bucket, list(keys), sample_bytes
        self.client_args = client_args
        self._client = None
        self._pid = None

    def client(self):
        if self._client is None or self._pid != os.getpid():  # one per worker process
            self._client = hipobj.Client(**self.client_args)
            self._pid = os.getpid()
        return self._client

    def __len__(self):
        return len(self.keys)

    def __getitem__(self, i):
        buf = alloc(self.sample_bytes)
        r = self.client().get_object(self.bucket, self.keys[i], buf)
        return buf[: r.bytes]


class S3Stream:
    """Iterable: the objects of ``keys`` in order, ``depth`` read ahead into
    ``depth`` preallocated slots of ``sample_bytes``."""

    def __init__(self, client, bucket, keys, sample_bytes, depth=4):
        self.client, self.bucket, self.keys = client, bucket, list(keys)
        self.slots = [alloc(sample_bytes) for _ in range(depth)]

    def __iter__(self):
        depth = len(self.slots)
        with concurrent.futures.ThreadPoolExecutor(depth) as pool:
            pending = {}
            for i, key in enumerate(self.keys[:depth]):
                pending[i] = pool.submit(self.client.get_object, self.bucket, key, self.slots[i])
            for i in range(len(self.keys)):
                r = pending.pop(i).result()
                slot = self.slots[i % depth]
                # The slot is handed out now; the read that reuses it starts
                # only when the next sample is asked for.
                yield self.keys[i], slot[: r.bytes], r
                nxt = i + depth
                if nxt < len(self.keys):
                    pending[nxt] = pool.submit(self.client.get_object, self.bucket, self.keys[nxt], slot)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:9000"))
    ap.add_argument("--access-key", default="hipobj-test-key")
    ap.add_argument("--secret-key", default="hipobj-test-secret")
    ap.add_argument("--bucket", default="dataset-example")
    ap.add_argument("--samples", type=int, default=16)
    ap.add_argument("--sample-bytes", type=int, default=1 << 20)
    a = ap.parse_args(argv)
    args = dict(endpoint=a.endpoint, access_key=a.access_key, secret_key=a.secret_key)
    c = hipobj.Client(**args)
    c.create_bucket(a.bucket)
    rng = np.random.default_rng(0)
    want = {}
    for i in range(a.samples):
        data = rng.integers(0, 256, a.sample_bytes - i, dtype=np.uint8)
        want[f"train/{i:05d}"] = data
        c.put_object(a.bucket, f"train/{i:05d}", data)
    keys = [o.key for o in hipobj.list_all(c, a.bucket, prefix="train/")]

    paths = set()
    for key, sample, r in S3Stream(c, a.bucket, keys, a.sample_bytes, depth=4):
        got = sample.numpy() if torch is not None else sample
        assert np.array_equal(got, want[key]), key
        paths.add(r.path)
    ds = S3Samples(a.bucket, keys, a.sample_bytes, **args)
    first = ds[0]
    assert np.array_equal(first.numpy() if torch is not None else first, want[keys[0]])
    print(f"{len(keys)} samples read, bytes exact, path {'/'.join(sorted(paths))}, "
          f"buffers: {'torch' if torch is not None else 'numpy'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
