//! The native module of the `hipobj` Python package (`hipobj._native`):
//! S3 over RDMA into Python buffers, built on the client library and
//! `hipobj-s3`. The Python side (`python/hipobj/`) adds the asyncio API,
//! the boto3 bridge and the exceptions.

mod args;
mod client;
mod dlpack;
mod errors;
mod memory;
mod plain;
mod transfer;
mod types;

use pyo3::prelude::*;

/// Settings as `hipobj.Client` resolves them (for tests and tools): a dict
/// of endpoint, region, access_key, nic (the secret key is left out).
#[pyfunction]
#[pyo3(signature = (endpoint=None, access_key=None, secret_key=None, region=None, profile=None, nic=None))]
fn resolve_settings(
    py: Python<'_>,
    endpoint: Option<String>,
    access_key: Option<String>,
    secret_key: Option<String>,
    region: Option<String>,
    profile: Option<String>,
    nic: Option<String>,
) -> PyResult<Py<pyo3::types::PyDict>> {
    let r = hipobj_s3::settings::resolve(&hipobj_s3::settings::Args {
        endpoint,
        profile,
        access_key,
        secret_key,
        region,
        nic,
    })
    .map_err(|e| errors::settings_error(py, e))?;
    let d = pyo3::types::PyDict::new(py);
    d.set_item("endpoint", r.endpoint)?;
    d.set_item("region", r.region)?;
    d.set_item("access_key", r.access_key)?;
    d.set_item("nic", r.nic)?;
    Ok(d.unbind())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<client::Client>()?;
    m.add_class::<types::Moved>()?;
    m.add_class::<types::ObjectInfo>()?;
    m.add_class::<types::ObjectEntry>()?;
    m.add_class::<types::ListPage>()?;
    m.add_class::<types::Bucket>()?;
    m.add_function(wrap_pyfunction!(resolve_settings, m)?)?;
    m.add("VERSION", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
