//! The elements of the ACLI tree: their values, their attributes and how they print.
//!
//! An attribute is read and written through the element's TOML form (the same serde model the
//! file uses), so the ACLI and the file can never disagree on a name or a type: setting
//! `value 80` on an `alarm-threshold` puts the integer 80 under the key `value` of the
//! element's TOML table and deserializes it back.

use std::net::{IpAddr, SocketAddr};

use toml::value::{Table, Value};

use crate::model::{
    default_address, AccessAction, AccessControl, AlarmThreshold, AlarmType, AutoScalingProfile,
    FilterLevel, InDialogSource, MediaManager, MediaManagerState, MemorySource, Peer, PeerType,
    RedundancyConfig, RedundancyState, RestrictedLatching, SessionAgent, SessionRouter, Severity,
    SipConfig, SipInterface, SnmpAuthProtocol, SnmpCommunity, SnmpPrivProtocol, SnmpUserEntry,
    SnmpVersion, SteeringPool, SystemConfig, TlsProfile, TlsVersion, Transport, TrapReceiver,
};
use crate::Config;

/// One element of the ACLI tree with its value: what `show` prints inside it and what
/// [`render_element`] takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Element {
    /// `system-config`.
    SystemConfig(SystemConfig),
    /// `sip-config`.
    SipConfig(SipConfig),
    /// `session-router` (the element, prompt `session-router-config`).
    SessionRouter(SessionRouter),
    /// `redundancy-config`.
    RedundancyConfig(RedundancyConfig),
    /// One `sip-interface`.
    SipInterface(SipInterface),
    /// One `session-agent`.
    SessionAgent(SessionAgent),
    /// One `alarm-threshold` of `system-config`.
    AlarmThreshold(AlarmThreshold),
    /// One `trap-receiver` of `system-config`.
    TrapReceiver(TrapReceiver),
    /// One `snmp-community` of `system-config`.
    SnmpCommunity(SnmpCommunity),
    /// One `snmp-user-entry` of `system-config`.
    SnmpUserEntry(SnmpUserEntry),
    /// One `peer` of `redundancy-config`.
    Peer(Peer),
    /// One `auto-scaling-profile`.
    AutoScalingProfile(AutoScalingProfile),
    /// One `access-control` entry.
    AccessControl(AccessControl),
    /// `media-manager`.
    MediaManager(MediaManager),
    /// One `steering-pool`.
    SteeringPool(SteeringPool),
    /// One `tls-profile`.
    TlsProfile(TlsProfile),
}

/// The kinds of [`Element`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    SystemConfig,
    SipConfig,
    SessionRouter,
    RedundancyConfig,
    SipInterface,
    SessionAgent,
    AlarmThreshold,
    TrapReceiver,
    SnmpCommunity,
    SnmpUserEntry,
    Peer,
    AutoScalingProfile,
    AccessControl,
    MediaManager,
    SteeringPool,
    TlsProfile,
}

/// The type of an attribute's value, which decides how the ACLI parses it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ty {
    /// Any string (one word; quote it if it has spaces).
    Str,
    /// A non-negative integer up to the given maximum (the storage type's).
    Int(u64),
    /// `enabled`/`disabled` (also `true`/`false`).
    Bool,
    /// One of these words.
    Words(&'static [&'static str]),
    /// An IP address.
    Ip,
    /// An `address:port`.
    Addr,
    /// A list of items of the inner type, edited with `+item`, `-item` or a bare list.
    List(&'static Self),
}

/// One attribute of an element.
#[derive(Debug)]
pub(crate) struct Attr {
    /// The ACLI word, which is also the TOML key.
    pub(crate) name: &'static str,
    /// How the value is parsed.
    pub(crate) ty: Ty,
    /// What is valid, shown by `?` and in type errors, e.g. `<1..=100>`.
    pub(crate) hint: &'static str,
    /// One line of what it means.
    pub(crate) help: &'static str,
    /// Whether the attribute may be unset (`""` or `none` clears it).
    pub(crate) optional: bool,
}

const fn attr(name: &'static str, ty: Ty, hint: &'static str, help: &'static str) -> Attr {
    Attr {
        name,
        ty,
        hint,
        help,
        optional: false,
    }
}

const fn opt(name: &'static str, ty: Ty, hint: &'static str, help: &'static str) -> Attr {
    Attr {
        name,
        ty,
        hint,
        help,
        optional: true,
    }
}

/// The largest integer TOML can hold.
const I64: u64 = i64::MAX as u64;
const U32: u64 = u32::MAX as u64;
const U16: u64 = u16::MAX as u64;
const U8: u64 = u8::MAX as u64;
const TRANSPORTS: &[&str] = &["udp", "tcp", "tls"];

const SYSTEM_CONFIG: &[Attr] = &[
    attr(
        "hostname",
        Ty::Str,
        "<name>",
        "node name used in logs, traps and show output",
    ),
    attr(
        "options",
        Ty::List(&Ty::Str),
        "<+name=value | -name | name=value ...>",
        "options: +name=value adds or replaces one, -name removes one, a bare list replaces all",
    ),
    attr(
        "memory-source",
        Ty::Words(MemorySource::WORDS),
        "<host | cgroup | process>",
        "what memory utilisation is measured against",
    ),
    attr(
        "memory-limit-mb",
        Ty::Int(I64),
        "<MiB, > 0 with memory-source process>",
        "memory limit of the process memory source",
    ),
    attr(
        "heap-limit-mb",
        Ty::Int(I64),
        "<1..=1048576>",
        "heap size heap percentages refer to, MiB",
    ),
    attr(
        "alarm-iteration-ms",
        Ty::Int(I64),
        "<100..=600000>",
        "length of one alarm iteration, ms",
    ),
    attr(
        "alarm-subsamples",
        Ty::Int(U32),
        "<1..=60>",
        "sub-samples per alarm iteration",
    ),
    attr(
        "spike-subsamples",
        Ty::Int(U32),
        "<1..=alarm-subsamples>",
        "consecutive sub-samples above a threshold that are not a spike",
    ),
    attr(
        "lab-mode",
        Ty::Bool,
        "<enabled | disabled>",
        "allow the lab's memory ballast commands",
    ),
    opt(
        "snmp-agent-address",
        Ty::Addr,
        "<address:port | none>",
        "UDP address the SNMP agent answers on (needs an snmp-community or snmp-user-entry)",
    ),
    opt(
        "snmp-engine-id",
        Ty::Str,
        "<hex, 5..=32 octets | none>",
        "this node's SNMPv3 engine ID (none: derived from the hostname)",
    ),
    opt(
        "metrics-address",
        Ty::Addr,
        "<address:port | none>",
        "where the Prometheus /metrics HTTP listener binds (none: no listener)",
    ),
];

