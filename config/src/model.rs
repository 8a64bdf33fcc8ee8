//! The configuration elements and their TOML spelling. Each key's type, default, range and
//! help are declared once, in its element's table in [`crate::keys`]; the `Default` impls
//! below read them, and the field docs say what a key means and why.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::{quoted, ConfigError};
use crate::keys::{
    alarm_threshold, auto_scaling_profile, capture_agent, media_manager, redundancy_config,
    session_agent, sip_config, sip_interface, sip_monitoring, system_config, tls_profile,
    trap_receiver,
};

/// Declares a keyword enum: the lowercase words the file and the ACLI spell it with, `ALL`,
/// `as_str`, `Display`, `Default` and a case-insensitive `FromStr` whose error names the key,
/// the value and the valid words.
macro_rules! keyword_enum {
    (
        $(#[$meta:meta])*
        $name:ident, key $key:literal, default $default:ident {
            $($(#[$vmeta:meta])* $variant:ident = $word:literal),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $word)] $variant),+
        }

        impl $name {
            /// Every value, in the order they are listed in messages.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The default, which the key tables ([`crate::keys`]) read.
            pub const DEFAULT: Self = Self::$default;

            /// The words of [`Self::ALL`], for the key tables, the ACLI's completion and help.
            #[allow(dead_code, reason = "not every keyword enum is a key of its own")]
            pub(crate) const WORDS: &'static [&'static str] = &[$($word),+];

            /// The lowercase word used in the file and the ACLI.
            #[must_use]
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $word),+
                }
            }

            /// The valid spellings, for error messages: `"a", "b"`.
            #[allow(dead_code, reason = "not every keyword enum is named in a message")]
            pub(crate) fn valid_list() -> String {
                crate::error::quoted_list(Self::ALL.iter().map(|v| v.as_str()))
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::DEFAULT
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = ConfigError;

            /// Parses one of the words, ignoring ASCII case (so the ACLI accepts capitals).
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(s))
                    .ok_or_else(|| {
                        ConfigError::invalid(
                            $key,
                            quoted(s),
                            concat!("unknown ", $key),
                            Self::valid_list(),
                        )
                    })
            }
        }
    };
}

mod accounting;
mod routing;

pub use accounting::{
    AccountConfig, AccountServer, AccountState, AccountStrategy, AccountTransport, FileOutput,
    GenerateInterim, GenerateStart, SpoolFullAction,
};

pub use routing::{
    parse_days_of_week, parse_hhmm, AdminState, LocalPolicy, LocalRoutingConfig, NextHop,
    PingSendMode, PolicyAttribute, RealmConfig, ReferCallTransfer, Refresher, SagStrategy,
    SessionAgentGroup, SessionTimerProfile, SessionTranslation, TranslationIndex, TranslationRules,
    TranslationType, DAY_LETTERS, SAG_PREFIX,
};

keyword_enum! {
    /// `critical-memory-abort` (a `system-config` option): what two consecutive critical memory
    /// readings do.
    CriticalMemoryAbort, key "critical-memory-abort", default Disabled {
        /// Alarm and trap only.
        Disabled = "disabled",
        /// Stop accepting new calls (503 to new requests); in-dialog traffic still flows.
        Enabled = "enabled",
        /// Take 100 off the health score, which switches the pair over; alone, as `enabled`.
        Switchover = "switchover",
    }
}

keyword_enum! {
    /// `memory-source`: what "memory utilisation" is measured against.
    MemorySource, key "memory-source", default Host {
        /// The host's used / total memory.
        Host = "host",
        /// The cgroup's usage against its `memory.max`.
        Cgroup = "cgroup",
        /// The process's resident memory against `memory-limit-mb`.
        Process = "process",
    }
}

keyword_enum! {
    /// `alarm-threshold` `type`: what is measured.
    AlarmType, key "type", default Memory {
        /// Memory utilisation (see `memory-source`).
        Memory = "memory",
        /// Heap in use against `heap-limit-mb`.
        Heap = "heap",
        /// CPU utilisation.
        Cpu = "cpu",
        /// Sessions in use against the licensed or configured maximum.
        Sessions = "sessions",
        /// Disk space of one `volume`.
        Space = "space",
    }
}

keyword_enum! {
    /// An alarm severity, lowest first (`Ord` follows it).
    Severity, key "severity", default Minor {
        /// Minor.
        Minor = "minor",
        /// Major.
        Major = "major",
        /// Critical: the one `critical-memory-abort` acts on.
        Critical = "critical",
    }
}

keyword_enum! {
    /// `trap-receiver` `filter-level`: the lowest severity sent to a receiver.
    FilterLevel, key "filter-level", default All {
        /// Every trap, including those without a severity (health, redundancy).
        All = "all",
        /// Minor and above.
        Minor = "minor",
        /// Major and above.
        Major = "major",
        /// Critical only.
        Critical = "critical",
        /// No trap at all (the receiver is kept but muted).
        None = "none",
    }
}

keyword_enum! {
    /// `sip-interface` `nat-traversal` (Oracle's hosted NAT traversal): which phones are taken
    /// as behind a NAT, answered at their source (RFC 3581) and given `nat-interval` as their
    /// registration expiry.
    NatTraversal, key "nat-traversal", default None {
        /// No phone is (its Via and Contact are trusted as written).
        None = "none",
        /// A phone whose top Via has `rport` and whose Via or Contact does not name its
        /// source address.
        Rport = "rport",
        /// Any phone whose Via or Contact does not name its source address.
        Always = "always",
    }
}

keyword_enum! {
    /// `realm-config` `allow-anonymous`: who may place new requests (calls, MESSAGE, ...)
    /// arriving in the realm; REGISTER is always let through.
    AllowAnonymous, key "allow-anonymous", default All {
        /// Anyone.
        All = "all",
        /// Only session-agents (by source address).
        AgentsOnly = "agents-only",
        /// Only sources with a binding in the registration cache, and session-agents
        /// (Oracle's `registered`: toll fraud from an unregistered source is refused, 403).
        Registered = "registered",
    }
}

keyword_enum! {
    /// `sip-config` `in-dialog-source`: where in-dialog requests (and responses) must come from.
    InDialogSource, key "in-dialog-source", default Address {
        /// From the address the leg's peer used (UDP: address and port; TCP and
        /// session-agents: the IP address).
        Address = "address",
        /// From the leg's peer's IP address, any port (a NAT that rebinds the port).
        Ip = "ip",
        /// From anywhere in the leg's realm (interface and transport still checked, and the
        /// dialog's tags): for peers whose address changes mid-call.
        Any = "any",
    }
}

keyword_enum! {
    /// `access-control` `action`: what is done with the sources of an entry.
    AccessAction, key "action", default Deny {
        /// Never limited (as session-agents are).
        Allow = "allow",
        /// Dropped, whatever they send.
        Deny = "deny",
    }
}

