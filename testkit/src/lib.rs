//! The end-to-end test harness the workspace's suites share
//! (`test-server/tests`, `integrations/s3-client/tests`,
//! `integrations/cli/tests`, the gateway binary's tests against an external
//! store in `gateway/tests`, and the containers crate in `tests/`):
//!
//! - [`process`]: servers as processes ([`ServerProc`]: the test server,
//!   the gateway; stopped with SIGTERM, then SIGKILL after 5 s, each with a
//!   `TMPDIR` of its own removed when the handle drops; a start that may
//!   fail as [`NotStarted`], with the server's stderr), where the
//!   workspace's binaries are ([`workspace_bin`]), free ports, and this
//!   test binary re-run as a child client process;
//! - [`s3`]: a signing S3 client ([`S3`]), its [`Answer`]s and assertions on
//!   them;
//! - [`rdma`]: the client library on the software provider ([`client`]),
//!   its S3 callbacks over real requests ([`RdmaOps`]), the handshake, data
//!   patterns and CRC-64/NVME;
//! - [`plain`]: s3s-fs served in-process, an S3 server without RDMA
//!   ([`PlainS3`]);
//! - [`tenant`]: key pairs besides the default one ([`Tenant`], each with
//!   its [`S3`] client), the credentials file that gives them to a server
//!   ([`CredentialsFile`]), and the test server started with them
//!   ([`test_server_with_tenants`]).
//!
//! Binaries are passed in by path: a package's own tests name theirs with
//! `env!("CARGO_BIN_EXE_<name>")`, other packages' tests find the
//! workspace's with [`workspace_bin`].

#![forbid(unsafe_code)]

pub mod plain;
pub mod process;
pub mod rc_v2;
pub mod rdma;
pub mod s3;
pub mod tenant;

pub use plain::{BgRuntime, PlainS3};
pub use process::{
    free_port, gateway, gateway_with, healthy, spawn_child, stop_child, test_server,
    try_gateway_with, wait_ready, workspace_bin, NotStarted, Ready, ServerProc, CHILD_READY,
    CHILD_ROLE,
};
pub use rdma::{client, crc64nvme_b64, handshake, pattern, RdmaOps};
pub use s3::{assert_absent, assert_error, assert_object, xml_field, Answer, AK, REGION, S3, SK};
pub use tenant::{test_server_with_tenants, CredentialsFile, Tenant};
