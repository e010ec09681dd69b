"""hipobj: S3 over RDMA straight into the arrays data loaders use.

    import hipobj, numpy as np
    c = hipobj.Client(endpoint="http://127.0.0.1:9000")   # or AWS_* / ~/.aws
    a = np.empty(c.head_object("bucket", "key").size, np.uint8)
    r = c.get_object("bucket", "key", a)                   # r.path == "rdma"

:class:`Client` moves objects between S3 and any object with the buffer
protocol (bytearray, memoryview, mmap, numpy arrays; writable for GET) or a
DLPack tensor (torch CPU tensors; GPU tensors where the client library has the
GPU runtime), by RDMA when the server speaks it (the server
writes or reads the memory itself), else in plain HTTP bodies into the same
memory. The GIL is released while bytes move. Buffers are registered once
and cached; a registration is released when the program drops the buffer
(see :meth:`Client.release`).

:mod:`hipobj.aio` has the same calls for asyncio; :mod:`hipobj.boto3`
makes an existing boto3 client move bodies by RDMA; :mod:`hipobj.fsspec` is
an fsspec filesystem (``s3rdma://``) for pandas, pyarrow and the rest;
:mod:`hipobj.torch` has PyTorch datasets and ``torch.distributed.checkpoint``
storage (importing :mod:`hipobj` imports neither fsspec nor torch).
"""

from ._errors import (
    BufferTooSmallError,
    ChecksumMismatchError,
    Error,
    InvalidArgumentError,
    LibraryError,
    NotFoundError,
    ProtocolError,
    RdmaRequiredError,
    S3Error,
    TimeoutError,
    TransportError,
)
from ._native import (
    VERSION,
    Bucket,
    Client,
    ListPage,
    ObjectEntry,
    ObjectInfo,
    Result,
    resolve_settings,
)

__version__ = VERSION

MIB = 1 << 20

__all__ = [
    "Client",
    "Result",
    "ObjectInfo",
    "ObjectEntry",
    "ListPage",
    "Bucket",
    "resolve_settings",
    "list_all",
    "Error",
    "S3Error",
    "NotFoundError",
    "RdmaRequiredError",
    "ChecksumMismatchError",
    "BufferTooSmallError",
    "InvalidArgumentError",
    "TransportError",
    "TimeoutError",
    "ProtocolError",
    "LibraryError",
]


def list_all(client, bucket, prefix=None, delimiter=None):
    """Every object under ``prefix``, page after page (``ObjectEntry``)."""
    token = None
    while True:
        page = client.list_objects_v2(bucket, prefix=prefix, delimiter=delimiter, continuation_token=token)
        yield from page.objects
        if not page.is_truncated:
            return
        token = page.next_continuation_token
