//! Authentication of incoming requests (SigV4, SigV2, signed forms).
//!
//! - [`verify`] checks a request's signature, header-signed
//!   (`Authorization: AWS4-HMAC-SHA256 ...`) or presigned (`X-Amz-*` query
//!   parameters), against the configured [`Credentials`], and says in
//!   [`Verified::body`] what the client signed about the body. Signature
//!   Version 2 (`Authorization: AWS key:signature`, or `AWSAccessKeyId`,
//!   `Signature` and `Expires` in the query) is verified by `sigv2.rs`.
//! - [`post_form`] checks a browser-based upload's form: its SigV4 or SigV2
//!   form signature and its POST policy.
//! - [`decode_body`] turns the body into what the client meant: aws-chunked
//!   decoded with every chunk signature checked in order and a trailing
//!   checksum (`x-amz-trailer: x-amz-checksum-*`) checked against the
//!   decoded bytes (400 `BadDigest`), or a plain body whose SHA-256 is
//!   checked at its end. It streams; at most one chunk is buffered, two
//!   with a trailing checksum, whose last chunk is held back until the
//!   checksum has checked out, so that a consumer never gets the whole of
//!   a body whose checksum is wrong. The trailer is consumed here: the
//!   decoded body does not carry it on ([`decode_body_with_trailers`]
//!   hands its headers over; the proxy passes a trailing checksum on to
//!   the store, `crate::plain::rechunk`).
//! - The canonical request's pieces (`canonical`) are shared with the
//!   signing of outbound requests to the store
//!   (`crate::upstream::sign_request`).
//!
//! The canonical request follows AWS SigV4 for S3: the canonical URI is the
//! raw path as received (S3 neither re-encodes nor normalizes it); query
//! keys and values are decoded then re-encoded with the unreserved set
//! `A-Za-z0-9-_.~` and sorted; signed header values are trimmed with runs
//! of spaces collapsed. As Garage does, `host` and every `x-amz-*` header
//! present must be signed; an unsigned `x-amz-rdma-token` is refused with
//! its own message.

pub(crate) mod canonical;
pub mod chunk_budget;
mod chunk_parser;
mod chunked;
mod error;
pub mod post_form;
mod settings;
mod sigv2;
mod verified;
mod verify;

pub use chunked::{decode_body, decode_body_with_trailers, TrailingHeaders};
pub use error::AuthError;
pub use settings::{AuthSettings, Credentials, MAX_CHUNK_SIZE, MAX_PRESIGNED_EXPIRES};
pub(crate) use verified::ChainContext;
pub use verified::{BodyMode, Verified};
pub use verify::{is_anonymous, verify, verify_addressed};