const ALARM_THRESHOLD: &[Attr] = &[
    attr(
        "type",
        Ty::Words(AlarmType::WORDS),
        "<memory | heap | cpu | sessions | space>",
        "what is measured",
    ),
    attr(
        "volume",
        Ty::Str,
        "<mount point>",
        "the volume, for type space only",
    ),
    attr(
        "severity",
        Ty::Words(Severity::WORDS),
        "<minor | major | critical>",
        "severity of the alarm",
    ),
    attr(
        "value",
        Ty::Int(U8),
        "<1..=100>",
        "threshold in percent; usage above it raises the alarm",
    ),
    attr(
        "health-penalty",
        Ty::Int(U8),
        "<0..=100>",
        "health points taken while raised",
    ),
];

const TRAP_RECEIVER: &[Attr] = &[
    attr(
        "ip-address",
        Ty::Ip,
        "<IP address>",
        "address of the SNMP manager",
    ),
    attr(
        "port",
        Ty::Int(U16),
        "<1..=65535>",
        "UDP port of the SNMP manager",
    ),
    attr("community", Ty::Str, "<community>", "SNMPv2c community"),
    attr(
        "filter-level",
        Ty::Words(FilterLevel::WORDS),
        "<all | minor | major | critical | none>",
        "lowest severity sent",
    ),
    attr(
        "version",
        Ty::Words(SnmpVersion::WORDS),
        "<v2c | v3>",
        "SNMP version of the traps",
    ),
    opt(
        "user-name",
        Ty::Str,
        "<snmp-user-entry user-name | none>",
        "the v3 user whose keys secure the traps",
    ),
];

const SNMP_USER_ENTRY: &[Attr] = &[
    attr("user-name", Ty::Str, "<name>", "SNMPv3 USM user name"),
    attr(
        "auth-protocol",
        Ty::Words(SnmpAuthProtocol::WORDS),
        "<sha>",
        "authentication protocol (HMAC-SHA-96; MD5 refused)",
    ),
    attr(
        "auth-password",
        Ty::Str,
        "<8 characters or more>",
        "authentication password (a secret)",
    ),
    attr(
        "priv-protocol",
        Ty::Words(SnmpPrivProtocol::WORDS),
        "<aes128>",
        "privacy protocol (AES-128-CFB; DES refused)",
    ),
    attr(
        "priv-password",
        Ty::Str,
        "<8 characters or more>",
        "privacy password (a secret)",
    ),
    attr(
        "ip-addresses",
        Ty::List(&Ty::Str),
        "<+address | -address | address/prefix ...>",
        "sources allowed to use it; none: any",
    ),
];

const SNMP_COMMUNITY: &[Attr] = &[
    attr(
        "community-name",
        Ty::Str,
        "<community>",
        "read-only SNMPv2c community of the agent (a secret)",
    ),
    attr(
        "ip-addresses",
        Ty::List(&Ty::Str),
        "<+address | -address | address/prefix ...>",
        "sources allowed to use it; none: any",
    ),
];

const REDUNDANCY_CONFIG: &[Attr] = &[
    attr(
        "state",
        Ty::Words(RedundancyState::WORDS),
        "<enabled | disabled>",
        "run as one node of a pair",
    ),
    attr("port", Ty::Int(U16), "<1..=65535>", "heartbeat UDP port"),
    attr(
        "advertisement-time",
        Ty::Int(I64),
        "<50..=60000>",
        "heartbeat interval, ms",
    ),
    attr(
        "percent-drift",
        Ty::Int(U32),
        "<100..=65535>",
        "peer dead after advertisement-time x this / 100",
    ),
    attr(
        "initial-time",
        Ty::Int(I64),
        "<5..=600000>",
        "listening time before choosing a role, ms",
    ),
    attr(
        "becoming-active-time",
        Ty::Int(I64),
        "<5..=600000>",
        "time in becoming-active, ms",
    ),
    attr(
        "becoming-standby-time",
        Ty::Int(I64),
        "<5..=3600000>",
        "time allowed for the initial sync, ms",
    ),
    attr(
        "health-threshold",
        Ty::Int(U8),
        "<1..=100>",
        "an active below it switches over",
    ),
    attr(
        "emergency-threshold",
        Ty::Int(U8),
        "<0..health-threshold>",
        "below it a starting standby becomes active at once",
    ),
    attr(
        "config-sync-port",
        Ty::Int(U16),
        "<1..=65535>",
        "config sync TCP port",
    ),
    attr(
        "sip-sync-port",
        Ty::Int(U16),
        "<1..=65535>",
        "SIP state sync TCP port",
    ),
    opt(
        "witness",
        Ty::Addr,
        "<address:port | none>",
        "address a node must reach to take over",
    ),
    attr(
        "shared-key",
        Ty::Str,
        "<secret>",
        "the pair's secret (keys of every pair channel), required when enabled",
    ),
    opt(
        "service-address",
        Ty::Ip,
        "<IP address | none>",
        "the shared SIP address the active owns",
    ),
    attr(
        "notify-active",
        Ty::Str,
        "<\"shell command\">",
        "run before taking the service address (e.g. add a virtual IP)",
    ),
    attr(
        "notify-standby",
        Ty::Str,
        "<\"shell command\">",
        "run after releasing the service address",
    ),
    attr(
        "notify-fault",
        Ty::Str,
        "<\"shell command\">",
        "run when the node goes out of service",
    ),
];

const PEER: &[Attr] = &[
    attr("name", Ty::Str, "<name>", "the node's name"),
    attr(
        "type",
        Ty::Words(PeerType::WORDS),
        "<primary | secondary>",
        "primary or secondary",
    ),
    attr(
        "destinations",
        Ty::List(&Ty::Addr),
        "<+address:port | -address:port | address:port ...>",
        "heartbeat paths to the node",
    ),
];

