"""Bytes exact into and out of every kind of buffer, by RDMA, at offsets,
in ranges and in parts."""

import hashlib
import uuid
import mmap

import numpy as np
import pytest

import hipobj
from conftest import MIB, make_client


def pattern(n, seed=0):
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8)


def test_bytearray_whole_object_by_rdma(client, bucket):
    data = pattern(3 * MIB + 123).tobytes()
    put = client.put_object(bucket, "k", data)
    assert (put.bytes, put.path, put.parts) == (len(data), "rdma", 1)
    assert put.etag.strip('"') == hashlib.md5(data).hexdigest()
    buf = bytearray(len(data))
    got = client.get_object(bucket, "k", buf)
    assert (got.bytes, got.path) == (len(data), "rdma")
    assert got.checksum == put.checksum and got.checksum_verified
    assert got.etag == put.etag
    assert bytes(buf) == data


def test_numpy_arrays_of_any_dtype(client, bucket):
    src = np.arange(300_000, dtype=np.float32)
    client.put_object(bucket, "f32", src)
    dst = np.zeros_like(src)
    r = client.get_object(bucket, "f32", dst)
    assert r.bytes == src.nbytes and r.path == "rdma"
    assert np.array_equal(dst, src)
    # A 2-D destination, C-contiguous.
    dst2 = np.zeros((600, 500), np.float32)
    client.get_object(bucket, "f32", dst2)
    assert np.array_equal(dst2.ravel(), src)


def test_memoryview_slices_and_offsets_leave_the_rest_alone(client, bucket):
    data = pattern(2 * MIB + 17, 1).tobytes()
    client.put_object(bucket, "k", data)
    base = bytearray(b"\xee" * (len(data) + 5000))
    r = client.get_object(bucket, "k", memoryview(base)[1000 : 1000 + len(data)])
    assert r.bytes == len(data)
    assert bytes(base[1000 : 1000 + len(data)]) == data
    assert base[:1000] == b"\xee" * 1000 and base[1000 + len(data) :] == b"\xee" * 4000
    # offset= into the same buffer: the object lands there.
    base[:] = b"\xee" * len(base)
    r = client.get_object(bucket, "k", base, offset=777)
    assert bytes(base[777 : 777 + len(data)]) == data
    assert base[:777] == b"\xee" * 777 and base[777 + len(data) :] == b"\xee" * (5000 - 777)
    # A numpy view in the middle of a larger array.
    arr = np.full(len(data) + 8192, 0xAB, np.uint8)
    r = client.get_object(bucket, "k", arr[4096 : 4096 + len(data)])
    assert r.bytes == len(data) and arr[4096 : 4096 + len(data)].tobytes() == data
    assert (arr[:4096] == 0xAB).all() and (arr[4096 + len(data) :] == 0xAB).all()
    # Slices of one buffer share one registration (its base).
    assert client.release(base)


def test_a_view_smaller_than_the_object_raises_and_writes_nothing_past_it(client, bucket):
    data = pattern(MIB, 2).tobytes()
    client.put_object(bucket, "k", data)
    arr = np.full(2 * MIB, 7, np.uint8)
    with pytest.raises(hipobj.BufferTooSmallError) as e:
        client.get_object(bucket, "k", arr[: MIB - 1])
    assert e.value.needed == MIB and e.value.available == MIB - 1
    assert isinstance(e.value, ValueError)
    assert (arr == 7).all()
    with pytest.raises(hipobj.BufferTooSmallError):
        client.get_object(bucket, "k", bytearray(MIB - 1))


def test_ranges(client, bucket):
    data = pattern(4 * MIB, 3).tobytes()
    client.put_object(bucket, "k", data)
    buf = bytearray(MIB)
    r = client.get_object(bucket, "k", buf, range=(100, 100 + MIB - 1))
    assert r.bytes == MIB and bytes(buf) == data[100 : 100 + MIB]
    assert r.content_range == f"bytes 100-{100 + MIB - 1}/{len(data)}"
    assert r.object_size == len(data)
    small = bytearray(10)
    r = client.get_object(bucket, "k", small, range="bytes=4194300-4194303")
    assert r.bytes == 4 and bytes(small[:4]) == data[-4:]
    r = client.get_object(bucket, "k", small, offset=6, range=(0, 3))
    assert bytes(small[6:]) == data[:4]