keyword_enum! {
    /// `redundancy-config` `state`: whether this node takes part in a pair.
    RedundancyState, key "state", default Disabled {
        /// The node runs in a pair.
        Enabled = "enabled",
        /// The node runs alone.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `peer` `type`: a peer's role preference.
    PeerType, key "type", default Primary {
        /// The node preferred as active.
        Primary = "primary",
        /// The other one.
        Secondary = "secondary",
    }
}

keyword_enum! {
    /// `media-manager` `state`: whether the SBC anchors media.
    MediaManagerState, key "state", default Enabled {
        /// The media of a call whose two realms each have a `steering-pool` is anchored: relayed
        /// through the SBC, each leg's SDP rewritten to a port of its realm's pool.
        Enabled = "enabled",
        /// SDP passes unchanged and media flows end to end.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `media-manager` `restricted-latching`: which sources a leg may latch to (Oracle's words).
    RestrictedLatching, key "restricted-latching", default None {
        /// Any source: the first packets of the latching window decide.
        None = "none",
        /// Only the IP address the leg's SDP signalled (any port).
        Sdp = "sdp",
    }
}

keyword_enum! {
    /// `snmp-user-entry` `auth-protocol`: the USM authentication protocol. SHA (HMAC-SHA-96,
    /// RFC 3414) only: MD5 is refused on purpose (broken as a hash, and net-snmp's default
    /// only for old habits).
    SnmpAuthProtocol, key "auth-protocol", default Sha {
        /// HMAC-SHA-96 (usmHMACSHAAuthProtocol).
        Sha = "sha",
    }
}

keyword_enum! {
    /// `snmp-user-entry` `priv-protocol`: the USM privacy protocol. AES-128-CFB (RFC 3826)
    /// only: DES is refused on purpose.
    SnmpPrivProtocol, key "priv-protocol", default Aes128 {
        /// AES-128 in CFB mode (usmAesCfb128Protocol).
        Aes128 = "aes128",
    }
}

keyword_enum! {
    /// `trap-receiver` `version`: the SNMP version of its traps.
    SnmpVersion, key "version", default V2c {
        /// SNMPv2c with the receiver's `community`.
        V2c = "v2c",
        /// SNMPv3 authPriv as the receiver's `user-name` (a `snmp-user-entry`).
        V3 = "v3",
    }
}

keyword_enum! {
    /// `tls-profile` `tls-version`: the TLS versions a profile negotiates (Oracle's attribute;
    /// TLS 1.0 and 1.1 are not offered at all, RFC 8996).
    TlsVersion, key "tls-version", default Compatibility {
        /// TLS 1.2 and TLS 1.3, the highest both sides support.
        Compatibility = "compatibility",
        /// TLS 1.2 only.
        Tlsv12 = "tlsv12",
        /// TLS 1.3 only.
        Tlsv13 = "tlsv13",
    }
}

keyword_enum! {
    /// `sip-monitoring` `state`: whether the on-box SIP trace captures what the configuration's
    /// `monitoring-filters` select.
    SipMonitoringState, key "state", default Disabled {
        /// Messages selected by `monitoring-filters` are captured.
        Enabled = "enabled",
        /// Nothing is captured because of the configuration.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `capture-agent` `state`: whether traced messages are sent to a HEPv3 capture server.
    CaptureAgentState, key "state", default Disabled {
        /// Each traced message is also sent to `address` as HEPv3.
        Enabled = "enabled",
        /// Nothing is sent.
        Disabled = "disabled",
    }
}

keyword_enum! {
    /// `capture-agent` `transport`: how HEPv3 packets reach the capture server.
    CaptureTransport, key "transport", default Udp {
        /// One HEPv3 packet per UDP datagram (Homer's default).
        Udp = "udp",
        /// HEPv3 packets one after the other on a TCP connection.
        Tcp = "tcp",
    }
}

/// The `system-config` options this build knows, each with its valid values (an empty list
/// means a flag without value).
pub(crate) const KNOWN_OPTIONS: &[(&str, &[&str])] = &[(
    CRITICAL_MEMORY_ABORT,
    &["enabled", "disabled", "switchover"],
)];

/// The option name of [`CriticalMemoryAbort`].
pub(crate) const CRITICAL_MEMORY_ABORT: &str = "critical-memory-abort";

/// Splits an option into its name and value: `"a=b"` → `("a", Some("b"))`, `"a"` → `("a", None)`.
#[must_use]
pub fn split_option(option: &str) -> (&str, Option<&str>) {
    match option.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (option, None),
    }
}

/// `system-config`: node-wide settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SystemConfig {
    /// `hostname`: the node's name, used in logs, traps and `show` output.
    pub hostname: String,
    /// `options`: Oracle-style options, `"name=value"` or `"name"`; known names only, each at
    /// most once. Known: `critical-memory-abort` = `enabled` | `disabled` | `switchover`
    /// (absent: `disabled`). Default none.
    pub options: Vec<String>,
    /// `memory-source`: what memory utilisation is measured against.
    pub memory_source: MemorySource,
    /// `memory-limit-mb`: the limit of the `process` memory source, in MiB; 0 = unset. Required (>
    /// 0) when `memory-source = "process"`.
    pub memory_limit_mb: u64,
    /// `heap-limit-mb`: the heap size that heap percentages refer to, in MiB.
    pub heap_limit_mb: u64,
    /// `alarm-iteration-ms`: length of one alarm iteration, in ms.
    pub alarm_iteration_ms: u64,
    /// `alarm-subsamples`: sub-samples taken per alarm iteration.
    pub alarm_subsamples: u32,
    /// `spike-subsamples`: how many consecutive sub-samples above a threshold make a reading
    /// (shorter is a transient spike).
    pub spike_subsamples: u32,
    /// `lab-mode`: enables the lab's memory ballast commands.
    pub lab_mode: bool,
    /// `alarm-threshold` (`[[system-config.alarm-threshold]]`): alarm thresholds. Default none.
    #[serde(rename = "alarm-threshold")]
    pub alarm_thresholds: Vec<AlarmThreshold>,
    /// `trap-receiver` (`[[system-config.trap-receiver]]`): SNMP trap receivers. Default none.
    #[serde(rename = "trap-receiver")]
    pub trap_receivers: Vec<TrapReceiver>,
    /// `snmp-agent-address`: the UDP `address:port` the SNMP agent answers GET, GETNEXT and
    /// GETBULK on (161 is the standard port). Default none: no agent. Needs at least one
    /// `snmp-community`.
    pub snmp_agent_address: Option<SocketAddr>,
    /// `snmp-community` (`[[system-config.snmp-community]]`): the agent's read-only SNMPv2c
    /// communities. Default none (there is no default community).
    #[serde(rename = "snmp-community")]
    pub snmp_communities: Vec<SnmpCommunity>,
    /// `snmp-user-entry` (`[[system-config.snmp-user-entry]]`): the SNMPv3 USM users of the
    /// agent and of v3 trap receivers (authPriv, SHA and AES-128 only). Default none.
    #[serde(rename = "snmp-user-entry")]
    pub snmp_users: Vec<SnmpUserEntry>,
    /// `snmp-engine-id`: this node's SNMPv3 `snmpEngineID`, hex (`0x` optional), 5 to 32
    /// octets. Node-local (never pushed: each node is its own engine). Default none: derived
    /// from the hostname, RFC 3411 format 4 (text): `80 00 0C BD 04` (enterprise 3261, the
    /// MIB's experimental arc, with the top bit set; then format 4) followed by the hostname's
    /// first 27 octets; the two nodes of a pair have different hostnames, hence engine IDs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snmp_engine_id: Option<String>,
    /// `metrics-address`: where the Prometheus `/metrics` HTTP listener binds (`address:port`,
    /// port not 0). Default none: no listener.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metrics_address: Option<SocketAddr>,
    /// `dns-ip-primary`: the DNS server (`address:port`) that resolves session-agents named by
    /// DNS (Oracle's key on its `network-interface`, an address there; here with its port, so
    /// that a server off port 53 can be named). Default none: the servers of
    /// `/etc/resolv.conf`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_ip_primary: Option<SocketAddr>,
    /// `dns-ip-backup1`: a second DNS server, asked when the primary does not answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dns_ip_backup1: Option<SocketAddr>,
}

impl Default for SystemConfig {
    fn default() -> Self {
        Self {
            hostname: system_config::HOSTNAME.text().to_owned(),
            options: Vec::new(),
            memory_source: MemorySource::DEFAULT,
            memory_limit_mb: const { system_config::MEMORY_LIMIT_MB.int() },
            heap_limit_mb: const { system_config::HEAP_LIMIT_MB.int() },
            alarm_iteration_ms: const { system_config::ALARM_ITERATION_MS.int() },
            alarm_subsamples: const { system_config::ALARM_SUBSAMPLES.u32() },
            spike_subsamples: const { system_config::SPIKE_SUBSAMPLES.u32() },
            lab_mode: const { system_config::LAB_MODE.flag() },
            alarm_thresholds: Vec::new(),
            trap_receivers: Vec::new(),
            snmp_agent_address: None,
            snmp_communities: Vec::new(),
            snmp_users: Vec::new(),
            snmp_engine_id: None,
            metrics_address: None,
            dns_ip_primary: None,
            dns_ip_backup1: None,
        }
    }
}

impl SystemConfig {
    /// The `critical-memory-abort` option; [`CriticalMemoryAbort::Disabled`] when absent (or
    /// invalid, which [`crate::Config::validate`] refuses).
    #[must_use]
    pub fn critical_memory_abort(&self) -> CriticalMemoryAbort {
        self.option(CRITICAL_MEMORY_ABORT)
            .and_then(|value| value.parse().ok())
            .unwrap_or_default()
    }

    /// The value of option `name`: `Some("")` for a flag without value, `None` when absent.
    #[must_use]
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options
            .iter()
            .find_map(|option| match split_option(option) {
                (n, value) if n == name => Some(value.unwrap_or("")),
                _ => None,
            })
    }

    /// This node's SNMPv3 `snmpEngineID`: `snmp-engine-id` when set (and valid, which
    /// [`crate::Config::validate`] checks), else derived from the hostname (RFC 3411 format 4,
    /// text: `80 00 0C BD 04` then the hostname's first 27 octets).
    #[must_use]
    pub fn engine_id(&self) -> Vec<u8> {
        if let Some(id) = self
            .snmp_engine_id
            .as_deref()
            .and_then(|h| parse_engine_id(h).ok())
        {
            return id;
        }
        let mut id = vec![0x80, 0x00, 0x0C, 0xBD, 0x04];
        let name = if self.hostname.is_empty() {
            "sbc"
        } else {
            &self.hostname
        };
        id.extend(name.as_bytes().iter().take(27));
        id
    }

    /// The thresholds of `kind`, in file order.
    pub fn thresholds(&self, kind: AlarmType) -> impl Iterator<Item = &AlarmThreshold> {
        self.alarm_thresholds.iter().filter(move |t| t.kind == kind)
    }
}

