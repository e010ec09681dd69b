//! The S3 store behind the front (being written).
