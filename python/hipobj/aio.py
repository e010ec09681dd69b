"""asyncio API: :class:`Client` has the calls of :class:`hipobj.Client` as
coroutines.

Each call runs the blocking call in a worker thread (``asyncio.to_thread``),
where it releases the GIL while bytes move, so the event loop and other
calls keep running. A cancelled call stops waiting, but the transfer in the
worker runs to its end (bounded by the client's timeouts), and the buffer
stays exported and registered until then: never reuse a buffer whose call
was cancelled until the transfer could have finished, or call
``await client.drain()`` first.

    import asyncio, numpy as np
    from hipobj.aio import Client

    async def main():
        c = Client(endpoint="http://127.0.0.1:9000")
        bufs = [np.empty(1 << 20, np.uint8) for _ in range(8)]
        await asyncio.gather(*(c.get_object("b", f"k{i}", b) for i, b in enumerate(bufs)))
"""

import asyncio

from . import _native

__all__ = ["Client"]


class Client:
    """The asyncio client: the same arguments as :class:`hipobj.Client`,
    or ``Client(sync=hipobj.Client(...))`` to share one (its registrations
    and connections)."""

    def __init__(self, *args, sync=None, **kwargs):
        self.sync = sync if sync is not None else _native.Client(*args, **kwargs)
        self._running = set()

    def __repr__(self):
        return f"hipobj.aio.Client({self.sync!r})"

    async def _call(self, name, *args, **kwargs):
        method = getattr(self.sync, name)
        task = asyncio.ensure_future(asyncio.to_thread(method, *args, **kwargs))
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        # shield: a cancelled caller leaves the thread's future to finish
        # (and be tracked by drain()).
        return await asyncio.shield(task)

    async def drain(self):
        """Waits until every call started from this client (cancelled ones
        too) has ended in its thread."""
        while self._running:
            await asyncio.gather(*list(self._running), return_exceptions=True)

    async def get_object(self, bucket, key, into, offset=0, range=None):
        return await self._call("get_object", bucket, key, into, offset, range)

    async def put_object(self, bucket, key, data, offset=0, length=None):
        return await self._call("put_object", bucket, key, data, offset, length)

    async def upload_part(self, bucket, key, upload_id, part_number, data, offset=0, length=None):
        return await self._call("upload_part", bucket, key, upload_id, part_number, data, offset, length)

    async def head_object(self, bucket, key):
        return await self._call("head_object", bucket, key)

    async def delete_object(self, bucket, key):
        return await self._call("delete_object", bucket, key)

    async def create_bucket(self, bucket):
        return await self._call("create_bucket", bucket)

    async def delete_bucket(self, bucket):
        return await self._call("delete_bucket", bucket)

    async def list_buckets(self):
        return await self._call("list_buckets")

    async def list_objects_v2(self, bucket, prefix=None, delimiter=None, continuation_token=None, start_after=None, max_keys=None):
        return await self._call(
            "list_objects_v2", bucket, prefix, delimiter, continuation_token, start_after, max_keys
        )

    async def list_all(self, bucket, prefix=None, delimiter=None):
        """Every object under ``prefix``, page after page (an async iterator)."""
        token = None
        while True:
            page = await self.list_objects_v2(bucket, prefix=prefix, delimiter=delimiter, continuation_token=token)
            for o in page.objects:
                yield o
            if not page.is_truncated:
                return
            token = page.next_continuation_token

    async def create_multipart_upload(self, bucket, key):
        return await self._call("create_multipart_upload", bucket, key)

    async def complete_multipart_upload(self, bucket, key, upload_id, parts):
        return await self._call("complete_multipart_upload", bucket, key, upload_id, parts)

    async def abort_multipart_upload(self, bucket, key, upload_id):
        return await self._call("abort_multipart_upload", bucket, key, upload_id)

    def release(self, buffer):
        return self.sync.release(buffer)

    def release_all(self):
        return self.sync.release_all()

    async def close(self):
        """Waits for the calls in flight, then releases the registrations."""
        await self.drain()
        self.sync.close()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()
        return False

    def __getattr__(self, name):
        # Properties (endpoint, rdma_available, registered_buffers, ...).
        return getattr(self.sync, name)