const SIP_CONFIG: &[Attr] = &[
    attr("t1-ms", Ty::Int(I64), "<10..=10000>", "RFC 3261 T1, ms"),
    attr("t2-ms", Ty::Int(I64), "<t1-ms..=60000>", "RFC 3261 T2, ms"),
    attr("t4-ms", Ty::Int(I64), "<10..=60000>", "RFC 3261 T4, ms"),
    attr(
        "timer-c-ms",
        Ty::Int(I64),
        "<1000..=3600000>",
        "proxy INVITE timer C, ms",
    ),
    attr(
        "max-message-size",
        Ty::Int(I64),
        "<1500..=65535>",
        "largest SIP message, bytes",
    ),
    attr(
        "workers",
        Ty::Int(I64),
        "<1..=64, within its profile's scale-down-to..=scale-up-to>",
        "initial (or fixed) worker count of each UDP worker group",
    ),
    attr(
        "tcp-workers",
        Ty::Int(I64),
        "<1..=64, within its profile's scale-down-to..=scale-up-to>",
        "initial (or fixed) worker count of the TCP worker group",
    ),
    opt(
        "tcp-auto-scaling-profile",
        Ty::Str,
        "<auto-scaling-profile name | \"\">",
        "scaling profile of the TCP worker group (\"\" for none: fixed count)",
    ),
    attr(
        "prsm",
        Ty::Bool,
        "<enabled | disabled>",
        "PRSM scheduling: new requests first, redundant retransmissions dropped (disabled: FIFO)",
    ),
    attr(
        "queue-size",
        Ty::Int(I64),
        "<16..=65536>",
        "capacity of each worker's primary and secondary queue",
    ),
    attr(
        "max-queue-delay-ms",
        Ty::Int(I64),
        "<0..=32000, 0 = off>",
        "a new request queued longer than this gets 503, ms",
    ),
    attr(
        "routing-cost-us",
        Ty::Int(I64),
        "<0..=1000000>",
        "benchmarks only: simulated blocking routing lookup per new request, us",
    ),
    attr(
        "shutdown-grace-ms",
        Ty::Int(I64),
        "<0..=120000>",
        "how long SIGTERM waits, ms",
    ),
    attr(
        "heap-reject-threshold",
        Ty::Int(U8),
        "<1..=100>",
        "heap percent above which new requests get 503",
    ),
    attr(
        "heap-resume-threshold",
        Ty::Int(U8),
        "<0..heap-reject-threshold>",
        "heap percent below which new requests are accepted again",
    ),
    attr(
        "retry-after-min",
        Ty::Int(U32),
        "<1..=3600>",
        "lowest Retry-After of those 503s, s",
    ),
    attr(
        "retry-after-max",
        Ty::Int(U32),
        "<retry-after-min..=3600>",
        "highest Retry-After, s",
    ),
    attr(
        "auto-scaling-cycle-ms",
        Ty::Int(I64),
        "<100..=60000>",
        "auto-scaling cycle, ms",
    ),
    attr(
        "source-rate",
        Ty::Int(U32),
        "<1..=1000000>",
        "new requests per second one source may send (session-agents exempt)",
    ),
    attr(
        "source-burst",
        Ty::Int(U32),
        "<1..=1000000>",
        "new requests one source may send at once",
    ),
    attr(
        "source-deny-seconds",
        Ty::Int(I64),
        "<0..=86400, 0 = only limit>",
        "how long a source that keeps exceeding its rate is denied, s",
    ),
    attr(
        "max-calls",
        Ty::Int(I64),
        "<64..=10000000>",
        "calls held at most; a new INVITE beyond gets 503",
    ),
    attr(
        "max-transactions",
        Ty::Int(I64),
        "<64..=20000000>",
        "transactions held at most; a new request beyond gets 503",
    ),
    attr(
        "in-dialog-source",
        Ty::Words(InDialogSource::WORDS),
        "<address | ip | any>",
        "where in-dialog requests and responses must come from (else 481 / dropped)",
    ),
    attr(
        "max-header-size",
        Ty::Int(I64),
        "<256..=65535>",
        "longest header line accepted, bytes (longer: 400 naming it)",
    ),
    attr(
        "tcp-max-connections",
        Ty::Int(I64),
        "<1..=1000000>",
        "TCP connections accepted per sip-interface at most",
    ),
    attr(
        "tcp-max-connections-per-source",
        Ty::Int(I64),
        "<1..=tcp-max-connections>",
        "TCP connections from one IP address at most (session-agents exempt)",
    ),
    attr(
        "tcp-message-timeout-ms",
        Ty::Int(I64),
        "<100..=600000>",
        "a TCP message must be complete this long after its first byte, ms",
    ),
    attr(
        "tcp-idle-timeout-ms",
        Ty::Int(I64),
        "<1000..=86400000>",
        "a TCP connection without traffic is closed after this, ms",
    ),
    attr(
        "tcp-write-queue-bytes",
        Ty::Int(I64),
        "<max-message-size..=16777216>",
        "a TCP connection's write queue at most; beyond, it is closed",
    ),
    attr(
        "tcp-write-timeout-ms",
        Ty::Int(I64),
        "<100..=600000>",
        "a TCP write not done within this closes the connection, ms",
    ),
    attr(
        "tls-handshake-timeout-ms",
        Ty::Int(I64),
        "<100..=60000>",
        "a TLS handshake not done within this closes the connection, ms",
    ),
];

const SESSION_ROUTER: &[Attr] = &[opt(
    "default-route",
    Ty::Str,
    "<session-agent name | none>",
    "agent used when no route matches",
)];

const SIP_INTERFACE: &[Attr] = &[
    attr(
        "realm",
        Ty::Str,
        "<realm>",
        "the network this interface faces",
    ),
    attr("address", Ty::Ip, "<IP address>", "local address to bind"),
    attr("port", Ty::Int(U16), "<1..=65535>", "local port to bind"),
    attr(
        "transports",
        Ty::List(&Ty::Words(TRANSPORTS)),
        "<+udp | -tcp | +tls | udp tcp tls>",
        "transports listening here (tls needs tls-profile)",
    ),
    attr(
        "tls-port",
        Ty::Int(U16),
        "<1..=65535>",
        "local port SIP over TLS listens on",
    ),
    opt(
        "tls-profile",
        Ty::Str,
        "<tls-profile name | \"\">",
        "certificate of the TLS listener and how clients are verified",
    ),
    opt(
        "auto-scaling-profile",
        Ty::Str,
        "<auto-scaling-profile name | \"\">",
        "scaling profile of this interface's UDP worker group (\"\" for none: fixed count)",
    ),
];

