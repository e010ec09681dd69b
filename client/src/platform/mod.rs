//! The platform seams: the library's only routes to the outside world.

pub mod topology;
