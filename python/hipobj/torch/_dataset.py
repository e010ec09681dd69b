"""Map-style and iterable datasets over S3 objects, read by RDMA."""

from __future__ import annotations

import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator, Optional, Union

import torch
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from .. import list_all
from .._errors import BufferTooSmallError
from .._process import ProcessClient

__all__ = ["S3Object", "S3MapDataset", "S3IterableDataset", "parse_s3_uri"]

_SCHEMES = ("s3://", "s3rdma://", "s3a://")
_MIN_STAGING = 1 << 20


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` (or ``s3rdma://``) as (bucket, key)."""
    for s in _SCHEMES:
        if uri.startswith(s):
            bucket, _, key = uri[len(s) :].partition("/")
            if not bucket:
                raise ValueError(f"no bucket in {uri!r}")
            return bucket, key
    raise ValueError(f"not an s3:// URI: {uri!r}")


def _default_device() -> torch.device:
    # CUDA does not start in a forked DataLoader worker: tensors go to the
    # GPU in the main process (DataLoader(pin_memory=True) pins on the way).
    if get_worker_info() is None and torch.cuda.is_available():
        return torch.device("cuda")
    return torch.device("cpu")


class S3Object:
    """One object's bytes, as s3torchconnector's readers give them:
    ``bucket``, ``key``, ``size``, ``read(size=-1)``, ``readinto``, ``seek``,
    ``tell``; :meth:`tensor` gives them as a ``uint8`` tensor (on the GPU
    where one is present and this is not a DataLoader worker). ``path``:
    how the bytes came (``"rdma"``, ``"http"``, ``"mixed"``; ``None`` for
    an empty object)."""

    __slots__ = ("bucket", "key", "path", "_data", "_pos")

    def __init__(self, bucket: str, key: str, data: bytes, path: Optional[str] = None) -> None:
        self.bucket = bucket
        self.key = key
        self.path = path
        self._data = data
        self._pos = 0

    def __repr__(self) -> str:
        return f"S3Object(bucket={self.bucket!r}, key={self.key!r}, size={len(self._data)})"

    def __reduce__(self):
        return (S3Object, (self.bucket, self.key, self._data, self.path))

    @property
    def size(self) -> int:
        return len(self._data)

    def read(self, size: Optional[int] = -1) -> bytes:
        if size is None or size < 0:
            end = len(self._data)
        else:
            end = min(len(self._data), self._pos + size)
        if self._pos == 0 and end == len(self._data):
            self._pos = end
            return self._data
        out = self._data[self._pos : end]
        self._pos = end
        return out

    def readinto(self, b: Any) -> int:
        mv = memoryview(b).cast("B")
        data = self.read(len(mv))
        mv[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._pos, 2: len(self._data)}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tensor(self, device: Union[str, torch.device, None] = None) -> torch.Tensor:
        """The bytes as a ``uint8`` tensor on ``device`` (default: the GPU
        where torch has one and this is not a DataLoader worker, else the
        CPU)."""
        t = torch.frombuffer(bytearray(self._data), dtype=torch.uint8) if self._data else torch.empty(0, dtype=torch.uint8)
        dev = torch.device(device) if device is not None else _default_device()
        return t if dev.type == "cpu" else t.to(dev)


class _Fetcher:
    """Reads objects by RDMA into a staging buffer per thread (registered
    once, grown by doubling), then copies them out. Picklable: a process
    that unpickles it opens its own client."""

    def __init__(self, client_options: dict) -> None:
        self.client_options = dict(client_options)
        self.pc = ProcessClient(**self.client_options)
        self._local = threading.local()
        self._pid = os.getpid()

    def __getstate__(self) -> dict:
        return {"client_options": self.client_options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["client_options"])

    def _staging(self, need: int) -> bytearray:
        if self._pid != os.getpid():
            self._local, self._pid = threading.local(), os.getpid()
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < need:
            if buf is not None:
                self.pc.release(buf)
            n = _MIN_STAGING
            while n < need:
                n *= 2
            buf = bytearray(n)
            self._local.buf = buf
        return buf

    def fetch(self, bucket: str, key: str, size: Optional[int] = None) -> S3Object:
        client = self.pc.get()
        if size == 0:
            return S3Object(bucket, key, b"")
        buf = self._staging(size or 0)
        try:
            r = client.get_object(bucket, key, buf)
        except BufferTooSmallError:
            size = client.head_object(bucket, key).size
            buf = self._staging(size)
            r = client.get_object(bucket, key, buf)
        return S3Object(bucket, key, bytes(memoryview(buf)[: r.bytes]), r.path)


Item = tuple[str, str, Optional[int]]  # bucket, key, size (None: not known)


def _listing(uri: str, fetcher: _Fetcher) -> list[Item]:
    bucket, prefix = parse_s3_uri(uri)
    client = fetcher.pc.get()
    return [(bucket, o.key, o.size) for o in list_all(client, bucket, prefix or None) if not o.key.endswith("/")]


def _objects(uris: Iterable[Union[str, tuple[str, str]]]) -> list[Item]:
    out: list[Item] = []
    for u in uris:
        if isinstance(u, str):
            b, k = parse_s3_uri(u)
        else:
            b, k = u
        out.append((b, k, None))
    return out


def _client_options(endpoint, region, client_options) -> dict:
    opts = dict(client_options)
    if endpoint is not None:
        opts["endpoint"] = endpoint
    if region is not None:
        opts["region"] = region
    return opts


class _Base:
    def __init__(
        self,
        items: Optional[list[Item]],
        prefix_uri: Optional[str],
        transform: Optional[Callable[[S3Object], Any]],
        client_options: dict,
    ) -> None:
        self._items = items
        self._prefix_uri = prefix_uri
        self.transform = transform
        self._fetcher = _Fetcher(client_options)

    @property
    def items(self) -> list[Item]:
        """(bucket, key, size) of each object, listed on first use."""
        if self._items is None:
            self._items = _listing(self._prefix_uri, self._fetcher)  # type: ignore[arg-type]
        return self._items

    def _get(self, item: Item) -> Any:
        obj = self._fetcher.fetch(*item)
        return obj if self.transform is None else self.transform(obj)


class S3MapDataset(_Base, Dataset):
    """``dataset[i]`` is the i-th object (keys in listing order), read by
    RDMA, through ``transform`` where given. Shuffling and sharding are the
    sampler's (``DataLoader(shuffle=True)``, ``DistributedSampler``); each
    worker process opens its own client."""

    @classmethod
    def from_prefix(
        cls,
        s3_uri: str,
        *,
        transform: Optional[Callable[[S3Object], Any]] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        **client_options: Any,
    ) -> "S3MapDataset":
        """Every object under ``s3://bucket/prefix`` (listed on first use);
        ``client_options`` are :class:`hipobj.Client`'s arguments."""
        return cls(None, s3_uri, transform, _client_options(endpoint, region, client_options))

    @classmethod
    def from_objects(
        cls,
        object_uris: Iterable[Union[str, tuple[str, str]]],
        *,
        transform: Optional[Callable[[S3Object], Any]] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        **client_options: Any,
    ) -> "S3MapDataset":
        """The objects named (``s3://bucket/key`` or ``(bucket, key)``)."""
        return cls(_objects(object_uris), None, transform, _client_options(endpoint, region, client_options))

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> Any:
        return self._get(self.items[i])


class S3IterableDataset(_Base, IterableDataset):
    """The objects one after the other, read by RDMA (``prefetch`` at once
    in each process), through ``transform`` where given. ``shuffle`` orders
    them by ``seed`` + the epoch (:meth:`set_epoch`), the same in every
    process; then each DataLoader worker of each rank takes its share:
    rank and world size from ``torch.distributed`` when it is initialised,
    else from ``rank``/``world_size`` (default 0 and 1)."""

    def __init__(
        self,
        items: Optional[list[Item]],
        prefix_uri: Optional[str],
        transform: Optional[Callable[[S3Object], Any]],
        client_options: dict,
        *,
        shuffle: bool = False,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        prefetch: int = 4,
    ) -> None:
        super().__init__(items, prefix_uri, transform, client_options)
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = 0
        self.rank = rank
        self.world_size = world_size
        self.prefetch = max(1, prefetch)

    @classmethod
    def from_prefix(
        cls,
        s3_uri: str,
        *,
        transform: Optional[Callable[[S3Object], Any]] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        shuffle: bool = False,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        prefetch: int = 4,
        **client_options: Any,
    ) -> "S3IterableDataset":
        return cls(
            None,
            s3_uri,
            transform,
            _client_options(endpoint, region, client_options),
            shuffle=shuffle,
            seed=seed,
            rank=rank,
            world_size=world_size,
            prefetch=prefetch,
        )

    @classmethod
    def from_objects(
        cls,
        object_uris: Iterable[Union[str, tuple[str, str]]],
        *,
        transform: Optional[Callable[[S3Object], Any]] = None,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        shuffle: bool = False,
        seed: int = 0,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        prefetch: int = 4,
        **client_options: Any,
    ) -> "S3IterableDataset":
        return cls(
            _objects(object_uris),
            None,
            transform,
            _client_options(endpoint, region, client_options),
            shuffle=shuffle,
            seed=seed,
            rank=rank,
            world_size=world_size,
            prefetch=prefetch,
        )

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def _rank_world(self) -> tuple[int, int]:
        if self.rank is not None or self.world_size is not None:
            return self.rank or 0, self.world_size or 1
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1

    def shard(self) -> list[Item]:
        """The items this process (rank and DataLoader worker) reads."""
        items = list(self.items)
        if self.shuffle:
            random.Random(self.seed + self.epoch).shuffle(items)
        rank, world = self._rank_world()
        info = get_worker_info()
        wid, nw = (info.id, info.num_workers) if info is not None else (0, 1)
        return items[rank * nw + wid :: world * nw]

    def __iter__(self) -> Iterator[Any]:
        items = self.shard()
        if self.prefetch == 1:
            for it in items:
                yield self._get(it)
            return
        with ThreadPoolExecutor(self.prefetch, thread_name_prefix="hipobj-dataset") as ex:
            window: list = []
            for it in items:
                window.append(ex.submit(self._get, it))
                if len(window) >= self.prefetch:
                    yield window.pop(0).result()
            for f in window:
                yield f.result()