const SESSION_AGENT: &[Attr] = &[
    attr("name", Ty::Str, "<name>", "how routes refer to this agent"),
    attr(
        "realm",
        Ty::Str,
        "<realm>",
        "realm through which the agent is reached",
    ),
    attr("address", Ty::Ip, "<IP address>", "the agent's address"),
    attr("port", Ty::Int(U16), "<1..=65535>", "the agent's port"),
    attr(
        "transport",
        Ty::Words(TRANSPORTS),
        "<udp | tcp | tls>",
        "transport to the agent",
    ),
    opt(
        "tls-profile",
        Ty::Str,
        "<tls-profile name | \"\">",
        "with transport tls: the CAs that verify the agent (and our client certificate)",
    ),
    opt(
        "tls-server-name",
        Ty::Str,
        "<DNS name or IP address | \"\">",
        "with transport tls: SNI, and the name the agent's certificate must carry (default its address)",
    ),
];

const TLS_PROFILE: &[Attr] = &[
    attr(
        "name",
        Ty::Str,
        "<name>",
        "how interfaces and agents refer to the profile",
    ),
    attr(
        "end-entity-certificate",
        Ty::Str,
        "<PEM file: certificate, then intermediates>",
        "the certificate chain this node presents",
    ),
    attr(
        "private-key",
        Ty::Str,
        "<PEM file>",
        "the certificate's private key (only its path is shown)",
    ),
    attr(
        "trusted-ca-certificates",
        Ty::List(&Ty::Str),
        "<+file | -file | file ...>",
        "PEM CA files peers' certificates must chain to",
    ),
    attr(
        "mutual-authenticate",
        Ty::Bool,
        "<enabled | disabled>",
        "clients must present a certificate of a trusted CA",
    ),
    attr(
        "verify-names",
        Ty::List(&Ty::Str),
        "<+name | -name | name ...>",
        "with mutual-authenticate: names a client certificate must carry one of",
    ),
    attr(
        "tls-version",
        Ty::Words(TlsVersion::WORDS),
        "<compatibility | tlsv12 | tlsv13>",
        "TLS versions negotiated (compatibility: 1.2 and 1.3)",
    ),
    attr(
        "expiry-warning-days",
        Ty::Int(U32),
        "<0..=365>",
        "a certificate expiring within this many days raises an alarm",
    ),
];

const ACCESS_CONTROL: &[Attr] = &[
    attr(
        "source-address",
        Ty::Str,
        "<IP address or network, e.g. 192.0.2.7 or 10.0.0.0/8>",
        "the SIP sources of this entry",
    ),
    attr(
        "action",
        Ty::Words(AccessAction::WORDS),
        "<allow | deny>",
        "allow: never rate-limited; deny: dropped",
    ),
];

const MEDIA_MANAGER: &[Attr] = &[
    attr(
        "state",
        Ty::Words(MediaManagerState::WORDS),
        "<enabled | disabled>",
        "anchor the media of calls whose two realms have a steering-pool (disabled: SDP unchanged)",
    ),
    attr(
        "latching",
        Ty::Bool,
        "<enabled | disabled>",
        "symmetric RTP: a leg's media goes to where its packets come from",
    ),
    attr(
        "restricted-latching",
        Ty::Words(RestrictedLatching::WORDS),
        "<none | sdp>",
        "sdp: latch only to the IP address the leg's SDP signalled",
    ),
    attr(
        "latching-window-ms",
        Ty::Int(I64),
        "<100..=60000>",
        "how long after a stream starts, or a new SDP, its remote may be latched, ms",
    ),
    attr(
        "rtp-inactivity",
        Ty::Int(I64),
        "<0..=86400, 0 = off>",
        "no RTP on any leg this long ends the call with BYE on both legs, s",
    ),
];

const STEERING_POOL: &[Attr] = &[
    attr(
        "ip-address",
        Ty::Ip,
        "<IP address, not a wildcard>",
        "local address the media is anchored on (written into the SDP)",
    ),
    attr(
        "start-port",
        Ty::Int(U16),
        "<1024..=65535>",
        "first port of the pool",
    ),
    attr(
        "end-port",
        Ty::Int(U16),
        "<above start-port, at least 2 RTP/RTCP pairs>",
        "last port of the pool; no two pools overlap, even on different addresses",
    ),
    attr(
        "realm-id",
        Ty::Str,
        "<sip-interface realm>",
        "the realm whose legs this pool anchors (one pool per realm)",
    ),
];

const AUTO_SCALING_PROFILE: &[Attr] = &[
    attr("name", Ty::Str, "<name>", "the profile's name"),
    attr("scale-up-to", Ty::Int(U32), "<1..=64>", "most workers"),
    attr(
        "scale-up-on",
        Ty::Int(U8),
        "<1..=100>",
        "load percent that counts for scaling up",
    ),
    attr(
        "scale-up-for",
        Ty::Int(U32),
        "<1..=1000>",
        "cycles above scale-up-on that start a worker",
    ),
    opt(
        "scale-up-within",
        Ty::Int(U32),
        "<scale-up-for..=1000 | none>",
        "window of cycles (default: scale-up-for)",
    ),
    opt(
        "scale-down-to",
        Ty::Int(U32),
        "<1..scale-up-to | none>",
        "fewest workers",
    ),
    opt(
        "scale-down-on",
        Ty::Int(U8),
        "<0..scale-up-on | none>",
        "load percent that counts for scaling down",
    ),
    opt(
        "scale-down-for",
        Ty::Int(U32),
        "<1..=1000 | none>",
        "cycles below scale-down-on that stop a worker",
    ),
];

