//! The hipObject client library.

pub mod platform;
