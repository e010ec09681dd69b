//! The one body type the front uses for requests and responses, in both
//! directions: axum's, which wraps any `http_body::Body` of `Bytes`.

pub use axum::body::Body;

/// A boxed error for bodies and services.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
