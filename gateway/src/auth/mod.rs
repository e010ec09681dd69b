//! SigV4 authentication of incoming requests and signing of upstream ones (being written).
