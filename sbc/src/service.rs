//! systemd integration: readiness (`Type=notify`) through `$NOTIFY_SOCKET`, with the `sd-notify`
//! crate (no libsystemd). Without `$NOTIFY_SOCKET` (not started by systemd) nothing is sent.
//!
//! A node alone is ready once its SIP interfaces and its management socket are bound (the
//! moment it prints its ready line). A node in a pair is ready once its redundancy machine has
//! left the start-up states (initial, becoming-active, becoming-standby): as active, standby or
//! out-of-service (reported in `STATUS=`, so that `systemctl status` shows it and the ACLI can
//! still reach an out-of-service node). `STATUS=` follows later role changes.

use std::sync::Arc;
use std::time::Duration;

use sbc_ha::State;
use sd_notify::NotifyState;
use tracing::debug;

use crate::pair::Pair;

/// Sends `READY=1` now (alone) or once the pair has settled (paired), then keeps `STATUS=`
/// current with the redundancy state, polled every 200 ms.
pub fn notify_ready(pair: Option<Arc<Pair>>) {
    let Some(pair) = pair else {
        send(&[NotifyState::Ready, NotifyState::Status("serving")]);
        return;
    };
    if std::env::var_os("NOTIFY_SOCKET").is_none() {
        return;
    }
    tokio::spawn(async move {
        let mut ready = false;
        let mut last = None;
        let mut tick = tokio::time::interval(Duration::from_millis(200));
        loop {
            tick.tick().await;
            let state = pair.status().state;
            if last == Some(state) {
                continue;
            }
            last = Some(state);
            let status = format!("redundancy state {state}");
            let settled = !matches!(
                state,
                State::Initial | State::BecomingActive | State::BecomingStandby
            );
            if settled && !ready {
                ready = true;
                send(&[NotifyState::Ready, NotifyState::Status(&status)]);
            } else {
                send(&[NotifyState::Status(&status)]);
            }
        }
    });
}

/// Sends `STOPPING=1` (the node is draining before it exits).
pub fn notify_stopping() {
    send(&[NotifyState::Stopping]);
}

/// Sends only `STATUS=rebooting` before the ACLI's `reboot` re-executes the process in place
/// (same PID). Not `STOPPING=1`: systemd would then wait `TimeoutStopSec` for an exit that never
/// comes and kill the new process; the re-executed node sends `READY=1` again, which systemd
/// takes as a no-op for a running service.
pub fn notify_rebooting() {
    send(&[NotifyState::Status("rebooting")]);
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        debug!(error = %e, "sd_notify failed");
    }
}
