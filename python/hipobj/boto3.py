"""The boto3 bridge: one call makes an existing boto3 S3 client move
object bodies by RDMA.

    import boto3, hipobj.boto3
    s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:9000", ...)
    bridge = hipobj.boto3.enable(s3)
    s3.put_object(Bucket="b", Key="k", Body=b"...")      # by RDMA
    body = s3.get_object(Bucket="b", Key="k")["Body"].read()

After :func:`enable`, the client's ``get_object``, ``put_object``,
``download_fileobj``, ``upload_fileobj``, ``download_file`` and
``upload_file`` go through a :class:`hipobj.Client` made from the boto3
client's endpoint, credentials and region, with ``require_rdma=True``:
when the endpoint does not speak RDMA (or no RDMA device is there, or the
call uses arguments the bridge does not carry: SSE-C, versions,
conditions, metadata, content types, ...) the call goes to boto3's own
method unchanged. The bridge's counters say which way each call went.

The bodies land in (and are sent from) registered memory: ``get_object``
reads into a ``bytearray`` of the object's size (``Body.read()`` then
copies it into ``bytes``, as boto3 returns; ``Body.readinto`` does not),
``download_fileobj``/``upload_fileobj`` move ``part_size`` chunks through
one reused buffer, so their memory stays bounded whatever the object's
size.
"""

import email.utils
import io
import os
import threading

from . import _native
from ._errors import Error, NotFoundError, RdmaRequiredError

__all__ = ["enable", "disable", "Bridge"]

_METHODS = ("get_object", "put_object", "download_fileobj", "upload_fileobj", "download_file", "upload_file")


class _MemoryReader(io.RawIOBase):
    """A raw stream over a bytearray (no copy until read)."""

    def __init__(self, buf):
        self._mv = memoryview(buf)
        self._pos = 0

    def readable(self):
        return True

    def readinto(self, b):
        n = min(len(b), len(self._mv) - self._pos)
        b[:n] = self._mv[self._pos : self._pos + n]
        self._pos += n
        return n

    def read(self, size=-1):
        if size is None or size < 0:
            size = len(self._mv) - self._pos
        end = min(len(self._mv), self._pos + size)
        out = bytes(self._mv[self._pos : end])
        self._pos = end
        return out


def _body(buf):
    from botocore.response import StreamingBody

    return StreamingBody(_MemoryReader(buf), len(buf))


def _http_date(s):
    if not s:
        return None
    try:
        return email.utils.parsedate_to_datetime(s)
    except (TypeError, ValueError):
        return None


def _meta(status, result):
    return {
        "HTTPStatusCode": status,
        "HTTPHeaders": {},
        "RetryAttempts": max(0, (result.attempts if result else 1) - 1),
        "HipobjPath": result.path if result else None,
    }


def _range(spec, size):
    """(first, last) of a Range header, or None if the bridge does not carry it."""
    if not isinstance(spec, str) or not spec.startswith("bytes=") or "," in spec:
        return None
    a, _, b = spec[len("bytes=") :].strip().partition("-")
    try:
        if a == "":
            n = int(b)
            if n <= 0:
                return None
            return max(0, size - n), size - 1
        first = int(a)
        last = int(b) if b else size - 1
    except ValueError:
        return None
    last = min(last, size - 1)
    if first > last:
        return None
    return first, last


