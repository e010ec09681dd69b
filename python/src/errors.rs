//! `hipobj_s3::Error` as the exceptions of `hipobj._errors`.

use hipobj_s3::settings::SettingsError;
use hipobj_s3::Error;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::BoundObject;

/// Builds `hipobj._errors.<class>(message, **fields)`.
pub fn raise(py: Python<'_>, class: &str, message: String, fields: &[(&str, Py<PyAny>)]) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let cls = py.import("hipobj._errors")?.getattr(class)?;
        let kw = PyDict::new(py);
        for (k, v) in fields {
            kw.set_item(k, v)?;
        }
        let e = cls.call((message.clone(),), Some(&kw))?;
        Ok(PyErr::from_value(e))
    })();
    made.unwrap_or_else(|e| {
        PyRuntimeError::new_err(format!("{message} (and building its exception: {e})"))
    })
}

fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, v: T) -> Py<PyAny> {
    match v.into_pyobject(py) {
        Ok(b) => b.into_any().unbind(),
        Err(_) => py.None(),
    }
}

/// The exception of an S3 client error.
pub fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let message = e.to_string();
    match e {
        Error::S3 {
            status,
            code,
            message: m,
            request_id,
            reply,
        } => {
            let class = if status == 404 {
                "NotFoundError"
            } else {
                "S3Error"
            };
            raise(
                py,
                class,
                message,
                &[
                    ("status", obj(py, status)),
                    ("code", obj(py, code)),
                    ("server_message", obj(py, m)),
                    ("request_id", obj(py, request_id)),
                    ("rdma_reply", obj(py, reply)),
                ],
            )
        }
        Error::RdmaRequired { reason } => raise(
            py,
            "RdmaRequiredError",
            message,
            &[("reason", obj(py, reason))],
        ),
        Error::ChecksumMismatch {
            expected,
            actual,
            path,
        } => raise(
            py,
            "ChecksumMismatchError",
            message,
            &[
                ("expected", obj(py, expected)),
                ("actual", obj(py, actual)),
                ("path", obj(py, path.as_str())),
            ],
        ),
        Error::BufferTooSmall { needed, available } => raise(
            py,
            "BufferTooSmallError",
            message,
            &[
                ("needed", obj(py, needed)),
                ("available", obj(py, available)),
            ],
        ),
        Error::Config(_) | Error::InvalidArgument(_) => {
            raise(py, "InvalidArgumentError", message, &[])
        }
        Error::Transport(_) => raise(py, "TransportError", message, &[]),
        Error::Timeout(_) => raise(py, "TimeoutError", message, &[]),
        Error::Protocol(_) => raise(py, "ProtocolError", message, &[]),
        Error::Library(_) => raise(py, "LibraryError", message, &[]),
        Error::Io(_) => raise(py, "Error", message, &[]),
        _ => raise(py, "Error", message, &[]),
    }
}

/// A settings error as `InvalidArgumentError`, in the words of the
/// `Client` arguments.
pub fn settings_error(py: Python<'_>, e: SettingsError) -> PyErr {
    let message = match e {
        SettingsError::NoEndpoint => {
            "no endpoint: pass endpoint=\"http://host:port\", or set AWS_ENDPOINT_URL".to_string()
        }
        SettingsError::HalfCredentials => "access_key and secret_key go together".to_string(),
        SettingsError::NoCredentials { profile } => format!(
            "no credentials: pass access_key and secret_key, set AWS_ACCESS_KEY_ID and \
             AWS_SECRET_ACCESS_KEY, or give the profile {profile:?} aws_access_key_id and \
             aws_secret_access_key"
        ),
        other => other.to_string(),
    };
    raise(py, "InvalidArgumentError", message, &[])
}
