//! Arguments of the Python calls.

use hipobj_s3::CompletedPart;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

use crate::types::Moved;

/// The parts of `complete_multipart_upload`: `(part_number, etag)` pairs
/// or upload_part Results (numbered in order); and the object's size when
/// every part is a Result (their bytes), for the time the server may take
/// to join them.
pub(crate) fn completed_parts(
    parts: &[Bound<'_, PyAny>],
) -> PyResult<(Vec<CompletedPart>, Option<u64>)> {
    let mut done = Vec::with_capacity(parts.len());
    let mut size = Some(0u64);
    for (i, p) in parts.iter().enumerate() {
        let (part_number, etag): (u32, String) = if let Ok(m) = p.cast::<Moved>() {
            let etag = m
                .get()
                .etag
                .clone()
                .ok_or_else(|| PyValueError::new_err(format!("part {} has no ETag", i + 1)))?;
            size = size.map(|s| s + m.get().bytes);
            (i as u32 + 1, etag)
        } else {
            size = None;
            p.extract().map_err(|_| {
                PyTypeError::new_err(
                    "parts must be (part_number, etag) pairs or upload_part Results",
                )
            })?
        };
        done.push(CompletedPart { part_number, etag });
    }
    Ok((done, size))
}

/// `(first, last)` or `"bytes=first-last"`, inclusive.
pub(crate) fn parse_range(r: &Bound<'_, PyAny>) -> PyResult<(u64, u64)> {
    let (first, last): (u64, u64) = if let Ok(s) = r.cast::<PyString>() {
        let s = s.to_str()?;
        let spec = s.trim().strip_prefix("bytes=").unwrap_or(s.trim());
        let parsed = spec.split_once('-').and_then(|(a, b)| {
            Some((a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?))
        });
        parsed.ok_or_else(|| {
            PyValueError::new_err(format!(
                "range {s:?} is not \"bytes=FIRST-LAST\" (both ends, inclusive)"
            ))
        })?
    } else if let Ok(t) = r.cast::<PyTuple>() {
        t.extract().map_err(|_| {
            PyValueError::new_err("range must be (first, last): two non-negative ints, inclusive")
        })?
    } else {
        return Err(PyTypeError::new_err(format!(
            "range must be a (first, last) tuple or \"bytes=first-last\", not {}",
            r.get_type().name()?
        )));
    };
    if last < first {
        return Err(PyValueError::new_err(format!(
            "range {first}-{last} is empty: last must be at least first (both inclusive)"
        )));
    }
    Ok((first, last))
}
