//! The management listeners' sockets between `activate-config` and their tasks: an activation
//! binds a new `metrics-address` or `snmp-agent-address` itself, so that a taken address
//! refuses it, and the listener's task takes the socket (through
//! [`crate::control::context::Console`]) when it follows the running configuration
//! ([`crate::control::follow`]).

use std::net::SocketAddr;

use sbc_config::Config;

/// The metrics listener's and the SNMP agent's sockets between `activate-config` and their
/// tasks. An activation binds a new `metrics-address` or `snmp-agent-address` itself (so a
/// taken address refuses it) unless that address is the one served now; each activation
/// replaces both slots, so a socket for an address given up again is closed, never left
/// bound.
#[derive(Debug, Default)]
pub struct ManagementSockets {
    /// Where the metrics listener serves now (its task says).
    pub metrics_served: Option<SocketAddr>,
    /// Where the SNMP agent serves now (its task says).
    pub snmp_agent_served: Option<SocketAddr>,
    /// Bound for the new `metrics-address`, not yet taken.
    pub metrics: Option<std::net::TcpListener>,
    /// Bound for the new `snmp-agent-address`, not yet taken.
    pub snmp_agent: Option<std::net::UdpSocket>,
}

impl ManagementSockets {
    /// Binds the addresses of `cfg` that are not served now.
    ///
    /// # Errors
    /// An address that cannot be bound, named with the key and the reason.
    pub(crate) fn bind_new(
        &self,
        cfg: &Config,
    ) -> Result<(Option<std::net::TcpListener>, Option<std::net::UdpSocket>), String> {
        let system = &cfg.system;
        let metrics = match system.metrics_address {
            Some(a) if Some(a) != self.metrics_served => Some(
                std::net::TcpListener::bind(a)
                    .map_err(|e| format!("cannot bind metrics-address {a}: {e}"))?,
            ),
            _ => None,
        };
        let snmp_agent = match system.snmp_agent_address {
            Some(a) if Some(a) != self.snmp_agent_served => Some(
                std::net::UdpSocket::bind(a)
                    .map_err(|e| format!("cannot bind snmp-agent-address {a}: {e}"))?,
            ),
            _ => None,
        };
        Ok((metrics, snmp_agent))
    }
}