class Bridge:
    """What :func:`enable` installed on a boto3 client.

    - ``client``: the :class:`hipobj.Client` (None when the boto3 client
      cannot be bridged; ``why`` says why);
    - ``rdma``: calls whose bytes moved by RDMA;
    - ``fallback``: calls handed to boto3's own methods; ``reasons``: why
      (the latest 16);
    - ``last``: the :class:`hipobj.Result` of the latest bridged transfer.
    """

    def __init__(self, s3, client, why):
        self.s3 = s3
        self.client = client
        self.why = why
        self.rdma = 0
        self.fallback = 0
        self.reasons = []
        self.last = None
        self.originals = {}
        # boto3's own transfer methods call get_object/put_object (from
        # s3transfer's threads): while one of them runs as a fallback, those
        # go straight to boto3, uncounted.
        self._inside = 0
        self._lock = threading.Lock()

    def __repr__(self):
        return f"hipobj.boto3.Bridge(rdma={self.rdma}, fallback={self.fallback}, client={self.client!r})"

    def _fall_back(self, why, name, *args, **kwargs):
        with self._lock:
            self.fallback += 1
            self.reasons = (self.reasons + [f"{name}: {why}"])[-16:]
            self._inside += 1
        try:
            return self.originals[name](*args, **kwargs)
        finally:
            with self._lock:
                self._inside -= 1

    def _passing_through(self):
        with self._lock:
            return self._inside > 0

    def _moved(self, result):
        with self._lock:
            self.last = result
            self.rdma += 1
        return result

    # -- get_object / put_object ------------------------------------------

    def get_object(self, **kwargs):
        if self._passing_through():
            return self.originals["get_object"](**kwargs)
        extra = set(kwargs) - {"Bucket", "Key", "Range"}
        if self.client is None or extra:
            return self._fall_back(self.why or f"arguments {sorted(extra)}", "get_object", **kwargs)
        bucket, key = kwargs["Bucket"], kwargs["Key"]
        try:
            info = self.client.head_object(bucket, key)
        except NotFoundError:
            # boto3 raises its own NoSuchKey ClientError.
            return self._fall_back("the object does not exist", "get_object", **kwargs)
        rng = None
        if "Range" in kwargs:
            rng = _range(kwargs["Range"], info.size)
            if rng is None:
                return self._fall_back(f"Range {kwargs['Range']!r}", "get_object", **kwargs)
        n = info.size if rng is None else rng[1] - rng[0] + 1
        if n == 0:
            return self._fall_back("an empty object", "get_object", **kwargs)
        buf = bytearray(n)
        try:
            r = self.client.get_object(bucket, key, buf, 0, rng)
        except RdmaRequiredError as e:
            return self._fall_back(e.reason or str(e), "get_object", **kwargs)
        finally:
            # A fresh buffer per call: no need to keep it registered.
            self.client.release(buf)
        self._moved(r)
        out = {
            "Body": _body(memoryview(buf)[: r.bytes]),
            "ContentLength": r.bytes,
            "ETag": r.etag or info.etag,
            "LastModified": _http_date(info.last_modified),
            "ContentType": info.content_type or "binary/octet-stream",
            "ResponseMetadata": _meta(206 if rng else 200, r),
        }
        if rng is not None:
            out["ContentRange"] = f"bytes {rng[0]}-{rng[0] + r.bytes - 1}/{info.size}"
        if r.checksum and rng is None:
            out["ChecksumCRC64NVME"] = r.checksum
        return out

    def put_object(self, **kwargs):
        if self._passing_through():
            return self.originals["put_object"](**kwargs)
        extra = set(kwargs) - {"Bucket", "Key", "Body", "ContentLength", "ChecksumAlgorithm"}
        if self.client is None or extra:
            return self._fall_back(self.why or f"arguments {sorted(extra)}", "put_object", **kwargs)
        if kwargs.get("ChecksumAlgorithm", "CRC64NVME") != "CRC64NVME":
            return self._fall_back("another checksum algorithm", "put_object", **kwargs)
        body = kwargs.get("Body", b"")
        if isinstance(body, str):
            body = body.encode()
        elif hasattr(body, "read"):
            pos = body.tell() if hasattr(body, "tell") else None
            data = body.read()
            if pos is not None and hasattr(body, "seek"):
                body.seek(pos)
            body = data.encode() if isinstance(data, str) else data
        try:
            memoryview(body)
        except TypeError:
            return self._fall_back(f"a Body of type {type(body).__name__}", "put_object", **kwargs)
        if len(memoryview(body).cast("B")) == 0:
            return self._fall_back("an empty body", "put_object", **kwargs)
        try:
            r = self.client.put_object(kwargs["Bucket"], kwargs["Key"], body)
        except RdmaRequiredError as e:
            return self._fall_back(e.reason or str(e), "put_object", **kwargs)
        self._moved(r)
        out = {"ETag": r.etag, "ResponseMetadata": _meta(200, r)}
        if r.checksum:
            out["ChecksumCRC64NVME"] = r.checksum
        return out

    # -- file objects -----------------------------------------------------

    def download_fileobj(self, Bucket, Key, Fileobj, ExtraArgs=None, Callback=None, Config=None):
        args = (Bucket, Key, Fileobj)
        kw = {"ExtraArgs": ExtraArgs, "Callback": Callback, "Config": Config}
        if self.client is None or ExtraArgs:
            return self._fall_back(self.why or "ExtraArgs", "download_fileobj", *args, **kw)
        try:
            size = self.client.head_object(Bucket, Key).size
        except NotFoundError:
            return self._fall_back("the object does not exist", "download_fileobj", *args, **kw)
        if size == 0:
            return self._fall_back("an empty object", "download_fileobj", *args, **kw)
        chunk = bytearray(min(size, self.client.part_size))
        mv = memoryview(chunk)
        result = None
        try:
            pos = 0
            while pos < size:
                n = min(len(chunk), size - pos)
                try:
                    r = self.client.get_object(Bucket, Key, mv[:n], 0, (pos, pos + n - 1))
                except RdmaRequiredError as e:
                    if pos == 0:
                        return self._fall_back(e.reason or str(e), "download_fileobj", *args, **kw)
                    raise
                if r.bytes != n:
                    raise Error(f"the object changed during the download: {r.bytes} bytes at {pos}, not {n}")
                Fileobj.write(mv[:n])
                if Callback is not None:
                    Callback(n)
                result = r
                pos += n
        finally:
            mv.release()
            self.client.release(chunk)
        self._moved(result)

    def upload_fileobj(self, Fileobj, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):
        args = (Fileobj, Bucket, Key)
        kw = {"ExtraArgs": ExtraArgs, "Callback": Callback, "Config": Config}
        if self.client is None or ExtraArgs:
            return self._fall_back(self.why or "ExtraArgs", "upload_fileobj", *args, **kw)
        start = Fileobj.tell() if _seekable(Fileobj) else None
        ps = self.client.part_size
        chunk = bytearray(ps)
        mv = memoryview(chunk)

        def fill():
            n = 0
            while n < ps:
                got = _read_into(Fileobj, mv[n:])
                if not got:
                    break
                n += got
            return n

        def rewind_or_raise(e):
            if start is None:
                raise e
            Fileobj.seek(start)
            return self._fall_back(e.reason or str(e), "upload_fileobj", *args, **kw)

        upload_id = None
        try:
            n = fill()
            if n < ps:
                # One PUT (an empty file goes to boto3).
                if n == 0:
                    if start is None:
                        return self.originals["put_object"](Bucket=Bucket, Key=Key, Body=b"")
                    Fileobj.seek(start)
                    return self._fall_back("an empty file", "upload_fileobj", *args, **kw)
                try:
                    r = self.client.put_object(Bucket, Key, mv[:n])
                except RdmaRequiredError as e:
                    return rewind_or_raise(e)
                if Callback is not None:
                    Callback(n)
                self._moved(r)
                return None
            upload_id = self.client.create_multipart_upload(Bucket, Key)
            parts = []
            while n > 0:
                try:
                    r = self.client.upload_part(Bucket, Key, upload_id, len(parts) + 1, mv[:n])
                except RdmaRequiredError as e:
                    self.client.abort_multipart_upload(Bucket, Key, upload_id)
                    upload_id = None
                    return rewind_or_raise(e)
                parts.append((len(parts) + 1, r.etag))
                if Callback is not None:
                    Callback(n)
                n = fill()
            self.client.complete_multipart_upload(Bucket, Key, upload_id, parts)
            upload_id = None
            self._moved(r)
            return None
        finally:
            if upload_id is not None:
                try:
                    self.client.abort_multipart_upload(Bucket, Key, upload_id)
                except Error:
                    pass
            mv.release()
            self.client.release(chunk)

    def download_file(self, Bucket, Key, Filename, ExtraArgs=None, Callback=None, Config=None):
        if self.client is None or ExtraArgs:
            return self._fall_back(
                self.why or "ExtraArgs", "download_file", Bucket, Key, Filename, ExtraArgs, Callback, Config
            )
        tmp = f"{Filename}.hipobj-{os.getpid()}.part"
        try:
            with open(tmp, "wb") as f:
                self.download_fileobj(Bucket, Key, f, None, Callback, Config)
            os.replace(tmp, Filename)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def upload_file(self, Filename, Bucket, Key, ExtraArgs=None, Callback=None, Config=None):
        if self.client is None or ExtraArgs:
            return self._fall_back(
                self.why or "ExtraArgs", "upload_file", Filename, Bucket, Key, ExtraArgs, Callback, Config
            )
        with open(Filename, "rb") as f:
            return self.upload_fileobj(f, Bucket, Key, None, Callback, Config)


