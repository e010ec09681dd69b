//! `include/hipobj.h` against the Rust declarations of `src/ffi/types.rs`
//! (and the constants of `ffi`, the error codes of `OpError`): a C program
//! generated into a temporary directory prints, from the real header, the
//! size and alignment of every type, the offset of every struct field, the
//! value of every enumerator and of every numeric `#define`, and each is
//! compared with the Rust side, as `fabric/tests/ibverbs_abi.rs` does for
//! the verbs header.
//!
//! The header is also read as text: an enumerator or a numeric constant
//! it declares that no check here names fails the test, so a new one
//! cannot go unchecked.

#![forbid(unsafe_code)]

use hipobj::ffi::{
    self, HipObjConfig, HipObjConfigV2, HipObjControlEndpointV2, HipObjError, HipObjFinalReplyV2,
    HipObjOps, HipObjOpsV2, HipObjPrepareReplyV2, HipObjTransferReqV2,
};
use hipobj::OpError;
use hipobj_c_layout::{Checks, Program};
use std::collections::BTreeSet;
use std::ffi::{c_int, c_void};
use std::mem::{align_of, offset_of, size_of};
use std::path::PathBuf;

fn header() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/include/hipobj.h"))
}

/// The enumerators of `hipObjOpError_t`, as `OpError` has them.
const OP_ERRORS: [(&str, OpError); 14] = [
    ("hipObjSuccess", OpError::Success),
    ("hipObjInvalidValue", OpError::InvalidValue),
    ("hipObjNotInitialized", OpError::NotInitialized),
    ("hipObjAlreadyInitialized", OpError::AlreadyInitialized),
    ("hipObjRdmaError", OpError::RdmaError),
    ("hipObjS3Error", OpError::S3Error),
    ("hipObjBufNotRegistered", OpError::BufNotRegistered),
    ("hipObjBufAlreadyRegistered", OpError::BufAlreadyRegistered),
    ("hipObjNicNotFound", OpError::NicNotFound),
    ("hipObjDmabufNotSupported", OpError::DmabufNotSupported),
    ("hipObjSizeTooLarge", OpError::SizeTooLarge),
    ("hipObjInternalError", OpError::InternalError),
    ("hipObjNotSupported", OpError::NotSupported),
    ("hipObjBusy", OpError::Busy),
];

/// The header's numeric constants, as the crate has them.
fn constants() -> Vec<(&'static str, i64)> {
    let (major, minor, patch) = hipobj::VERSION;
    vec![
        ("HIPOBJ_VERSION_MAJOR", i64::from(major)),
        ("HIPOBJ_VERSION_MINOR", i64::from(minor)),
        ("HIPOBJ_VERSION_PATCH", i64::from(patch)),
        ("HIPOBJ_BASE_ERR", i64::from(ffi::HIPOBJ_BASE_ERR)),
        ("HIPOBJ_RDMA_OP_PUT", i64::from(ffi::HIPOBJ_RDMA_OP_PUT)),
        ("HIPOBJ_RDMA_OP_GET", i64::from(ffi::HIPOBJ_RDMA_OP_GET)),
        (
            "HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED",
            i64::from(ffi::HIPOBJ_RDMA_REPLY_NOT_IMPLEMENTED),
        ),
        (
            "HIPOBJ_RDMA_REPLY_RECONNECT",
            i64::from(ffi::HIPOBJ_RDMA_REPLY_RECONNECT),
        ),
        ("HIPOBJ_SYNC_TO_HOST", i64::from(ffi::HIPOBJ_SYNC_TO_HOST)),
        (
            "HIPOBJ_SYNC_TO_DEVICE",
            i64::from(ffi::HIPOBJ_SYNC_TO_DEVICE),
        ),
    ]
}

