"""DLPack capsules made by hand (ctypes): the device is the capsule's own;
a GPU tensor (kDLCUDA, kDLROCM) moves through the client library's GPU
runtime (here the CUDA stub, below) and is refused with a TypeError naming
it when no loaded runtime knows its memory, or without the client library;
other devices are refused; every consumed capsule is released (its
deleter runs once)."""

import ctypes
import os
import subprocess

import numpy as np
import pytest

from conftest import MIB, ROOT, make_client


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class DLManagedTensor(ctypes.Structure):
    pass


DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [
    ("dl_tensor", DLTensor),
    ("manager_ctx", ctypes.c_void_p),
    ("deleter", DELETER),
]

PyCapsule_New = ctypes.pythonapi.PyCapsule_New
PyCapsule_New.restype = ctypes.py_object
PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


class HandMade:
    """A tensor with only DLPack: `shape` int32 elements at `data` (a
    numpy array's memory, or a made-up device address), on `device`;
    `said` is what __dlpack_device__ answers."""

    def __init__(self, device, shape, data, said=None, strides=None):
        self.deleted = 0
        self.exported = 0
        self.device = device
        self.said = said if said is not None else device
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(strides))(*strides) if strides else None
        self._data = data
        self._deleter = DELETER(self._delete)
        self._managed = []

    def _delete(self, _ptr):
        self.deleted += 1

    def __dlpack_device__(self):
        return self.said

    def __dlpack__(self, **_kw):
        addr = self._data.ctypes.data if isinstance(self._data, np.ndarray) else self._data
        t = DLTensor(
            data=addr,
            device=DLDevice(*self.device),
            ndim=len(self._shape),
            dtype=DLDataType(0, 32, 1),
            shape=ctypes.cast(self._shape, ctypes.POINTER(ctypes.c_int64)),
            strides=ctypes.cast(self._strides, ctypes.POINTER(ctypes.c_int64)) if self._strides else None,
            byte_offset=0,
        )
        m = DLManagedTensor(dl_tensor=t, manager_ctx=None, deleter=self._deleter)
        self._managed.append(m)
        self.exported += 1
        return PyCapsule_New(ctypes.addressof(m), b"dltensor", None)


def test_a_hand_made_host_capsule_moves_bytes(client, bucket):
    src = np.arange(3 * 1000, dtype=np.int32)
    client.put_object(bucket, "hand", src)
    dst = np.zeros(3 * 1000, np.int32)
    t = HandMade((1, 0), (3, 1000), dst)
    r = client.get_object(bucket, "hand", t)
    assert r.bytes == src.nbytes and np.array_equal(dst, src)
    client.release_all()
    assert t.exported >= 1 and t.deleted == t.exported


@pytest.mark.parametrize(
    "device,name,why",
    [
        ((2, 0), "kDLCUDA device 0", "no GPU runtime"),
        ((10, 1), "kDLROCM device 1", "no GPU runtime"),
        ((13, 0), "kDLCUDAManaged device 0", "not in host memory"),
    ],
)
def test_gpu_capsules_no_runtime_knows_are_refused(client, bucket, device, name, why):
    """The session's client has no GPU runtime (no libcuda, no HIP here)."""
    client.put_object(bucket, "g", b"\0" * 8000)
    # A made-up device address: nothing may read or write it.
    t = HandMade(device, (2, 1000), 0xDEAD0000)
    with pytest.raises(TypeError, match=f"of 8000 bytes is on {name}.*{why}"):
        client.get_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (1, 1)
    with pytest.raises(TypeError, match=name):
        client.put_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (2, 2)


def test_the_capsule_wins_over_dlpack_device(client, bucket):
    """A producer that says CPU but hands over a CUDA tensor is taken as
    the CUDA tensor it is (and refused here, where no runtime knows it)
    before its pointer is touched."""
    client.put_object(bucket, "g", b"\0" * 400)
    t = HandMade((2, 3), (100,), 0xDEAD0000, said=(1, 0))
    with pytest.raises(TypeError, match="kDLCUDA device 3"):
        client.get_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (1, 1)
    # Non-contiguous host capsules are a ValueError (after the device check).
    a = np.zeros(2000, np.int32)
    t = HandMade((1, 0), (1000,), a, strides=(2,))
    with pytest.raises(ValueError, match="C-contiguous"):
        client.get_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (1, 1)


# ---- GPU tensors, through the CUDA stub of the client library's tests ----
#
# No GPU here: the client library loads `client/tests/stubs/cuda_stub.c`,
# compiled by the fixture, as `libcuda` (HIPOBJ_CUDA_LIBRARY). Its "device
# memory" is host memory that it reports as device memory, so the bytes the
# library moves into it can be checked here; this process loads the same
# file with ctypes, which shares the library's copy (one dlopen() handle
# per file), to allocate that memory and read the stub's call log.

STUB_SRC = os.path.join(ROOT, "client", "tests", "stubs", "cuda_stub.c")


def cuda_client(endpoint, so, **kw):
    """A client whose library loads `so` as libcuda, and no HIP library
    (the variables are read when the client is made, then restored)."""
    names = ("HIPOBJ_CUDA_LIBRARY", "HIPOBJ_HIP_LIBRARY")
    saved = {k: os.environ.get(k) for k in names}
    os.environ["HIPOBJ_CUDA_LIBRARY"] = str(so)
    os.environ["HIPOBJ_HIP_LIBRARY"] = "/nonexistent/libamdhip64.so"
    try:
        return make_client(endpoint, **kw)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cuda(server, tmp_path_factory):
    so = tmp_path_factory.mktemp("cuda") / "libcuda-stub.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O1", "-o", str(so), STUB_SRC], check=True)
    stub = ctypes.CDLL(str(so))
    stub.stubAllocDevice.restype = ctypes.c_void_p
    stub.stubAllocDevice.argtypes = [ctypes.c_size_t, ctypes.c_int]
    stub.stubLog.restype = ctypes.c_char_p
    c = cuda_client(server, so, part_size=5 * MIB)
    assert c.rdma_available, c.rdma_error
    yield c, stub
    c.close()