impl Kind {
    /// The word that enters the element, also the first line of its `show`.
    pub(crate) const fn word(self) -> &'static str {
        match self {
            Self::SystemConfig => "system-config",
            Self::SipConfig => "sip-config",
            Self::SessionRouter => "session-router",
            Self::RedundancyConfig => "redundancy-config",
            Self::SipInterface => "sip-interface",
            Self::SessionAgent => "session-agent",
            Self::AlarmThreshold => "alarm-threshold",
            Self::TrapReceiver => "trap-receiver",
            Self::SnmpCommunity => "snmp-community",
            Self::SnmpUserEntry => "snmp-user-entry",
            Self::Peer => "peer",
            Self::AutoScalingProfile => "auto-scaling-profile",
            Self::AccessControl => "access-control",
            Self::MediaManager => "media-manager",
            Self::SteeringPool => "steering-pool",
            Self::TlsProfile => "tls-profile",
        }
    }

    /// The name in the prompt (Oracle's, where it differs from the word).
    pub(crate) const fn prompt(self) -> &'static str {
        match self {
            Self::SessionRouter => "session-router-config",
            other => other.word(),
        }
    }

    /// One line of what the element is.
    pub(crate) const fn help(self) -> &'static str {
        match self {
            Self::SystemConfig => "node-wide settings, options, alarm thresholds, trap receivers",
            Self::SipConfig => "SIP timers, limits and heap thresholds",
            Self::SessionRouter => "default route of new requests",
            Self::RedundancyConfig => "the HA pair: heartbeat, thresholds, peers",
            Self::SipInterface => "a listening point per realm (multi-instance, key: realm)",
            Self::SessionAgent => "a next hop (multi-instance, key: name)",
            Self::AlarmThreshold => {
                "an alarm threshold (multi-instance, key: type severity [volume])"
            }
            Self::TrapReceiver => "an SNMP trap receiver (multi-instance, key: ip-address[:port])",
            Self::SnmpCommunity => {
                "a community of the SNMP agent (multi-instance, key: community-name)"
            }
            Self::SnmpUserEntry => {
                "an SNMPv3 user, authPriv SHA + AES-128 (multi-instance, key: user-name)"
            }
            Self::Peer => "one node of the pair (multi-instance, key: name)",
            Self::AutoScalingProfile => "worker-group scaling rules (multi-instance, key: name)",
            Self::AccessControl => {
                "allow or deny SIP sources (multi-instance, key: source-address)"
            }
            Self::MediaManager => "media anchoring: state, latching, RTP inactivity",
            Self::SteeringPool => {
                "the address and ports a realm's media is anchored on (multi-instance, key: realm-id)"
            }
            Self::TlsProfile => {
                "a certificate and how TLS peers are verified (multi-instance, key: name)"
            }
        }
    }

    /// Its attributes, in `show` order.
    pub(crate) const fn attrs(self) -> &'static [Attr] {
        match self {
            Self::SystemConfig => SYSTEM_CONFIG,
            Self::SipConfig => SIP_CONFIG,
            Self::SessionRouter => SESSION_ROUTER,
            Self::RedundancyConfig => REDUNDANCY_CONFIG,
            Self::SipInterface => SIP_INTERFACE,
            Self::SessionAgent => SESSION_AGENT,
            Self::AlarmThreshold => ALARM_THRESHOLD,
            Self::TrapReceiver => TRAP_RECEIVER,
            Self::SnmpCommunity => SNMP_COMMUNITY,
            Self::SnmpUserEntry => SNMP_USER_ENTRY,
            Self::Peer => PEER,
            Self::AutoScalingProfile => AUTO_SCALING_PROFILE,
            Self::AccessControl => ACCESS_CONTROL,
            Self::MediaManager => MEDIA_MANAGER,
            Self::SteeringPool => STEERING_POOL,
            Self::TlsProfile => TLS_PROFILE,
        }
    }

    /// Its sub-elements.
    pub(crate) const fn children(self) -> &'static [Self] {
        match self {
            Self::SystemConfig => &[
                Self::AlarmThreshold,
                Self::TrapReceiver,
                Self::SnmpCommunity,
                Self::SnmpUserEntry,
            ],
            Self::RedundancyConfig => &[Self::Peer],
            _ => &[],
        }
    }

    /// Whether there may be several, selected by key.
    pub(crate) const fn is_multi(self) -> bool {
        !matches!(
            self,
            Self::SystemConfig
                | Self::SipConfig
                | Self::SessionRouter
                | Self::RedundancyConfig
                | Self::MediaManager
        )
    }

    /// The TOML key of the element (of its list, for a multi-instance one).
    pub(crate) const fn toml_key(self) -> &'static str {
        self.word()
    }

    /// A new instance, as entering the element word gives it.
    pub(crate) fn fresh(self) -> Element {
        match self {
            Self::SystemConfig => Element::SystemConfig(SystemConfig::default()),
            Self::SipConfig => Element::SipConfig(SipConfig::default()),
            Self::SessionRouter => Element::SessionRouter(SessionRouter::default()),
            Self::RedundancyConfig => Element::RedundancyConfig(RedundancyConfig::default()),
            Self::SipInterface => Element::SipInterface(SipInterface {
                realm: String::new(),
                address: default_address(),
                port: 5060,
                transports: crate::model::default_transports(),
                tls_port: crate::model::default_tls_port(),
                tls_profile: None,
                auto_scaling_profile: None,
            }),
            Self::SessionAgent => Element::SessionAgent(SessionAgent {
                name: String::new(),
                realm: String::new(),
                address: default_address(),
                port: 5060,
                transport: Transport::Udp,
                tls_profile: None,
                tls_server_name: None,
            }),
            Self::AlarmThreshold => Element::AlarmThreshold(AlarmThreshold::default()),
            Self::TrapReceiver => Element::TrapReceiver(TrapReceiver::default()),
            Self::SnmpCommunity => Element::SnmpCommunity(SnmpCommunity::default()),
            Self::SnmpUserEntry => Element::SnmpUserEntry(SnmpUserEntry::default()),
            Self::Peer => Element::Peer(Peer::default()),
            Self::AutoScalingProfile => Element::AutoScalingProfile(AutoScalingProfile::default()),
            Self::AccessControl => Element::AccessControl(AccessControl::default()),
            Self::MediaManager => Element::MediaManager(MediaManager::default()),
            // Ports 0 and no realm: `done` names what is still to set.
            Self::SteeringPool => Element::SteeringPool(SteeringPool {
                ip_address: default_address(),
                start_port: 0,
                end_port: 0,
                realm_id: String::new(),
            }),
            Self::TlsProfile => Element::TlsProfile(TlsProfile::named("")),
        }
    }
}

