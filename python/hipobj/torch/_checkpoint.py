"""``torch.distributed.checkpoint`` storage in an S3 prefix, by RDMA.

The layout: one object per write item (a tensor, a shard of one, or a
pickled non-tensor value), named ``<prefix>/__<rank>_<n>.distcp``, holding
the tensor's bytes as they lie in memory (C order), so a load reads each one
by RDMA straight into the destination tensor where that is a contiguous CPU
tensor of the same type and shape; and ``<prefix>/.metadata``, the pickled
:class:`~torch.distributed.checkpoint.metadata.Metadata`, written last.
Objects move ``thread_count`` at a time; the client splits each object
larger than its ``part_size`` into parts that move in parallel.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Optional, Union

import torch
from torch.futures import Future
from torch.distributed.checkpoint.metadata import Metadata, StorageMeta
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItem,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import StorageReader, StorageWriter, WriteResult

from .._errors import NotFoundError
from .._process import ProcessClient
from ._dataset import _client_options, parse_s3_uri

__all__ = ["S3RdmaStorageWriter", "S3RdmaStorageReader", "S3RdmaStorageInfo"]

METADATA = ".metadata"
SUFFIX = ".distcp"


@dataclass
class S3RdmaStorageInfo:
    """Where one write item lies: its object's key (relative to the
    checkpoint's prefix), and for a tensor its dtype and shape."""

    relative_key: str
    length: int
    dtype: Optional[str] = None
    shape: Optional[tuple[int, ...]] = None


@dataclass
class _StoragePrefix:
    prefix: str


def _join(prefix: str, name: str) -> str:
    return f"{prefix.rstrip('/')}/{name}" if prefix else name


def _dtype(name: str) -> torch.dtype:
    dt = getattr(torch, name.removeprefix("torch."), None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt


def _as_bytes(t: torch.Tensor) -> Any:
    """A contiguous CPU tensor's memory as a uint8 numpy array (no copy)."""
    flat = t.reshape(-1)
    if flat.numel() == 0:
        return b""
    return flat.view(torch.uint8).numpy()


class _S3Checkpoint:
    def _init(self, path: Union[str, os.PathLike], thread_count: int, client_options: dict) -> None:
        self.bucket, self.prefix = parse_s3_uri(os.fspath(path))
        self.path = os.fspath(path)
        self.thread_count = max(1, thread_count)
        self.pc = ProcessClient(**client_options)

    def _key(self, name: str) -> str:
        return _join(self.prefix, name)

    def _set_path(self, checkpoint_id: Union[str, os.PathLike, None]) -> None:
        if checkpoint_id:
            self.bucket, self.prefix = parse_s3_uri(os.fspath(checkpoint_id))
            self.path = os.fspath(checkpoint_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, os.PathLike]) -> bool:
        try:
            parse_s3_uri(os.fspath(checkpoint_id))
            return True
        except (TypeError, ValueError):
            return False

    @property
    def checkpoint_id(self) -> str:
        return self.path


class S3RdmaStorageWriter(_S3Checkpoint, StorageWriter):
    """Saves a checkpoint under ``s3://bucket/prefix`` by RDMA.
    ``endpoint``, ``region`` and ``client_options`` (more
    :class:`hipobj.Client` arguments) make the client; ``thread_count``
    objects move at once; ``overwrite=False`` refuses a prefix that holds a
    checkpoint's metadata already."""

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        thread_count: int = 8,
        overwrite: bool = True,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        **client_options: Any,
    ) -> None:
        super().__init__()
        self._init(path, thread_count, _client_options(endpoint, region, client_options))
        self.overwrite = overwrite
        self.save_id = uuid.uuid4().hex
        self.rank: Optional[int] = None
        self.is_coordinator = True

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        self._set_path(checkpoint_id)
        self.save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        self.rank = kwargs.get("rank")

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        if not self.overwrite and self.is_coordinator:
            try:
                self.pc.get().head_object(self.bucket, self._key(METADATA))
            except NotFoundError:
                pass
            else:
                raise RuntimeError(f"a checkpoint exists in {self.path} and overwrite=False")
        return plan

    def prepare_global_plan(self, plans: list[SavePlan]) -> list[SavePlan]:
        return [
            dataclasses.replace(p, storage_data=_StoragePrefix(f"__{i}_")) if p.storage_data is None else p
            for i, p in enumerate(plans)
        ]

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[list[WriteResult]]:
        prefix = plan.storage_data.prefix if plan.storage_data is not None else "__0_"
        client = self.pc.get()
        # resolve_data in this thread (the planner is not thread-safe), then
        # the bytes move thread_count objects at a time
        jobs = []
        for n, item in enumerate(plan.items):
            name = f"{prefix}{n}{SUFFIX}"
            data = planner.resolve_data(item)
            jobs.append((item, name, data))

        def put(job: tuple[WriteItem, str, Any]) -> WriteResult:
            item, name, data = job
            key = self._key(name)
            if item.type == WriteItemType.BYTE_IO:
                body = data.getvalue() if isinstance(data, io.BytesIO) else bytes(data)
                client.put_object(self.bucket, key, body)
                if body:
                    self.pc.release(body)
                info = S3RdmaStorageInfo(name, len(body))
            else:
                t = data.detach()
                if t.device.type != "cpu":
                    t = t.cpu()
                t = t.contiguous()
                body = _as_bytes(t)
                client.put_object(self.bucket, key, body)
                if len(body):
                    self.pc.release(body)
                info = S3RdmaStorageInfo(name, t.numel() * t.element_size(), str(t.dtype), tuple(t.shape))
            return WriteResult(index=item.index, size_in_bytes=info.length, storage_data=info)

        with ThreadPoolExecutor(self.thread_count, thread_name_prefix="hipobj-dcp") as ex:
            results = list(ex.map(put, jobs))
        fut: Future[list[WriteResult]] = Future()
        fut.set_result(results)
        return fut

    def finish(self, metadata: Metadata, results: list[list[WriteResult]]) -> None:
        storage_md = {}
        for wr_list in results:
            storage_md.update({wr.index: wr.storage_data for wr in wr_list})
        metadata.storage_data = storage_md
        metadata.storage_meta = self.storage_meta()
        self.pc.get().put_object(self.bucket, self._key(METADATA), pickle.dumps(metadata))

    def storage_meta(self) -> Optional[StorageMeta]:
        return StorageMeta(checkpoint_id=self.checkpoint_id, save_id=self.save_id)