/// Parses an `snmp-engine-id`: hex digits (an optional `0x`, `:` between octets allowed),
/// 5 to 32 octets (RFC 3411 `SnmpEngineID`).
///
/// # Errors
/// Why the text is not one, for the validation message.
pub fn parse_engine_id(text: &str) -> Result<Vec<u8>, String> {
    let hex: String = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text)
        .chars()
        .filter(|c| *c != ':')
        .collect();
    if !hex.len().is_multiple_of(2) || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err("not an even number of hex digits".to_owned());
    }
    let octets: Vec<u8> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    if !(5..=32).contains(&octets.len()) {
        return Err(format!("{} octets", octets.len()));
    }
    Ok(octets)
}

/// `alarm-threshold`: raise an alarm of `severity` when `type` usage exceeds `value` percent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AlarmThreshold {
    /// `type`: what is measured.
    #[serde(rename = "type")]
    pub kind: AlarmType,
    /// `volume`: the mount point, for `type = "space"` only (required there). Default empty.
    pub volume: String,
    /// `severity`: the alarm's severity when crossed.
    pub severity: Severity,
    /// `value`: the threshold in percent; usage above it raises the alarm (the default: unset); a
    /// higher severity of the same type needs a higher value.
    pub value: u8,
    /// `health-penalty`: points taken off the health score while raised.
    pub health_penalty: u8,
}

impl Default for AlarmThreshold {
    fn default() -> Self {
        Self {
            kind: AlarmType::DEFAULT,
            volume: alarm_threshold::VOLUME.text().to_owned(),
            severity: Severity::DEFAULT,
            value: const { alarm_threshold::VALUE.u8() },
            health_penalty: const { alarm_threshold::HEALTH_PENALTY.u8() },
        }
    }
}

/// `snmp-community`: a read-only SNMPv2c community of the agent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SnmpCommunity {
    /// `community-name`: the community string (a secret: `show` masks it). Required, unique.
    pub community_name: String,
    /// `ip-addresses`: the sources allowed to use it, addresses or networks (`10.0.0.0/8`).
    /// Default none: any source.
    pub ip_addresses: Vec<String>,
}

/// `snmp-user-entry`: an SNMPv3 USM user (Oracle's element of that name), authPriv only. Its
/// `Debug` masks both passwords.
#[derive(Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SnmpUserEntry {
    /// `user-name`: the USM `msgUserName`. Required, unique, at most 32 octets.
    pub user_name: String,
    /// `auth-protocol`: `sha` (HMAC-SHA-96); MD5 is refused on purpose.
    pub auth_protocol: SnmpAuthProtocol,
    /// `auth-password`: the authentication password (a secret: `show` masks it), at least
    /// 8 characters (RFC 3414 section 11.2).
    pub auth_password: String,
    /// `priv-protocol`: `aes128` (AES-128-CFB, RFC 3826).
    pub priv_protocol: SnmpPrivProtocol,
    /// `priv-password`: the privacy password (a secret: `show` masks it), at least 8
    /// characters.
    pub priv_password: String,
    /// `ip-addresses`: the sources allowed to use it for requests, addresses or networks.
    /// Default none: any source.
    pub ip_addresses: Vec<String>,
}

impl fmt::Debug for SnmpUserEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mask = |p: &str| if p.is_empty() { "" } else { crate::MASK };
        f.debug_struct("SnmpUserEntry")
            .field("user_name", &self.user_name)
            .field("auth_protocol", &self.auth_protocol)
            .field("auth_password", &mask(&self.auth_password))
            .field("priv_protocol", &self.priv_protocol)
            .field("priv_password", &mask(&self.priv_password))
            .field("ip_addresses", &self.ip_addresses)
            .finish()
    }
}

/// `trap-receiver`: where SNMP traps are sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct TrapReceiver {
    /// `ip-address`: the receiver's address.
    pub ip_address: IpAddr,
    /// `port`: the receiver's UDP port.
    pub port: u16,
    /// `community`: the SNMPv2c community, non-empty.
    pub community: String,
    /// `filter-level`: the lowest severity sent.
    pub filter_level: FilterLevel,
    /// `version`: `v2c` (with `community`) or `v3` (authPriv as `user-name`).
    pub version: SnmpVersion,
    /// `user-name`: the `snmp-user-entry` whose keys secure the v3 traps; required with
    /// `version = "v3"` (the community is unused then). Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_name: Option<String>,
}

impl Default for TrapReceiver {
    fn default() -> Self {
        Self {
            ip_address: const { trap_receiver::IP_ADDRESS.ip() },
            port: const { trap_receiver::PORT.u16() },
            community: trap_receiver::COMMUNITY.text().to_owned(),
            filter_level: FilterLevel::DEFAULT,
            version: SnmpVersion::DEFAULT,
            user_name: None,
        }
    }
}

impl TrapReceiver {
    /// The receiver's address and port.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip_address, self.port)
    }
}

/// `redundancy-config`: the HA pair, with Oracle's names and defaults (times in ms), except the
/// three timers of failure detection, shortened so that a pair serves again within half a
/// second of its active's death:
///
/// - `advertisement-time` 200 ms (Oracle: 500): five heartbeats a second per path, a few
///   hundred bytes a second. The heartbeat runs on a thread of its own, so a node busy with
///   SIP (or a host saturated by anything else) still sends and hears them on time.
/// - `percent-drift` 300 (Oracle: 210): the peer is dead after 600 ms of silence (Oracle's
///   1.05 s). Oracle's 210 at 200 ms would leave 420 ms: one lost heartbeat and 20 ms of
///   lateness would be a false failover; 300 tolerates one lost heartbeat *and* 200 ms of
///   lateness (Oracle's defaults: 50 ms), or two lost ones in a row arriving just in time. This
///   window only matters when the peer stops without its sockets closing (a hung or stopped
///   process, a cut link): when its process dies, its kernel resets the state-sync
///   connection and the peer is declared dead one advertisement-time and a half (300 ms) after
///   its last heartbeat unless a heartbeat comes (`sbc-ha`'s machine, "Link lost").
/// - `becoming-active-time` 50 ms (Oracle: 100): the wait for a conflicting active before
///   taking the role. The heartbeat announcing `becoming-active` leaves at once, so the peer
///   hears it within one network delay (well under a millisecond on a LAN); 50 ms still
///   leaves room for a loaded scheduler, and, after the peer was declared dead, nothing is
///   expected to arrive at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct RedundancyConfig {
    /// `state`: whether this node runs in a pair (the default: the node runs alone).
    pub state: RedundancyState,
    /// `port`: the heartbeat UDP port.
    pub port: u16,
    /// `advertisement-time`: heartbeat interval, ms (Oracle's default: 500).
    pub advertisement_time: u64,
    /// `percent-drift`: the peer is dead after `advertisement-time` × this / 100 without a
    /// heartbeat (Oracle's default: 210).
    pub percent_drift: u32,
    /// `initial-time`: how long a starting node listens before choosing a role, ms.
    pub initial_time: u64,
    /// `becoming-active-time`: ms spent in becoming-active (Oracle's default: 100).
    pub becoming_active_time: u64,
    /// `becoming-standby-time`: ms allowed to finish the initial state sync, then out-of-service.
    pub becoming_standby_time: u64,
    /// `health-threshold`: an active below it switches over.
    pub health_threshold: u8,
    /// `emergency-threshold`: below it a starting standby becomes active at once.
    pub emergency_threshold: u8,
    /// `config-sync-port`: TCP port of config sync.
    pub config_sync_port: u16,
    /// `sip-sync-port`: TCP port of SIP state sync.
    pub sip_sync_port: u16,
    /// `witness`: an `address:port` a node must reach before taking over. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub witness: Option<SocketAddr>,
    /// `shared-key`: the pair's secret (the keys of heartbeats, witness messages and the state
    /// sync are derived from it; it never travels). Default empty; required when
    /// `state = "enabled"`; masked in every output.
    pub shared_key: String,
    /// `service-address`: the shared SIP address the active owns. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service_address: Option<IpAddr>,
    /// `notify-active`: a shell command run (keepalived style) when this node takes the service
    /// address, before it binds it: e.g. `ip addr add 192.0.2.10/24 dev eth0`. Default none.
    pub notify_active: String,
    /// `notify-standby`: a shell command run after this node released the service address.
    pub notify_standby: String,
    /// `notify-fault`: a shell command run when this node goes out of service.
    pub notify_fault: String,
    /// `peer` (`[[redundancy-config.peer]]`): the two nodes; exactly one primary and one
    /// secondary when enabled. Default none.
    #[serde(rename = "peer")]
    pub peers: Vec<Peer>,
}