/// Serializes any model value to its TOML table.
fn table_of<T: serde::Serialize>(value: &T) -> Table {
    match Value::try_from(value) {
        Ok(Value::Table(table)) => table,
        // Every element is a struct, which serializes to a table (the tests cover each one).
        other => unreachable!("an element serializes to a TOML table, got {other:?}"),
    }
}

/// Writes a key for messages: `"memory critical"`.
fn quoted(s: &str) -> String {
    crate::error::quoted(s)
}

impl Element {
    /// The element's kind.
    pub(crate) const fn kind(&self) -> Kind {
        match self {
            Self::SystemConfig(_) => Kind::SystemConfig,
            Self::SipConfig(_) => Kind::SipConfig,
            Self::SessionRouter(_) => Kind::SessionRouter,
            Self::RedundancyConfig(_) => Kind::RedundancyConfig,
            Self::SipInterface(_) => Kind::SipInterface,
            Self::SessionAgent(_) => Kind::SessionAgent,
            Self::AlarmThreshold(_) => Kind::AlarmThreshold,
            Self::TrapReceiver(_) => Kind::TrapReceiver,
            Self::SnmpCommunity(_) => Kind::SnmpCommunity,
            Self::SnmpUserEntry(_) => Kind::SnmpUserEntry,
            Self::Peer(_) => Kind::Peer,
            Self::AutoScalingProfile(_) => Kind::AutoScalingProfile,
            Self::AccessControl(_) => Kind::AccessControl,
            Self::MediaManager(_) => Kind::MediaManager,
            Self::SteeringPool(_) => Kind::SteeringPool,
            Self::TlsProfile(_) => Kind::TlsProfile,
        }
    }

    /// The ACLI word of the element, e.g. `"alarm-threshold"`.
    #[must_use]
    pub fn name(&self) -> &'static str {
        self.kind().word()
    }

    /// The element as a TOML table, sub-element lists included.
    pub(crate) fn to_table(&self) -> Table {
        match self {
            Self::SystemConfig(v) => table_of(v),
            Self::SipConfig(v) => table_of(v),
            Self::SessionRouter(v) => table_of(v),
            Self::RedundancyConfig(v) => table_of(v),
            Self::SipInterface(v) => table_of(v),
            Self::SessionAgent(v) => table_of(v),
            Self::AlarmThreshold(v) => table_of(v),
            Self::TrapReceiver(v) => table_of(v),
            Self::SnmpCommunity(v) => table_of(v),
            Self::SnmpUserEntry(v) => table_of(v),
            Self::Peer(v) => table_of(v),
            Self::AutoScalingProfile(v) => table_of(v),
            Self::AccessControl(v) => table_of(v),
            Self::MediaManager(v) => table_of(v),
            Self::SteeringPool(v) => table_of(v),
            Self::TlsProfile(v) => table_of(v),
        }
    }

    /// An element of `kind` from a TOML table; the error is the deserializer's message.
    pub(crate) fn from_table(kind: Kind, table: Table) -> Result<Self, String> {
        let value = Value::Table(table);
        let result = match kind {
            Kind::SystemConfig => value.try_into().map(Self::SystemConfig),
            Kind::SipConfig => value.try_into().map(Self::SipConfig),
            Kind::SessionRouter => value.try_into().map(Self::SessionRouter),
            Kind::RedundancyConfig => value.try_into().map(Self::RedundancyConfig),
            Kind::SipInterface => value.try_into().map(Self::SipInterface),
            Kind::SessionAgent => value.try_into().map(Self::SessionAgent),
            Kind::AlarmThreshold => value.try_into().map(Self::AlarmThreshold),
            Kind::TrapReceiver => value.try_into().map(Self::TrapReceiver),
            Kind::SnmpCommunity => value.try_into().map(Self::SnmpCommunity),
            Kind::SnmpUserEntry => value.try_into().map(Self::SnmpUserEntry),
            Kind::Peer => value.try_into().map(Self::Peer),
            Kind::AutoScalingProfile => value.try_into().map(Self::AutoScalingProfile),
            Kind::AccessControl => value.try_into().map(Self::AccessControl),
            Kind::MediaManager => value.try_into().map(Self::MediaManager),
            Kind::SteeringPool => value.try_into().map(Self::SteeringPool),
            Kind::TlsProfile => value.try_into().map(Self::TlsProfile),
        };
        result.map_err(|err| err.to_string().trim_end().to_owned())
    }

    /// The key that `select` and `no` take: `"access"` (a realm or a steering-pool's
    /// realm-id), `"memory critical"`,
    /// `"space major /var"`, `"10.0.0.1:162"`; empty for a single-instance element.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::SipInterface(v) => v.realm.clone(),
            Self::SessionAgent(v) => v.name.clone(),
            Self::Peer(v) => v.name.clone(),
            Self::AutoScalingProfile(v) => v.name.clone(),
            Self::AccessControl(v) => v.source_address.clone(),
            Self::SteeringPool(v) => v.realm_id.clone(),
            Self::TlsProfile(v) => v.name.clone(),
            Self::AlarmThreshold(v) if v.volume.is_empty() => {
                format!("{} {}", v.kind, v.severity)
            }
            Self::AlarmThreshold(v) => format!("{} {} {}", v.kind, v.severity, v.volume),
            Self::TrapReceiver(v) => v.socket_addr().to_string(),
            Self::SnmpCommunity(v) => v.community_name.clone(),
            Self::SnmpUserEntry(v) => v.user_name.clone(),
            _ => String::new(),
        }
    }

    /// The spellings `select` accepts for this instance: the key, and for a trap receiver its
    /// bare address too.
    pub(crate) fn aliases(&self) -> Vec<String> {
        let mut aliases = vec![self.key()];
        if let Self::TrapReceiver(v) = self {
            aliases.push(v.ip_address.to_string());
        }
        aliases
    }

    /// The instances of sub-element `kind`.
    pub(crate) fn children_of(&self, kind: Kind) -> Vec<Self> {
        match (self, kind) {
            (Self::SystemConfig(v), Kind::AlarmThreshold) => v
                .alarm_thresholds
                .iter()
                .cloned()
                .map(Self::AlarmThreshold)
                .collect(),
            (Self::SystemConfig(v), Kind::TrapReceiver) => v
                .trap_receivers
                .iter()
                .cloned()
                .map(Self::TrapReceiver)
                .collect(),
            (Self::SystemConfig(v), Kind::SnmpCommunity) => v
                .snmp_communities
                .iter()
                .cloned()
                .map(Self::SnmpCommunity)
                .collect(),
            (Self::SystemConfig(v), Kind::SnmpUserEntry) => v
                .snmp_users
                .iter()
                .cloned()
                .map(Self::SnmpUserEntry)
                .collect(),
            (Self::RedundancyConfig(v), Kind::Peer) => {
                v.peers.iter().cloned().map(Self::Peer).collect()
            }
            _ => Vec::new(),
        }
    }

    /// Puts `child` in place of the instance keyed `at` (or appends it when `at` is `None` or
    /// names no instance); returns its index.
    pub(crate) fn put_child(&mut self, child: Self, at: Option<&str>) -> usize {
        match (self, child) {
            (Self::SystemConfig(v), Self::AlarmThreshold(c)) => {
                put(&mut v.alarm_thresholds, c, at, |t| {
                    Self::AlarmThreshold(t.clone()).key()
                })
            }
            (Self::SystemConfig(v), Self::SnmpCommunity(c)) => {
                put(&mut v.snmp_communities, c, at, |t| t.community_name.clone())
            }
            (Self::SystemConfig(v), Self::SnmpUserEntry(c)) => {
                put(&mut v.snmp_users, c, at, |t| t.user_name.clone())
            }
            (Self::SystemConfig(v), Self::TrapReceiver(c)) => {
                put(&mut v.trap_receivers, c, at, |t| {
                    Self::TrapReceiver(t.clone()).key()
                })
            }
            (Self::RedundancyConfig(v), Self::Peer(c)) => {
                put(&mut v.peers, c, at, |p| p.name.clone())
            }
            (parent, child) => {
                unreachable!("{} is not a sub-element of {}", child.name(), parent.name())
            }
        }
    }

    /// Removes the instance of sub-element `kind` at `index`.
    pub(crate) fn remove_child(&mut self, kind: Kind, index: usize) {
        match (self, kind) {
            (Self::SystemConfig(v), Kind::AlarmThreshold) => {
                v.alarm_thresholds.remove(index);
            }
            (Self::SystemConfig(v), Kind::TrapReceiver) => {
                v.trap_receivers.remove(index);
            }
            (Self::SystemConfig(v), Kind::SnmpCommunity) => {
                v.snmp_communities.remove(index);
            }
            (Self::SystemConfig(v), Kind::SnmpUserEntry) => {
                v.snmp_users.remove(index);
            }
            (Self::RedundancyConfig(v), Kind::Peer) => {
                v.peers.remove(index);
            }
            _ => {}
        }
    }
}

