//! The configuration elements, their TOML spelling and their defaults.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{quoted, ConfigError};

/// `system-config`: node-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SystemConfig {
    /// `hostname`: the node's name, used in logs, traps and `show` output. Default `"sbc"`.
    pub hostname: String,
}

impl Default for SystemConfig {
    fn default() -> Self {
        Self {
            hostname: "sbc".to_owned(),
        }
    }
}

/// `sip-config`: SIP timers and limits shared by every interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SipConfig {
    /// `t1-ms`: RFC 3261 T1, the round-trip estimate, in ms. Default 500, valid 10..=10000.
    pub t1_ms: u64,
    /// `t2-ms`: RFC 3261 T2, the retransmit cap for non-INVITE requests and INVITE responses,
    /// in ms. Default 4000, valid `t1-ms`..=60000.
    pub t2_ms: u64,
    /// `t4-ms`: RFC 3261 T4, how long a message may stay in the network, in ms. Default 5000,
    /// valid 10..=60000.
    pub t4_ms: u64,
    /// `timer-c-ms`: RFC 3261 proxy INVITE timer C (more than 3 minutes recommended), in ms.
    /// Default 180000, valid 1000..=3600000.
    pub timer_c_ms: u64,
    /// `max-message-size`: largest SIP message accepted or sent, in bytes (UDP datagram or TCP
    /// message). Default 65535, valid 1500..=65535.
    pub max_message_size: usize,
    /// `workers`: fixed number of SIP worker threads (until auto-scaling profiles exist).
    /// Default 2, valid 1..=64.
    pub workers: usize,
    /// `shutdown-grace-ms`: how long SIGTERM waits for open transactions, in ms. Default 5000,
    /// valid 0..=120000.
    pub shutdown_grace_ms: u64,
}

impl Default for SipConfig {
    fn default() -> Self {
        Self {
            t1_ms: 500,
            t2_ms: 4000,
            t4_ms: 5000,
            timer_c_ms: 180_000,
            max_message_size: 65_535,
            workers: 2,
            shutdown_grace_ms: 5000,
        }
    }
}

/// A SIP transport protocol; spelled `"udp"` or `"tcp"` in the file and in the ACLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// SIP over UDP.
    Udp,
    /// SIP over TCP.
    Tcp,
}

impl Transport {
    /// Every transport, in the order they are listed in messages.
    pub const ALL: [Self; 2] = [Self::Udp, Self::Tcp];

    /// The lowercase name used in the file and the ACLI: `"udp"` or `"tcp"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
        }
    }

    /// The valid spellings, for error messages: `"udp", "tcp"`.
    pub(crate) fn valid_list() -> String {
        crate::error::quoted_list(Self::ALL.iter().map(|t| t.as_str()))
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Transport {
    type Err = ConfigError;

    /// Parses `udp` or `tcp`, ignoring ASCII case (so the ACLI accepts `UDP`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| {
                ConfigError::invalid(
                    "transport",
                    quoted(s),
                    "unknown transport",
                    Self::valid_list(),
                )
            })
    }
}

/// `sip-interface`: where the SBC listens for SIP in one realm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SipInterface {
    /// `realm`: the network this interface faces (e.g. `"access"`, `"core"`); unique. Required.
    pub realm: String,
    /// `address`: the local IP address to bind. Default `127.0.0.1`.
    #[serde(default = "default_address")]
    pub address: IpAddr,
    /// `port`: the local port to bind, for every transport. Default 5060, valid 1..=65535.
    #[serde(default = "default_port")]
    pub port: u16,
    /// `transports`: which transports listen here; non-empty, no duplicates.
    /// Default `["udp", "tcp"]`.
    #[serde(default = "default_transports")]
    pub transports: Vec<Transport>,
}

impl SipInterface {
    /// The address and port this interface binds.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }
}

/// `session-agent`: a SIP next hop (a PBX, a carrier, a registrar) reachable in one realm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionAgent {
    /// `name`: how routes refer to this agent; unique and non-empty. Required.
    pub name: String,
    /// `realm`: the realm (a `sip-interface`'s realm) through which the agent is reached.
    /// Required.
    pub realm: String,
    /// `address`: the agent's IP address. Default `127.0.0.1`.
    #[serde(default = "default_address")]
    pub address: IpAddr,
    /// `port`: the agent's port. Default 5060, valid 1..=65535.
    #[serde(default = "default_port")]
    pub port: u16,
    /// `transport`: the transport used to reach the agent. Default `"udp"`.
    #[serde(default = "default_transport")]
    pub transport: Transport,
}

impl SessionAgent {
    /// The agent's address and port.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }
}

/// `session-router`: which session-agent new requests go to.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SessionRouter {
    /// `default-route`: the session-agent used when no `route` matches the ingress realm.
    /// Defaults to `"core"` when the file has no `[[session-agent]]` (so the default agent is in
    /// use), otherwise to none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_route: Option<String>,
    /// `route` (`[[session-router.route]]`): per-realm routes, tried in order before the default.
    #[serde(rename = "route", skip_serializing_if = "Vec::is_empty")]
    pub routes: Vec<Route>,
}

/// `[[session-router.route]]`: requests arriving in `from-realm` go to `session-agent`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Route {
    /// `from-realm`: the realm of the sip-interface the request arrived on. Required.
    pub from_realm: String,
    /// `session-agent`: the name of the agent to send it to. Required.
    pub session_agent: String,
}

/// The realm of the default access-side interface, the one `--listen` overrides.
pub(crate) const ACCESS_REALM: &str = "access";
/// The realm, and name, of the default core-side interface and session-agent.
pub(crate) const CORE: &str = "core";

fn default_address() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}

const fn default_port() -> u16 {
    5060
}

fn default_transports() -> Vec<Transport> {
    Transport::ALL.to_vec()
}

const fn default_transport() -> Transport {
    Transport::Udp
}

/// The interfaces used when the file has no `[[sip-interface]]`: access on 5060, core on 5062.
pub(crate) fn default_interfaces() -> Vec<SipInterface> {
    vec![
        SipInterface {
            realm: ACCESS_REALM.to_owned(),
            address: default_address(),
            port: 5060,
            transports: default_transports(),
        },
        SipInterface {
            realm: CORE.to_owned(),
            address: default_address(),
            port: 5062,
            transports: default_transports(),
        },
    ]
}

/// The agents used when the file has no `[[session-agent]]`: `core` at 127.0.0.1:5080 over UDP.
pub(crate) fn default_agents() -> Vec<SessionAgent> {
    vec![SessionAgent {
        name: CORE.to_owned(),
        realm: CORE.to_owned(),
        address: default_address(),
        port: 5080,
        transport: Transport::Udp,
    }]
}
