//! The transport timers, from the QP's attribute codes.
//!
//! The local ACK timeout is 4.096 µs × 2^`timeout` (timeout 14 is about
//! 67 ms; 0 means no timer), and the RNR NAK delay comes from the IB
//! specification's table of `min_rnr_timer` codes. The software provider
//! multiplies both by its `timeout_scale` (1.0 by default: hardware timing),
//! so tests that wait for RETRY_EXC_ERR can run faster.

use std::time::Duration;

/// The local ACK timeout for `code`, scaled; `None` means infinite.
pub fn local_ack_timeout(code: u8, scale: f64) -> Option<Duration> {
    if code == 0 {
        return None;
    }
    let nanos = 4096.0 * f64::from(1u32 << code.min(31)) * scale;
    Some(Duration::from_nanos(nanos.clamp(100_000.0, 3.6e12) as u64))
}

/// The RNR NAK delay for `code` (IB spec table 45), scaled.
pub fn rnr_delay(code: u8, scale: f64) -> Duration {
    const MICROS: [u32; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    let us = f64::from(MICROS[usize::from(code & 31)]) * scale;
    Duration::from_nanos((us * 1000.0).clamp(10_000.0, 3.6e12) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hardware_values() {
        let t = local_ack_timeout(14, 1.0).unwrap();
        assert_eq!(t.as_micros(), 67_108);
        assert_eq!(local_ack_timeout(0, 1.0), None);
        assert_eq!(rnr_delay(12, 1.0), Duration::from_micros(640));
        assert_eq!(rnr_delay(0, 1.0), Duration::from_micros(655_360));
    }
}
