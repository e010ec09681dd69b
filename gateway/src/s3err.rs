//! S3 XML error responses (being written).