def test_large_objects_move_in_ranged_parts_and_multipart_uploads(server, client, bucket):
    data = pattern(17 * MIB + 5, 4)
    # One PUT (a full-object checksum), read back in 5 MiB ranged parts.
    client.put_object(bucket, "one", data)
    parts_client = make_client(server, part_size=5 * MIB, concurrency=3)
    dst = np.zeros_like(data)
    r = parts_client.get_object(bucket, "one", dst)
    assert (r.bytes, r.parts, r.path) == (data.nbytes, 4, "rdma")
    assert r.checksum_verified
    assert np.array_equal(dst, data)
    # A range larger than a part goes in parts too.
    out = np.zeros(11 * MIB, np.uint8)
    r = parts_client.get_object(bucket, "one", out, range=(MIB, 12 * MIB - 1))
    assert r.parts == 3 and np.array_equal(out, data[MIB : 12 * MIB])
    # A multipart upload.
    r = parts_client.put_object(bucket, "multi", data)
    assert (r.bytes, r.parts, r.path) == (data.nbytes, 4, "rdma")
    assert r.etag.strip('"').endswith("-4")
    dst[:] = 0
    client.get_object(bucket, "multi", dst)
    assert np.array_equal(dst, data)


def test_put_from_read_only_and_partial_buffers(client, bucket):
    data = pattern(MIB + 1, 5).tobytes()
    client.put_object(bucket, "ro", data)  # bytes are read-only: fine for a PUT
    r = client.put_object(bucket, "part", memoryview(data), offset=10, length=1000)
    assert r.bytes == 1000
    buf = bytearray(1000)
    client.get_object(bucket, "part", buf)
    assert bytes(buf) == data[10:1010]
    r = client.put_object(bucket, "empty", b"")
    assert r.bytes == 0
    assert client.head_object(bucket, "empty").size == 0


def test_mmap_destination(client, bucket, tmp_path):
    data = pattern(MIB + 3, 6).tobytes()
    client.put_object(bucket, "k", data)
    path = tmp_path / "out"
    path.write_bytes(b"\0" * len(data))
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), len(data))
        client.get_object(bucket, "k", m)
        assert client.release(m)
        m.flush()
        m.close()
    assert path.read_bytes() == data


def test_dlpack_tensors(client, bucket):
    class Tensor:
        """Only DLPack, no buffer protocol (as a torch tensor)."""

        def __init__(self, a):
            self.a = a

        def __dlpack__(self, **kw):
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    src = np.arange(100_000, dtype=np.int64)
    r = client.put_object(bucket, "t", Tensor(src))
    assert r.bytes == src.nbytes and r.path == "rdma"
    dst = np.zeros_like(src)
    r = client.get_object(bucket, "t", Tensor(dst))
    assert r.bytes == src.nbytes and np.array_equal(dst, src)

    class GpuTensor(Tensor):
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

    # The producer says kDLCUDA: GPU memory the (absent) runtime must confirm.
    with pytest.raises(TypeError, match="on kDLCUDA device 0, but no GPU runtime"):
        client.get_object(bucket, "t", GpuTensor(dst))
    with pytest.raises(ValueError, match="C-contiguous"):
        client.get_object(bucket, "t", Tensor(np.zeros((100, 2000), np.int64)[:, ::2]))


def test_torch_cpu_tensors(client, bucket):
    torch = pytest.importorskip("torch")
    src = torch.arange(50_000, dtype=torch.float32)
    client.put_object(bucket, "torch", src)
    dst = torch.zeros(50_000, dtype=torch.float32)
    r = client.get_object(bucket, "torch", dst)
    assert r.bytes == 200_000 and torch.equal(dst, src)


