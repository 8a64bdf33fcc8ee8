//! The demo's trap listener: an SNMPv2c trap receiver on UDP that decodes every trap with
//! `sbc-snmp`'s MIB names and hands it to the narrator.

use std::net::SocketAddr;
use std::time::Instant;

use sbc_snmp::{decode_trap, DecodedTrap};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A trap as received.
#[derive(Debug, Clone)]
pub(crate) struct Received {
    /// When it arrived.
    pub(crate) at: Instant,
    /// The decoded trap.
    pub(crate) trap: DecodedTrap,
}

impl Received {
    /// The notification's short name, e.g. `sbcAlarmTrap`.
    pub(crate) fn name(&self) -> &str {
        self.trap
            .trap
            .rsplit("::")
            .next()
            .unwrap_or(&self.trap.trap)
    }

    /// The sending node (`sbcNodeName`).
    pub(crate) fn node(&self) -> &str {
        self.trap.get("sbcNodeName").unwrap_or("?")
    }

    /// An enumerated value without its number: `critical(3)` → `critical`.
    pub(crate) fn word(&self, object: &str) -> &str {
        let v = self.trap.get(object).unwrap_or("?");
        v.split('(').next().unwrap_or(v)
    }

    /// The trap on one line.
    pub(crate) fn one_line(&self) -> String {
        let g = |o: &str| self.trap.get(o).unwrap_or("?").to_owned();
        match self.name() {
            "sbcAlarmTrap" => format!(
                "sbcAlarmTrap from {}: {} {}% {} (threshold {}%, alarm {})",
                self.node(),
                self.word("sbcAlarmType"),
                g("sbcAlarmValue"),
                self.word("sbcAlarmSeverity"),
                g("sbcAlarmThreshold"),
                g("sbcAlarmId"),
            ),
            "sbcAlarmClearTrap" => format!(
                "sbcAlarmClearTrap from {}: {} {} cleared by {}",
                self.node(),
                self.word("sbcAlarmType"),
                self.word("sbcAlarmSeverity"),
                self.word("sbcAlarmClearedBy"),
            ),
            "sbcRedundancyTrap" => format!(
                "sbcRedundancyTrap from {}: {} ({}, {})",
                self.node(),
                self.word("sbcRedundancyState"),
                self.word("sbcRedundancyRole"),
                g("sbcRedundancyReason"),
            ),
            "sbcHealthTrap" => format!(
                "sbcHealthTrap from {}: health {} -> {} ({})",
                self.node(),
                g("sbcHealthPreviousScore"),
                g("sbcHealthScore"),
                g("sbcHealthReason"),
            ),
            other => format!("{other} ({} varbinds)", self.trap.varbinds.len()),
        }
    }
}

/// Binds the listener (an error when the port is taken).
pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<UdpSocket> {
    UdpSocket::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("trap listener {addr}: {e}"))
}

/// Receives, decodes and forwards traps until the receiver is dropped. Undecodable datagrams
/// are forwarded as errors (text) on `bad`.
pub(crate) fn spawn(
    socket: UdpSocket,
    out: mpsc::UnboundedSender<Received>,
    bad: mpsc::UnboundedSender<String>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65_536];
        loop {
            let Ok((n, from)) = socket.recv_from(&mut buf).await else {
                continue;
            };
            let at = Instant::now();
            match decode_trap(&buf[..n]) {
                Ok(trap) => {
                    if out.send(Received { at, trap }).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    if bad
                        .send(format!("undecodable datagram from {from}: {e}"))
                        .is_err()
                    {
                        return;
                    }
                }
            }
        }
    })
}