def device_tensor(stub, nbytes, device=0):
    """A kDLCUDA tensor of int32 elements in the stub's device memory."""
    addr = stub.stubAllocDevice(nbytes, device)
    assert addr
    return HandMade((2, device), (nbytes // 4,), addr), addr


def test_a_cuda_tensor_is_written_and_read_by_rdma(cuda, bucket):
    c, stub = cuda
    n = 3 * MIB + 12
    src = np.random.default_rng(5).integers(0, 255, n, dtype=np.uint8)
    c.put_object(bucket, "gpu", src)
    t, addr = device_tensor(stub, n)
    stub.stubLogClear()
    r = c.get_object(bucket, "gpu", t)
    assert (r.bytes, r.path) == (n, "rdma")
    assert ctypes.string_at(addr, n) == src.tobytes()
    log = stub.stubLog().decode()
    # Registered as device memory: the software provider cannot reach
    # device memory (no dma-buf, no plain MR), so through a pinned staging
    # buffer, and into the device by the runtime's asynchronous copy.
    assert "cuMemHostAlloc" in log, log
    assert "cuMemcpyHtoDAsync dst=+0" in log, log
    # And back out of device memory by RDMA READ.
    ctypes.memmove(addr, bytes(reversed(src.tobytes())), n)
    r = c.put_object(bucket, "gpu-back", t)
    assert (r.bytes, r.path) == (n, "rdma")
    back = bytearray(n)
    c.get_object(bucket, "gpu-back", back)
    assert bytes(back) == bytes(reversed(src.tobytes()))
    c.release_all()
    assert t.exported >= 1 and t.deleted == t.exported


def test_a_large_cuda_tensor_goes_in_parts(cuda, bucket):
    """Larger than part_size: ranged GETs and a multipart upload, each part
    by RDMA into or out of its range of the device memory."""
    c, stub = cuda
    n = 12 * MIB + 4
    src = np.random.default_rng(6).integers(0, 255, n, dtype=np.uint8)
    t, addr = device_tensor(stub, n)
    ctypes.memmove(addr, src.ctypes.data, n)
    r = c.put_object(bucket, "big", t)
    assert (r.bytes, r.path) == (n, "rdma")
    got = np.zeros(n, np.uint8)
    c.get_object(bucket, "big", got)
    assert np.array_equal(got, src)
    t2, addr2 = device_tensor(stub, n)
    r = c.get_object(bucket, "big", t2)
    assert (r.bytes, r.path) == (n, "rdma")
    assert ctypes.string_at(addr2, n) == src.tobytes()
    c.release_all()


def test_a_cuda_tensor_through_the_http_fallback(cuda, bucket, proxy_factory):
    """A server without RDMA: the bytes go between HTTP and device memory
    through the runtime's copies (cuMemcpyHtoD / DtoH), never by the CPU
    touching the device pointer."""
    c, stub = cuda
    p = proxy_factory(strip_rdma=True)
    plain = cuda_client(p.url, stub._name)
    try:
        n = 256 * 1024 + 8
        src = np.random.default_rng(7).integers(0, 255, n, dtype=np.uint8)
        c.put_object(bucket, "fb", src)
        t, addr = device_tensor(stub, n)
        stub.stubLogClear()
        r = plain.get_object(bucket, "fb", t)
        assert (r.bytes, r.path) == (n, "http")
        assert ctypes.string_at(addr, n) == src.tobytes()
        assert "cuMemcpyHtoD" in stub.stubLog().decode()
        stub.stubLogClear()
        r = plain.put_object(bucket, "fb2", t)
        assert (r.bytes, r.path) == (n, "http")
        assert "cuMemcpyDtoH" in stub.stubLog().decode()
        back = bytearray(n)
        c.get_object(bucket, "fb2", back)
        assert bytes(back) == src.tobytes()
    finally:
        plain.close()


def test_a_cuda_tensor_no_runtime_knows_is_refused(cuda, bucket):
    """kDLCUDA on host memory the stub did not hand out: the library's CUDA
    runtime does not call it device memory, so it is refused (TypeError),
    never registered as host memory."""
    c, _ = cuda
    c.put_object(bucket, "g", b"\0" * 4000)
    a = np.zeros(1000, np.int32)
    t = HandMade((2, 0), (1000,), a.ctypes.data)
    with pytest.raises(TypeError, match="kDLCUDA device 0.*no GPU runtime"):
        c.get_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (1, 1)


def test_a_gpu_tensor_without_the_client_library_is_refused(server, bucket):
    """rdma=False: no client library, so no GPU runtime to copy with."""
    plain = make_client(server, rdma=False)
    try:
        t = HandMade((2, 0), (100,), 0xDEAD0000)
        with pytest.raises(TypeError, match="kDLCUDA device 0.*client library"):
            plain.get_object(bucket, "g", t)
        with pytest.raises(TypeError, match="kDLCUDA device 0.*client library"):
            plain.put_object(bucket, "g", t)
    finally:
        plain.close()
