"""Type stubs of hipobj's native module (hipobj._native)."""

from typing import Any, Optional, Protocol, Sequence, Tuple, Union


VERSION: str

class _DLPack(Protocol):
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> Tuple[int, int]: ...

# Any object with the buffer protocol (bytearray, memoryview, mmap, numpy
# arrays; C-contiguous) or a DLPack tensor: host memory (torch CPU tensors) or,
# where the client library has the GPU runtime, kDLCUDA / kDLROCM device memory.
BufferLike = Any
Range = Union[Tuple[int, int], str]

class Result:
    """What a GET, PUT or part did."""

    bytes: int
    path: str  # "rdma", "http" or "mixed"
    etag: Optional[str]
    checksum: Optional[str]  # x-amz-checksum-crc64nvme
    checksum_verified: bool
    object_size: Optional[int]
    content_range: Optional[str]
    status: int
    parts: int
    attempts: int
    fallback_reason: Optional[str]
    #: ``"hipobj-rc-v2"`` or ``"handshake"``: the RDMA protocol that moved
    #: the bytes; ``None`` over HTTP.
    rdma_protocol: Optional[str]

class ObjectInfo:
    size: int
    etag: Optional[str]
    last_modified: Optional[str]
    content_type: Optional[str]
    checksum: Optional[str]

class ObjectEntry:
    key: str
    size: int
    etag: Optional[str]
    last_modified: Optional[str]
    storage_class: Optional[str]

class ListPage:
    objects: list[ObjectEntry]
    common_prefixes: list[str]
    is_truncated: bool
    next_continuation_token: Optional[str]
    key_count: Optional[int]

class Bucket:
    name: str
    creation_date: Optional[str]

class Client:
    """An S3 client that moves objects by RDMA into and out of Python
    buffers, with plain-HTTP fallback.

    Settings resolve as the ``hipobj`` command resolves them: the arguments,
    then ``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``,
    ``AWS_REGION``/``AWS_DEFAULT_REGION``, ``AWS_PROFILE`` and the
    ``~/.aws`` files; the NIC from ``nic``, ``HIPOBJ_NIC``, else ``soft0``.

    ``require_rdma=True`` raises :class:`hipobj.RdmaRequiredError` instead
    of falling back to plain HTTP. ``rdma=False`` never starts the client
    library (plain HTTP only). Objects larger than ``part_size`` move in
    ranged GETs and multipart uploads, ``concurrency`` at once. At most
    ``max_registrations`` buffers stay registered (least recently used
    ones that no transfer uses are released first). Each attempt of a
    request may take ``request_timeout`` seconds plus ``timeout_per_gib``
    for each GiB it moves. ``rdma_protocol`` is ``"v2"`` (hipobj-rc-v2:
    PREPARE and READY), ``"handshake"`` (the token on the S3 request after
    the connect-first handshake) or ``"auto"`` (v2 first, the handshake
    flow where the server does not speak v2); default
    ``HIPOBJ_RDMA_PROTOCOL``, else ``"auto"``.
    """

    def __init__(
        self,
        endpoint: Optional[str] = None,
        access_key: Optional[str] = None,
        secret_key: Optional[str] = None,
        region: Optional[str] = None,
        profile: Optional[str] = None,
        nic: Optional[str] = None,
        require_rdma: bool = False,
        *,
        rdma: bool = True,
        addressing_style: str = "path",
        part_size: int = 64 << 20,
        concurrency: int = 4,
        attempts: int = 2,
        max_registrations: int = 64,
        connect_timeout: float = 5.0,
        request_timeout: float = 10.0,
        timeout_per_gib: float = 30.0,
        rdma_protocol: Optional[str] = None,
    ) -> None: ...
    @property
    def endpoint(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def nic(self) -> str: ...
    @property
    def rdma_available(self) -> bool: ...
    @property
    def rdma_error(self) -> Optional[str]: ...
    @property
    def require_rdma(self) -> bool: ...
    @property
    def part_size(self) -> int: ...
    @property
    def registered_buffers(self) -> int: ...
    @property
    def endpoint_without_rdma(self) -> bool: ...
    def forget_no_rdma(self) -> None: ...
    def get_object(
        self, bucket: str, key: str, into: BufferLike, offset: int = 0, range: Optional[Range] = None
    ) -> Result:
        """GET of the object, or of ``range`` (``(first, last)`` or
        ``"bytes=first-last"``, inclusive), into ``into`` from byte
        ``offset``. The object must fit in the rest of ``into``
        (:class:`hipobj.BufferTooSmallError` otherwise; nothing past it is
        written). The GIL is released while the bytes move; do not touch
        ``into`` from other threads meanwhile."""
    def put_object(
        self, bucket: str, key: str, data: BufferLike, offset: int = 0, length: Optional[int] = None
    ) -> Result:
        """PUT of ``data`` (``length`` bytes from ``offset``, else all); a
        multipart upload above ``part_size``."""
    def upload_part(
        self,
        bucket: str,
        key: str,
        upload_id: str,
        part_number: int,
        data: BufferLike,
        offset: int = 0,
        length: Optional[int] = None,
    ) -> Result:
        """UploadPart of ``data`` (``length`` bytes from ``offset``, else
        all): by RDMA, or in a plain HTTP body (a copy of the bytes) without
        the client library. The Result's ``etag`` goes into
        :meth:`complete_multipart_upload`."""
    def head_object(self, bucket: str, key: str) -> ObjectInfo: ...
    def delete_object(self, bucket: str, key: str) -> None: ...
    def create_bucket(self, bucket: str) -> None: ...
    def delete_bucket(self, bucket: str) -> None: ...
    def list_buckets(self) -> list[Bucket]: ...
    def list_objects_v2(
        self,
        bucket: str,
        prefix: Optional[str] = None,
        delimiter: Optional[str] = None,
        continuation_token: Optional[str] = None,
        start_after: Optional[str] = None,
        max_keys: Optional[int] = None,
    ) -> ListPage: ...
    def create_multipart_upload(self, bucket: str, key: str) -> str: ...
    def complete_multipart_upload(
        self, bucket: str, key: str, upload_id: str, parts: Sequence[Union[Tuple[int, str], Result]]
    ) -> Optional[str]:
        """Completes the upload from ``(part_number, etag)`` pairs or the
        parts' Results (numbered in order); the object's ETag. Each attempt
        may take ``request_timeout`` + ``timeout_per_gib`` per GiB of the
        object (the Results' bytes; ``part_size`` per part from pairs): the
        server joins the parts before it answers. An attempt retried after
        a lost answer that finds the upload gone returns the object's ETag
        when the object is this upload's."""
    def abort_multipart_upload(self, bucket: str, key: str, upload_id: str) -> None: ...
    def release(self, buffer: BufferLike) -> bool:
        """Releases the registration of ``buffer``'s memory now (a
        registered bytearray cannot be resized, nor an mmap closed, until
        then); ``BufferError`` while a transfer uses it."""
    def release_all(self) -> int: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Client": ...
    def __exit__(self, *args: Any) -> bool: ...

def resolve_settings(
    endpoint: Optional[str] = None,
    access_key: Optional[str] = None,
    secret_key: Optional[str] = None,
    region: Optional[str] = None,
    profile: Optional[str] = None,
    nic: Optional[str] = None,
) -> dict[str, str]: ...
