"""The exceptions of hipobj. Every failure of an S3 operation is a
:class:`hipobj.Error`; bad arguments are ``TypeError`` or ``ValueError``
(:class:`InvalidArgumentError` is both a ``hipobj.Error`` and a
``ValueError``)."""

import builtins

__all__ = [
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


class Error(Exception):
    """A failed S3 operation.

    Attributes (``None`` where they do not apply):

    - ``status``: the HTTP status of the server's answer;
    - ``code``: the S3 error code (``NoSuchKey``, ``AccessDenied``, ...);
    - ``server_message``: the message of the server's error document;
    - ``request_id``: ``x-amz-request-id`` or the document's ``RequestId``;
    - ``rdma_reply``: the ``x-amz-rdma-reply`` of an RDMA request.
    """

    status = None
    code = None
    server_message = None
    request_id = None
    rdma_reply = None

    def __init__(self, message, **fields):
        super().__init__(message)
        self.message = message
        for k, v in fields.items():
            setattr(self, k, v)

    def __str__(self):
        return self.message


class S3Error(Error):
    """The server answered with an S3 error (``status``, ``code``, ...)."""


class NotFoundError(S3Error):
    """The bucket, object or upload does not exist (HTTP 404)."""


class RdmaRequiredError(Error):
    """``require_rdma=True`` and the bytes would have gone over plain HTTP;
    ``reason`` says why RDMA could not be used."""

    reason = None


class ChecksumMismatchError(Error):
    """The bytes received do not match the server's CRC64NVME
    (``expected``, ``actual``, ``path``); discard what was written."""

    expected = None
    actual = None
    path = None


class BufferTooSmallError(Error, ValueError):
    """The object (or range) does not fit in the buffer from the offset
    (``needed`` when known, ``available``); nothing past it was written."""

    needed = None
    available = None


class InvalidArgumentError(Error, ValueError):
    """An argument or setting is unusable (an empty bucket name, no
    endpoint, a bad part size, ...)."""


class TransportError(Error, ConnectionError):
    """The request could not be sent or its answer read, after every attempt."""


class TimeoutError(Error, builtins.TimeoutError):  # noqa: A001 - hipobj.TimeoutError
    """A connection or request timed out, after every attempt."""


class ProtocolError(Error):
    """The server's answer makes no sense (a missing header, bad XML, an
    object that changed between the requests of one GET)."""


class LibraryError(Error):
    """The client library failed (registration, the RDMA connection)."""
