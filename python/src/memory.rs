//! Python memory as registered buffers, and the cache of registrations.
//!
//! **Exports.** A [`View`] is an export of an object's memory: a buffer
//! protocol export (`PyObject_GetBuffer`; bytearray, memoryview, mmap,
//! numpy arrays, ...) or a consumed DLPack capsule (torch CPU or GPU tensors). While
//! an export lives the exporter keeps the memory allocated and in place: a
//! bytearray refuses to resize, an mmap to close, a numpy array holds its
//! data, a DLPack producer its storage.
//!
//! **Registrations.** Each [`Entry`] owns an export of the memory it
//! registered (the base object of a numpy view or memoryview, so that
//! slices of one array share one registration) together with the
//! [`Registered`] handle. The entry drops the handle first and releases the
//! export only if that handle was the last (the registration is then gone);
//! if anything still held a handle, the export is leaked, never released
//! under a live registration. So a registered range is always memory that
//! the entry keeps allocated, and no other live object can be at those
//! addresses: a buffer found inside a registered range is that memory, and
//! the lookup by address below is sound. A buffer the program frees cannot
//! be used by a later transfer, because it cannot be freed while registered:
//! the registration is released first (by [`Cache::sweep`] once the program
//! holds no reference to the object, by `Client.release`, by eviction, or
//! when the client is closed).
//!
//! Transfers hold an `Arc<Entry>`: an entry in use is never released, and
//! the last `Arc` (the cache's or a transfer's) releases it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hipobj::{Hipobj, Registered};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyMemoryView;

use crate::dlpack::{self, DlPackExport, Gpu};

/// The largest registration the client library takes.
const MAX_REGISTRATION: usize = hipobj::buffer::MAX_BUFFER_SIZE;

