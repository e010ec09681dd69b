"""An fsspec filesystem that moves bytes by RDMA: protocol ``s3rdma``.

    import fsspec, pandas as pd
    import hipobj.fsspec  # registers "s3rdma" (the package's entry point does too)

    fs = fsspec.filesystem("s3rdma", endpoint_url="http://127.0.0.1:9000",
                           key="...", secret="...")
    fs.pipe_file("bucket/dir/x.bin", b"...")
    df = pd.read_parquet("s3rdma://bucket/t.parquet",
                         storage_options={"endpoint_url": "http://127.0.0.1:9000"})

Everything goes through a :class:`hipobj.Client` (opened lazily, once per
process: a forked child opens its own), so settings and credentials resolve
as the client resolves them (the arguments, then ``AWS_ENDPOINT_URL``,
``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, the
``~/.aws`` files) and transfers fall back to plain HTTP where the server has
no RDMA (``require_rdma=True`` raises instead).

Reading: :class:`S3RdmaFile` does ranged GETs into buffers registered once
per file and reused: a readahead window of ``block_size`` bytes (the whole
object when it is smaller) for sequential scans, and a tail window (the last
``footer_size`` bytes, read whole on the first read near the end) for
formats that start at their footer (parquet). Reads larger than the window
go straight into a buffer of their size. Writing: bytes collect in
``block_size`` buffers (registered once, reused); a file that ends within
the first buffer is one PUT, a larger one a multipart upload whose parts go
``concurrency`` at a time.

Paths are ``bucket/key`` (``s3rdma://``, ``s3://`` and ``s3a://`` prefixes
are stripped); directories are common prefixes under ``/``, buckets the top
level.
"""

from __future__ import annotations

import io
import mmap
import os
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any, Optional

import fsspec
from fsspec.spec import AbstractBufferedFile, AbstractFileSystem

from . import _native
from ._errors import NotFoundError, S3Error
from ._process import ProcessClient

__all__ = ["S3RdmaFileSystem", "S3RdmaFile", "ProcessClient"]

MIB = 1 << 20

def split_path(path: str) -> tuple[str, str]:
    """``bucket/key`` (any protocol prefix stripped) as (bucket, key)."""
    path = S3RdmaFileSystem._strip_protocol(path)
    bucket, _, key = path.partition("/")
    return bucket, key


def _mtime(s: Optional[str]) -> Optional[datetime]:
    if not s:
        return None
    try:
        if s[0].isdigit():
            return datetime.fromisoformat(s.replace("Z", "+00:00"))
        return parsedate_to_datetime(s)
    except (TypeError, ValueError):
        return None


def _not_found(path: str, err: Optional[BaseException] = None) -> FileNotFoundError:
    e = FileNotFoundError(2, "No such file or directory", path)
    if err is not None:
        e.__cause__ = err
    return e


