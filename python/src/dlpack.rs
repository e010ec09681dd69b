//! DLPack tensors (`__dlpack__`, the unversioned capsule every producer
//! still offers): the memory of a host or GPU tensor, kept alive by the
//! managed tensor until this export is dropped.
//!
//! The device is the capsule's own (`DLTensor.device`) where it and
//! `__dlpack_device__` differ. Host memory (`kDLCPU`, pinned `kDLCUDAHost`,
//! `kDLROCMHost`) is host memory; a `kDLCUDA` or `kDLROCM` tensor is GPU
//! memory, which the caller must have the client library's GPU runtime
//! confirm before registering it ([`Gpu`]); anything else (managed memory,
//! OpenCL, Vulkan, ...) is refused with a `TypeError` that names it, its
//! capsule consumed and released, before anything reads its pointer.

use std::ffi::{c_void, CStr};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

const CAPSULE: &CStr = c"dltensor";
const USED: &CStr = c"used_dltensor";

/// `kDLCPU`, `kDLCUDAHost` (pinned host memory), `kDLROCMHost`.
const HOST_DEVICES: [i32; 3] = [1, 3, 11];
/// `kDLCUDA`, `kDLROCM`: device memory the client library's GPU runtimes
/// (CUDA, HIP) can register.
const GPU_DEVICES: [i32; 2] = [2, 10];

/// The GPU a DLPack tensor says its memory is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpu {
    pub device_type: i32,
    pub device_id: i32,
}

impl std::fmt::Display for Gpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} device {}",
            device_name(self.device_type),
            self.device_id
        )
    }
}

/// DLPack's name of a device type.
fn device_name(device_type: i32) -> String {
    let name = match device_type {
        1 => "kDLCPU",
        2 => "kDLCUDA",
        3 => "kDLCUDAHost",
        4 => "kDLOpenCL",
        7 => "kDLVulkan",
        8 => "kDLMetal",
        9 => "kDLVPI",
        10 => "kDLROCM",
        11 => "kDLROCMHost",
        12 => "kDLExtDev",
        13 => "kDLCUDAManaged",
        14 => "kDLOneAPI",
        15 => "kDLWebGPU",
        16 => "kDLHexagon",
        17 => "kDLMAIA",
        other => return format!("device type {other}"),
    };
    name.to_string()
}

/// The error for a tensor that is not in host memory.
fn not_host(device_type: i32, device_id: i32, len: usize) -> PyErr {
    PyTypeError::new_err(format!(
        "the DLPack tensor of {len} bytes is on {} device {device_id}, not in host memory or \
         on a GPU hipobj registers (kDLCUDA, kDLROCM); copy it to the CPU or a GPU first \
         (tensor.cpu(), pinned for speed)",
        device_name(device_type)
    ))
}

#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// A consumed DLPack capsule: the managed tensor, whose deleter runs on
/// drop (with the interpreter attached, as producers such as numpy need).
#[derive(Debug)]
pub struct DlPackExport {
    managed: *mut DlManagedTensor,
}

// SAFETY: the managed tensor is owned by this value alone (the capsule was
// renamed "used_dltensor", so neither it nor anyone else calls the deleter),
// it is only read while the value lives, and the deleter runs once, on drop,
// with the interpreter attached: nothing in it is tied to the thread that
// made it.
unsafe impl Send for DlPackExport {}
// SAFETY: shared access only reads the (immutable) tensor description.
unsafe impl Sync for DlPackExport {}

impl Drop for DlPackExport {
    fn drop(&mut self) {
        let managed = self.managed;
        Python::attach(|_| {
            // SAFETY: `managed` came from a valid "dltensor" capsule that we
            // renamed, so we own it, and this is the only call of its
            // deleter.
            unsafe {
                if let Some(deleter) = (*managed).deleter {
                    deleter(managed);
                }
            }
        });
    }
}