impl Default for RedundancyConfig {
    fn default() -> Self {
        Self {
            state: RedundancyState::DEFAULT,
            port: const { redundancy_config::PORT.u16() },
            advertisement_time: const { redundancy_config::ADVERTISEMENT_TIME.int() },
            percent_drift: const { redundancy_config::PERCENT_DRIFT.u32() },
            initial_time: const { redundancy_config::INITIAL_TIME.int() },
            becoming_active_time: const { redundancy_config::BECOMING_ACTIVE_TIME.int() },
            becoming_standby_time: const { redundancy_config::BECOMING_STANDBY_TIME.int() },
            health_threshold: const { redundancy_config::HEALTH_THRESHOLD.u8() },
            emergency_threshold: const { redundancy_config::EMERGENCY_THRESHOLD.u8() },
            config_sync_port: const { redundancy_config::CONFIG_SYNC_PORT.u16() },
            sip_sync_port: const { redundancy_config::SIP_SYNC_PORT.u16() },
            witness: None,
            shared_key: redundancy_config::SHARED_KEY.text().to_owned(),
            service_address: None,
            notify_active: redundancy_config::NOTIFY_ACTIVE.text().to_owned(),
            notify_standby: redundancy_config::NOTIFY_STANDBY.text().to_owned(),
            notify_fault: redundancy_config::NOTIFY_FAULT.text().to_owned(),
            peers: Vec::new(),
        }
    }
}

impl RedundancyConfig {
    /// Whether the node runs in a pair (`state = "enabled"`).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.state == RedundancyState::Enabled
    }

    /// How long without a valid heartbeat before the peer is dead:
    /// `advertisement-time` × `percent-drift` / 100 ms (600 at the defaults).
    #[must_use]
    pub fn dead_after_ms(&self) -> u64 {
        self.advertisement_time * u64::from(self.percent_drift) / 100
    }

    /// The peer called `name`, if any.
    #[must_use]
    pub fn peer(&self, name: &str) -> Option<&Peer> {
        self.peers.iter().find(|p| p.name == name)
    }
}

/// `peer`: one node of the pair and the heartbeat paths to it.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Peer {
    /// `name`: the node's name; unique and non-empty.
    pub name: String,
    /// `type`: `primary` or `secondary`.
    #[serde(rename = "type")]
    pub kind: PeerType,
    /// `destinations`: `address:port` of each heartbeat path to this node; at least one, no
    /// duplicates.
    pub destinations: Vec<SocketAddr>,
}

/// `auto-scaling-profile`: how a worker group grows and shrinks (OpenSIPS's rules):
/// `scale up to <scale-up-to> on <scale-up-on>% for <scale-up-for> cycles within
/// <scale-up-within>`, `scale down to <scale-down-to> on <scale-down-on>% for
/// <scale-down-for> cycles`. The down rule is optional (absent: never scale down) and then
/// all three of its keys are absent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AutoScalingProfile {
    /// `name`: unique and non-empty.
    pub name: String,
    /// `scale-up-to`: the most workers.
    pub scale_up_to: u32,
    /// `scale-up-on`: load percent above which a cycle counts for scaling up.
    pub scale_up_on: u8,
    /// `scale-up-for`: how many cycles above `scale-up-on` start a worker.
    pub scale_up_for: u32,
    /// `scale-up-within`: the window, in cycles, in which `scale-up-for` must be seen. Default
    /// (absent): `scale-up-for`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_up_within: Option<u32>,
    /// `scale-down-to`: the fewest workers, below `scale-up-to`. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_to: Option<u32>,
    /// `scale-down-on`: load percent below which a cycle counts for scaling down, below
    /// `scale-up-on`. Default none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_on: Option<u8>,
    /// `scale-down-for`: how many consecutive cycles below `scale-down-on` stop a worker. Default
    /// none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scale_down_for: Option<u32>,
}

impl Default for AutoScalingProfile {
    fn default() -> Self {
        Self {
            name: String::new(),
            scale_up_to: const { auto_scaling_profile::SCALE_UP_TO.u32() },
            scale_up_on: const { auto_scaling_profile::SCALE_UP_ON.u8() },
            scale_up_for: const { auto_scaling_profile::SCALE_UP_FOR.u32() },
            scale_up_within: None,
            scale_down_to: None,
            scale_down_on: None,
            scale_down_for: None,
        }
    }
}

impl AutoScalingProfile {
    /// `scale-up-within`, or `scale-up-for` when absent.
    #[must_use]
    pub fn up_within(&self) -> u32 {
        self.scale_up_within.unwrap_or(self.scale_up_for)
    }

    /// The down rule `(to, on, for)` when the profile has one.
    #[must_use]
    pub fn scale_down(&self) -> Option<(u32, u8, u32)> {
        Some((
            self.scale_down_to?,
            self.scale_down_on?,
            self.scale_down_for?,
        ))
    }
}

/// `sip-config`: SIP timers and limits shared by every interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SipConfig {
    /// `t1-ms`: RFC 3261 T1, the round-trip estimate, in ms.
    pub t1_ms: u64,
    /// `t2-ms`: RFC 3261 T2, the retransmit cap for non-INVITE requests and INVITE responses, in
    /// ms.
    pub t2_ms: u64,
    /// `t4-ms`: RFC 3261 T4, how long a message may stay in the network, in ms.
    pub t4_ms: u64,
    /// `timer-c-ms`: RFC 3261 proxy INVITE timer C (more than 3 minutes recommended), in ms.
    pub timer_c_ms: u64,
    /// `max-message-size`: largest SIP message accepted or sent, in bytes (UDP datagram or TCP
    /// message).
    pub max_message_size: usize,
    /// `workers`: initial worker count of each UDP worker group (one group per UDP
    /// `sip-interface`); the fixed count when the group has no auto-scaling profile; with a
    /// profile, within its `scale-down-to` (1 without a down rule)..=`scale-up-to`.
    pub workers: usize,
    /// `tcp-workers`: initial worker count of the TCP worker group; the fixed count when it has no
    /// auto-scaling profile; with a profile, within its `scale-down-to` (1 without a down
    /// rule)..=`scale-up-to`.
    pub tcp_workers: usize,
    /// `tcp-auto-scaling-profile`: name of the `auto-scaling-profile` of the TCP worker group;
    /// must name an existing profile. Default none (fixed at `tcp-workers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_auto_scaling_profile: Option<String>,
    /// `prsm`: PRSM scheduling: new requests before retransmissions, redundant retransmissions
    /// removed; `false` is plain FIFO, for comparison.
    pub prsm: bool,
    /// `queue-size`: capacity of each worker's primary queue and of its secondary queue, in
    /// messages.
    pub queue_size: usize,
    /// `max-queue-delay-ms`: the longest a new request may wait in a worker queue, in ms; 0 = off.
    /// A new request expected to wait longer (queue length x recent service time) is answered 503
    /// at once, and one that did wait longer is answered 503 instead of being routed (PRSM mode
    /// only) (the default: below T1, so admitted INVITEs are answered 100 Trying before their
    /// caller retransmits).
    pub max_queue_delay_ms: u64,
    /// `routing-cost-us`: for benchmarks only: a simulated blocking routing lookup per new request,
    /// in µs (like the peer Kamailio config's `ROUTING_COST_US`); 0 = none.
    pub routing_cost_us: u64,
    /// `shutdown-grace-ms`: how long SIGTERM waits for open transactions, in ms.
    pub shutdown_grace_ms: u64,
    /// `heap-reject-threshold`: heap use, in percent of `system-config.heap-limit-mb`, above which
    /// new requests get 503.
    pub heap_reject_threshold: u8,
    /// `heap-resume-threshold`: heap percent below which new requests are accepted again.
    pub heap_resume_threshold: u8,
    /// `retry-after-min`: lowest `Retry-After` of those 503s, in seconds.
    pub retry_after_min: u32,
    /// `retry-after-max`: highest `Retry-After`, in seconds.
    pub retry_after_max: u32,
    /// `auto-scaling-cycle-ms`: the auto-scaling cycle, in ms.
    pub auto_scaling_cycle_ms: u64,
    /// `max-calls`: calls (in any state) the node holds at most; a new INVITE beyond gets 503 and
    /// is counted. Enforced per shard (a 64th of it each, rounded up), so new calls may be refused
    /// a little before the total.
    pub max_calls: usize,
    /// `max-transactions`: SIP transactions (server and client) the node holds at most; a new
    /// request beyond gets 503 (in-dialog requests of existing calls still pass). Per shard as
    /// `max-calls`.
    pub max_transactions: usize,
    /// `max-subscriptions-per-source`: subscriptions one source (an IPv6 source: its
    /// `source-ipv6-prefix-length` prefix) holds at most, node-wide; a new SUBSCRIBE or REFER
    /// beyond gets 503. 0: only `max-calls` bounds them (they take places in the call table).
    pub max_subscriptions_per_source: u32,
    /// `source-rate`: new requests per second one source may send (a token bucket; session-agents
    /// and `access-control allow` sources are exempt); beyond, they are dropped (the default:
    /// Kamailio's `pike`: 30 per 2 s).
    pub source_rate: u32,
    /// `source-burst`: new requests one source may send at once.
    pub source_burst: u32,
    /// `source-deny-seconds`: a source that sends `source-burst` more new requests while its bucket
    /// is empty is denied this long (every message dropped, an SNMP trap sent); 0 = only limit (the
    /// default: `pike`).
    pub source_deny_seconds: u64,
    /// `source-ipv6-prefix-length`: IPv6 sources are counted per prefix of this length by the
    /// per-source rates, denies and TCP connection caps (a stranger holding a /64 has 2^64
    /// addresses); IPv4 sources per address.
    pub source_ipv6_prefix_length: u8,
    /// `in-dialog-source`: where an in-dialog request must come from to be taken for its leg
    /// (beside the leg's interface, transport and remote tag), and a response from the next hop the
    /// request went to: `address`, `ip` or `any` (see [`InDialogSource`]). A mismatch gets 481 (a
    /// response is dropped) and is counted.
    pub in_dialog_source: InDialogSource,
    /// `max-header-size`: the longest header line accepted (name, colon and value), in bytes; a
    /// request with a longer one gets 400 naming it, a response is dropped (a header is never
    /// longer than `max-message-size` anyway).
    pub max_header_size: usize,
    /// `tcp-max-connections`: TCP connections accepted per `sip-interface` at most; one beyond is
    /// closed at once (the default: Kamailio's and OpenSIPS's `tcp_max_connections`).
    pub tcp_max_connections: usize,
    /// `tcp-max-connections-per-source`: TCP connections from one source at most: an IPv4
    /// address, or an IPv6 prefix of `source-ipv6-prefix-length` bits (session-agents exempt).
    pub tcp_max_connections_per_source: usize,
    /// `tcp-message-timeout-ms`: a message on TCP must be complete (headers and body) this long
    /// after its first byte, or the connection is closed (the default: Kamailio's
    /// `tcp_msg_read_timeout`).
    pub tcp_message_timeout_ms: u64,
    /// `tcp-idle-timeout-ms`: a TCP connection without traffic (CRLF keep-alives count) is closed
    /// after this (the default: Kamailio's `tcp_connection_lifetime`).
    pub tcp_idle_timeout_ms: u64,
    /// `tcp-write-queue-bytes`: what one TCP connection's write queue may hold; a send beyond
    /// closes the connection (the default: four messages of the largest size).
    pub tcp_write_queue_bytes: usize,
    /// `tcp-write-timeout-ms`: a TCP write that does not complete within this closes the connection
    /// (the default: Kamailio's `tcp_send_timeout`).
    pub tcp_write_timeout_ms: u64,
    /// `tls-handshake-timeout-ms`: a TLS handshake (accepted or dialled) not complete within this
    /// closes the connection; until then it holds its place in the connection caps.
    pub tls_handshake_timeout_ms: u64,
    /// `initial-inv-trans-expire`: how long an initial INVITE waits for a first response (a
    /// 100 Trying is one) before the next candidate next hop is tried, in seconds; a
    /// session-agent's `invite-trans-expire` overrides it. (Oracle's attribute; its default
    /// is 0 there, which waits for timer B: 4 s here, so that a dead next hop costs a caller
    /// 4 s, not 32.)
    pub initial_inv_trans_expire: u32,
    /// `reg-cache-limit`: registration-cache bindings at most (0: no limit); a REGISTER that
    /// would add one beyond gets 503.
    pub reg_cache_limit: u64,
}