fn checks() -> Checks {
    let mut c = Checks::default();
    // The enum is an int on both sides (`HipObjError::op_error`, the
    // argument of `hipObjGetErrorString`).
    c.layout("hipObjOpError_t", size_of::<c_int>(), align_of::<c_int>());
    for (name, op) in OP_ERRORS {
        c.value(name, op as i64);
    }

    c.layout(
        "hipObjError_t",
        size_of::<HipObjError>(),
        align_of::<HipObjError>(),
    );
    c.offset(
        "hipObjError_t",
        "opError",
        offset_of!(HipObjError, op_error),
    );
    c.offset(
        "hipObjError_t",
        "hipError",
        offset_of!(HipObjError, hip_error),
    );
    let success = HipObjError::SUCCESS;
    c.add_signed(
        "HIPOBJ_SUCCESS.opError",
        "HIPOBJ_SUCCESS.opError",
        i64::from(success.op_error),
    );
    c.add_signed(
        "HIPOBJ_SUCCESS.hipError",
        "HIPOBJ_SUCCESS.hipError",
        i64::from(success.hip_error),
    );

    c.layout(
        "hipObjHandle_t",
        size_of::<*mut c_void>(),
        align_of::<*mut c_void>(),
    );

    c.layout(
        "hipObjOps_t",
        size_of::<HipObjOps>(),
        align_of::<HipObjOps>(),
    );
    c.offset(
        "hipObjOps_t",
        "sendRequest",
        offset_of!(HipObjOps, send_request),
    );
    c.offset(
        "hipObjOps_t",
        "recvReply",
        offset_of!(HipObjOps, recv_reply),
    );

    c.layout(
        "hipObjConfig_t",
        size_of::<HipObjConfig>(),
        align_of::<HipObjConfig>(),
    );
    for (c_name, rust) in [
        ("endpoint", offset_of!(HipObjConfig, endpoint)),
        ("region", offset_of!(HipObjConfig, region)),
        ("accessKey", offset_of!(HipObjConfig, access_key)),
        ("secretKey", offset_of!(HipObjConfig, secret_key)),
        ("flags", offset_of!(HipObjConfig, flags)),
        ("gpuDevice", offset_of!(HipObjConfig, gpu_device)),
        ("nicHint", offset_of!(HipObjConfig, nic_hint)),
    ] {
        c.offset("hipObjConfig_t", c_name, rust);
    }

    // hipobj-rc-v2.
    c.layout(
        "hipObjControlEndpointV2_t",
        size_of::<HipObjControlEndpointV2>(),
        align_of::<HipObjControlEndpointV2>(),
    );
    c.offset(
        "hipObjControlEndpointV2_t",
        "controlEndpoint",
        offset_of!(HipObjControlEndpointV2, control_endpoint),
    );
    c.layout(
        "hipObjConfigV2_t",
        size_of::<HipObjConfigV2>(),
        align_of::<HipObjConfigV2>(),
    );
    for (c_name, rust) in [
        ("v1", offset_of!(HipObjConfigV2, v1)),
        ("control", offset_of!(HipObjConfigV2, control)),
        (
            "connectDeadlineMs",
            offset_of!(HipObjConfigV2, connect_deadline_ms),
        ),
        (
            "transferDeadlineMs",
            offset_of!(HipObjConfigV2, transfer_deadline_ms),
        ),
        (
            "cancelCleanupBudgetMs",
            offset_of!(HipObjConfigV2, cancel_cleanup_budget_ms),
        ),
    ] {
        c.offset("hipObjConfigV2_t", c_name, rust);
    }
    c.layout(
        "hipObjTransferReqV2_t",
        size_of::<HipObjTransferReqV2>(),
        align_of::<HipObjTransferReqV2>(),
    );
    for (c_name, rust) in [
        ("method", offset_of!(HipObjTransferReqV2, method)),
        ("bucket", offset_of!(HipObjTransferReqV2, bucket)),
        ("key", offset_of!(HipObjTransferReqV2, key)),
        ("query", offset_of!(HipObjTransferReqV2, query)),
        ("token", offset_of!(HipObjTransferReqV2, token)),
        ("session", offset_of!(HipObjTransferReqV2, session)),
        ("target", offset_of!(HipObjTransferReqV2, target)),
        ("size", offset_of!(HipObjTransferReqV2, size)),
        ("offset", offset_of!(HipObjTransferReqV2, offset)),
        ("cookie", offset_of!(HipObjTransferReqV2, cookie)),
        ("clientPsn", offset_of!(HipObjTransferReqV2, client_psn)),
        ("deadlineMs", offset_of!(HipObjTransferReqV2, deadline_ms)),
        ("remainingMs", offset_of!(HipObjTransferReqV2, remaining_ms)),
        ("endpoint", offset_of!(HipObjTransferReqV2, endpoint)),
        ("nic", offset_of!(HipObjTransferReqV2, nic)),
        ("nicPort", offset_of!(HipObjTransferReqV2, nic_port)),
        (
            "nicGidIndex",
            offset_of!(HipObjTransferReqV2, nic_gid_index),
        ),
        ("clientQpn", offset_of!(HipObjTransferReqV2, client_qpn)),
        (
            "clientMrAddr",
            offset_of!(HipObjTransferReqV2, client_mr_addr),
        ),
        (
            "clientMrRkey",
            offset_of!(HipObjTransferReqV2, client_mr_rkey),
        ),
    ] {
        c.offset("hipObjTransferReqV2_t", c_name, rust);
    }
    c.layout(
        "hipObjPrepareReplyV2_t",
        size_of::<HipObjPrepareReplyV2>(),
        align_of::<HipObjPrepareReplyV2>(),
    );
    for (c_name, rust) in [
        ("httpStatus", offset_of!(HipObjPrepareReplyV2, http_status)),
        (
            "protocolEcho",
            offset_of!(HipObjPrepareReplyV2, protocol_echo),
        ),
        (
            "unsupportedMarker",
            offset_of!(HipObjPrepareReplyV2, unsupported_marker),
        ),
        (
            "serverToken",
            offset_of!(HipObjPrepareReplyV2, server_token),
        ),
        ("session", offset_of!(HipObjPrepareReplyV2, session)),
        ("serverPsn", offset_of!(HipObjPrepareReplyV2, server_psn)),
        (
            "stagingAddr",
            offset_of!(HipObjPrepareReplyV2, staging_addr),
        ),
        (
            "stagingRkey",
            offset_of!(HipObjPrepareReplyV2, staging_rkey),
        ),
        (
            "stagingPresent",
            offset_of!(HipObjPrepareReplyV2, staging_present),
        ),
    ] {
        c.offset("hipObjPrepareReplyV2_t", c_name, rust);
    }
    c.layout(
        "hipObjFinalReplyV2_t",
        size_of::<HipObjFinalReplyV2>(),
        align_of::<HipObjFinalReplyV2>(),
    );
    for (c_name, rust) in [
        ("httpStatus", offset_of!(HipObjFinalReplyV2, http_status)),
        (
            "protocolEcho",
            offset_of!(HipObjFinalReplyV2, protocol_echo),
        ),
        ("bytes", offset_of!(HipObjFinalReplyV2, bytes)),
        ("cookieEcho", offset_of!(HipObjFinalReplyV2, cookie_echo)),
        ("etag", offset_of!(HipObjFinalReplyV2, etag)),
        ("versionId", offset_of!(HipObjFinalReplyV2, version_id)),
        ("checksumB64", offset_of!(HipObjFinalReplyV2, checksum_b64)),
        (
            "cookiePresent",
            offset_of!(HipObjFinalReplyV2, cookie_present),
        ),
    ] {
        c.offset("hipObjFinalReplyV2_t", c_name, rust);
    }
    c.layout(
        "hipObjOpsV2_t",
        size_of::<HipObjOpsV2>(),
        align_of::<HipObjOpsV2>(),
    );
    for (c_name, rust) in [
        ("v1", offset_of!(HipObjOpsV2, v1)),
        ("sendPrepare", offset_of!(HipObjOpsV2, send_prepare)),
        (
            "sendReadyRequest",
            offset_of!(HipObjOpsV2, send_ready_request),
        ),
        ("finishReady", offset_of!(HipObjOpsV2, finish_ready)),
        ("sendCancel", offset_of!(HipObjOpsV2, send_cancel)),
    ] {
        c.offset("hipObjOpsV2_t", c_name, rust);
    }
    // A hexadecimal constant (not in `constants()`, whose names the
    // header's decimal `#define`s are compared with).
    c.value(
        "HIPOBJ_DIAG_DEADLINE_EXPIRED",
        i64::from(ffi::HIPOBJ_DIAG_DEADLINE_EXPIRED),
    );
    c.layout("uint64_t", size_of::<u64>(), align_of::<u64>());

    // The scalar types of the functions' arguments.
    c.layout("size_t", size_of::<usize>(), align_of::<usize>());
    c.layout("off_t", size_of::<libc::off_t>(), align_of::<libc::off_t>());

    for (name, rust) in constants() {
        c.value(name, rust);
    }
    c
}

