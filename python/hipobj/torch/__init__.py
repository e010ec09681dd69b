"""PyTorch over RDMA: datasets and distributed checkpoints.

    from torch.utils.data import DataLoader
    from hipobj.torch import S3IterableDataset, S3MapDataset

    ds = S3MapDataset.from_prefix("s3://bucket/train/", endpoint="http://127.0.0.1:9000")
    for obj in DataLoader(ds, batch_size=None, num_workers=4):
        obj.key, obj.read()                 # bytes, read by RDMA

    import torch.distributed.checkpoint as dcp
    from hipobj.torch import S3RdmaStorageWriter, S3RdmaStorageReader
    dcp.save(model.state_dict(), storage_writer=S3RdmaStorageWriter("s3://bucket/ckpt/1"))
    dcp.load(state, storage_reader=S3RdmaStorageReader("s3://bucket/ckpt/1"))

Each process opens its own :class:`hipobj.Client` on first use (a
``DataLoader`` worker, forked or spawned, never uses its parent's: the
client holds threads and RDMA registrations that a fork does not carry).
Importing :mod:`hipobj` does not import torch; importing this does.
"""

from ._checkpoint import S3RdmaStorageReader, S3RdmaStorageWriter
from ._dataset import S3IterableDataset, S3MapDataset, S3Object, parse_s3_uri

__all__ = [
    "S3MapDataset",
    "S3IterableDataset",
    "S3Object",
    "S3RdmaStorageWriter",
    "S3RdmaStorageReader",
    "parse_s3_uri",
]