impl Default for SipConfig {
    fn default() -> Self {
        Self {
            t1_ms: const { sip_config::T1_MS.int() },
            t2_ms: const { sip_config::T2_MS.int() },
            t4_ms: const { sip_config::T4_MS.int() },
            timer_c_ms: const { sip_config::TIMER_C_MS.int() },
            max_message_size: const { sip_config::MAX_MESSAGE_SIZE.usize() },
            workers: const { sip_config::WORKERS.usize() },
            tcp_workers: const { sip_config::TCP_WORKERS.usize() },
            tcp_auto_scaling_profile: None,
            prsm: const { sip_config::PRSM.flag() },
            queue_size: const { sip_config::QUEUE_SIZE.usize() },
            max_queue_delay_ms: const { sip_config::MAX_QUEUE_DELAY_MS.int() },
            routing_cost_us: const { sip_config::ROUTING_COST_US.int() },
            shutdown_grace_ms: const { sip_config::SHUTDOWN_GRACE_MS.int() },
            heap_reject_threshold: const { sip_config::HEAP_REJECT_THRESHOLD.u8() },
            heap_resume_threshold: const { sip_config::HEAP_RESUME_THRESHOLD.u8() },
            retry_after_min: const { sip_config::RETRY_AFTER_MIN.u32() },
            retry_after_max: const { sip_config::RETRY_AFTER_MAX.u32() },
            auto_scaling_cycle_ms: const { sip_config::AUTO_SCALING_CYCLE_MS.int() },
            source_rate: const { sip_config::SOURCE_RATE.u32() },
            source_burst: const { sip_config::SOURCE_BURST.u32() },
            source_deny_seconds: const { sip_config::SOURCE_DENY_SECONDS.int() },
            source_ipv6_prefix_length: const { sip_config::SOURCE_IPV6_PREFIX_LENGTH.u8() },
            max_calls: const { sip_config::MAX_CALLS.usize() },
            max_transactions: const { sip_config::MAX_TRANSACTIONS.usize() },
            max_subscriptions_per_source: const { sip_config::MAX_SUBSCRIPTIONS_PER_SOURCE.u32() },
            in_dialog_source: InDialogSource::DEFAULT,
            max_header_size: const { sip_config::MAX_HEADER_SIZE.usize() },
            tcp_max_connections: const { sip_config::TCP_MAX_CONNECTIONS.usize() },
            tcp_max_connections_per_source: const { sip_config::TCP_MAX_CONNECTIONS_PER_SOURCE.usize() },
            tcp_message_timeout_ms: const { sip_config::TCP_MESSAGE_TIMEOUT_MS.int() },
            tcp_idle_timeout_ms: const { sip_config::TCP_IDLE_TIMEOUT_MS.int() },
            tcp_write_queue_bytes: const { sip_config::TCP_WRITE_QUEUE_BYTES.usize() },
            tcp_write_timeout_ms: const { sip_config::TCP_WRITE_TIMEOUT_MS.int() },
            tls_handshake_timeout_ms: const { sip_config::TLS_HANDSHAKE_TIMEOUT_MS.int() },
            initial_inv_trans_expire: const { sip_config::INITIAL_INV_TRANS_EXPIRE.u32() },
            reg_cache_limit: const { sip_config::REG_CACHE_LIMIT.int() },
        }
    }
}

/// A SIP transport protocol; spelled `"udp"`, `"tcp"` or `"tls"` in the file and in the ACLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// SIP over UDP.
    Udp,
    /// SIP over TCP.
    Tcp,
    /// SIP over TLS over TCP (RFC 3261 §26.2, RFC 5630), with a `tls-profile`.
    Tls,
}

impl Transport {
    /// Every transport, in the order they are listed in messages.
    pub const ALL: [Self; 3] = [Self::Udp, Self::Tcp, Self::Tls];

    /// The lowercase name used in the file and the ACLI: `"udp"`, `"tcp"` or `"tls"`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Udp => "udp",
            Self::Tcp => "tcp",
            Self::Tls => "tls",
        }
    }

    /// Whether it runs over a TCP connection (TCP and TLS).
    #[must_use]
    pub const fn is_stream(self) -> bool {
        matches!(self, Self::Tcp | Self::Tls)
    }

    /// The valid spellings, for error messages: `"udp", "tcp", "tls"`.
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

    /// Parses `udp`, `tcp` or `tls`, ignoring ASCII case (so the ACLI accepts `UDP`).
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
    /// `address`: the local IP address to bind.
    #[serde(default = "default_address")]
    pub address: IpAddr,
    /// `port`: the local port to bind for UDP and TCP.
    #[serde(default = "default_port")]
    pub port: u16,
    /// `transports`: which transports listen here; non-empty, no duplicates; `tls` needs a
    /// `tls-profile`.
    #[serde(default = "default_transports")]
    pub transports: Vec<Transport>,
    /// `tls-port`: the local port SIP over TLS listens on (when `transports` has `tls`) (the
    /// default: RFC 3261 §19.1.2), not `port` when TCP listens too.
    #[serde(default = "default_tls_port")]
    pub tls_port: u16,
    /// `tls-profile`: the `tls-profile` of the TLS listener: its certificate, and how clients
    /// are verified. Required with `tls` in `transports`, refused without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_profile: Option<String>,
    /// `auto-scaling-profile`: name of the `auto-scaling-profile` of this interface's UDP worker
    /// group; must name an existing profile. Default none (the group is fixed at
    /// `sip-config.workers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_scaling_profile: Option<String>,
    /// `registration-caching`: phones' REGISTERs arriving here are cached (see
    /// `sbc_proto::registration`). Default disabled (relayed as any request).
    #[serde(default = "default_registration_caching")]
    pub registration_caching: bool,
    /// `min-reg-expire`: the shortest expiry a phone not behind NAT is given, s (300).
    #[serde(default = "default_min_reg_expire")]
    pub min_reg_expire: u32,
    /// `registration-interval`: how often the registrar sees each binding refreshed, s (3600).
    #[serde(default = "default_registration_interval")]
    pub registration_interval: u32,
    /// `nat-traversal`: which phones are taken as behind a NAT (default none).
    #[serde(default)]
    pub nat_traversal: NatTraversal,
    /// `nat-interval`: the registration expiry a phone behind NAT is given, s (30).
    #[serde(default = "default_nat_interval")]
    pub nat_interval: u32,
}