class S3RdmaFileSystem(AbstractFileSystem):
    """fsspec's interface over :class:`hipobj.Client`.

    ``endpoint_url``, ``key``, ``secret``, ``region``, ``profile`` (s3fs's
    names; ``client_kwargs={"endpoint_url": ..., "region_name": ...}`` too),
    ``nic``, ``require_rdma``, ``rdma`` and ``client_options`` (more
    :class:`hipobj.Client` arguments: ``part_size``, ``concurrency``, ...)
    make the client. ``default_block_size`` is the files' readahead window
    and write buffer (and multipart part) size, ``footer_size`` the tail
    window, ``concurrency`` how many parts or ranges move at once.
    """

    protocol = ("s3rdma",)
    root_marker = ""
    default_block_size = 8 * MIB
    default_footer_size = 1 * MIB

    def __init__(
        self,
        endpoint_url: Optional[str] = None,
        key: Optional[str] = None,
        secret: Optional[str] = None,
        region: Optional[str] = None,
        profile: Optional[str] = None,
        nic: Optional[str] = None,
        require_rdma: bool = False,
        rdma: bool = True,
        client_kwargs: Optional[dict] = None,
        client_options: Optional[dict] = None,
        default_block_size: Optional[int] = None,
        footer_size: Optional[int] = None,
        concurrency: int = 4,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        ck = dict(client_kwargs or {})
        endpoint_url = endpoint_url or ck.pop("endpoint_url", None)
        region = region or ck.pop("region_name", None)
        opts = dict(client_options or {})
        opts.update(
            endpoint=endpoint_url,
            access_key=key,
            secret_key=secret,
            region=region,
            profile=profile,
            nic=nic,
            require_rdma=require_rdma,
            rdma=rdma,
        )
        self._pc = ProcessClient(**opts)
        if default_block_size is not None:
            self.default_block_size = int(default_block_size)
        if footer_size is not None:
            self.default_footer_size = int(footer_size)
        self.concurrency = max(1, int(concurrency))
        self._pool_lock = threading.Lock()
        self._pool: list[bytearray] = []
        self._pool_pid = os.getpid()
        self._executor: Optional[ThreadPoolExecutor] = None
        self._executor_pid: Optional[int] = None

    # ----------------------------------------------------------- plumbing
    @property
    def client(self) -> _native.Client:
        """This process's :class:`hipobj.Client`."""
        return self._pc.get()

    def executor(self) -> ThreadPoolExecutor:
        pid = os.getpid()
        if self._executor is None or self._executor_pid != pid:
            self._executor = ThreadPoolExecutor(self.concurrency, thread_name_prefix="hipobj-fsspec")
            self._executor_pid = pid
        return self._executor

    def _scratch(self) -> bytearray:
        """A registered buffer of ``default_block_size`` bytes from the pool."""
        with self._pool_lock:
            if self._pool_pid != os.getpid():
                self._pool, self._pool_pid = [], os.getpid()
            if self._pool:
                return self._pool.pop()
        return bytearray(self.default_block_size)

    def _unscratch(self, buf: bytearray) -> None:
        with self._pool_lock:
            if len(self._pool) < 2 * self.concurrency and len(buf) == self.default_block_size:
                self._pool.append(buf)
                return
        self._release(buf)

    def _release(self, buf: Any) -> None:
        self._pc.release(buf)

    @classmethod
    def _strip_protocol(cls, path: Any) -> str:
        if isinstance(path, list):
            return [cls._strip_protocol(p) for p in path]  # type: ignore[return-value]
        path = os.fspath(path) if not isinstance(path, str) else path
        for proto in ("s3rdma://", "s3://", "s3a://", "s3rdma::"):
            if path.startswith(proto):
                path = path[len(proto) :]
                break
        return path.strip("/")

    def unstrip_protocol(self, name: str) -> str:
        return "s3rdma://" + name

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict:
        return {}

    def _file_info(self, path: str, size: int, etag: Optional[str], last_modified: Optional[str]) -> dict:
        mtime = _mtime(last_modified)
        return {
            "name": path,
            "size": size,
            "type": "file",
            "ETag": etag,
            "LastModified": mtime,
            "mtime": mtime,
        }

    @staticmethod
    def _dir_info(path: str) -> dict:
        return {"name": path, "size": 0, "type": "directory"}

    def _pages(self, bucket: str, prefix: str, delimiter: Optional[str]):
        token = None
        client = self.client
        while True:
            try:
                page = client.list_objects_v2(
                    bucket, prefix=prefix or None, delimiter=delimiter, continuation_token=token
                )
            except NotFoundError as e:
                raise _not_found(bucket, e) from e
            yield page
            if not page.is_truncated:
                return
            token = page.next_continuation_token

    # ----------------------------------------------------------- listing
    def ls(self, path: str, detail: bool = True, **kwargs: Any) -> list:
        path = self._strip_protocol(path)
        if path == "":
            out = [self._dir_info(b.name) for b in self.client.list_buckets()]
            return out if detail else [o["name"] for o in out]
        bucket, key = split_path(path)
        prefix = key + "/" if key else ""
        out = []
        for page in self._pages(bucket, prefix, "/"):
            for p in page.common_prefixes:
                out.append(self._dir_info(f"{bucket}/{p.rstrip('/')}"))
            for o in page.objects:
                if o.key == prefix:  # a "directory marker" object
                    continue
                out.append(self._file_info(f"{bucket}/{o.key}", o.size, o.etag, o.last_modified))
        if not out and key:
            info = self.info(path)  # a file: ls names it; else FileNotFoundError
            if info["type"] == "file":
                out = [info]
        out.sort(key=lambda i: i["name"])
        return out if detail else [o["name"] for o in out]

    def info(self, path: str, **kwargs: Any) -> dict:
        path = self._strip_protocol(path)
        if path == "":
            return self._dir_info("")
        bucket, key = split_path(path)
        client = self.client
        if not key:
            try:
                client.list_objects_v2(bucket, max_keys=1)
            except NotFoundError as e:
                raise _not_found(path, e) from e
            return self._dir_info(bucket)
        try:
            h = client.head_object(bucket, key)
            return self._file_info(path, h.size, h.etag, h.last_modified)
        except NotFoundError:
            pass
        try:
            page = client.list_objects_v2(bucket, prefix=key + "/", delimiter="/", max_keys=1)
        except NotFoundError as e:
            raise _not_found(path, e) from e
        if page.objects or page.common_prefixes:
            return self._dir_info(path)
        raise _not_found(path)

    def find(self, path: str, maxdepth: Optional[int] = None, withdirs: bool = False, detail: bool = False, **kwargs: Any):
        if maxdepth is not None:
            return super().find(path, maxdepth=maxdepth, withdirs=withdirs, detail=detail, **kwargs)
        path = self._strip_protocol(path)
        if path == "":
            out: dict = {}
            for b in self.ls("", detail=False):
                out.update(self.find(b, withdirs=withdirs, detail=True))
                if withdirs:
                    out[b] = self._dir_info(b)
        else:
            bucket, key = split_path(path)
            prefix = key + "/" if key else ""
            out = {}
            for page in self._pages(bucket, prefix, None):
                for o in page.objects:
                    if o.key.endswith("/"):
                        continue
                    name = f"{bucket}/{o.key}"
                    out[name] = self._file_info(name, o.size, o.etag, o.last_modified)
                    if withdirs:
                        rel = o.key[len(prefix) :].split("/")[:-1]
                        d = f"{bucket}/{prefix}".rstrip("/")
                        for part in rel:
                            d = f"{d}/{part}"
                            out.setdefault(d, self._dir_info(d))
            if withdirs and out:
                out[path] = self._dir_info(path)
            if not out and key:
                try:
                    info = self.info(path)
                except FileNotFoundError:
                    info = None
                if info is not None and info["type"] == "file":
                    out[path] = info
        names = sorted(out)
        return {n: out[n] for n in names} if detail else names

    def modified(self, path: str) -> datetime:
        info = self.info(path)
        if info["type"] != "file" or info.get("mtime") is None:
            raise IsADirectoryError(path) if info["type"] != "file" else ValueError(path)
        return info["mtime"]

    def ukey(self, path: str) -> str:
        return str(self.info(path).get("ETag"))

    # ----------------------------------------------------------- buckets
    def mkdir(self, path: str, create_parents: bool = True, **kwargs: Any) -> None:
        bucket, key = split_path(path)
        if not bucket:
            raise ValueError("no bucket name")
        if key and not create_parents:
            self.info(bucket)  # FileNotFoundError without the bucket
            return
        try:
            self.client.create_bucket(bucket)
        except S3Error as e:
            if e.code not in ("BucketAlreadyOwnedByYou", "BucketAlreadyExists"):
                raise
            if not key:
                raise FileExistsError(bucket) from e

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        bucket, key = split_path(path)
        try:
            self.mkdir(bucket)
        except FileExistsError:
            if not exist_ok and not key:
                raise

    def rmdir(self, path: str) -> None:
        bucket, key = split_path(path)
        if key:
            return  # prefixes vanish with their last object
        try:
            self.client.delete_bucket(bucket)
        except NotFoundError as e:
            raise _not_found(path, e) from e

    # ----------------------------------------------------------- bytes
    def _get_range(self, bucket: str, key: str, start: int, end: int) -> bytes:
        """Bytes [start, end) of an object, through a pooled registered buffer."""
        n = end - start
        if n <= 0:
            return b""
        client = self.client
        if n <= self.default_block_size:
            buf = self._scratch()
            try:
                r = client.get_object(bucket, key, buf, range=(start, end - 1))
                return bytes(memoryview(buf)[: r.bytes])
            finally:
                self._unscratch(buf)
        buf = bytearray(n)
        try:
            r = client.get_object(bucket, key, buf, range=(start, end - 1))
        finally:
            self._release(buf)
        return bytes(buf) if r.bytes == n else bytes(memoryview(buf)[: r.bytes])

    def _size(self, bucket: str, key: str) -> int:
        try:
            return self.client.head_object(bucket, key).size
        except NotFoundError as e:
            raise _not_found(f"{bucket}/{key}", e) from e

    def cat_file(self, path: str, start: Optional[int] = None, end: Optional[int] = None, **kwargs: Any) -> bytes:
        bucket, key = split_path(path)
        if not key:
            raise IsADirectoryError(path)
        size = None
        if start is None or start < 0 or end is None or end < 0:
            size = self._size(bucket, key)
        if start is None:
            start = 0
        elif start < 0:
            start = max(0, size + start)  # type: ignore[operator]
        if end is None:
            end = size
        elif end < 0:
            end = size + end  # type: ignore[operator]
        if size is not None:
            end = min(end, size)  # type: ignore[type-var]
        if end <= start:  # type: ignore[operator]
            if size is None:
                self._size(bucket, key)  # FileNotFoundError where it is missing
            return b""
        try:
            return self._get_range(bucket, key, start, end)  # type: ignore[arg-type]
        except NotFoundError as e:
            raise _not_found(path, e) from e
        except S3Error as e:
            if e.status == 416:  # start past the end
                return b""
            raise

    def cat_ranges(self, paths, starts, ends, max_gap=None, on_error="return", **kwargs):
        if not isinstance(paths, list):
            raise TypeError("paths must be a list")
        if not isinstance(starts, list):
            starts = [starts] * len(paths)
        if not isinstance(ends, list):
            ends = [ends] * len(paths)
        if len(starts) != len(paths) or len(ends) != len(paths):
            raise ValueError("paths, starts and ends differ in length")
        futures = [self.executor().submit(self.cat_file, p, s, e) for p, s, e in zip(paths, starts, ends)]
        out = []
        for f in futures:
            try:
                out.append(f.result())
            except Exception as e:
                if on_error == "return":
                    out.append(e)
                else:
                    raise
        return out

    def pipe_file(self, path: str, value: Any, mode: str = "overwrite", **kwargs: Any) -> None:
        if mode == "create" and self.exists(path):
            raise FileExistsError(path)
        bucket, key = split_path(path)
        if not key:
            raise IsADirectoryError(path)
        try:
            self.client.put_object(bucket, key, value)
        except NotFoundError as e:
            raise _not_found(path, e) from e

    def put_file(self, lpath, rpath, callback=None, mode: str = "overwrite", **kwargs: Any) -> None:
        if os.path.isdir(lpath):
            return
        if mode == "create" and self.exists(rpath):
            raise FileExistsError(rpath)
        bucket, key = split_path(rpath)
        client = self.client
        with open(lpath, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if callback is not None:
                callback.set_size(size)
            if size == 0:
                client.put_object(bucket, key, b"")
            else:
                with mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ) as m:
                    try:
                        client.put_object(bucket, key, m)
                    finally:
                        self._release(m)
            if callback is not None:
                callback.relative_update(size)

    def get_file(self, rpath, lpath, callback=None, outfile=None, **kwargs: Any) -> None:
        if outfile is None and not isinstance(lpath, (str, os.PathLike)):
            outfile = lpath
        bucket, key = split_path(rpath)
        if outfile is None and self.isdir(rpath):
            os.makedirs(lpath, exist_ok=True)
            return
        size = self._size(bucket, key)
        if callback is not None:
            callback.set_size(size)
        client = self.client
        if outfile is not None:
            pos = 0
            while pos < size:
                chunk = self.cat_file(rpath, pos, min(size, pos + self.default_block_size))
                outfile.write(chunk)
                pos += len(chunk)
        else:
            parent = os.path.dirname(os.fspath(lpath))
            if parent:
                os.makedirs(parent, exist_ok=True)
            with open(lpath, "w+b") as f:
                if size:
                    f.truncate(size)
                    with mmap.mmap(f.fileno(), size) as m:
                        try:
                            client.get_object(bucket, key, m)
                        finally:
                            self._release(m)
        if callback is not None:
            callback.relative_update(size)

    def rm_file(self, path: str) -> None:
        bucket, key = split_path(path)
        if not key:
            raise IsADirectoryError(path)
        self.client.delete_object(bucket, key)

    def _rm(self, path: str) -> None:
        self.rm_file(path)

    def rm(self, path, recursive: bool = False, maxdepth: Optional[int] = None) -> None:
        paths = path if isinstance(path, list) else [path]
        for p in paths:
            p = self._strip_protocol(p)
            bucket, key = split_path(p)
            if recursive:
                for name in self.find(p, maxdepth=maxdepth):
                    self.rm_file(name)
                if not key:
                    try:
                        self.rmdir(bucket)
                    except (FileNotFoundError, S3Error):
                        pass
            else:
                info = self.info(p)
                if info["type"] == "directory":
                    raise IsADirectoryError(p)
                self.rm_file(p)

    def cp_file(self, path1: str, path2: str, **kwargs: Any) -> None:
        self.pipe_file(path2, self.cat_file(path1))

    def invalidate_cache(self, path: Optional[str] = None) -> None:
        pass  # nothing is cached

    def _open(
        self,
        path: str,
        mode: str = "rb",
        block_size: Optional[int] = None,
        autocommit: bool = True,
        cache_options: Optional[dict] = None,
        **kwargs: Any,
    ):
        if mode == "rb":
            return S3RdmaFile(self, path, block_size=block_size, cache_options=cache_options, **kwargs)
        if mode in ("wb", "xb"):
            if not autocommit:
                raise NotImplementedError("s3rdma writes commit on close (autocommit=False is not supported)")
            if mode == "xb" and self.exists(path):
                raise FileExistsError(path)
            return S3RdmaWriter(self, path, block_size=block_size)
        raise NotImplementedError(f"mode {mode!r}: s3rdma files are read (rb) or written whole (wb, xb)")


class _RdmaCache:
    """fsspec's cache interface (``_fetch(start, stop)``) over two windows
    in buffers registered once: readahead (``blocksize``) and tail
    (``footer``)."""

    name = "hipobj-rdma"

    def __init__(self, file: "S3RdmaFile", blocksize: int, footer: int) -> None:
        self.f = file
        self.size = file.size
        self.blocksize = max(1, min(blocksize, self.size))
        self.footer = min(footer, self.size)
        self.buf: Optional[bytearray] = None
        self.lo = self.hi = 0  # readahead window [lo, hi)
        self.tail: Optional[bytearray] = None
        self.tail_lo = self.size
        self.hits = self.misses = 0

    def _get(self, into: Any, start: int, stop: int) -> None:
        f = self.f
        f.fs.client.get_object(f.bucket, f.key, into, range=(start, stop - 1))

    def _fetch(self, start: Optional[int], stop: Optional[int]) -> bytes:
        start = 0 if start is None else start
        stop = self.size if stop is None else min(stop, self.size)
        if start >= stop:
            return b""
        out = []
        pos = start
        while pos < stop:
            if self.tail is not None and pos >= self.tail_lo:
                out.append(bytes(memoryview(self.tail)[pos - self.tail_lo : stop - self.tail_lo]))
                self.hits += 1
                pos = stop
            elif self.lo <= pos < self.hi:
                end = min(stop, self.hi)
                # a copy now: a refill for the rest reuses the buffer
                out.append(bytes(memoryview(self.buf)[pos - self.lo : end - self.lo]))  # type: ignore[arg-type]
                self.hits += 1
                pos = end
            elif self.tail is None and 0 < self.footer and self.blocksize < self.size and pos >= self.size - self.footer:
                # the first read near the end: the tail, whole
                self.tail = bytearray(self.footer)
                self.tail_lo = self.size - self.footer
                self._get(self.tail, self.tail_lo, self.size)
                self.misses += 1
            elif stop - pos > self.blocksize:
                # larger than the window: straight into a buffer of its size
                big = bytearray(stop - pos)
                try:
                    self._get(big, pos, stop)
                finally:
                    self.f.fs._release(big)
                out.append(big)
                self.misses += 1
                pos = stop
            else:
                if self.buf is None:
                    self.buf = bytearray(self.blocksize)
                # a file within one window is read whole
                lo = 0 if self.size <= self.blocksize else pos
                hi = min(self.size, lo + self.blocksize)
                self.lo = self.hi = 0  # invalid while it fills
                self._get(self.buf, lo, hi)
                self.lo, self.hi = lo, hi
                self.misses += 1
        if len(out) == 1 and isinstance(out[0], bytes):
            return out[0]
        return b"".join(out)

    def _log_stats(self) -> str:
        return f", {self.name}: {self.hits} hits, {self.misses} misses"

    def close(self) -> None:
        fs = self.f.fs
        for b in (self.buf, self.tail):
            if b is not None:
                fs._release(b)
        self.buf = self.tail = None
        self.lo = self.hi = 0
        self.tail_lo = self.size


class S3RdmaFile(AbstractBufferedFile):
    """A file open for reading: ranged RDMA GETs through :class:`_RdmaCache`
    (``cache_options={"footer_size": n}`` sizes the tail window)."""

    def __init__(self, fs: S3RdmaFileSystem, path: str, block_size: Optional[int] = None, cache_options: Optional[dict] = None, size: Optional[int] = None, **kwargs: Any) -> None:
        path = fs._strip_protocol(path)
        self.bucket, self.key = split_path(path)
        if not self.key:
            raise IsADirectoryError(path)
        opts = dict(cache_options or {})
        footer = int(opts.pop("footer_size", fs.default_footer_size))
        if size is None:
            try:
                size = fs.client.head_object(self.bucket, self.key).size
            except NotFoundError as e:
                raise _not_found(path, e) from e
        super().__init__(
            fs, path, mode="rb", block_size=block_size or fs.default_block_size, cache_type="none", size=size, **kwargs
        )
        self.cache = _RdmaCache(self, self.blocksize, footer)

    def _fetch_range(self, start: int, end: int) -> bytes:
        return self.cache._fetch(start, end)


class S3RdmaWriter(io.BufferedIOBase):
    """A file open for writing: bytes collect in registered ``block_size``
    buffers; on close a file within one buffer is one PUT, a larger one a
    multipart upload (parts ``fs.concurrency`` at once, each from its
    buffer; a failure aborts the upload)."""

    def __init__(self, fs: S3RdmaFileSystem, path: str, block_size: Optional[int] = None) -> None:
        super().__init__()
        self.fs = fs
        self.path = fs._strip_protocol(path)
        self.bucket, self.key = split_path(self.path)
        if not self.key:
            raise IsADirectoryError(self.path)
        self.mode = "wb"
        self.blocksize = max(5 * MIB, int(block_size or fs.default_block_size))
        self._buf: Optional[bytearray] = None
        self._n = 0  # bytes in _buf
        self._pos = 0  # bytes written in all
        self._free: list[bytearray] = []
        self._upload_id: Optional[str] = None
        self._parts: list[tuple[int, Future]] = []
        self._inflight: list[Future] = []
        self._closed = False

    # io
    def writable(self) -> bool:
        return True

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def tell(self) -> int:
        return self._pos

    @property
    def closed(self) -> bool:  # type: ignore[override]
        return self._closed

    def write(self, data: Any) -> int:
        if self._closed:
            raise ValueError("I/O operation on closed file.")
        mv = memoryview(data).cast("B")
        total = len(mv)
        while len(mv):
            if self._buf is None:
                self._buf = self._free.pop() if self._free else bytearray(self.blocksize)
                self._n = 0
            k = min(len(mv), self.blocksize - self._n)
            self._buf[self._n : self._n + k] = mv[:k]
            self._n += k
            mv = mv[k:]
            if self._n == self.blocksize:
                self._send_part()
        self._pos += total
        return total

    def flush(self) -> None:
        pass  # parts go as buffers fill; the rest on close

    def _send_part(self) -> None:
        fs = self.fs
        client = fs.client
        if self._upload_id is None:
            self._upload_id = client.create_multipart_upload(self.bucket, self.key)
        # at most fs.concurrency parts in flight: wait for the oldest
        while len(self._inflight) >= fs.concurrency:
            self._inflight.pop(0).result()
        buf, n = self._buf, self._n
        number = len(self._parts) + 1
        upload_id = self._upload_id

        def part() -> Any:
            try:
                return client.upload_part(self.bucket, self.key, upload_id, number, buf, 0, n)
            finally:
                self._free.append(buf)  # type: ignore[arg-type]

        fut = fs.executor().submit(part)
        self._parts.append((number, fut))
        self._inflight.append(fut)
        self._buf, self._n = None, 0

    def close(self) -> None:
        if self._closed:
            return
        fs = self.fs
        client = fs.client
        try:
            if self._upload_id is None:
                data = memoryview(self._buf)[: self._n] if self._buf is not None else b""
                client.put_object(self.bucket, self.key, data if self._n else b"")
            else:
                if self._n:
                    self._send_part()
                results = [(num, f.result()) for num, f in self._parts]
                client.complete_multipart_upload(self.bucket, self.key, self._upload_id, [r for _, r in results])
        except BaseException:
            if self._upload_id is not None:
                for _, f in self._parts:
                    try:
                        f.result()
                    except BaseException:
                        pass
                try:
                    client.abort_multipart_upload(self.bucket, self.key, self._upload_id)
                except Exception:
                    pass
            raise
        finally:
            self._closed = True
            for b in self._free + ([self._buf] if self._buf is not None else []):
                fs._release(b)
            self._free, self._buf = [], None

    def discard(self) -> None:
        """Drops what was written (aborts a multipart upload)."""
        if self._closed:
            return
        self._closed = True
        if self._upload_id is not None:
            for _, f in self._parts:
                try:
                    f.result()
                except BaseException:
                    pass
            self.fs.client.abort_multipart_upload(self.bucket, self.key, self._upload_id)

    def __enter__(self) -> "S3RdmaWriter":
        return self

    def __exit__(self, exc_type, *args: Any) -> None:
        if exc_type is not None:
            self.discard()
        else:
            self.close()


fsspec.register_implementation("s3rdma", S3RdmaFileSystem, clobber=True)