def _seekable(f):
    try:
        return f.seekable()
    except (AttributeError, OSError, ValueError):
        return False


def _read_into(f, mv):
    if hasattr(f, "readinto"):
        return f.readinto(mv) or 0
    data = f.read(len(mv))
    if isinstance(data, str):
        data = data.encode()
    mv[: len(data)] = data
    return len(data)


def _hipobj_client_for(s3, kwargs):
    """A hipobj.Client for the boto3 client, or (None, why)."""
    endpoint = s3.meta.endpoint_url
    if not endpoint or not endpoint.startswith("http://"):
        return None, f"the endpoint {endpoint!r} is not plain http:// (hipobj-s3 has no TLS)"
    creds = s3._request_signer._credentials
    if creds is None:
        return None, "the boto3 client has no credentials (unsigned)"
    frozen = creds.get_frozen_credentials()
    if frozen.token:
        return None, "session tokens are not carried by hipobj-s3"
    style = (s3.meta.config.s3 or {}).get("addressing_style") or "path"
    args = dict(
        endpoint=endpoint,
        access_key=frozen.access_key,
        secret_key=frozen.secret_key,
        region=s3.meta.region_name or "us-east-1",
        require_rdma=True,
        addressing_style="virtual" if style == "virtual" else "path",
    )
    args.update(kwargs)
    try:
        return _native.Client(**args), None
    except RdmaRequiredError as e:
        return None, str(e)


def enable(s3, client=None, **kwargs):
    """Makes the boto3 S3 client ``s3`` move bodies by RDMA; returns the
    :class:`Bridge`. ``client``: a :class:`hipobj.Client` to use (made with
    ``require_rdma=True``, or fallbacks move bytes by hipobj's HTTP path
    instead of boto3's); else one is made from ``s3``'s settings, with
    ``kwargs`` (``nic``, ``part_size``, ...) for :class:`hipobj.Client`."""
    if "_hipobj_bridge" in s3.__dict__:
        return s3.__dict__["_hipobj_bridge"]
    why = None
    if client is None:
        client, why = _hipobj_client_for(s3, kwargs)
    bridge = Bridge(s3, client, why)
    for name in _METHODS:
        bridge.originals[name] = getattr(s3, name)
        setattr(s3, name, getattr(bridge, name))
    s3.__dict__["_hipobj_bridge"] = bridge
    return bridge


def disable(s3):
    """Gives the boto3 client its own methods back."""
    bridge = s3.__dict__.pop("_hipobj_bridge", None)
    if bridge is None:
        return
    for name in _METHODS:
        s3.__dict__.pop(name, None)
    if bridge.client is not None:
        bridge.client.close()