/// The memory of a DLPack tensor: (address, bytes, the GPU it is on, if
/// any, export).
pub fn export(obj: &Bound<'_, PyAny>) -> PyResult<(usize, usize, Option<Gpu>, DlPackExport)> {
    // What the producer says, checked against its capsule below.
    let said: Option<(i32, i32)> = obj
        .call_method0("__dlpack_device__")
        .and_then(|d| d.extract())
        .ok();
    let capsule = obj.call_method0("__dlpack__")?;
    let ptr = capsule.as_ptr();
    // SAFETY: `ptr` is a live object (held by `capsule`); the calls only
    // inspect it, and the name is a NUL-terminated string.
    let managed = unsafe {
        if pyo3::ffi::PyCapsule_IsValid(ptr, CAPSULE.as_ptr()) != 1 {
            return Err(PyTypeError::new_err(
                "__dlpack__ did not return a \"dltensor\" capsule",
            ));
        }
        let p = pyo3::ffi::PyCapsule_GetPointer(ptr, CAPSULE.as_ptr()) as *mut DlManagedTensor;
        if p.is_null() || pyo3::ffi::PyCapsule_SetName(ptr, USED.as_ptr()) != 0 {
            return Err(PyErr::fetch(obj.py()));
        }
        p
    };
    // From here on the deleter is ours to call: `ex` does it on every path.
    let ex = DlPackExport { managed };
    // SAFETY: the producer keeps the tensor description valid until the
    // deleter runs; `ndim` entries of shape (and strides, when not null).
    let (addr, len, device, compact) = unsafe {
        let t = &(*managed).dl_tensor;
        let device = (t.device.device_type, t.device.device_id);
        let ndim = usize::try_from(t.ndim)
            .map_err(|_| PyValueError::new_err("DLPack tensor with a negative ndim"))?;
        let shape: &[i64] = if ndim == 0 {
            &[]
        } else {
            std::slice::from_raw_parts(t.shape, ndim)
        };
        let strides: Option<&[i64]> = if t.strides.is_null() || ndim == 0 {
            None
        } else {
            Some(std::slice::from_raw_parts(t.strides, ndim))
        };
        let bits = u64::from(t.dtype.bits) * u64::from(t.dtype.lanes);
        if bits == 0 || bits % 8 != 0 {
            return Err(PyValueError::new_err(format!(
                "DLPack dtype of {bits} bits per element is not whole bytes"
            )));
        }
        let item = bits / 8;
        let mut count: u64 = 1;
        for d in shape {
            let d = u64::try_from(*d)
                .map_err(|_| PyValueError::new_err("DLPack tensor with a negative dimension"))?;
            count = count.saturating_mul(d);
        }
        let compact = strides.is_none_or(|st| row_major(shape, st));
        let len = usize::try_from(count.saturating_mul(item))
            .map_err(|_| PyValueError::new_err("DLPack tensor too large"))?;
        let addr = (t.data as usize)
            .checked_add(t.byte_offset as usize)
            .ok_or_else(|| PyValueError::new_err("DLPack data pointer overflows"))?;
        (addr, len, device, compact)
    };
    // The capsule's device first: it wins over what the producer said.
    let mut gpu = None;
    for (device_type, device_id) in [Some(device), said].into_iter().flatten() {
        if GPU_DEVICES.contains(&device_type) {
            gpu.get_or_insert(Gpu {
                device_type,
                device_id,
            });
        } else if !HOST_DEVICES.contains(&device_type) {
            // `ex` releases the tensor (its deleter runs) as this returns.
            return Err(not_host(device_type, device_id, len));
        }
    }
    if !compact {
        return Err(PyValueError::new_err(
            "the DLPack tensor is not C-contiguous: call .contiguous() first",
        ));
    }
    Ok((addr, len, gpu, ex))
}

/// Whether `strides` (in elements) are those of a compact row-major
/// tensor of `shape` (dimensions of size 1 may have any stride).
fn row_major(shape: &[i64], strides: &[i64]) -> bool {
    let mut expect: i64 = 1;
    for (d, s) in shape.iter().zip(strides).rev() {
        if *d != 1 && *s != expect {
            return false;
        }
        expect = expect.saturating_mul(*d);
    }
    true
}
