//! The name and rate helpers of rdma-core (`ibv_wc_status_str`,
//! `ibv_rate_to_mbps` ...): pure tables, with rdma-core's texts.

use hipobj_fabric::WcStatus;
use std::ffi::{c_char, c_int, CStr};

fn cstr(s: &'static CStr) -> *const c_char {
    s.as_ptr()
}

/// `ibv_wc_status_str`.
#[no_mangle]
pub extern "C" fn ibv_wc_status_str(status: u32) -> *const c_char {
    crate::ffi::called("ibv_wc_status_str");
    // The texts are WcStatus::as_str's, NUL-terminated once, here.
    static TEXTS: std::sync::OnceLock<Vec<std::ffi::CString>> = std::sync::OnceLock::new();
    let texts = TEXTS.get_or_init(|| {
        (0..24u32)
            .map(|v| std::ffi::CString::new(WcStatus::from_raw(v).as_str()).unwrap_or_default())
            .collect()
    });
    match texts.get(status as usize) {
        Some(t) => t.as_ptr(),
        None => cstr(c"unknown"),
    }
}

/// `ibv_node_type_str`.
#[no_mangle]
pub extern "C" fn ibv_node_type_str(node_type: c_int) -> *const c_char {
    crate::ffi::called("ibv_node_type_str");
    cstr(match node_type {
        1 => c"InfiniBand channel adapter",
        2 => c"InfiniBand switch",
        3 => c"InfiniBand router",
        4 => c"iWARP NIC",
        5 => c"usNIC",
        6 => c"usNIC UDP",
        7 => c"unspecified",
        _ => c"unknown",
    })
}

/// `ibv_port_state_str`.
#[no_mangle]
pub extern "C" fn ibv_port_state_str(state: u32) -> *const c_char {
    crate::ffi::called("ibv_port_state_str");
    cstr(match state {
        0 => c"PORT_NOP",
        1 => c"PORT_DOWN",
        2 => c"PORT_INIT",
        3 => c"PORT_ARMED",
        4 => c"PORT_ACTIVE",
        5 => c"PORT_ACTIVE_DEFER",
        _ => c"invalid state",
    })
}

/// `ibv_event_type_str`.
#[no_mangle]
pub extern "C" fn ibv_event_type_str(event: u32) -> *const c_char {
    crate::ffi::called("ibv_event_type_str");
    const NAMES: [&CStr; 22] = [
        c"CQ error",
        c"local work queue catastrophic error",
        c"invalid request local work queue error",
        c"local access violation work queue error",
        c"communication established",
        c"send queue drained",
        c"path migrated",
        c"path migration request error",
        c"local catastrophic error",
        c"port active",
        c"port error",
        c"LID change",
        c"P_Key change",
        c"SM change",
        c"SRQ catastrophic error",
        c"SRQ limit reached",
        c"last WQE reached",
        c"client reregistration",
        c"GID table change",
        c"WQ fatal",
        c"device fatal",
        c"unknown",
    ];
    NAMES
        .get(event as usize)
        .map_or(cstr(c"unknown"), |n| n.as_ptr())
}

/// `enum ibv_rate` values with their multiple of 2.5 Gb/s (0 where the
/// rate is not one) and their rate in Mb/s, as rdma-core tabulates them.
const RATES: [(c_int, c_int, c_int); 21] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, 0, 14062),
    (12, 0, 56250),
    (13, 0, 112500),
    (14, 0, 168750),
    (15, 0, 25781),
    (16, 0, 103125),
    (17, 0, 206250),
    (18, 0, 309375),
    (19, 0, 28125),
    (20, 0, 53125),
    (21, 0, 425000),
    (22, 0, 637500),
];

/// `ibv_rate_to_mult`: -1 for a rate that is no multiple of 2.5 Gb/s.
#[no_mangle]
pub extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    crate::ffi::called("ibv_rate_to_mult");
    RATES
        .iter()
        .find(|r| r.0 == rate && r.1 != 0)
        .map_or(-1, |r| r.1)
}

/// `mult_to_ibv_rate`: `IBV_RATE_MAX` (0) when none matches.
#[no_mangle]
pub extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    crate::ffi::called("mult_to_ibv_rate");
    RATES
        .iter()
        .find(|r| r.1 == mult && r.1 != 0)
        .map_or(0, |r| r.0)
}

/// `ibv_rate_to_mbps`: -1 for an unknown rate.
#[no_mangle]
pub extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    crate::ffi::called("ibv_rate_to_mbps");
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

/// `mbps_to_ibv_rate`: `IBV_RATE_MAX` (0) when none matches.
#[no_mangle]
pub extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    crate::ffi::called("mbps_to_ibv_rate");
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(p: *const c_char) -> String {
        // SAFETY: every function above returns a pointer to a static
        // NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    #[test]
    fn texts_are_rdma_cores() {
        assert_eq!(text(ibv_wc_status_str(0)), "success");
        assert_eq!(
            text(ibv_wc_status_str(12)),
            "transport retry counter exceeded"
        );
        assert_eq!(text(ibv_wc_status_str(999)), "unknown");
        assert_eq!(text(ibv_port_state_str(4)), "PORT_ACTIVE");
        assert_eq!(text(ibv_node_type_str(1)), "InfiniBand channel adapter");
        assert_eq!(text(ibv_event_type_str(9)), "port active");
    }

    #[test]
    fn rates_round_trip() {
        assert_eq!(ibv_rate_to_mult(3), 4);
        assert_eq!(mult_to_ibv_rate(4), 3);
        assert_eq!(ibv_rate_to_mult(16), -1);
        assert_eq!(ibv_rate_to_mbps(16), 103125);
        assert_eq!(mbps_to_ibv_rate(103125), 16);
        assert_eq!(ibv_rate_to_mbps(99), -1);
    }
}
