//! The gateway end to end: the integration tests of this crate that can share a
//! process, as one test binary (one link instead of one per file).
//! Each file is a module; files whose tests need a process of their
//! own (global state, environment variables) are test binaries of
//! their own in Cargo.toml.

mod auth_body;
mod auth_sigv4;
mod embedded_store;
mod external_common;
mod external_upstream;
mod hostile_chunks;
mod hostile_common;
mod hostile_rc_v2;
mod hostile_rdma;
mod hostile_slowloris;
mod hostile_soak;
mod hostile_stalls;
mod hostile_store_keys;
mod hostile_tenant_scope;
mod hostile_tenants;
mod hostile_tokens;
mod multi_nic;
mod post_object;
mod proxy_forward;
mod proxy_headers;
mod rc_v2;
mod rgw_failover;
mod s3_edges;
mod server_shutdown;
mod sigv2;
mod store_direct;
mod token_alias;
mod upstream_common;
mod upstream_embedded;
mod upstream_failover;
mod upstream_remote;
mod upstream_timeouts;
mod upstream_tls;