/// The enumerators and numeric `#define`s the header declares.
fn declared_names() -> BTreeSet<String> {
    let text = std::fs::read_to_string(header()).expect("read include/hipobj.h");
    let mut names = BTreeSet::new();
    let mut in_enum = false;
    for line in text.lines() {
        let l = line.trim();
        if l.starts_with("typedef enum") {
            in_enum = true;
            continue;
        }
        if in_enum {
            if l.starts_with('}') {
                in_enum = false;
                continue;
            }
            if let Some((name, _)) = l.split_once('=') {
                names.insert(name.trim().to_string());
            }
            continue;
        }
        let mut words = l.split_whitespace();
        if words.next() == Some("#define") {
            if let (Some(name), Some(value)) = (words.next(), words.next()) {
                if value.parse::<i64>().is_ok() {
                    names.insert(name.to_string());
                }
            }
        }
    }
    names
}

#[test]
fn every_enumerator_and_constant_of_the_header_is_checked() {
    let declared = declared_names();
    let checked: BTreeSet<String> = OP_ERRORS
        .iter()
        .map(|(n, _)| n.to_string())
        .chain(constants().into_iter().map(|(n, _)| n.to_string()))
        .collect();
    assert_eq!(
        declared, checked,
        "the header's enumerators and numeric constants against the checks"
    );
    // Every OpError has its enumerator.
    for v in 0..=64 {
        if let Some(op) = OpError::from_raw(v) {
            assert!(
                OP_ERRORS.iter().any(|(_, o)| *o == op),
                "{op:?} has no enumerator in the header"
            );
        }
    }
}

#[test]
fn rust_declarations_match_the_header() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let include = format!("\"{}\"", header().display());
    let program = Program {
        include: &include,
        cc: "gcc",
        flags: &["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"],
    };
    hipobj_c_layout::assert_matches(&checks(), program, dir.path(), "include/hipobj.h");
}
