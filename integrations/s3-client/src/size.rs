//! Byte counts as the tools take them on their command lines: the parser
//! of [`hipobj_net::size`], which the tools (`hipobj`, `hipobj-bench`)
//! share; re-exported here for the client's users.

pub use hipobj_net::size::parse_size;