/// What keeps exported memory in place.
#[derive(Debug)]
enum Export {
    Buffer(#[allow(dead_code)] PyUntypedBuffer),
    DlPack(#[allow(dead_code)] DlPackExport),
}

/// An export of one object's memory.
#[derive(Debug)]
pub struct View {
    pub addr: usize,
    pub len: usize,
    pub writable: bool,
    /// One contiguous block (C or Fortran order).
    pub contiguous: bool,
    /// Row-major, as the bytes of an object land in it.
    pub c_contiguous: bool,
    /// A DLPack tensor on a GPU: its memory is never read or written by
    /// the CPU, only registered once a GPU runtime confirms it.
    pub gpu: Option<Gpu>,
    _export: Export,
}

impl View {
    /// Exports `obj`: the buffer protocol, else DLPack.
    pub fn of(obj: &Bound<'_, PyAny>) -> PyResult<View> {
        match PyUntypedBuffer::get(obj) {
            Ok(b) => {
                let (c, f) = (b.is_c_contiguous(), b.is_fortran_contiguous());
                Ok(View {
                    addr: b.buf_ptr() as usize,
                    len: b.len_bytes(),
                    writable: !b.readonly(),
                    contiguous: c || f,
                    c_contiguous: c,
                    gpu: None,
                    _export: Export::Buffer(b),
                })
            }
            Err(e) if obj.hasattr("__dlpack__").unwrap_or(false) => {
                drop(e);
                let (addr, len, gpu, ex) = dlpack::export(obj)?;
                Ok(View {
                    addr,
                    len,
                    writable: true,
                    contiguous: true,
                    c_contiguous: true,
                    gpu,
                    _export: Export::DlPack(ex),
                })
            }
            Err(e) => Err(PyTypeError::new_err(format!(
                "expected an object with the buffer protocol (bytearray, memoryview, mmap, \
                 numpy array) or a DLPack tensor (host memory, kDLCUDA, kDLROCM), got {} ({e})",
                type_name(obj)
            ))),
        }
    }

    /// Exports `obj` as a transfer's source (`write == false`) or
    /// destination, with the checks a caller's buffer needs.
    pub fn of_arg(obj: &Bound<'_, PyAny>, what: &str, write: bool) -> PyResult<View> {
        let v = View::of(obj).map_err(|e| {
            if e.is_instance_of::<PyTypeError>(obj.py()) {
                PyTypeError::new_err(format!("{what}: {}", e.value(obj.py())))
            } else {
                e
            }
        })?;
        if write && !v.writable {
            return Err(PyTypeError::new_err(format!(
                "{what} is read-only ({}): get_object writes into it; pass a bytearray, a \
                 writable numpy array or memoryview",
                type_name(obj)
            )));
        }
        if !v.c_contiguous {
            return Err(PyValueError::new_err(format!(
                "{what} is not C-contiguous: the object's bytes go into one contiguous range \
                 (use numpy.ascontiguousarray, or a contiguous slice)"
            )));
        }
        Ok(v)
    }
}

/// The object's reference count.
fn refcnt(obj: &Bound<'_, PyAny>) -> isize {
    // SAFETY: `obj` is a live object, borrowed while attached.
    unsafe { pyo3::ffi::Py_REFCNT(obj.as_ptr()) }
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The object whose memory `obj` is a view of: a memoryview's `obj`, a
/// numpy array's `base`, followed to the end.
fn owner_of<'py>(obj: &Bound<'py, PyAny>) -> Bound<'py, PyAny> {
    let mut o = obj.clone();
    for _ in 0..64 {
        let next = if o.is_instance_of::<PyMemoryView>() {
            o.getattr("obj").ok()
        } else if o.hasattr("__array_interface__").unwrap_or(false) {
            o.getattr("base").ok()
        } else {
            None
        };
        match next {
            Some(n) if !n.is_none() => o = n,
            _ => break,
        }
    }
    o
}

/// A registration of Python memory, with the export that keeps it there.
#[derive(Debug)]
pub struct Entry {
    pub addr: usize,
    pub len: usize,
    pub writable: bool,
    reg: Option<Registered<'static, 'static>>,
    export: Option<View>,
    /// The object the export is of, and how many of its references the
    /// entry (export and this) holds: when it has no others, the program
    /// has dropped it.
    owner: Option<Py<PyAny>>,
    held: isize,
    last_used: AtomicU64,
}

impl Entry {
    /// The registration.
    pub fn reg(&self) -> &Registered<'static, 'static> {
        match &self.reg {
            Some(r) => r,
            None => unreachable!("the handle lives until drop"),
        }
    }
}

impl Drop for Entry {
    fn drop(&mut self) {
        let reg = self.reg.take();
        let last = reg.as_ref().is_none_or(|r| r.handles() == 1);
        // The last handle deregisters the buffer.
        drop(reg);
        if !last {
            // Something still holds the registration: keep the memory (and
            // its owner) allocated for good rather than free it under it.
            std::mem::forget(self.export.take());
            std::mem::forget(self.owner.take());
        }
    }
}

/// The error for a GPU tensor whose memory no GPU runtime of the client
/// library knows.
pub fn unknown_gpu_memory(gpu: Gpu, len: usize) -> PyErr {
    PyTypeError::new_err(format!(
        "the DLPack tensor of {len} bytes is on {gpu}, but no GPU runtime the client library \
         loaded knows its memory as device memory (CUDA: libcuda.so.1, HIP: libamdhip64.so; \
         HIPOBJ_CUDA_LIBRARY and HIPOBJ_HIP_LIBRARY name others): nothing was registered"
    ))
}

/// The registrations of one client.
#[derive(Debug)]
pub struct Cache {
    lib: Arc<Hipobj>,
    max: usize,
    entries: Mutex<Vec<Arc<Entry>>>,
    clock: AtomicU64,
}

impl Cache {
    pub fn new(lib: Arc<Hipobj>, max: usize) -> Cache {
        Cache {
            lib,
            max,
            entries: Mutex::new(Vec::new()),
            clock: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Entry>>> {
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn touch(&self, e: &Entry) {
        e.last_used.store(
            self.clock.fetch_add(1, Ordering::Relaxed),
            Ordering::Relaxed,
        );
    }

    /// Whether a GPU runtime of the client library calls `[addr, addr +
    /// len)` its device memory.
    pub fn is_device_memory(&self, addr: usize, len: usize) -> bool {
        self.lib.device_memory(addr, len).is_some()
    }

    /// Registrations held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// The entry whose range holds `[addr, addr + len)`.
    fn find(entries: &[Arc<Entry>], addr: usize, len: usize) -> Option<Arc<Entry>> {
        entries
            .iter()
            .find(|e| e.addr <= addr && addr + len <= e.addr + e.len)
            .cloned()
    }

    /// Takes out the entries no transfer uses whose owner the program no
    /// longer references (they are dropped by the caller, after the lock).
    fn take_unreferenced(py: Python<'_>, entries: &mut Vec<Arc<Entry>>) -> Vec<Arc<Entry>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < entries.len() {
            let e = &entries[i];
            let unreferenced = e
                .owner
                .as_ref()
                .is_some_and(|o| refcnt(o.bind(py)) <= e.held);
            if Arc::strong_count(e) == 1 && unreferenced {
                out.push(entries.swap_remove(i));
            } else {
                i += 1;
            }
        }
        out
    }

    /// Releases the registrations of objects the program has dropped;
    /// how many.
    pub fn sweep(&self, py: Python<'_>) -> usize {
        let gone = Self::take_unreferenced(py, &mut self.lock());
        gone.len()
    }

    /// Releases the registration holding `view`'s memory, unless a transfer
    /// uses it; whether one was released.
    pub fn release(&self, view: &View) -> PyResult<bool> {
        let gone = {
            let mut m = self.lock();
            let Some(i) = m
                .iter()
                .position(|e| e.addr <= view.addr && view.addr + view.len <= e.addr + e.len)
            else {
                return Ok(false);
            };
            if Arc::strong_count(&m[i]) > 1 {
                return Err(PyBufferError::new_err(
                    "the buffer is in use by a transfer; release it when the transfer is done",
                ));
            }
            m.swap_remove(i)
        };
        drop(gone);
        Ok(true)
    }

    /// Releases every registration no transfer uses; how many.
    pub fn release_all(&self) -> usize {
        let gone: Vec<_> = {
            let mut m = self.lock();
            let (idle, busy): (Vec<_>, Vec<_>) =
                m.drain(..).partition(|e| Arc::strong_count(e) == 1);
            *m = busy;
            idle
        };
        gone.len()
    }

    /// The registration holding `view` (the export of `obj`), made (for
    /// `obj`'s owner where it holds the view) if there is none;
    /// `write`: for a GET.
    pub fn entry_for(
        &self,
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        view: &View,
        write: bool,
    ) -> PyResult<Arc<Entry>> {
        let check = |e: Arc<Entry>| -> PyResult<Arc<Entry>> {
            if write && !e.writable {
                return Err(PyTypeError::new_err(
                    "the buffer's memory was exported read-only: get_object cannot write it",
                ));
            }
            self.touch(&e);
            Ok(e)
        };
        let gone;
        {
            let mut m = self.lock();
            gone = Self::take_unreferenced(py, &mut m);
            if let Some(e) = Self::find(&m, view.addr, view.len) {
                return check(e);
            }
        }
        drop(gone);
        let (owner, export, held) = self.export_owner(obj, view)?;
        let mut victims = Vec::new();
        let mut m = self.lock();
        if let Some(e) = Self::find(&m, view.addr, view.len) {
            // Another thread registered it meanwhile.
            drop(m);
            drop((export, owner));
            return check(e);
        }
        // Registrations are keyed by their start: one starting where this
        // one would (a smaller view of the same memory) gives way.
        if let Some(i) = m.iter().position(|e| e.addr == export.addr) {
            if Arc::strong_count(&m[i]) > 1 {
                return Err(PyBufferError::new_err(
                    "a transfer in flight uses a registration of part of this buffer; \
                     wait for it, or pass the same buffer it uses",
                ));
            }
            victims.push(m.swap_remove(i));
        }
        while m.len() >= self.max {
            let idle = m
                .iter()
                .enumerate()
                .filter(|(_, e)| Arc::strong_count(e) == 1)
                .min_by_key(|(_, e)| e.last_used.load(Ordering::Relaxed))
                .map(|(i, _)| i);
            match idle {
                Some(i) => victims.push(m.swap_remove(i)),
                None => break,
            }
        }
        if let Some(gpu) = export.gpu {
            // Registered as host memory, a device pointer would be read and
            // written by the CPU: only memory a GPU runtime of the library
            // calls its own device memory goes on.
            if self.lib.device_memory(export.addr, export.len).is_none() {
                return Err(unknown_gpu_memory(gpu, export.len));
            }
        }
        // SAFETY: `export` keeps `[addr, addr + len)` allocated and in place
        // for as long as it lives, and it lives in the entry below until the
        // registration's last handle is gone (`Entry::drop` releases it only
        // then, and leaks it otherwise). The CPU accesses the library makes
        // go through the handle; Python code touching the buffer during a
        // transfer is the program's race to avoid, as with any I/O into a
        // buffer.
        let reg = unsafe { self.lib.register(export.addr, export.len) }
            .map_err(|e| PyBufferError::new_err(format!("registering the buffer: {e}")))?
            .handle();
        let e = Arc::new(Entry {
            addr: export.addr,
            len: export.len,
            writable: export.writable,
            reg: Some(reg),
            export: Some(export),
            owner: Some(owner),
            held,
            last_used: AtomicU64::new(0),
        });
        m.push(e.clone());
        drop(m);
        drop(victims);
        check(e)
    }

    /// An export of the memory to register: of `obj`'s owner when that
    /// holds the view in one contiguous block within the library's limit,
    /// else of `obj` itself. With the owner and the references the entry
    /// will hold to it.
    fn export_owner(
        &self,
        obj: &Bound<'_, PyAny>,
        view: &View,
    ) -> PyResult<(Py<PyAny>, View, isize)> {
        let owner = owner_of(obj);
        if !owner.is(obj) {
            let before = refcnt(&owner);
            if let Ok(v) = View::of(&owner) {
                let holds = v.addr <= view.addr && view.addr + view.len <= v.addr + v.len;
                if holds && v.contiguous && v.len <= MAX_REGISTRATION {
                    let p = owner.clone().unbind();
                    let held = refcnt(&owner) - before;
                    return Ok((p, v, held));
                }
            }
        }
        if view.len > MAX_REGISTRATION {
            return Err(PyValueError::new_err(format!(
                "the buffer is {} bytes, more than the {MAX_REGISTRATION} one registration takes",
                view.len
            )));
        }
        let before = refcnt(obj);
        let v = View::of(obj)?;
        let p = obj.clone().unbind();
        let held = refcnt(obj) - before;
        Ok((p, v, held))
    }
}