def test_listing_head_delete_and_multipart_pieces(client, bucket):
    for i in range(3):
        client.put_object(bucket, f"dir/{i}", bytes([i]) * (i + 1))
    client.put_object(bucket, "top", b"x")
    page = client.list_objects_v2(bucket, prefix="dir/")
    assert [(o.key, o.size) for o in page.objects] == [("dir/0", 1), ("dir/1", 2), ("dir/2", 3)]
    page = client.list_objects_v2(bucket, delimiter="/")
    assert page.common_prefixes == ["dir/"] and [o.key for o in page.objects] == ["top"]
    keys = [o.key for o in hipobj.list_all(client, bucket)]
    assert keys == ["dir/0", "dir/1", "dir/2", "top"]
    page = client.list_objects_v2(bucket, max_keys=2)
    assert page.is_truncated and len(page.objects) == 2
    assert bucket in [b.name for b in client.list_buckets()]
    info = client.head_object(bucket, "dir/2")
    assert info.size == 3 and info.etag
    client.delete_object(bucket, "top")
    with pytest.raises(hipobj.NotFoundError) as e:
        client.head_object(bucket, "top")
    assert e.value.status == 404

    data = pattern(11 * MIB, 7)
    uid = client.create_multipart_upload(bucket, "mp")
    p1 = client.upload_part(bucket, "mp", uid, 1, data, length=6 * MIB)
    p2 = client.upload_part(bucket, "mp", uid, 2, data, offset=6 * MIB)
    assert (p1.path, p2.path, p2.bytes) == ("rdma", "rdma", 5 * MIB)
    etag = client.complete_multipart_upload(bucket, "mp", uid, [p1, p2])
    assert etag.strip('"').endswith("-2")
    dst = np.zeros_like(data)
    client.get_object(bucket, "mp", dst)
    assert np.array_equal(dst, data)
    uid = client.create_multipart_upload(bucket, "gone")
    client.upload_part(bucket, "gone", uid, 1, data[: 5 * MIB])
    client.abort_multipart_upload(bucket, "gone", uid)
    with pytest.raises(hipobj.NotFoundError):
        client.complete_multipart_upload(bucket, "gone", uid, [(1, '"x"')])


def test_multipart_pieces_over_plain_http(server, client, bucket):
    """Without the client library (rdma=False) parts go in HTTP bodies."""
    plain = make_client(server, rdma=False)
    data = pattern(11 * MIB, 8)
    uid = plain.create_multipart_upload(bucket, "mp-http")
    p1 = plain.upload_part(bucket, "mp-http", uid, 1, data, length=6 * MIB)
    p2 = plain.upload_part(bucket, "mp-http", uid, 2, memoryview(data)[6 * MIB :])
    assert (p1.path, p2.path, p1.bytes, p2.bytes) == ("http", "http", 6 * MIB, 5 * MIB)
    assert p1.checksum and p1.etag and "turned off" in p1.fallback_reason
    etag = plain.complete_multipart_upload(bucket, "mp-http", uid, [p1, p2])
    assert etag.strip('"').endswith("-2")
    dst = np.zeros_like(data)
    r = client.get_object(bucket, "mp-http", dst)
    assert r.bytes == 11 * MIB and np.array_equal(dst, data)
    # From (part_number, etag) pairs too.
    uid = plain.create_multipart_upload(bucket, "mp-http2")
    p = plain.upload_part(bucket, "mp-http2", uid, 1, bytes(data[:100]))
    assert plain.complete_multipart_upload(bucket, "mp-http2", uid, [(1, p.etag)])
    out = bytearray(100)
    plain.get_object(bucket, "mp-http2", out)
    assert out == bytes(data[:100])
    with pytest.raises(ValueError, match="at least one byte"):
        plain.upload_part(bucket, "mp-http2", uid, 1, b"")
    # put_object above part_size: a multipart upload over HTTP.
    small_parts = make_client(server, rdma=False, part_size=5 * MIB)
    r = small_parts.put_object(bucket, "big-http", data, offset=3)
    assert (r.path, r.parts, r.bytes) == ("http", 3, 11 * MIB - 3)
    assert r.etag.strip('"').endswith("-3")
    dst = np.zeros(11 * MIB - 3, np.uint8)
    client.get_object(bucket, "big-http", dst)
    assert np.array_equal(dst, data[3:])


