//! The hipObject client library.

pub mod platform;
pub mod select;
