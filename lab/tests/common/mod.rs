//! Shared by the lab's integration tests (the bounded waits are `sbc_lab::testing`'s).

#![allow(dead_code, unreachable_pub)]

/// Panics with the install line when `sipp` is not on PATH.
pub fn require_sipp() {
    let _ = sbc_e2e::sipp::sipp_binary();
}
