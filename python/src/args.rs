//! Arguments of the Python calls.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple};

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