/// The key of an element of which a realm has one per address family: the realm for IPv4 (a
/// single-stack IPv4 configuration keeps its plain realm keys), `realm ipv6` for IPv6.
fn family_key(realm: &str, address: IpAddr) -> String {
    if address.is_ipv4() {
        realm.to_owned()
    } else {
        format!("{realm} ipv6")
    }
}

impl SipInterface {
    /// An interface of `realm` on `port` of the default address, every other key at its
    /// default.
    #[must_use]
    pub fn with_defaults(realm: &str, port: u16) -> Self {
        Self {
            realm: realm.to_owned(),
            address: default_address(),
            port,
            transports: default_transports(),
            tls_port: default_tls_port(),
            tls_profile: None,
            auto_scaling_profile: None,
            registration_caching: default_registration_caching(),
            min_reg_expire: default_min_reg_expire(),
            registration_interval: default_registration_interval(),
            nat_traversal: NatTraversal::DEFAULT,
            nat_interval: default_nat_interval(),
        }
    }

    /// What names this interface among the configuration's: its realm, with ` ipv6` for an
    /// IPv6 one (a realm has at most one interface per address family).
    #[must_use]
    pub fn key(&self) -> String {
        family_key(&self.realm, self.address)
    }

    /// The address and port this interface binds.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.address, self.port)
    }

    /// Whether `transport` listens here.
    #[must_use]
    pub fn has(&self, transport: Transport) -> bool {
        self.transports.contains(&transport)
    }

    /// The address and port `transport` listens on here (`tls-port` for TLS).
    #[must_use]
    pub fn addr_of(&self, transport: Transport) -> SocketAddr {
        match transport {
            Transport::Tls => SocketAddr::new(self.address, self.tls_port),
            Transport::Udp | Transport::Tcp => self.socket_addr(),
        }
    }

    /// The TCP ports this interface listens on (TCP's `port`, TLS's `tls-port`).
    pub fn stream_addrs(&self) -> impl Iterator<Item = SocketAddr> + '_ {
        self.transports
            .iter()
            .filter(|t| t.is_stream())
            .map(|t| self.addr_of(*t))
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
    /// `address`: the agent's IP address. Unset with a `hostname` that is a DNS name: that
    /// name resolved by DNS (RFC 3263, [`SessionAgent::dns_name`]); unset otherwise: 127.0.0.1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
    /// `port`: the agent's port; 0 with a DNS-resolved agent: the port (and the order of its
    /// hosts) from SRV records (RFC 3263 section 4.2).
    #[serde(default = "default_agent_port")]
    pub port: u16,
    /// `transport`: the transport used to reach the agent; `tls` needs a `tls-profile`, and TLS
    /// listening on the agent's realm's interface (where the agent's in-dialog requests come back).
    #[serde(default = "default_transport")]
    pub transport: Transport,
    /// `tls-profile`: with `transport = "tls"`, the `tls-profile` whose trusted CAs verify the
    /// agent's certificate (and whose certificate is presented, if the agent asks for one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_profile: Option<String>,
    /// `tls-server-name`: with `transport = "tls"`, the name sent in SNI and which the agent's
    /// certificate must carry (a DNS name, or an IP address for an IP SubjectAltName).
    /// Default: the agent's `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    /// `max-udp-length`: with `transport = "udp"`, a new request (INVITE or out-of-dialog)
    /// whose size exceeds this goes over TCP to the agent's address and port instead (RFC 3261
    /// section 18.1.1: 1300 bytes when the path MTU is unknown), for the whole dialog; 0 never
    /// switches. The agent's realm interface of its family must listen on TCP.
    #[serde(default)]
    pub max_udp_length: u16,
    /// `hostname`: the host of the Request-URI sent to the agent (a DNS name or an IP
    /// address). Default none: its `address`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// `state`: a disabled agent is no candidate of any route and is not pinged.
    #[serde(default)]
    pub state: AdminState,
    /// `ping-method`: the method of the health pings (`OPTIONS`): a SIP method in capitals
    /// that is answered outside a dialog.
    #[serde(default = "default_ping_method")]
    pub ping_method: String,
    /// `ping-interval`: seconds between health pings; 0 = no pings (the agent is taken out
    /// of service only by `trans-timeouts`).
    #[serde(default)]
    pub ping_interval: u32,
    /// `ping-send-mode`: `keep-alive` pings only when nothing came from the agent during the
    /// interval; `continuous` always.
    #[serde(default)]
    pub ping_send_mode: PingSendMode,
    /// `ping-response-timeout-ms`: how long a ping waits for an answer before it counts as
    /// missed, in ms. Our key: Oracle has none and waits for the transaction's timeout (32 s).
    #[serde(default = "default_ping_response_timeout_ms")]
    pub ping_response_timeout_ms: u32,
    /// `ping-misses`: consecutive missed pings that take the agent out of service. Our key
    /// (Kamailio's `ds_probing_threshold`, 1 there too).
    #[serde(default = "default_ping_misses")]
    pub ping_misses: u8,
    /// `ping-in-service-response-codes`: answers to a ping (100..=699) that count as up. Default
    /// none: any answer counts as up, except those in `out-service-response-codes`.
    #[serde(default)]
    pub ping_in_service_response_codes: Vec<u16>,
    /// `out-service-response-codes`: answers to a ping (100..=699) that take the agent out of
    /// service. Default none.
    #[serde(default)]
    pub out_service_response_codes: Vec<u16>,
    /// `trans-timeouts`: consecutive timeouts of requests sent to the agent (real traffic, not
    /// pings) that take it out of service; 0 = off (Oracle's option of that name).
    #[serde(default)]
    pub trans_timeouts: u32,
    /// `time-to-resume`: seconds after which an out-of-service agent that is not pinged is in
    /// service again; 0 = never (it stays out until the configuration is activated again).
    #[serde(default)]
    pub time_to_resume: u32,
    /// `invite-trans-expire`: seconds an initial INVITE to the agent waits for a first
    /// response (a 100 Trying is one) before the next candidate is tried; 0 = sip-config's
    /// `initial-inv-trans-expire`.
    #[serde(default)]
    pub invite_trans_expire: u32,
    /// `max-sessions`: calls to and from the agent at most; beyond, it is no candidate for a
    /// new one. 0 = unlimited.
    #[serde(default)]
    pub max_sessions: u32,
    /// `max-outbound-sessions`: calls to the agent at most (at most `max-sessions` when both
    /// are set). 0 = unlimited.
    #[serde(default)]
    pub max_outbound_sessions: u32,
    /// `max-burst-rate`: new sessions per second to the agent at most. 0 = unlimited.
    #[serde(default)]
    pub max_burst_rate: u32,
    /// `in-translationid`: the `session-translation` applied to requests from the agent,
    /// before routing. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_translationid: Option<String>,
    /// `out-translationid`: the `session-translation` applied to requests sent to the agent,
    /// after routing. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_translationid: Option<String>,
    /// `refer-call-transfer`: whether the SBC performs a transfer an in-dialog REFER from the
    /// agent asks for (either this or the realm's `refer-call-transfer` enables it).
    #[serde(default)]
    pub refer_call_transfer: ReferCallTransfer,
}

fn default_ping_method() -> String {
    session_agent::PING_METHOD.text().to_owned()
}

const fn default_ping_response_timeout_ms() -> u32 {
    session_agent::PING_RESPONSE_TIMEOUT_MS.u32()
}

const fn default_ping_misses() -> u8 {
    session_agent::PING_MISSES.u8()
}

impl Default for SessionAgent {
    /// An agent without name nor realm (as the ACLI starts one) at the default address, port
    /// and transport, every other key its default.
    fn default() -> Self {
        Self {
            name: String::new(),
            realm: String::new(),
            address: None,
            port: default_agent_port(),
            transport: DEFAULT_TRANSPORT,
            tls_profile: None,
            tls_server_name: None,
            max_udp_length: const { session_agent::MAX_UDP_LENGTH.u16() },
            hostname: None,
            state: AdminState::DEFAULT,
            ping_method: default_ping_method(),
            ping_interval: const { session_agent::PING_INTERVAL.u32() },
            ping_send_mode: PingSendMode::DEFAULT,
            ping_response_timeout_ms: default_ping_response_timeout_ms(),
            ping_misses: default_ping_misses(),
            ping_in_service_response_codes: Vec::new(),
            out_service_response_codes: Vec::new(),
            trans_timeouts: const { session_agent::TRANS_TIMEOUTS.u32() },
            time_to_resume: const { session_agent::TIME_TO_RESUME.u32() },
            invite_trans_expire: const { session_agent::INVITE_TRANS_EXPIRE.u32() },
            max_sessions: const { session_agent::MAX_SESSIONS.u32() },
            max_outbound_sessions: const { session_agent::MAX_OUTBOUND_SESSIONS.u32() },
            max_burst_rate: const { session_agent::MAX_BURST_RATE.u32() },
            in_translationid: None,
            out_translationid: None,
            refer_call_transfer: ReferCallTransfer::default(),
        }
    }
}

