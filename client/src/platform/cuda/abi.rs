//! The CUDA driver API's values and C prototypes, as `cuda.h` declares
//! them (the enum or macro each value belongs to is named with it).

use std::ffi::{c_char, c_int, c_uint, c_void};

// `CUresult` (cuda.h, enum cudaError_enum).
/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: c_int = 0;
/// `CUDA_ERROR_INVALID_VALUE`.
pub const CUDA_ERROR_INVALID_VALUE: c_int = 1;
/// `CUDA_ERROR_NO_DEVICE`.
pub const CUDA_ERROR_NO_DEVICE: c_int = 100;
/// `CUDA_ERROR_INVALID_DEVICE`.
pub const CUDA_ERROR_INVALID_DEVICE: c_int = 101;
/// `CUDA_ERROR_NOT_READY`: an event's work has not finished.
pub const CUDA_ERROR_NOT_READY: c_int = 600;
/// `CUDA_ERROR_NOT_SUPPORTED`.
pub const CUDA_ERROR_NOT_SUPPORTED: c_int = 801;

// `CUpointer_attribute` (cuda.h, enum CUpointer_attribute_enum).
/// `CU_POINTER_ATTRIBUTE_MEMORY_TYPE` (data: `CUmemorytype`, an unsigned int).
pub const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
/// `CU_POINTER_ATTRIBUTE_IS_MANAGED` (data: a boolean, read as unsigned int).
pub const CU_POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
/// `CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL` (data: int).
pub const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
/// `CU_POINTER_ATTRIBUTE_RANGE_START_ADDR` (data: `CUdeviceptr`).
pub const CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: c_int = 11;
/// `CU_POINTER_ATTRIBUTE_RANGE_SIZE` (data: size_t).
pub const CU_POINTER_ATTRIBUTE_RANGE_SIZE: c_int = 12;

// `CUmemorytype` (cuda.h, enum CUmemorytype_enum).
/// `CU_MEMORYTYPE_HOST`.
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;

/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD` (cuda.h, enum
/// CUmemRangeHandleType_enum).
pub const CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// `CU_MEMHOSTALLOC_PORTABLE` (cuda.h, macro): pinned for every context.
pub const CU_MEMHOSTALLOC_PORTABLE: c_uint = 0x01;
/// `CU_EVENT_DISABLE_TIMING` (cuda.h, enum CUevent_flags_enum).
pub const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
/// `CU_STREAM_PER_THREAD` (cuda.h, macro `((CUstream)0x2)`): the calling
/// thread's default stream.
pub const CU_STREAM_PER_THREAD: usize = 0x2;

pub(super) type CuResult = c_int;
pub(super) type CuDevice = c_int;
pub(super) type CuPtr = u64;
pub(super) type Handle = *mut c_void;

pub(super) type FnInit = unsafe extern "C" fn(c_uint) -> CuResult;
pub(super) type FnOutInt = unsafe extern "C" fn(*mut c_int) -> CuResult;
pub(super) type FnDeviceGet = unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult;
pub(super) type FnBusId = unsafe extern "C" fn(*mut c_char, c_int, CuDevice) -> CuResult;
pub(super) type FnRetain = unsafe extern "C" fn(*mut Handle, CuDevice) -> CuResult;
pub(super) type FnOnDevice = unsafe extern "C" fn(CuDevice) -> CuResult;
pub(super) type FnCtxState = unsafe extern "C" fn(CuDevice, *mut c_uint, *mut c_int) -> CuResult;
pub(super) type FnPush = unsafe extern "C" fn(Handle) -> CuResult;
pub(super) type FnPop = unsafe extern "C" fn(*mut Handle) -> CuResult;
pub(super) type FnVoid = unsafe extern "C" fn() -> CuResult;
pub(super) type FnAttrs =
    unsafe extern "C" fn(c_uint, *mut c_int, *mut *mut c_void, CuPtr) -> CuResult;
pub(super) type FnHostAlloc = unsafe extern "C" fn(*mut *mut c_void, usize, c_uint) -> CuResult;
pub(super) type FnHostFree = unsafe extern "C" fn(*mut c_void) -> CuResult;
pub(super) type FnHtoDAsync = unsafe extern "C" fn(CuPtr, *const c_void, usize, Handle) -> CuResult;
pub(super) type FnDtoHAsync = unsafe extern "C" fn(*mut c_void, CuPtr, usize, Handle) -> CuResult;
pub(super) type FnHtoD = unsafe extern "C" fn(CuPtr, *const c_void, usize) -> CuResult;
pub(super) type FnDtoH = unsafe extern "C" fn(*mut c_void, CuPtr, usize) -> CuResult;
pub(super) type FnEventCreate = unsafe extern "C" fn(*mut Handle, c_uint) -> CuResult;
pub(super) type FnEventRecord = unsafe extern "C" fn(Handle, Handle) -> CuResult;
pub(super) type FnHandle = unsafe extern "C" fn(Handle) -> CuResult;
pub(super) type FnMemAlloc = unsafe extern "C" fn(*mut CuPtr, usize) -> CuResult;
pub(super) type FnMemFree = unsafe extern "C" fn(CuPtr) -> CuResult;
pub(super) type FnRangeHandle =
    unsafe extern "C" fn(*mut c_void, CuPtr, usize, c_int, u64) -> CuResult;