/// Replaces the item whose key is `at`, or appends; returns the index.
fn put<T>(list: &mut Vec<T>, item: T, at: Option<&str>, key: impl Fn(&T) -> String) -> usize {
    match at.and_then(|at| list.iter().position(|x| key(x) == at)) {
        Some(i) => {
            list[i] = item;
            i
        }
        None => {
            list.push(item);
            list.len() - 1
        }
    }
}

/// The element of a single-instance `kind` in `config`.
pub(crate) fn top_single(config: &Config, kind: Kind) -> Element {
    match kind {
        Kind::SystemConfig => Element::SystemConfig(config.system.clone()),
        Kind::SipConfig => Element::SipConfig(config.sip_config.clone()),
        Kind::SessionRouter => Element::SessionRouter(config.session_router.clone()),
        Kind::RedundancyConfig => Element::RedundancyConfig(config.redundancy.clone()),
        Kind::MediaManager => Element::MediaManager(config.media_manager.clone()),
        other => unreachable!("{} is multi-instance", other.word()),
    }
}

/// The instances of the top-level multi-instance `kind` in `config`.
pub(crate) fn top_list(config: &Config, kind: Kind) -> Vec<Element> {
    match kind {
        Kind::SipInterface => config
            .sip_interfaces
            .iter()
            .cloned()
            .map(Element::SipInterface)
            .collect(),
        Kind::SessionAgent => config
            .session_agents
            .iter()
            .cloned()
            .map(Element::SessionAgent)
            .collect(),
        Kind::AutoScalingProfile => config
            .auto_scaling_profiles
            .iter()
            .cloned()
            .map(Element::AutoScalingProfile)
            .collect(),
        Kind::AccessControl => config
            .access_control
            .iter()
            .cloned()
            .map(Element::AccessControl)
            .collect(),
        Kind::SteeringPool => config
            .steering_pools
            .iter()
            .cloned()
            .map(Element::SteeringPool)
            .collect(),
        Kind::TlsProfile => config
            .tls_profiles
            .iter()
            .cloned()
            .map(Element::TlsProfile)
            .collect(),
        _ => Vec::new(),
    }
}

/// Puts a top-level element into `config` (for a multi-instance one, in place of the instance
/// keyed `at`, or appended); returns its index (0 for a single-instance one).
pub(crate) fn top_put(config: &mut Config, element: Element, at: Option<&str>) -> usize {
    match element {
        Element::SystemConfig(v) => config.system = v,
        Element::SipConfig(v) => config.sip_config = v,
        Element::SessionRouter(v) => config.session_router = v,
        Element::RedundancyConfig(v) => config.redundancy = v,
        Element::MediaManager(v) => config.media_manager = v,
        Element::SipInterface(v) => {
            return put(&mut config.sip_interfaces, v, at, |i| i.realm.clone())
        }
        Element::SessionAgent(v) => {
            return put(&mut config.session_agents, v, at, |a| a.name.clone())
        }
        Element::AutoScalingProfile(v) => {
            return put(&mut config.auto_scaling_profiles, v, at, |p| p.name.clone())
        }
        Element::AccessControl(v) => {
            return put(&mut config.access_control, v, at, |a| {
                a.source_address.clone()
            })
        }
        Element::SteeringPool(v) => {
            return put(&mut config.steering_pools, v, at, |p| p.realm_id.clone())
        }
        Element::TlsProfile(v) => return put(&mut config.tls_profiles, v, at, |p| p.name.clone()),
        other => unreachable!("{} is a sub-element", other.name()),
    }
    0
}