impl SessionAgent {
    /// Whether the agent takes part in routing (`state = "enabled"`).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.state.is_enabled()
    }

    /// The host of the Request-URI sent to the agent: `hostname`, else its address.
    #[must_use]
    pub fn request_uri_host(&self) -> String {
        self.hostname.clone().unwrap_or_else(|| match self.ip() {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        })
    }

    /// The agent's configured address: `address`, else 127.0.0.1 (for an agent resolved by
    /// DNS, a placeholder: see [`Self::dns_name`]).
    #[must_use]
    pub fn ip(&self) -> IpAddr {
        self.address.unwrap_or_else(default_address)
    }

    /// The DNS name the agent is resolved by: its `hostname` when `address` is unset and the
    /// hostname is not an IP address.
    #[must_use]
    pub fn dns_name(&self) -> Option<&str> {
        if self.address.is_some() {
            return None;
        }
        let host = self.hostname.as_deref()?;
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        (!host.is_empty() && bare.parse::<IpAddr>().is_err()).then_some(host)
    }

    /// The agent's configured address and port.
    #[must_use]
    pub fn socket_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ip(), self.port)
    }
}

/// `tls-profile`: a certificate and how peers are verified, for SIP over TLS (Oracle's element
/// name). A `sip-interface` listening on TLS names one, as does a `session-agent` reached over
/// TLS. The files are PEM; they are read (and checked) when the node starts and at every
/// `activate-config`, so a renewed certificate is taken by new handshakes without a restart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TlsProfile {
    /// `name`: how interfaces and agents refer to the profile; unique and non-empty. Required.
    pub name: String,
    /// `end-entity-certificate`: the PEM file of the certificate chain (the node's certificate
    /// first, then its intermediates). Required for a profile a `sip-interface` listens with;
    /// optional for one only used to dial (then no client certificate is presented).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub end_entity_certificate: String,
    /// `private-key`: the PEM file of the certificate's private key (PKCS#8, SEC1 or PKCS#1).
    /// Required with `end-entity-certificate`; never shown by `show`, only its path.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub private_key: String,
    /// `trusted-ca-certificates`: PEM files of the CAs that peers' certificates must chain to:
    /// session-agents' server certificates, and clients' with `mutual-authenticate`. Required
    /// for both uses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub trusted_ca_certificates: Vec<String>,
    /// `mutual-authenticate`: clients of a listener with this profile must present a certificate
    /// that chains to `trusted-ca-certificates` (mutual TLS).
    #[serde(default)]
    pub mutual_authenticate: bool,
    /// `verify-names`: with `mutual-authenticate`, the names (DNS or IP SubjectAltNames) of
    /// which a client's certificate must carry one. Default none: any certificate of a trusted
    /// CA is accepted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verify_names: Vec<String>,
    /// `tls-version`: `compatibility` (TLS 1.2 and 1.3), `tlsv12` or `tlsv13`.
    #[serde(default)]
    pub tls_version: TlsVersion,
    /// `expiry-warning-days`: a loaded certificate that expires within this many days raises the
    /// certificate-expiry alarm (with a trap) until it is replaced; 0 = only once expired.
    #[serde(default = "default_expiry_warning_days")]
    pub expiry_warning_days: u32,
}

impl TlsProfile {
    /// A profile named `name` with every default (no files yet).
    #[must_use]
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            end_entity_certificate: String::new(),
            private_key: String::new(),
            trusted_ca_certificates: Vec::new(),
            mutual_authenticate: const { tls_profile::MUTUAL_AUTHENTICATE.flag() },
            verify_names: Vec::new(),
            tls_version: TlsVersion::DEFAULT,
            expiry_warning_days: default_expiry_warning_days(),
        }
    }

    /// Whether the profile has a certificate (it can serve a listener).
    #[must_use]
    pub fn has_certificate(&self) -> bool {
        !self.end_entity_certificate.is_empty()
    }
}

const fn default_expiry_warning_days() -> u32 {
    tls_profile::EXPIRY_WARNING_DAYS.u32()
}

/// `access-control`: an operator's allow or deny entry for SIP sources (Oracle's element name).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct AccessControl {
    /// `source-address`: an IP address or a network (`192.0.2.7`, `10.0.0.0/8`, `2001:db8::/32`);
    /// unique. Required.
    pub source_address: String,
    /// `action`: `allow` (never rate-limited) or `deny` (dropped).
    pub action: AccessAction,
}

/// `media-manager`: media anchoring, one element for the node (Oracle's element name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct MediaManager {
    /// `state`: `enabled`: the media of a call whose two realms each have a `steering-pool` is
    /// anchored (relayed through the SBC, SDP rewritten); `disabled`: SDP passes unchanged.
    pub state: MediaManagerState,
    /// `latching`: symmetric RTP: during the latching window, a leg's media destination moves to
    /// where its packets come from (a caller behind NAT).
    pub latching: bool,
    /// `restricted-latching`: `none` (latch to any source) or `sdp` (latch only to the IP address
    /// the leg's SDP signalled).
    pub restricted_latching: RestrictedLatching,
    /// `latching-window-ms`: how long after a stream starts, or after a new SDP from that leg, its
    /// remote may be latched, in ms.
    pub latching_window_ms: u64,
    /// `rtp-inactivity`: no RTP on any leg of an anchored call for this long ends the call with a
    /// BYE on both legs, in seconds; 0 = off.
    pub rtp_inactivity: u64,
}

impl Default for MediaManager {
    fn default() -> Self {
        Self {
            state: MediaManagerState::DEFAULT,
            latching: const { media_manager::LATCHING.flag() },
            restricted_latching: RestrictedLatching::DEFAULT,
            latching_window_ms: const { media_manager::LATCHING_WINDOW_MS.int() },
            rtp_inactivity: const { media_manager::RTP_INACTIVITY.int() },
        }
    }
}

impl MediaManager {
    /// Whether media is anchored (`state = "enabled"`).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.state == MediaManagerState::Enabled
    }
}

/// `steering-pool`: the local address and ports the media of one realm is anchored on
/// (Oracle's element and attribute names). Each port pair (even RTP port, RTCP on the next
/// odd one) carries one leg of one call.
///
/// Port ranges of two pools never overlap, even on different addresses: the media relay finds
/// a call by its port alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SteeringPool {
    /// `ip-address`: the local address the pool's ports are bound on and written into the SDP
    /// (`c=`); not a wildcard. Required.
    pub ip_address: IpAddr,
    /// `start-port`: the first port of the pool. Required.
    pub start_port: u16,
    /// `end-port`: the last port of the pool (inclusive). Required, above `start-port`, with at
    /// least two RTP/RTCP pairs between them (see [`SteeringPool::pairs`]); the range overlaps no
    /// other pool's and holds no port of a `sip-interface` on the same address.
    pub end_port: u16,
    /// `realm-id`: the realm (a `sip-interface`'s realm) whose legs this pool anchors; at most
    /// one pool per realm. Required.
    pub realm_id: String,
}

impl SteeringPool {
    /// What names this pool among the configuration's: its realm-id, with ` ipv6` for an IPv6
    /// one (a realm has at most one pool per address family).
    #[must_use]
    pub fn key(&self) -> String {
        family_key(&self.realm_id, self.ip_address)
    }

    /// The number of RTP/RTCP pairs the pool holds: the even ports `p` with `p + 1 <=
    /// end-port`, from `start-port` rounded up to even: 500 for 20000..=20999, 1 for
    /// 1025..=1028 (only 1026/1027 is a pair).
    #[must_use]
    pub fn pairs(&self) -> usize {
        let first = u32::from(self.start_port) + u32::from(self.start_port) % 2;
        let end = u32::from(self.end_port);
        if first + 1 > end {
            return 0;
        }
        usize::try_from((end - 1 - first) / 2 + 1).unwrap_or(usize::MAX)
    }

    /// The pool's ports, `start-port..=end-port`.
    #[must_use]
    pub fn ports(&self) -> std::ops::RangeInclusive<u16> {
        self.start_port..=self.end_port
    }
}

