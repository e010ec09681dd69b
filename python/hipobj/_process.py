"""One :class:`hipobj.Client` per process, for the integrations
(:mod:`hipobj.fsspec`, :mod:`hipobj.torch`) whose objects cross ``fork`` and
pickling into data-loader workers."""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Optional

from . import _native

__all__ = ["ProcessClient"]

# Clients inherited across a fork: the child keeps them referenced and never
# uses nor drops them (their threads did not survive the fork, and dropping
# one would wait for them).
_INHERITED: list = []

# Every ProcessClient of this process. Before os.fork (DataLoader workers,
# multiprocessing's fork) each drops its client, whose runtime threads then
# end, so that none of its transfers is in flight at the fork (the child
# could not finish nor release them). The parent opens a new client on its
# next call. (The extension's runtime is built without parking_lot, whose
# process-wide wait table kept forked children's new clients from working
# now and then.)
_LIVE: "weakref.WeakSet[ProcessClient]" = weakref.WeakSet()


def _before_fork() -> None:
    for pc in list(_LIVE):
        pc._drop_before_fork()


os.register_at_fork(before=_before_fork)


class ProcessClient:
    """A :class:`hipobj.Client` per process: opened on first use, and again
    in a forked child (its pid differs), never pickled (``spawn``ed workers
    open their own)."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self._client: Optional[_native.Client] = None
        self._pid: Optional[int] = None
        self._lock = threading.Lock()
        _LIVE.add(self)

    def _drop_before_fork(self) -> None:
        if self._pid != os.getpid() or not self._lock.acquire(blocking=False):
            return
        try:
            self._client = None  # its threads end as it goes (if nothing else holds it)
        finally:
            self._lock.release()

    def get(self) -> _native.Client:
        pid = os.getpid()
        client = self._client
        if client is not None and self._pid == pid:
            return client
        if client is not None:
            # a forked child: the parent's lock may have been held by a
            # thread that is not here
            self._lock = threading.Lock()
        with self._lock:
            if self._client is not None and self._pid != pid:
                _INHERITED.append(self._client)
                self._client = None
            if self._client is None:
                self._client = _native.Client(**self.kwargs)
                self._pid = pid
            return self._client

    def release(self, buf: Any) -> None:
        """Releases ``buf``'s registration where this process's client has
        one (nothing before the client opened, or while a transfer uses it)."""
        client = self._client
        if client is not None and self._pid == os.getpid():
            try:
                client.release(buf)
            except BufferError:
                pass

    def close(self) -> None:
        with self._lock:
            if self._client is not None and self._pid == os.getpid():
                self._client.close()
            self._client = None

    def __getstate__(self) -> dict:
        return {"kwargs": self.kwargs}

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state["kwargs"])  # type: ignore[misc]