def test_through_the_gateway_in_front_of_the_store(gateway):
    """The gateway in front of the separately started store (s3s-fs, or
    Ceph RGW in CI's RGW step)."""
    c = make_client(gateway, require_rdma=True)
    name = f"py-gateway-{uuid.uuid4().hex[:8]}"
    c.create_bucket(name)
    data = pattern(9 * MIB + 1, 8)
    r = c.put_object(name, "k", data)
    assert r.path == "rdma"
    dst = np.zeros_like(data)
    r = c.get_object(name, "k", dst)
    assert r.path == "rdma" and np.array_equal(dst, data)
    buf = bytearray(1000)
    c.get_object(name, "k", buf, range=(5000, 5999))
    assert bytes(buf) == data[5000:6000].tobytes()


def test_multipart_through_the_gateway_in_front_of_the_store(gateway):
    """Multipart by RDMA through the gateway: put_object above part_size,
    and the parts by hand. Ceph RGW 16 answers CompleteMultipartUpload with
    an empty ETag; the client recovers the object's ETag (a HEAD), so the
    Result and complete_multipart_upload's answer carry it either way."""
    c = make_client(gateway, require_rdma=True, part_size=5 * MIB)
    name = f"py-gateway-mp-{uuid.uuid4().hex[:8]}"
    c.create_bucket(name)
    data = pattern(11 * MIB + 3, 9)
    r = c.put_object(name, "auto", data)
    assert (r.path, r.parts, r.bytes) == ("rdma", 3, len(data))
    assert r.etag and r.etag.strip('"').endswith("-3"), r.etag
    assert c.head_object(name, "auto").etag == r.etag
    dst = np.zeros_like(data)
    got = c.get_object(name, "auto", dst)
    assert got.path == "rdma" and np.array_equal(dst, data)

    upload = c.create_multipart_upload(name, "by-hand")
    parts = [
        c.upload_part(name, "by-hand", upload, 1, data, offset=0, length=5 * MIB),
        c.upload_part(name, "by-hand", upload, 2, data, offset=5 * MIB, length=len(data) - 5 * MIB),
    ]
    assert [p.path for p in parts] == ["rdma", "rdma"]
    etag = c.complete_multipart_upload(name, "by-hand", upload, parts)
    assert etag and etag.strip('"').endswith("-2"), etag
    assert c.head_object(name, "by-hand").etag == etag
    dst = np.zeros_like(data)
    c.get_object(name, "by-hand", dst)
    assert np.array_equal(dst, data)


@pytest.mark.parametrize("protocol, moved_by", [("v2", "hipobj-rc-v2"), ("handshake", "handshake"), ("auto", "hipobj-rc-v2")])
def test_rdma_protocol_is_chosen(server, protocol, moved_by):
    c = make_client(server, rdma_protocol=protocol)
    try:
        name = f"py-{uuid.uuid4().hex[:12]}"
        c.create_bucket(name)
        data = pattern(2 * MIB + 5).tobytes()
        put = c.put_object(name, "k", data)
        assert (put.path, put.rdma_protocol) == ("rdma", moved_by)
        buf = bytearray(len(data))
        got = c.get_object(name, "k", buf)
        assert (got.path, got.rdma_protocol) == ("rdma", moved_by)
        assert bytes(buf) == data
    finally:
        c.close()


def test_an_unknown_rdma_protocol_is_refused(server):
    with pytest.raises(ValueError, match="rdma_protocol"):
        make_client(server, rdma_protocol="v3")