/// Removes the instance of top-level `kind` at `index`.
pub(crate) fn top_remove(config: &mut Config, kind: Kind, index: usize) {
    match kind {
        Kind::SipInterface => {
            config.sip_interfaces.remove(index);
        }
        Kind::SessionAgent => {
            config.session_agents.remove(index);
        }
        Kind::AutoScalingProfile => {
            config.auto_scaling_profiles.remove(index);
        }
        Kind::AccessControl => {
            config.access_control.remove(index);
        }
        Kind::SteeringPool => {
            config.steering_pools.remove(index);
        }
        Kind::TlsProfile => {
            config.tls_profiles.remove(index);
        }
        _ => {}
    }
}

/// Parses one word as a value of the scalar type `ty`, or says what is valid.
pub(crate) fn parse_scalar(ty: Ty, word: &str) -> Result<Value, String> {
    match ty {
        Ty::Str => Ok(Value::String(word.to_owned())),
        Ty::Int(max) => match word.parse::<u64>() {
            Ok(n) if n <= max => Ok(Value::Integer(n.try_into().unwrap_or(i64::MAX))),
            Ok(_) => Err("out of range".to_owned()),
            Err(_) => Err("not a whole number".to_owned()),
        },
        Ty::Bool => match word.to_ascii_lowercase().as_str() {
            "enabled" | "true" => Ok(Value::Boolean(true)),
            "disabled" | "false" => Ok(Value::Boolean(false)),
            _ => Err("not enabled or disabled".to_owned()),
        },
        Ty::Words(words) => words
            .iter()
            .find(|w| w.eq_ignore_ascii_case(word))
            .map(|w| Value::String((*w).to_owned()))
            .ok_or_else(|| {
                format!(
                    "not one of {}",
                    crate::error::quoted_list(words.iter().copied())
                )
            }),
        Ty::Ip => word
            .parse::<IpAddr>()
            .map(|ip| Value::String(ip.to_string()))
            .map_err(|_| "not an IP address".to_owned()),
        Ty::Addr => word
            .parse::<SocketAddr>()
            .map(|addr| Value::String(addr.to_string()))
            .map_err(|_| "not an address:port (IPv6 as [::1]:9090)".to_owned()),
        Ty::List(_) => unreachable!("lists are parsed item by item"),
    }
}

/// How a value prints in `show`: strings bare, booleans as enabled/disabled, lists one item
/// per line.
fn value_lines(value: Option<&Value>) -> Vec<String> {
    match value {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Boolean(b)) => vec![if *b { "enabled" } else { "disabled" }.to_owned()],
        Some(Value::Array(items)) => items
            .iter()
            .flat_map(|item| value_lines(Some(item)))
            .collect(),
        Some(other) => vec![other.to_string()],
    }
}

/// Width of the attribute-name column of `show`.
const NAME_WIDTH: usize = 32;
/// Indent of one nesting level of `show`.
const INDENT: &str = "        ";

/// Prints an element as Oracle's `show` does: its name, then one attribute per line with the
/// names left and the values aligned (a list continues on the following lines, a secret prints
/// as `********`), then its sub-elements, indented.
#[must_use]
pub fn render_element(element: &Element) -> String {
    let mut out = String::new();
    render_into(&mut out, element, 0);
    out
}

fn render_into(out: &mut String, element: &Element, depth: usize) {
    let pad = INDENT.repeat(depth);
    out.push_str(&pad);
    out.push_str(element.name());
    out.push('\n');
    let table = element.to_table();
    for attr in element.kind().attrs() {
        let mut lines = value_lines(table.get(attr.name));
        if crate::SECRET_KEYS.contains(&attr.name) {
            for line in &mut lines {
                if !line.is_empty() {
                    *line = crate::MASK.to_owned();
                }
            }
        }
        let mut lines = lines.into_iter();
        let first = lines.next().unwrap_or_default();
        let line = format!("{pad}{INDENT}{:<NAME_WIDTH$}{first}", attr.name);
        out.push_str(line.trim_end());
        out.push('\n');
        for more in lines {
            out.push_str(&format!("{pad}{INDENT}{:<NAME_WIDTH$}{more}\n", ""));
        }
    }
    for kind in element.kind().children() {
        for child in element.children_of(*kind) {
            render_into(out, &child, depth + 1);
        }
    }
}

/// Prints a whole configuration in ACLI form, element by element in Oracle's order:
/// `system-config`, `sip-config`, `session-router`, each `tls-profile`, each `sip-interface`, each
/// `session-agent`, `redundancy-config`, each `auto-scaling-profile`, each `access-control`,
/// `media-manager`, each `steering-pool`. (The session-router's `route` list is only in the
/// TOML form.)
#[must_use]
pub fn render_config(config: &Config) -> String {
    let mut elements = vec![
        top_single(config, Kind::SystemConfig),
        top_single(config, Kind::SipConfig),
        top_single(config, Kind::SessionRouter),
    ];
    elements.extend(top_list(config, Kind::TlsProfile));
    elements.extend(top_list(config, Kind::SipInterface));
    elements.extend(top_list(config, Kind::SessionAgent));
    elements.push(top_single(config, Kind::RedundancyConfig));
    elements.extend(top_list(config, Kind::AutoScalingProfile));
    elements.extend(top_list(config, Kind::AccessControl));
    elements.push(top_single(config, Kind::MediaManager));
    elements.extend(top_list(config, Kind::SteeringPool));
    elements
        .iter()
        .map(render_element)
        .collect::<Vec<_>>()
        .join("\n")
}

/// For messages: `"access", "core"`.
pub(crate) fn key_list(elements: &[Element]) -> String {
    if elements.is_empty() {
        "(none)".to_owned()
    } else {
        elements
            .iter()
            .map(|e| quoted(&e.key()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