/// `sip-monitoring`: Oracle's SIP Monitor & Trace, one element for the node: whether the
/// on-box trace runs, which `filter-config`s select the messages it captures, and the bounds
/// of the ring the captures are kept in (the three `max-` keys are ours, not Oracle's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct SipMonitoring {
    /// `state`: `enabled` runs the trace; `disabled` (the default) captures nothing because of
    /// the configuration.
    pub state: SipMonitoringState,
    /// `match-any-filter`: with several `monitoring-filters`, `true` captures a message that
    /// matches any one of them, `false` (the default) only one that matches every one.
    pub match_any_filter: bool,
    /// `monitoring-filters`: names of `filter-config`s, each at most once, or
    /// [`SipMonitoring::ALL`] (`*`) alone for every message. Default none: with `state`
    /// enabled, nothing is captured because of the configuration.
    pub monitoring_filters: Vec<String>,
    /// `max-trace-memory`: what the ring of captures holds at most, in MiB; the oldest
    /// captures are dropped beyond it.
    pub max_trace_memory: u32,
    /// `max-captures`: captures (calls or out-of-dialog exchanges) the ring keeps at most; the
    /// oldest is dropped for a new one beyond it.
    pub max_captures: u32,
    /// `max-messages-per-capture`: messages one capture keeps at most; later ones are counted
    /// as dropped.
    pub max_messages_per_capture: u32,
}

impl Default for SipMonitoring {
    fn default() -> Self {
        Self {
            state: SipMonitoringState::DEFAULT,
            match_any_filter: const { sip_monitoring::MATCH_ANY_FILTER.flag() },
            monitoring_filters: Vec::new(),
            max_trace_memory: const { sip_monitoring::MAX_TRACE_MEMORY.u32() },
            max_captures: const { sip_monitoring::MAX_CAPTURES.u32() },
            max_messages_per_capture: const { sip_monitoring::MAX_MESSAGES_PER_CAPTURE.u32() },
        }
    }
}

impl SipMonitoring {
    /// The `monitoring-filters` entry that captures every message.
    pub const ALL: &'static str = "*";

    /// Whether the trace runs (`state = "enabled"`).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.state == SipMonitoringState::Enabled
    }

    /// Whether `monitoring-filters` is `["*"]`: every message is captured.
    #[must_use]
    pub fn captures_all(&self) -> bool {
        matches!(self.monitoring_filters.as_slice(), [only] if only == Self::ALL)
    }

    /// `max-trace-memory` in bytes.
    #[must_use]
    pub fn max_trace_bytes(&self) -> usize {
        usize::try_from(u64::from(self.max_trace_memory) * 1024 * 1024).unwrap_or(usize::MAX)
    }
}

/// `filter-config`: one filter of the SIP trace (Oracle's element), which `sip-monitoring`
/// names in its `monitoring-filters`. A message matches when every key set matches it; a
/// filter with nothing set matches every message. `address` and `user` are Oracle's;
/// `realm`, `session-agent` and `method` are ours.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct FilterConfig {
    /// `name`: how `monitoring-filters` refers to the filter; unique, non-empty, not `*`.
    /// Required.
    pub name: String,
    /// `address`: the peer's IP address or network, IPv4 or IPv6 (`192.0.2.7`,
    /// `192.0.2.0/24`, `2001:db8::/32`); a bare address is that one address. See
    /// [`FilterConfig::network`]. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// `user`: a user part or phone number (`alice`, `+15551234`), or an AoR (`alice@example.com`),
    /// of the Request-URI, From or To. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// `realm`: the realm (a `sip-interface`'s) of the message's leg. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub realm: Option<String>,
    /// `session-agent`: the session-agent the message comes from or goes to. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_agent: Option<String>,
    /// `method`: the SIP method (of a response, its CSeq's), compared case-sensitively as on
    /// the wire: `INVITE`, `REGISTER`. Default none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

impl FilterConfig {
    /// A filter named `name` with nothing set (it matches every message).
    #[must_use]
    pub fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            ..Self::default()
        }
    }

    /// The `address` as a network: an address without a prefix length as a `/32` or `/128`;
    /// `None` when unset (or invalid, which [`crate::Config::validate`] refuses).
    #[must_use]
    pub fn network(&self) -> Option<crate::net::IpNet> {
        self.address
            .as_deref()
            .and_then(|a| crate::net::parse_net(a).ok())
    }
}

/// `capture-agent`: where traced messages go as HEPv3 (a Homer server, sngrep), one element
/// for the node. The `password` is HEP's authentication key, which travels in clear: an
/// identifier for the server, not a protection; `show` and the JSON mask it all the same, and
/// so does this type's `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct CaptureAgent {
    /// `state`: `enabled` sends each traced message to `address`; `disabled` (the default)
    /// sends nothing.
    pub state: CaptureAgentState,
    /// `address`: the capture server's `address:port` (IPv6 as `[2001:db8::9]:9060`).
    /// Default none; required when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<SocketAddr>,
    /// `transport`: `udp` (a datagram per packet) or `tcp`.
    pub transport: CaptureTransport,
    /// `capture-id`: the HEP capture agent id the server files the packets under.
    pub capture_id: u32,
    /// `password`: the HEP authentication key, sent in clear with every packet; empty: none is
    /// sent. Masked in `show`, the JSON and `Debug`.
    pub password: String,
    /// `queue-size`: packets waiting for the capture server at most; beyond, they are dropped
    /// and counted.
    pub queue_size: u32,
    /// `rtcp`: the media relay's RTCP reports are sent too.
    pub rtcp: bool,
}

impl Default for CaptureAgent {
    fn default() -> Self {
        Self {
            state: CaptureAgentState::DEFAULT,
            address: None,
            transport: CaptureTransport::DEFAULT,
            capture_id: const { capture_agent::CAPTURE_ID.u32() },
            password: capture_agent::PASSWORD.text().to_owned(),
            queue_size: const { capture_agent::QUEUE_SIZE.u32() },
            rtcp: const { capture_agent::RTCP.flag() },
        }
    }
}

impl fmt::Debug for CaptureAgent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let password = if self.password.is_empty() {
            ""
        } else {
            crate::MASK
        };
        f.debug_struct("CaptureAgent")
            .field("state", &self.state)
            .field("address", &self.address)
            .field("transport", &self.transport)
            .field("capture_id", &self.capture_id)
            .field("password", &password)
            .field("queue_size", &self.queue_size)
            .field("rtcp", &self.rtcp)
            .finish()
    }
}

impl CaptureAgent {
    /// Whether traced messages are sent (`state = "enabled"`).
    #[must_use]
    pub fn is_enabled(&self) -> bool {
        self.state == CaptureAgentState::Enabled
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

/// The default of an interface's and an agent's `address`.
pub(crate) const fn default_address() -> IpAddr {
    sip_interface::ADDRESS.ip()
}

/// The default `port` of an interface.
pub(crate) const fn default_port() -> u16 {
    sip_interface::PORT.u16()
}

/// The default `port` of a session-agent.
pub(crate) const fn default_agent_port() -> u16 {
    session_agent::PORT.u16()
}

/// The default `transports` of an interface, from its key table.
pub(crate) fn default_transports() -> Vec<Transport> {
    sip_interface::TRANSPORTS
        .list()
        .iter()
        .filter_map(|word| word.parse().ok())
        .collect()
}

pub(crate) const fn default_tls_port() -> u16 {
    sip_interface::TLS_PORT.u16()
}

const fn default_registration_caching() -> bool {
    sip_interface::REGISTRATION_CACHING.flag()
}

const fn default_min_reg_expire() -> u32 {
    sip_interface::MIN_REG_EXPIRE.u32()
}

const fn default_registration_interval() -> u32 {
    sip_interface::REGISTRATION_INTERVAL.u32()
}

const fn default_nat_interval() -> u32 {
    sip_interface::NAT_INTERVAL.u32()
}

/// The default `transport` of a session-agent, which its key table reads.
pub(crate) const DEFAULT_TRANSPORT: Transport = Transport::Udp;

const fn default_transport() -> Transport {
    DEFAULT_TRANSPORT
}

/// The interfaces used when the file has no `[[sip-interface]]`: access on 5060, core on 5062.
pub(crate) fn default_interfaces() -> Vec<SipInterface> {
    vec![
        SipInterface::with_defaults(ACCESS_REALM, 5060),
        SipInterface::with_defaults(CORE, 5062),
    ]
}

/// The agents used when the file has no `[[session-agent]]`: `core` at 127.0.0.1:5080 over UDP.
pub(crate) fn default_agents() -> Vec<SessionAgent> {
    vec![SessionAgent {
        name: CORE.to_owned(),
        realm: CORE.to_owned(),
        port: 5080,
        transport: Transport::Udp,
        ..SessionAgent::default()
    }]
}

/// The pools used when the file has neither `[[sip-interface]]` nor `[[steering-pool]]`:
/// `access` on 127.0.0.1 ports 20000..=20999 and `core` on 127.0.0.1 ports 21000..=21999.
pub(crate) fn default_pools() -> Vec<SteeringPool> {
    vec![
        SteeringPool {
            ip_address: default_address(),
            start_port: 20_000,
            end_port: 20_999,
            realm_id: ACCESS_REALM.to_owned(),
        },
        SteeringPool {
            ip_address: default_address(),
            start_port: 21_000,
            end_port: 21_999,
            realm_id: CORE.to_owned(),
        },
    ]
}
