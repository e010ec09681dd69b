"""DLPack capsules made by hand (ctypes): the device is the capsule's own,
a GPU tensor (kDLCUDA, kDLROCM) is refused with a TypeError naming it and
its size, and every consumed capsule is released (its deleter runs once)."""

import ctypes

import numpy as np
import pytest

import hipobj


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
    "device,name",
    [((2, 0), "kDLCUDA device 0"), ((10, 1), "kDLROCM device 1"), ((13, 0), "kDLCUDAManaged device 0")],
)
def test_gpu_capsules_are_refused_by_their_device(client, bucket, device, name):
    client.put_object(bucket, "g", b"\0" * 8000)
    # A made-up device address: nothing may read or write it.
    t = HandMade(device, (2, 1000), 0xDEAD0000)
    with pytest.raises(TypeError, match=f"of 8000 bytes is on {name}, not in host memory"):
        client.get_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (1, 1)
    with pytest.raises(TypeError, match="tensor.cpu"):
        client.put_object(bucket, "g", t)
    assert (t.exported, t.deleted) == (2, 2)


def test_the_capsule_wins_over_dlpack_device(client, bucket):
    """A producer that says CPU but hands over a CUDA tensor is refused
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