class S3RdmaStorageReader(_S3Checkpoint, StorageReader):
    """Loads a checkpoint that :class:`S3RdmaStorageWriter` saved under
    ``s3://bucket/prefix``: each tensor by RDMA straight into its
    destination where that is a contiguous CPU tensor of the stored type
    and shape, else into a staging tensor that is then copied
    (``thread_count`` objects at once)."""

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        thread_count: int = 8,
        endpoint: Optional[str] = None,
        region: Optional[str] = None,
        **client_options: Any,
    ) -> None:
        super().__init__()
        self._init(path, thread_count, _client_options(endpoint, region, client_options))
        self.storage_data: dict = {}
        self.load_id = uuid.uuid4().hex

    def reset(self, checkpoint_id: Union[str, os.PathLike, None] = None) -> None:
        self.storage_data = {}
        self._set_path(checkpoint_id)
        self.load_id = uuid.uuid4().hex

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        client = self.pc.get()
        key = self._key(METADATA)
        try:
            size = client.head_object(self.bucket, key).size
        except NotFoundError as e:
            raise FileNotFoundError(f"no checkpoint metadata at s3://{self.bucket}/{key}") from e
        buf = bytearray(size)
        client.get_object(self.bucket, key, buf)
        self.pc.release(buf)
        metadata = pickle.loads(buf)
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if metadata.storage_data is None:
            raise ValueError("the checkpoint's metadata has no storage_data")
        self.storage_data = metadata.storage_data

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: list[LoadPlan]) -> list[LoadPlan]:
        return plans

    def _get_into(self, key: str, into: Any, length: int) -> None:
        if length == 0:
            return
        client = self.pc.get()
        client.get_object(self.bucket, key, into)
        self.pc.release(into)

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        # planner calls here, transfers in the pool
        byte_items: list[tuple[ReadItem, S3RdmaStorageInfo]] = []
        tensor_items: list[tuple[ReadItem, S3RdmaStorageInfo, torch.Tensor]] = []
        for req in plan.items:
            info: S3RdmaStorageInfo = self.storage_data[req.storage_index]
            if req.type == LoadItemType.BYTE_IO:
                byte_items.append((req, info))
            else:
                tensor_items.append((req, info, planner.resolve_tensor(req).detach()))

        def get_bytes(job: tuple[ReadItem, S3RdmaStorageInfo]) -> bytearray:
            _, info = job
            buf = bytearray(info.length)
            if info.length:
                self._get_into(self._key(info.relative_key), buf, info.length)
            return buf

        def get_tensor(job: tuple[ReadItem, S3RdmaStorageInfo, torch.Tensor]) -> Optional[torch.Tensor]:
            req, info, target = job
            shape = tuple(info.shape or ())
            dtype = _dtype(info.dtype or "uint8")
            whole = tuple(req.storage_offsets) == (0,) * len(shape) and tuple(req.lengths) == shape
            key = self._key(info.relative_key)
            if (
                whole
                and target.device.type == "cpu"
                and target.dtype == dtype
                and tuple(target.shape) == shape
                and target.is_contiguous()
            ):
                self._get_into(key, _as_bytes(target), info.length)
                return None  # landed in place
            staging = torch.empty(shape, dtype=dtype)
            self._get_into(key, _as_bytes(staging), info.length)
            for dim, (off, n) in enumerate(zip(req.storage_offsets, req.lengths)):
                staging = staging.narrow(dim, off, n)
            return staging

        with ThreadPoolExecutor(self.thread_count, thread_name_prefix="hipobj-dcp") as ex:
            byte_futs = [ex.submit(get_bytes, j) for j in byte_items]
            tensor_futs = [ex.submit(get_tensor, j) for j in tensor_items]
            for (req, _), f in zip(byte_items, byte_futs):
                planner.load_bytes(req, io.BytesIO(f.result()))
            for (req, _, target), f in zip(tensor_items, tensor_futs):
                src = f.result()
                if src is not None:
                    if tuple(target.shape) != tuple(src.shape):
                        raise ValueError(f"{req.storage_index}: stored {tuple(src.shape)}, wanted {tuple(target.shape)}")
                    target.copy_(src)
                planner.commit_tensor(req, target)
        fut: Future[None] = Future()
        fut.set_result(None)
        return fut
