//! Every configuration key, declared once: one table per element.
//!
//! Each key of each element is one [`KeySpec`]: its name (the TOML key and the ACLI word), its
//! type, its default, its range or valid words, and one line of help. Everything else follows
//! from that declaration:
//!
//! - the model's `Default` impls and serde default functions read the defaults
//!   ([`KeySpec::int`], [`KeySpec::text`], …, evaluated at compile time);
//! - validation checks the ranges (`validate.rs` names the key's spec, never a number);
//! - the ACLI's `?` help, its completion of words and its "valid:" part of messages;
//! - the commented example file `config/sbc.example.toml` and the configuration reference
//!   `docs/configuration-reference.md` ([`crate::docs`]), which a unit test compares with the
//!   committed files.
//!
//! Bounds that depend on another key (`t2-ms` from `t1-ms` up) are declared as such
//! ([`Bound::Key`], [`Bound::Below`]); `validate.rs` checks them with the other key's value.
//! A keyword's words and its default come from the keyword enum of the model (its
//! `DEFAULT`), so they are written once too.

use std::net::{IpAddr, Ipv4Addr};

use crate::model::{
    AccessAction, AccountState, AccountStrategy, AccountTransport, AdminState, AlarmType,
    AllowAnonymous, CaptureAgentState, CaptureTransport, FileOutput, FilterLevel, GenerateInterim,
    GenerateStart, InDialogSource, MediaManagerState, MemorySource, NatTraversal, PeerType,
    PingSendMode, RedundancyState, ReferCallTransfer, Refresher, RestrictedLatching, SagStrategy,
    Severity, SipMonitoringState, SnmpAuthProtocol, SnmpPrivProtocol, SnmpVersion, SpoolFullAction,
    TlsVersion, TranslationType, DEFAULT_TRANSPORT,
};

/// The type of a key's value, which decides how the ACLI parses it and how the reference
/// names it.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// Any string (one word in the ACLI; quote it if it has spaces).
    Str,
    /// A non-negative integer up to the given maximum (the storage type's).
    Int(u64),
    /// A boolean (`enabled`/`disabled`, also `true`/`false`, in the ACLI).
    Bool,
    /// One of these words.
    Words(&'static [&'static str]),
    /// An IP address.
    Ip,
    /// An `address:port`.
    Addr,
    /// A list of items of the inner type (edited with `+item`, `-item` or a bare list).
    List(&'static Self),
    /// A position in a string: a whole number from 0, or `$` for the end (`translation-rules`'
    /// `add-index` and `delete-index`).
    Index,
}

/// A key's default, as the model's `Default` takes it.
#[derive(Debug, Clone, Copy)]
pub enum Dflt {
    /// An integer.
    Int(u64),
    /// A boolean.
    Bool(bool),
    /// A string (also a keyword's word).
    Str(&'static str),
    /// An IP address.
    Ip(IpAddr),
    /// A list of strings (empty: an empty list).
    List(&'static [&'static str]),
    /// Absent: an optional key that is unset by default.
    Unset,
    /// No default: the key must be given.
    Required,
}

/// One end of a key's range.
#[derive(Debug, Clone, Copy)]
pub enum Bound {
    /// A number.
    Value(u64),
    /// The value of another key of the same element (inclusive).
    Key(&'static str),
    /// Below the value of another key of the same element (an upper bound only).
    Below(&'static str),
}

impl Bound {
    fn write(self, out: &mut String) {
        match self {
            Self::Value(n) => out.push_str(&n.to_string()),
            Self::Key(k) | Self::Below(k) => out.push_str(k),
        }
    }
}

/// One configuration key: its name, type, default, range and help, declared once.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// The TOML key, which is also the ACLI attribute word.
    pub name: &'static str,
    /// How the value is parsed.
    pub ty: Ty,
    /// The default.
    pub default: Dflt,
    /// The valid range of an integer: `(low, high)`, both inclusive unless [`Bound::Below`].
    pub range: Option<(Bound, Bound)>,
    /// What is valid, when the range or the words do not say it all (`<MiB, > 0 with …>`).
    hint: Option<&'static str>,
    /// Appended to a range in the hint: `0 = off`.
    note: Option<&'static str>,
    /// An example value in TOML, for the example file where the key has no default.
    pub example: Option<&'static str>,
    /// One line of what it means.
    pub help: &'static str,
    /// Whether the key may be unset (`""` or `none` clears it in the ACLI).
    pub optional: bool,
}

impl KeySpec {
    const fn new(ty: Ty, default: Dflt, help: &'static str) -> Self {
        Self {
            name: "",
            ty,
            default,
            range: None,
            hint: None,
            note: None,
            example: None,
            help,
            optional: false,
        }
    }

    /// An integer stored in a type whose maximum is `max`.
    const fn int_of(max: u64, default: u64, help: &'static str) -> Self {
        Self::new(Ty::Int(max), Dflt::Int(default), help)
    }

    /// The declaration's name (the table macro sets it).
    const fn named(mut self, name: &'static str) -> Self {
        self.name = name;
        self
    }

    /// Valid `low..=high`.
    const fn range(mut self, low: u64, high: u64) -> Self {
        self.range = Some((Bound::Value(low), Bound::Value(high)));
        self
    }

    /// A range with bounds that may name other keys.
    const fn bounds(mut self, low: Bound, high: Bound) -> Self {
        self.range = Some((low, high));
        self
    }

    /// What is valid, in words (replaces the hint made from the range or the words).
    const fn hint(mut self, hint: &'static str) -> Self {
        self.hint = Some(hint);
        self
    }

    /// A remark after the range: `<0..=32000, 0 = off>`.
    const fn note(mut self, note: &'static str) -> Self {
        self.note = Some(note);
        self
    }

    /// An example value (TOML) for the example file.
    const fn example(mut self, toml: &'static str) -> Self {
        self.example = Some(toml);
        self
    }

    /// May be unset; unset by default.
    const fn optional(mut self) -> Self {
        self.optional = true;
        self.default = Dflt::Unset;
        self
    }

    /// Has no default.
    const fn required(mut self) -> Self {
        self.default = Dflt::Required;
        self
    }

    /// The integer default. Panics (at compile time, where the model reads it in a `const`
    /// block) when the default is not an integer.
    #[must_use]
    pub const fn int(&self) -> u64 {
        match self.default {
            Dflt::Int(n) => n,
            _ => panic!("not an integer default"),
        }
    }

    /// The integer default as a `u8` (checked at compile time).
    #[must_use]
    pub const fn u8(&self) -> u8 {
        let n = self.int();
        assert!(n <= u8::MAX as u64);
        n as u8
    }

    /// The integer default as a `u16` (checked at compile time).
    #[must_use]
    pub const fn u16(&self) -> u16 {
        let n = self.int();
        assert!(n <= u16::MAX as u64);
        n as u16
    }

    /// The integer default as a `u32` (checked at compile time).
    #[must_use]
    pub const fn u32(&self) -> u32 {
        let n = self.int();
        assert!(n <= u32::MAX as u64);
        n as u32
    }

    /// The integer default as a `usize` (checked at compile time).
    #[must_use]
    pub const fn usize(&self) -> usize {
        let n = self.int();
        assert!(n <= usize::MAX as u64);
        n as usize
    }

    /// The boolean default.
    #[must_use]
    pub const fn flag(&self) -> bool {
        match self.default {
            Dflt::Bool(b) => b,
            _ => panic!("not a boolean default"),
        }
    }

    /// The string default.
    #[must_use]
    pub const fn text(&self) -> &'static str {
        match self.default {
            Dflt::Str(s) => s,
            _ => panic!("not a string default"),
        }
    }

    /// The IP address default.
    #[must_use]
    pub const fn ip(&self) -> IpAddr {
        match self.default {
            Dflt::Ip(ip) => ip,
            _ => panic!("not an address default"),
        }
    }

    /// The list default.
    #[must_use]
    pub const fn list(&self) -> &'static [&'static str] {
        match self.default {
            Dflt::List(items) => items,
            _ => panic!("not a list default"),
        }
    }

    /// The literal bounds of the range (a bound naming another key counts as open); `None`
    /// without a range.
    #[must_use]
    pub fn literal_range(&self) -> Option<std::ops::RangeInclusive<u64>> {
        self.range.map(|_| self.min()..=self.max())
    }

    /// The literal upper bound of the range (`u64::MAX` when it names another key).
    #[must_use]
    pub const fn max(&self) -> u64 {
        match self.range {
            Some((_, Bound::Value(n))) => n,
            _ => u64::MAX,
        }
    }

    /// The literal lower bound of the range (0 when it names another key).
    #[must_use]
    pub const fn min(&self) -> u64 {
        match self.range {
            Some((Bound::Value(n), _)) => n,
            _ => 0,
        }
    }

    /// What is valid, as the ACLI's `?` shows it: `<1..=100>`, `<0..=32000, 0 = off>`,
    /// `<t1-ms..=60000>`, `<memory | heap>`, `<scale-up-for..=1000 | none>`.
    #[must_use]
    pub fn hint_text(&self) -> String {
        if let Some(hint) = self.hint {
            return hint.to_owned();
        }
        let mut out = String::from("<");
        match (self.range, self.ty) {
            (Some((low, high)), _) => {
                low.write(&mut out);
                out.push_str(if matches!(high, Bound::Below(_)) {
                    ".."
                } else {
                    "..="
                });
                high.write(&mut out);
            }
            (None, Ty::Words(words)) => out.push_str(&words.join(" | ")),
            (None, Ty::Bool) => out.push_str("enabled | disabled"),
            _ => out.push_str(self.name),
        }
        if let Some(note) = self.note {
            out.push_str(", ");
            out.push_str(note);
        }
        if self.optional {
            out.push_str(" | none");
        }
        out.push('>');
        out
    }

    /// What is valid, for messages and the reference: the hint without its brackets.
    #[must_use]
    pub fn valid(&self) -> String {
        let hint = self.hint_text();
        hint.trim_start_matches('<')
            .trim_end_matches('>')
            .to_owned()
    }

    /// The default as TOML text (`500`, `"sbc"`, `["udp", "tcp"]`), `None` when unset or
    /// required.
    #[must_use]
    pub fn default_toml(&self) -> Option<String> {
        let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
        match self.default {
            Dflt::Int(n) => Some(n.to_string()),
            Dflt::Bool(b) => Some(b.to_string()),
            Dflt::Str(s) => Some(quote(s)),
            Dflt::Ip(ip) => Some(quote(&ip.to_string())),
            Dflt::List(items) => Some(format!(
                "[{}]",
                items
                    .iter()
                    .map(|i| match self.ty {
                        Ty::List(Ty::Int(_)) => (*i).to_owned(),
                        _ => quote(i),
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Dflt::Unset | Dflt::Required => None,
        }
    }
}

/// One element: its Oracle name, its place in the file, one line of help and its keys.
#[derive(Debug, Clone, Copy)]
pub struct ElementSpec {
    /// Oracle's element name, the ACLI word that enters it.
    pub name: &'static str,
    /// The TOML table it is written as: `[sip-config]`, `[[system-config.alarm-threshold]]`.
    pub table: &'static str,
    /// One line of what it is.
    pub help: &'static str,
    /// Its keys, in `show` order.
    pub keys: &'static [KeySpec],
}

impl ElementSpec {
    /// The key called `name`, if the element has it.
    #[must_use]
    pub fn key(&self, name: &str) -> Option<&'static KeySpec> {
        self.keys.iter().find(|k| k.name == name)
    }
}

/// The largest integer TOML can hold.
const I64: u64 = i64::MAX as u64;
const U32: u64 = u32::MAX as u64;
const U16: u64 = u16::MAX as u64;
const U8: u64 = u8::MAX as u64;
/// The most workers of a worker group, as a bound.
const MAX_WORKERS: u64 = crate::MAX_WORKERS as u64;
/// The spellings of the SIP transports.
const TRANSPORT_WORDS: &[&str] = &["udp", "tcp", "tls"];
/// A SIP response code in a list (100..=699 checked by validation).
const CODE: Ty = Ty::Int(U16);
/// The words of `state` keys.
const STATE_WORDS: &[&str] = AdminState::WORDS;
/// The loopback address, the default of addresses.
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// An integer stored as `u64` (TOML's own limit applies).
const fn int(default: u64, help: &'static str) -> KeySpec {
    KeySpec::int_of(I64, default, help)
}
/// An integer stored as `u32`.
const fn int32(default: u64, help: &'static str) -> KeySpec {
    KeySpec::int_of(U32, default, help)
}
/// An integer stored as `u16` (a port).
const fn int16(default: u64, help: &'static str) -> KeySpec {
    KeySpec::int_of(U16, default, help)
}
/// An integer stored as `u8` (a percentage, points).
const fn int8(default: u64, help: &'static str) -> KeySpec {
    KeySpec::int_of(U8, default, help)
}
/// A port, valid 1..=65535.
const fn port(default: u64, help: &'static str) -> KeySpec {
    int16(default, help).range(1, 65_535)
}
/// A boolean.
const fn flag(default: bool, help: &'static str) -> KeySpec {
    KeySpec::new(Ty::Bool, Dflt::Bool(default), help)
}
/// A string; `hint` says what it is.
const fn text(default: &'static str, hint: &'static str, help: &'static str) -> KeySpec {
    KeySpec::new(Ty::Str, Dflt::Str(default), help).hint(hint)
}
/// One of `words`, `default` among them.
const fn word(
    words: &'static [&'static str],
    default: &'static str,
    help: &'static str,
) -> KeySpec {
    KeySpec::new(Ty::Words(words), Dflt::Str(default), help)
}
/// An IP address.
const fn ip(default: Dflt, hint: &'static str, help: &'static str) -> KeySpec {
    KeySpec::new(Ty::Ip, default, help).hint(hint)
}
/// An `address:port`, unset by default.
const fn addr(hint: &'static str, help: &'static str) -> KeySpec {
    KeySpec::new(Ty::Addr, Dflt::Unset, help)
        .hint(hint)
        .optional()
}
/// A list of `item`s.
const fn list(
    item: &'static Ty,
    default: &'static [&'static str],
    hint: &'static str,
    help: &'static str,
) -> KeySpec {
    KeySpec::new(Ty::List(item), Dflt::List(default), help).hint(hint)
}

/// Declares one element's table: a module with one `const` per key and `ELEMENT`.
macro_rules! element {
    (
        $(#[$meta:meta])*
        $module:ident: $name:literal in $table:literal, $help:literal {
            $($id:ident $key:literal: $spec:expr;)+
        }
    ) => {
        $(#[$meta])*
        pub mod $module {
            #[allow(clippy::wildcard_imports, reason = "the table's constructors")]
            use super::*;
            $(
                #[doc = concat!("`", $name, "` `", $key, "`.")]
                pub const $id: KeySpec = $spec.named($key);
            )+
            #[doc = concat!("The `", $name, "` element and its keys.")]
            pub const ELEMENT: ElementSpec = ElementSpec {
                name: $name,
                table: $table,
                help: $help,
                keys: &[$($id),+],
            };
        }
    };
}

element! {
    /// `system-config`.
    system_config: "system-config" in "[system-config]",
        "node-wide settings, options, alarm thresholds, trap receivers" {
    HOSTNAME "hostname": text("sbc", "<name>", "node name used in logs, traps and show output");
    OPTIONS "options": list(&Ty::Str, &[],
        "<+name=value | -name | name=value ...>",
        "options: +name=value adds or replaces one, -name removes one, a bare list replaces all");
    MEMORY_SOURCE "memory-source": word(MemorySource::WORDS, MemorySource::DEFAULT.as_str(),
        "what memory utilisation is measured against");
    MEMORY_LIMIT_MB "memory-limit-mb": int(0, "memory limit of the process memory source")
        .hint("<MiB, > 0 with memory-source process>");
    HEAP_LIMIT_MB "heap-limit-mb": int(1024, "heap size heap percentages refer to, MiB")
        .range(1, 1_048_576);
    ALARM_ITERATION_MS "alarm-iteration-ms": int(15_000, "length of one alarm iteration, ms")
        .range(100, 600_000);
    ALARM_SUBSAMPLES "alarm-subsamples": int32(15, "sub-samples per alarm iteration")
        .range(1, 60);
    SPIKE_SUBSAMPLES "spike-subsamples": int32(3,
        "consecutive sub-samples above a threshold that are not a spike")
        .bounds(Bound::Value(1), Bound::Key("alarm-subsamples"));
    LAB_MODE "lab-mode": flag(false, "allow the lab's memory ballast commands");
    SNMP_AGENT_ADDRESS "snmp-agent-address": addr("<address:port | none>",
        "UDP address the SNMP agent answers on (needs an snmp-community or snmp-user-entry)")
        .example("\"127.0.0.1:1161\"");
    SNMP_ENGINE_ID "snmp-engine-id": KeySpec::new(Ty::Str, Dflt::Unset,
        "this node's SNMPv3 engine ID (none: derived from the hostname)")
        .hint("<hex, 5..=32 octets | none>").optional().example("\"0x80000cbd0473626331\"");
    METRICS_ADDRESS "metrics-address": addr("<address:port | none>",
        "where the Prometheus /metrics HTTP listener binds (none: no listener)")
        .example("\"127.0.0.1:9100\"");
    DNS_IP_PRIMARY "dns-ip-primary": addr("<address:port | none>",
        "the DNS server session-agents named by DNS are resolved with (none: /etc/resolv.conf's)")
        .example("\"192.0.2.53:53\"");
    DNS_IP_BACKUP1 "dns-ip-backup1": addr("<address:port | none>",
        "a second DNS server, asked when the primary does not answer")
        .example("\"192.0.2.54:53\"");
}}

element! {
    /// `alarm-threshold`, a sub-element of `system-config`.
    alarm_threshold: "alarm-threshold" in "[[system-config.alarm-threshold]]",
        "an alarm threshold (multi-instance, key: type severity [volume])" {
    TYPE "type": word(AlarmType::WORDS, AlarmType::DEFAULT.as_str(), "what is measured");
    VOLUME "volume": text("", "<mount point>", "the volume, for type space only");
    SEVERITY "severity": word(Severity::WORDS, Severity::DEFAULT.as_str(),
        "severity of the alarm");
    VALUE "value": int8(0, "threshold in percent; usage above it raises the alarm")
        .range(1, 100).example("80");
    HEALTH_PENALTY "health-penalty": int8(0, "health points taken while raised").range(0, 100);
}}

element! {
    /// `trap-receiver`, a sub-element of `system-config`.
    trap_receiver: "trap-receiver" in "[[system-config.trap-receiver]]",
        "an SNMP trap receiver (multi-instance, key: ip-address[:port])" {
    IP_ADDRESS "ip-address": ip(Dflt::Ip(LOOPBACK), "<IP address>", "address of the SNMP manager");
    PORT "port": port(162, "UDP port of the SNMP manager");
    COMMUNITY "community": text("public", "<community>", "SNMPv2c community");
    FILTER_LEVEL "filter-level": word(FilterLevel::WORDS, FilterLevel::DEFAULT.as_str(),
        "lowest severity sent");
    VERSION "version": word(SnmpVersion::WORDS, SnmpVersion::DEFAULT.as_str(),
        "SNMP version of the traps");
    USER_NAME "user-name": KeySpec::new(Ty::Str, Dflt::Unset,
        "the v3 user whose keys secure the traps")
        .hint("<snmp-user-entry user-name | none>").optional().example("\"nms\"");
}}

element! {
    /// `snmp-community`, a sub-element of `system-config`.
    snmp_community: "snmp-community" in "[[system-config.snmp-community]]",
        "a community of the SNMP agent (multi-instance, key: community-name)" {
    COMMUNITY_NAME "community-name": text("", "<community>",
        "read-only SNMPv2c community of the agent (a secret)").required().example("\"public\"");
    IP_ADDRESSES "ip-addresses": list(&Ty::Str, &[],
        "<+address | -address | address/prefix ...>",
        "sources allowed to use it, IPv4 or IPv6; none: any");
}}

element! {
    /// `snmp-user-entry`, a sub-element of `system-config`.
    snmp_user_entry: "snmp-user-entry" in "[[system-config.snmp-user-entry]]",
        "an SNMPv3 user, authPriv SHA + AES-128 (multi-instance, key: user-name)" {
    USER_NAME "user-name": text("", "<name>", "SNMPv3 USM user name").required()
        .example("\"nms\"");
    AUTH_PROTOCOL "auth-protocol": word(SnmpAuthProtocol::WORDS,
        SnmpAuthProtocol::DEFAULT.as_str(), "authentication protocol (HMAC-SHA-96; MD5 refused)");
    AUTH_PASSWORD "auth-password": text("", "<8 characters or more>",
        "authentication password (a secret)").required().example("\"auth-secret\"");
    PRIV_PROTOCOL "priv-protocol": word(SnmpPrivProtocol::WORDS,
        SnmpPrivProtocol::DEFAULT.as_str(), "privacy protocol (AES-128-CFB; DES refused)");
    PRIV_PASSWORD "priv-password": text("", "<8 characters or more>",
        "privacy password (a secret)").required().example("\"priv-secret\"");
    IP_ADDRESSES "ip-addresses": list(&Ty::Str, &[],
        "<+address | -address | address/prefix ...>",
        "sources allowed to use it, IPv4 or IPv6; none: any");
}}

element! {
    /// `sip-config`.
    sip_config: "sip-config" in "[sip-config]", "SIP timers, limits and heap thresholds" {
    T1_MS "t1-ms": int(500, "RFC 3261 T1, ms").range(10, 10_000);
    T2_MS "t2-ms": int(4000, "RFC 3261 T2, ms")
        .bounds(Bound::Key("t1-ms"), Bound::Value(60_000));
    T4_MS "t4-ms": int(5000, "RFC 3261 T4, ms").range(10, 60_000);
    TIMER_C_MS "timer-c-ms": int(180_000, "proxy INVITE timer C, ms").range(1000, 3_600_000);
    MAX_MESSAGE_SIZE "max-message-size": int(65_535, "largest SIP message, bytes")
        .range(1500, 65_535);
    WORKERS "workers": int(2, "initial (or fixed) worker count of each UDP worker group")
        .range(1, MAX_WORKERS).note("within its profile's scale-down-to..=scale-up-to");
    TCP_WORKERS "tcp-workers": int(1, "initial (or fixed) worker count of the TCP worker group")
        .range(1, MAX_WORKERS).note("within its profile's scale-down-to..=scale-up-to");
    TCP_AUTO_SCALING_PROFILE "tcp-auto-scaling-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "scaling profile of the TCP worker group (\"\" for none: fixed count)")
        .hint("<auto-scaling-profile name | \"\">").optional().example("\"PROFILE_A\"");
    PRSM "prsm": flag(true,
        "PRSM scheduling: new requests first, redundant retransmissions dropped (disabled: FIFO)");
    QUEUE_SIZE "queue-size": int(1024, "capacity of each worker's primary and secondary queue")
        .range(16, 65_536);
    MAX_QUEUE_DELAY_MS "max-queue-delay-ms": int(100,
        "a new request queued longer than this gets 503, ms").range(0, 32_000).note("0 = off");
    ROUTING_COST_US "routing-cost-us": int(0,
        "benchmarks only: simulated blocking routing lookup per new request, us")
        .range(0, 1_000_000);
    SHUTDOWN_GRACE_MS "shutdown-grace-ms": int(5000, "how long SIGTERM waits, ms")
        .range(0, 120_000);
    HEAP_REJECT_THRESHOLD "heap-reject-threshold": int8(90,
        "heap percent above which new requests get 503").range(1, 100);
    HEAP_RESUME_THRESHOLD "heap-resume-threshold": int8(80,
        "heap percent below which new requests are accepted again")
        .bounds(Bound::Value(0), Bound::Below("heap-reject-threshold"));
    RETRY_AFTER_MIN "retry-after-min": int32(5, "lowest Retry-After of those 503s, s")
        .range(1, 3600);
    RETRY_AFTER_MAX "retry-after-max": int32(15, "highest Retry-After, s")
        .bounds(Bound::Key("retry-after-min"), Bound::Value(3600));
    AUTO_SCALING_CYCLE_MS "auto-scaling-cycle-ms": int(1000, "auto-scaling cycle, ms")
        .range(100, 60_000);
    SOURCE_RATE "source-rate": int32(15,
        "new requests per second one source may send (session-agents exempt)")
        .range(1, 1_000_000);
    SOURCE_BURST "source-burst": int32(30, "new requests one source may send at once")
        .range(1, 1_000_000);
    SOURCE_DENY_SECONDS "source-deny-seconds": int(120,
        "how long a source that keeps exceeding its rate is denied, s")
        .range(0, 86_400).note("0 = only limit");
    SOURCE_IPV6_PREFIX_LENGTH "source-ipv6-prefix-length": int8(64,
        "IPv6 sources in one prefix this long are one source (rates, denies, TCP caps)")
        .range(32, 128);
    MAX_CALLS "max-calls": int(100_000, "calls held at most; a new INVITE beyond gets 503")
        .range(64, 10_000_000);
    MAX_TRANSACTIONS "max-transactions": int(200_000,
        "transactions held at most; a new request beyond gets 503").range(64, 20_000_000);
    MAX_SUBSCRIPTIONS_PER_SOURCE "max-subscriptions-per-source": int32(500,
        "subscriptions (SUBSCRIBE, REFER) one source holds at most, node-wide (an IPv6 source: \
         its source-ipv6-prefix-length prefix); a new one beyond gets 503")
        .range(0, 1_000_000).note("0 = only max-calls bounds them");
    IN_DIALOG_SOURCE "in-dialog-source": word(InDialogSource::WORDS,
        InDialogSource::DEFAULT.as_str(),
        "where in-dialog requests and responses must come from (else 481 / dropped)");
    MAX_HEADER_SIZE "max-header-size": int(8192,
        "longest header line accepted, bytes (longer: 400 naming it)").range(256, 65_535);
    TCP_MAX_CONNECTIONS "tcp-max-connections": int(2048,
        "TCP connections accepted per sip-interface at most").range(1, 1_000_000);
    TCP_MAX_CONNECTIONS_PER_SOURCE "tcp-max-connections-per-source": int(64,
        "TCP connections from one source (IPv6: its prefix) at most (session-agents exempt)")
        .bounds(Bound::Value(1), Bound::Key("tcp-max-connections"));
    TCP_MESSAGE_TIMEOUT_MS "tcp-message-timeout-ms": int(20_000,
        "a TCP message must be complete this long after its first byte, ms")
        .range(100, 600_000);
    TCP_IDLE_TIMEOUT_MS "tcp-idle-timeout-ms": int(120_000,
        "a TCP connection without traffic is closed after this, ms").range(1000, 86_400_000);
    TCP_WRITE_QUEUE_BYTES "tcp-write-queue-bytes": int(262_144,
        "a TCP connection's write queue at most; beyond, it is closed")
        .bounds(Bound::Key("max-message-size"), Bound::Value(16 * 1024 * 1024));
    TCP_WRITE_TIMEOUT_MS "tcp-write-timeout-ms": int(10_000,
        "a TCP write not done within this closes the connection, ms").range(100, 600_000);
    TLS_HANDSHAKE_TIMEOUT_MS "tls-handshake-timeout-ms": int(5000,
        "a TLS handshake not done within this closes the connection, ms").range(100, 60_000);
    INITIAL_INV_TRANS_EXPIRE "initial-inv-trans-expire": int32(4,
        "how long an initial INVITE waits for a first response (even 100) before the next \
         candidate is tried, s (a session-agent's invite-trans-expire overrides it)")
        .range(1, 32);
    REG_CACHE_LIMIT "reg-cache-limit": int(0,
        "registration-cache bindings at most; a REGISTER that would add one beyond gets 503")
        .range(0, 1_000_000).note("0 = the hard cap, 1,000,000");
}}

element! {
    /// `session-router`.
    session_router: "session-router" in "[session-router]", "default route of new requests" {
    DEFAULT_ROUTE "default-route": KeySpec::new(Ty::Str, Dflt::Unset,
        "agent used when no route matches")
        .hint("<session-agent name | none>").optional().example("\"core\"");
}}

element! {
    /// `route`, a list of `session-router` in the file only (not an ACLI element).
    route: "route" in "[[session-router.route]]",
        "a per-realm route, tried in order before default-route (file only; superseded by \
         local-policy)" {
    FROM_REALM "from-realm": text("", "<realm>",
        "the realm of the sip-interface the request arrived on").required().example("\"core\"");
    SESSION_AGENT "session-agent": text("", "<session-agent name>",
        "the agent to send it to").required().example("\"pbx\"");
}}

element! {
    /// `tls-profile`.
    tls_profile: "tls-profile" in "[[tls-profile]]",
        "a certificate and how TLS peers are verified (multi-instance, key: name)" {
    NAME "name": text("", "<name>", "how interfaces and agents refer to the profile")
        .required().example("\"edge\"");
    END_ENTITY_CERTIFICATE "end-entity-certificate": text("",
        "<PEM file: certificate, then intermediates>", "the certificate chain this node presents")
        .example("\"/etc/sbc/tls/sbc.pem\"");
    PRIVATE_KEY "private-key": text("", "<PEM file>",
        "the certificate's private key (only its path is shown)")
        .example("\"/etc/sbc/tls/sbc.key\"");
    TRUSTED_CA_CERTIFICATES "trusted-ca-certificates": list(&Ty::Str, &[],
        "<+file | -file | file ...>", "PEM CA files peers' certificates must chain to");
    MUTUAL_AUTHENTICATE "mutual-authenticate": flag(false,
        "clients must present a certificate of a trusted CA");
    VERIFY_NAMES "verify-names": list(&Ty::Str, &[], "<+name | -name | name ...>",
        "with mutual-authenticate: names a client certificate must carry one of");
    TLS_VERSION "tls-version": word(TlsVersion::WORDS, TlsVersion::DEFAULT.as_str(),
        "TLS versions negotiated (compatibility: 1.2 and 1.3)");
    EXPIRY_WARNING_DAYS "expiry-warning-days": int32(30,
        "a certificate expiring within this many days raises an alarm").range(0, 365);
}}

element! {
    /// `sip-interface`.
    sip_interface: "sip-interface" in "[[sip-interface]]",
        "a listening point of a realm, one per address family (multi-instance, key: realm, \
         realm ipv6 for an IPv6 one); a leg uses its realm's interface of its peer's family" {
    REALM "realm": text("", "<realm>", "the network this interface faces").required()
        .example("\"access\"");
    ADDRESS "address": ip(Dflt::Ip(LOOPBACK), "<IP address>", "local address to bind");
    PORT "port": port(5060, "local port to bind");
    TRANSPORTS "transports": list(&Ty::Words(TRANSPORT_WORDS), &["udp", "tcp"],
        "<+udp | -tcp | +tls | udp tcp tls>", "transports listening here (tls needs tls-profile)");
    TLS_PORT "tls-port": port(5061, "local port SIP over TLS listens on");
    TLS_PROFILE "tls-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "certificate of the TLS listener and how clients are verified")
        .hint("<tls-profile name | \"\">").optional().example("\"edge\"");
    AUTO_SCALING_PROFILE "auto-scaling-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "scaling profile of this interface's UDP worker group (\"\" for none: fixed count)")
        .hint("<auto-scaling-profile name | \"\">").optional().example("\"PROFILE_A\"");
    REGISTRATION_CACHING "registration-caching": flag(false,
        "cache phones' registrations: REGISTERs relayed with a Contact of ours, refreshes \
         answered from the cache, requests for a registered phone sent over its flow");
    MIN_REG_EXPIRE "min-reg-expire": int32(300,
        "with registration-caching: the shortest expiry a phone not behind NAT is given, s")
        .range(1, 86_400);
    REGISTRATION_INTERVAL "registration-interval": int32(3600,
        "with registration-caching: how often the registrar sees a refresh of each binding \
         (it is asked this plus the phone's own interval), s").range(60, 604_800);
    NAT_TRAVERSAL "nat-traversal": word(NatTraversal::WORDS, NatTraversal::DEFAULT.as_str(),
        "hosted NAT traversal: which phones are taken as behind a NAT (their source differs \
         from their Via or Contact)");
    NAT_INTERVAL "nat-interval": int32(30,
        "the registration expiry a phone behind NAT is given (its re-REGISTERs keep its \
         pinhole open), s").range(5, 3600);
}}

element! {
    /// `session-agent`.
    session_agent: "session-agent" in "[[session-agent]]",
        "a next hop (multi-instance, key: name)" {
    NAME "name": text("", "<name>", "how routes refer to this agent").required()
        .example("\"pbx\"");
    REALM "realm": text("", "<realm>", "realm through which the agent is reached").required()
        .example("\"core\"");
    ADDRESS "address": KeySpec::new(Ty::Ip, Dflt::Unset,
        "the agent's IP address (unset: its hostname resolved by DNS if that is a DNS name, \
         else 127.0.0.1)")
        .hint("<IP address | \"\">").optional().example("\"192.0.2.10\"");
    PORT "port": int16(5060, "the agent's port (0 with a DNS hostname and no address: from SRV \
         records, RFC 3263)").range(0, 65_535);
    TRANSPORT "transport": word(TRANSPORT_WORDS, DEFAULT_TRANSPORT.as_str(), "transport to the agent");
    TLS_PROFILE "tls-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "with transport tls: the CAs that verify the agent (and our client certificate)")
        .hint("<tls-profile name | \"\">").optional().example("\"edge\"");
    TLS_SERVER_NAME "tls-server-name": KeySpec::new(Ty::Str, Dflt::Unset,
        "with transport tls: SNI, and the name the agent's certificate must carry (default its address)")
        .hint("<DNS name or IP address | \"\">").optional().example("\"pbx.example.com\"");
    MAX_UDP_LENGTH "max-udp-length": int16(0,
        "with transport udp: a new request larger than this goes over TCP to the agent's port \
         (RFC 3261 18.1.1: 1300 when the path MTU is unknown; the agent must listen on TCP), bytes")
        .range(0, 65_535).note("0 = off");
    HOSTNAME "hostname": KeySpec::new(Ty::Str, Dflt::Unset,
        "the host of the Request-URI sent to the agent (default its address); a DNS name with \
         no address: resolved by DNS (SRV with port 0, else A/AAAA), again at each answer's TTL")
        .hint("<DNS name or IP address | \"\">").optional().example("\"pbx.example.com\"");
    STATE "state": word(STATE_WORDS, AdminState::DEFAULT.as_str(),
        "disabled: no candidate of any route, not pinged");
    PING_METHOD "ping-method": text("OPTIONS", "<SIP method in capitals, answered outside a dialog>",
        "the method of the health pings");
    PING_INTERVAL "ping-interval": int32(0, "time between health pings, s")
        .range(0, 86_400).note("0 = no pings");
    PING_SEND_MODE "ping-send-mode": word(PingSendMode::WORDS, PingSendMode::DEFAULT.as_str(),
        "keep-alive: ping only when nothing came from the agent in the interval; continuous: always");
    PING_RESPONSE_TIMEOUT_MS "ping-response-timeout-ms": int32(2000,
        "how long a ping waits for an answer before it is missed, ms (our key: Oracle has none \
         and waits for the transaction timeout)")
        .range(100, 32_000);
    PING_MISSES "ping-misses": int8(1,
        "consecutive missed pings that take the agent out of service (our key: Kamailio's \
         ds_probing_threshold)")
        .range(1, 10);
    PING_IN_SERVICE_RESPONSE_CODES "ping-in-service-response-codes": list(&CODE, &[],
        "<+code | -code | code ...: 100..=699>",
        "answers to a ping that count as up (none: any answer not in out-service-response-codes)");
    OUT_SERVICE_RESPONSE_CODES "out-service-response-codes": list(&CODE, &[],
        "<+code | -code | code ...: 100..=699>",
        "answers to a ping, or to a new request (which then tries the next candidate), that \
         take the agent out of service (by a request's: only with pings or time-to-resume)");
    TRANS_TIMEOUTS "trans-timeouts": int32(0,
        "consecutive timeouts of requests sent to the agent that take it out of service \
         (Oracle's option; only with pings or time-to-resume, which bring it back)")
        .range(0, 100).note("0 = off");
    TIME_TO_RESUME "time-to-resume": int32(0,
        "an out-of-service agent that is not pinged is in service again after this, s")
        .range(0, 86_400).note("0 = never");
    INVITE_TRANS_EXPIRE "invite-trans-expire": int32(0,
        "how long an initial INVITE to the agent waits for a first response (even 100) before \
         the next candidate is tried, s")
        .range(0, 32).note("0 = sip-config's initial-inv-trans-expire");
    MAX_SESSIONS "max-sessions": int32(0,
        "calls to and from the agent at most; beyond, it is no candidate for a new one")
        .hint("<sessions, 0 = unlimited>");
    MAX_OUTBOUND_SESSIONS "max-outbound-sessions": int32(0,
        "calls to the agent at most (at most max-sessions when both are set)")
        .hint("<sessions up to max-sessions, 0 = unlimited>");
    MAX_BURST_RATE "max-burst-rate": int32(0, "new sessions per second to the agent at most")
        .hint("<sessions per second, 0 = unlimited>");
    IN_TRANSLATIONID "in-translationid": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session-translation applied to requests from the agent, before routing")
        .hint("<session-translation id | \"\">").optional().example("\"strip-plus\"");
    OUT_TRANSLATIONID "out-translationid": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session-translation applied to requests sent to the agent, after routing")
        .hint("<session-translation id | \"\">").optional().example("\"add-plus\"");
    REFER_CALL_TRANSFER "refer-call-transfer": word(ReferCallTransfer::WORDS,
        ReferCallTransfer::DEFAULT.as_str(),
        "an in-dialog REFER from the agent is performed by the SBC (enabled), as with its \
         realm's refer-call-transfer (either enables it)");
}}

element! {
    /// `session-agent-group`.
    session_agent_group: "session-agent-group" in "[[session-agent-group]]",
        "session-agents a local-policy names together as SAG:<group-name> (multi-instance, key: \
         group-name)" {
    GROUP_NAME "group-name": text("", "<name, no spaces>",
        "how a next-hop names the group: SAG:<group-name>").required().example("\"carriers\"");
    STATE "state": word(STATE_WORDS, AdminState::DEFAULT.as_str(),
        "disabled: no candidate of any route");
    STRATEGY "strategy": word(SagStrategy::WORDS, SagStrategy::DEFAULT.as_str(),
        "hunt: in dest order; round-robin: in turn; least-busy: fewest sessions relative to \
         max-sessions; prop-dist: in proportion to max-outbound-sessions");
    DEST "dest": list(&Ty::Str, &[], "<+agent | -agent | agent ...>",
        "the member session-agents, in hunt order").required()
        .example("[\"carrier-a\", \"carrier-b\"]");
    SAG_RECURSION "sag-recursion": flag(false,
        "after a member fails, try the next member of the group (disabled: the route's next \
         candidate)");
    STOP_SAG_RECURSE "stop-sag-recurse": list(&CODE, &["401", "407"],
        "<+code | -code | code ...: 300..=699>",
        "final responses of a member that end the recursion and go back to the caller");
}}

element! {
    /// `translation-rules`.
    translation_rules: "translation-rules" in "[[translation-rules]]",
        "one edit of a number or user that session-translations name (multi-instance, key: id)" {
    ID "id": text("", "<id, no spaces>", "how session-translations name the rule").required()
        .example("\"strip-plus\"");
    TYPE "type": word(TranslationType::WORDS, TranslationType::DEFAULT.as_str(),
        "add: insert add-string at add-index; delete: remove delete-string at delete-index; \
         replace: both; none: nothing");
    ADD_STRING "add-string": text("", "<string>", "what add and replace insert");
    ADD_INDEX "add-index": KeySpec::new(Ty::Index, Dflt::Int(0), "where it is inserted")
        .hint("<position from 0 | $ for the end>");
    DELETE_STRING "delete-string": text("", "<string, @ matches any one character>",
        "what delete and replace remove");
    DELETE_INDEX "delete-index": KeySpec::new(Ty::Index, Dflt::Int(0),
        "where it must be found").hint("<position from 0 | $ for the end>");
}}

element! {
    /// `session-translation`.
    session_translation: "session-translation" in "[[session-translation]]",
        "the translation-rules of the calling and the called user, which a session-agent names \
         as in-translationid or out-translationid (multi-instance, key: id)" {
    ID "id": text("", "<id, no spaces>", "how session-agents name it").required()
        .example("\"strip-plus\"");
    RULES_CALLING "rules-calling": list(&Ty::Str, &[], "<+id | -id | id ...>",
        "translation-rules applied to the calling user (From), in order");
    RULES_CALLED "rules-called": list(&Ty::Str, &[], "<+id | -id | id ...>",
        "translation-rules applied to the called user (Request-URI, To), in order");
}}

element! {
    /// `realm-config`.
    realm_config: "realm-config" in "[[realm-config]]",
        "what a realm applies to the requests it carries: its number translations \
         (multi-instance, key: identifier)" {
    IDENTIFIER "identifier": text("", "<realm>", "the realm (a sip-interface's realm)").required()
        .example("\"access\"");
    IN_TRANSLATIONID "in-translationid": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session-translation applied to new requests arriving in the realm, before routing \
         (a session-agent's own wins)")
        .hint("<session-translation id | \"\">").optional().example("\"strip-plus\"");
    OUT_TRANSLATIONID "out-translationid": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session-translation applied to new requests sent into the realm, after routing \
         (a session-agent's own wins)")
        .hint("<session-translation id | \"\">").optional().example("\"add-plus\"");
    ALLOW_ANONYMOUS "allow-anonymous": word(AllowAnonymous::WORDS,
        AllowAnonymous::DEFAULT.as_str(),
        "who may place new requests arriving in the realm (REGISTER is always let through)");
    SESSION_TIMER_PROFILE "session-timer-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session timer the SBC runs on the realm's legs when the caller asked for none, \
         and the Min-SE it enforces (none: only the endpoints' own timers are enforced)")
        .hint("<session-timer-profile name | \"\">").optional().example("\"default\"");
    SESSION_MAX_LIFE_LIMIT "session-max-life-limit": int32(0,
        "a call with a leg in the realm ends (BYE on both legs) this long after its INVITE, s")
        .range(0, 31_536_000).note("0 = no limit");
    REFER_CALL_TRANSFER "refer-call-transfer": word(ReferCallTransfer::WORDS,
        ReferCallTransfer::DEFAULT.as_str(),
        "an in-dialog REFER arriving in the realm: relayed to the transferee (disabled), or \
         answered by the SBC, which calls the Refer-To target itself (enabled)");
}}

element! {
    /// `session-timer-profile`.
    session_timer_profile: "session-timer-profile" in "[[session-timer-profile]]",
        "the session timer (RFC 4028) the SBC runs on the legs of a realm that names it \
         (multi-instance, key: name)" {
    NAME "name": text("", "<name, no spaces>", "how realm-configs name it").required()
        .example("\"default\"");
    SESSION_EXPIRES "session-expires": int32(1800,
        "the session interval offered in Session-Expires, s").range(90, 86_400);
    MIN_SE "min-se": int32(90,
        "the smallest session interval accepted (below: 422 with Min-SE), s")
        .bounds(Bound::Value(90), Bound::Key("session-expires"));
    REQUEST_REFRESHER "request-refresher": word(Refresher::WORDS, "uac",
        "the refresher asked of the callee (uac: the SBC refreshes; a callee that answers \
         without a timer is refreshed by the SBC)");
    RESPONSE_REFRESHER "response-refresher": word(Refresher::WORDS, "uas",
        "the refresher named to a caller that supports timers (uas: the SBC refreshes; a \
         caller without timer support is refreshed by the SBC)");
    FORCE_REINVITE "force-reinvite": flag(false,
        "the SBC refreshes with a re-INVITE even where the peer allows UPDATE (disabled: \
         UPDATE where allowed, a re-INVITE elsewhere)");
}}

element! {
    /// `local-policy`.
    local_policy: "local-policy" in "[[local-policy]]",
        "a routing table row: where requests from, to and arriving in these may go \
         (multi-instance, key: from-address to-address source-realm)" {
    FROM_ADDRESS "from-address": list(&Ty::Str, &["*"], "<+prefix | -prefix | prefix ... | *>",
        "prefixes of the From user (digits or users, left to right), or * alone for any");
    TO_ADDRESS "to-address": list(&Ty::Str, &["*"], "<+prefix | -prefix | prefix ... | *>",
        "prefixes of the Request-URI user, or * alone for any");
    SOURCE_REALM "source-realm": list(&Ty::Str, &["*"], "<+realm | -realm | realm ... | *>",
        "sip-interface realms the request arrives from, or * alone for any");
    DESCRIPTION "description": KeySpec::new(Ty::Str, Dflt::Unset, "free text")
        .hint("<text | \"\">").optional().example("\"to the carriers\"");
    STATE "state": word(STATE_WORDS, AdminState::DEFAULT.as_str(), "disabled: matches nothing");
}}

element! {
    /// `policy-attributes`, a sub-element of `local-policy`.
    policy_attributes: "policy-attributes" in "[[local-policy.policy-attribute]]",
        "a next hop of a local-policy and when it may be used (multi-instance, key: next-hop)" {
    NEXT_HOP "next-hop": text("", "<session-agent name | SAG:group-name>",
        "where the request goes").required().example("\"pbx\"");
    REALM "realm": KeySpec::new(Ty::Str, Dflt::Unset,
        "the realm the request leaves by (default the next hop's own)")
        .hint("<sip-interface realm | \"\">").optional().example("\"core\"");
    COST "cost": int32(0, "lower is preferred").range(0, 999_999_999);
    START_TIME "start-time": text("0000", "<hhmm, 0000..=2400>",
        "start of the daily window it applies in");
    END_TIME "end-time": text("2400", "<hhmm, 0000..=2400>",
        "end of the window (before start-time: it spans midnight)");
    DAYS_OF_WEEK "days-of-week": text("U-S",
        "<day letters U M T W R F S, ranges M-F, lists MWF or U,S>", "the days it applies on");
    TERMINATE_RECURSION "terminate-recursion": flag(false,
        "a failure of this next hop ends the hunt: no later candidate is tried");
    STATE "state": word(STATE_WORDS, AdminState::DEFAULT.as_str(), "disabled: no candidate");
}}

element! {
    /// `local-routing-config`.
    local_routing_config: "local-routing-config" in "[[local-routing-config]]",
        "a large route table in a file of its own (multi-instance, key: name)" {
    NAME "name": text("", "<name, no spaces>", "the table's name").required()
        .example("\"numbers\"");
    FILE_NAME "file-name": text("", "<path>",
        "the table: rows to-address,next-hop[,cost] (loaded by the node, not checked here)")
        .required().example("\"/etc/sbc/routes.csv\"");
    SOURCE_REALM "source-realm": list(&Ty::Str, &["*"], "<+realm | -realm | realm ... | *>",
        "sip-interface realms whose requests it routes, or * alone for any");
    STATE "state": word(STATE_WORDS, AdminState::DEFAULT.as_str(), "disabled: not used");
}}

element! {
    /// `redundancy-config`.
    redundancy_config: "redundancy-config" in "[redundancy-config]",
        "the HA pair: heartbeat, thresholds, peers" {
    STATE "state": word(RedundancyState::WORDS, RedundancyState::DEFAULT.as_str(),
        "run as one node of a pair");
    PORT "port": port(9090, "heartbeat UDP port");
    ADVERTISEMENT_TIME "advertisement-time": int(200, "heartbeat interval, ms")
        .range(50, 60_000);
    PERCENT_DRIFT "percent-drift": int32(300, "peer dead after advertisement-time x this / 100")
        .range(100, 65_535);
    INITIAL_TIME "initial-time": int(1250, "listening time before choosing a role, ms")
        .range(5, 600_000);
    BECOMING_ACTIVE_TIME "becoming-active-time": int(50, "time in becoming-active, ms")
        .range(5, 600_000);
    BECOMING_STANDBY_TIME "becoming-standby-time": int(180_000,
        "time allowed for the initial sync, ms").range(5, 3_600_000);
    HEALTH_THRESHOLD "health-threshold": int8(75, "an active below it switches over")
        .range(1, 100);
    EMERGENCY_THRESHOLD "emergency-threshold": int8(50,
        "below it a starting standby becomes active at once")
        .bounds(Bound::Value(0), Bound::Below("health-threshold"));
    CONFIG_SYNC_PORT "config-sync-port": port(1987, "config sync TCP port");
    SIP_SYNC_PORT "sip-sync-port": port(1988, "SIP state sync TCP port");
    WITNESS "witness": addr("<address:port | none>", "address a node must reach to take over")
        .example("\"192.0.2.1:7000\"");
    SHARED_KEY "shared-key": text("", "<secret>",
        "the pair's secret (keys of every pair channel), required when enabled");
    SERVICE_ADDRESS "service-address": ip(Dflt::Unset, "<IP address | none>",
        "the shared SIP address the active owns").optional().example("\"192.0.2.10\"");
    NOTIFY_ACTIVE "notify-active": text("", "<\"shell command\">",
        "run before taking the service address (e.g. add a virtual IP)");
    NOTIFY_STANDBY "notify-standby": text("", "<\"shell command\">",
        "run after releasing the service address");
    NOTIFY_FAULT "notify-fault": text("", "<\"shell command\">",
        "run when the node goes out of service");
}}

element! {
    /// `peer`, a sub-element of `redundancy-config`.
    peer: "peer" in "[[redundancy-config.peer]]",
        "one node of the pair (multi-instance, key: name)" {
    NAME "name": text("", "<name>", "the node's name").required().example("\"sbc1\"");
    TYPE "type": word(PeerType::WORDS, PeerType::DEFAULT.as_str(), "primary or secondary");
    DESTINATIONS "destinations": list(&Ty::Addr, &[],
        "<+address:port | -address:port | address:port ...>", "heartbeat paths to the node")
        .example("[\"192.0.2.1:9090\"]");
}}

element! {
    /// `auto-scaling-profile`.
    auto_scaling_profile: "auto-scaling-profile" in "[[auto-scaling-profile]]",
        "worker-group scaling rules (multi-instance, key: name)" {
    NAME "name": text("", "<name>", "the profile's name").required().example("\"PROFILE_A\"");
    SCALE_UP_TO "scale-up-to": int32(6, "most workers").range(1, MAX_WORKERS);
    SCALE_UP_ON "scale-up-on": int8(70, "load percent that counts for scaling up")
        .range(1, 100);
    SCALE_UP_FOR "scale-up-for": int32(4, "cycles above scale-up-on that start a worker")
        .range(1, 1000);
    SCALE_UP_WITHIN "scale-up-within": int32(0, "window of cycles (default: scale-up-for)")
        .bounds(Bound::Key("scale-up-for"), Bound::Value(1000)).optional().example("5");
    SCALE_DOWN_TO "scale-down-to": int32(0, "fewest workers")
        .bounds(Bound::Value(1), Bound::Below("scale-up-to")).optional().example("2");
    SCALE_DOWN_ON "scale-down-on": int8(0, "load percent that counts for scaling down")
        .bounds(Bound::Value(0), Bound::Below("scale-up-on")).optional().example("18");
    SCALE_DOWN_FOR "scale-down-for": int32(0, "cycles below scale-down-on that stop a worker")
        .range(1, 1000).optional().example("10");
}}

element! {
    /// `access-control`.
    access_control: "access-control" in "[[access-control]]",
        "allow or deny SIP sources (multi-instance, key: source-address)" {
    SOURCE_ADDRESS "source-address": text("",
        "<IP address or network, e.g. 192.0.2.7 or 10.0.0.0/8>", "the SIP sources of this entry")
        .required().example("\"198.51.100.0/24\"");
    ACTION "action": word(AccessAction::WORDS, AccessAction::DEFAULT.as_str(),
        "allow: never rate-limited; deny: dropped");
}}

element! {
    /// `media-manager`.
    media_manager: "media-manager" in "[media-manager]",
        "media anchoring: state, latching, RTP inactivity" {
    STATE "state": word(MediaManagerState::WORDS, MediaManagerState::DEFAULT.as_str(),
        "anchor the media of calls whose two realms have a steering-pool (disabled: SDP unchanged)");
    LATCHING "latching": flag(true,
        "symmetric RTP: a leg's media goes to where its packets come from");
    RESTRICTED_LATCHING "restricted-latching": word(RestrictedLatching::WORDS,
        RestrictedLatching::DEFAULT.as_str(),
        "sdp: latch only to the IP address the leg's SDP signalled");
    LATCHING_WINDOW_MS "latching-window-ms": int(5000,
        "how long after a stream starts, or a new SDP, its remote may be latched, ms")
        .range(100, 60_000);
    RTP_INACTIVITY "rtp-inactivity": int(0,
        "no RTP on any leg this long ends the call with BYE on both legs, s")
        .range(0, 86_400).note("0 = off");
}}

element! {
    /// `steering-pool`.
    steering_pool: "steering-pool" in "[[steering-pool]]",
        "the address and ports a realm's media is anchored on, one per address family \
         (multi-instance, key: realm-id, realm-id ipv6 for an IPv6 one)" {
    IP_ADDRESS "ip-address": ip(Dflt::Ip(LOOPBACK), "<IP address, not a wildcard>",
        "local address the media is anchored on (written into the SDP)");
    START_PORT "start-port": int16(0, "first port of the pool").range(1024, 65_535).required()
        .example("20000");
    END_PORT "end-port": int16(0,
        "last port of the pool; no two pools overlap, even on different addresses")
        .hint("<above start-port, at least 2 RTP/RTCP pairs>").required().example("20999");
    REALM_ID "realm-id": text("", "<sip-interface realm>",
        "the realm whose legs of this pool's family it anchors (one pool per realm and family)")
        .required()
        .example("\"access\"");
}}

element! {
    /// `filter-config`.
    filter_config: "filter-config" in "[[filter-config]]",
        "a filter of the SIP trace that sip-monitoring names: every key set must match, none \
         set matches every message (multi-instance, key: name)" {
    NAME "name": text("", "<name, not *>", "how sip-monitoring's monitoring-filters name it")
        .required().example("\"pbx-calls\"");
    ADDRESS "address": KeySpec::new(Ty::Str, Dflt::Unset,
        "the peer's IP address or network, IPv4 or IPv6 (a bare address: that one only)")
        .hint("<IP address or network, e.g. 192.0.2.0/24 or ::1 | \"\">").optional()
        .example("\"192.0.2.0/24\"");
    USER "user": KeySpec::new(Ty::Str, Dflt::Unset,
        "a user part or phone number, or an AoR user@host, of the Request-URI, From or To")
        .hint("<user, number or user@host | \"\">").optional().example("\"alice\"");
    REALM "realm": KeySpec::new(Ty::Str, Dflt::Unset,
        "the realm of the message's leg (our extension, not Oracle's)")
        .hint("<sip-interface realm | \"\">").optional().example("\"access\"");
    SESSION_AGENT "session-agent": KeySpec::new(Ty::Str, Dflt::Unset,
        "the session-agent the message comes from or goes to (our extension, not Oracle's)")
        .hint("<session-agent name | \"\">").optional().example("\"pbx\"");
    METHOD "method": KeySpec::new(Ty::Str, Dflt::Unset,
        "the SIP method, a response's CSeq method, as on the wire (our extension, not Oracle's)")
        .hint("<SIP method in capitals, e.g. INVITE | \"\">").optional().example("\"INVITE\"");
}}

element! {
    /// `sip-monitoring`.
    sip_monitoring: "sip-monitoring" in "[sip-monitoring]",
        "SIP Monitor & Trace: which messages the on-box trace captures, and how many it keeps" {
    STATE "state": word(SipMonitoringState::WORDS, SipMonitoringState::DEFAULT.as_str(),
        "run the on-box SIP trace (disabled: nothing is captured because of the configuration)");
    MATCH_ANY_FILTER "match-any-filter": flag(false,
        "with several monitoring-filters, capture a message matching any one (disabled: every one)");
    MONITORING_FILTERS "monitoring-filters": list(&Ty::Str, &[],
        "<+name | -name | name ... | *>",
        "filter-config names, or * alone for every message; none: nothing is captured");
    MAX_TRACE_MEMORY "max-trace-memory": int32(16,
        "memory the captures are kept in, oldest dropped beyond, MiB (our extension, not Oracle's)")
        .range(1, 1024);
    MAX_CAPTURES "max-captures": int32(1000,
        "captures (calls, exchanges) kept at most, oldest dropped beyond (our extension, not Oracle's)")
        .range(1, 100_000);
    MAX_MESSAGES_PER_CAPTURE "max-messages-per-capture": int32(200,
        "messages one capture keeps at most, later ones counted as dropped (our extension, not \
         Oracle's)")
        .range(1, 10_000);
}}

element! {
    /// `capture-agent`.
    capture_agent: "capture-agent" in "[capture-agent]",
        "where traced messages are sent as HEPv3 (Homer, sngrep)" {
    STATE "state": word(CaptureAgentState::WORDS, CaptureAgentState::DEFAULT.as_str(),
        "send each traced message to the capture server");
    ADDRESS "address": addr("<address:port | none>",
        "the capture server, required when enabled").example("\"192.0.2.9:9060\"");
    TRANSPORT "transport": word(CaptureTransport::WORDS, CaptureTransport::DEFAULT.as_str(),
        "transport to the capture server");
    CAPTURE_ID "capture-id": int32(2001, "HEP capture agent id the server files packets under")
        .range(0, U32);
    PASSWORD "password": text("", "<HEP key | \"\">",
        "HEP authentication key, sent in clear: an identifier, not a protection (shown masked)");
    QUEUE_SIZE "queue-size": int32(8192,
        "packets waiting for the capture server at most; beyond, dropped and counted")
        .range(16, 1_000_000);
    RTCP "rtcp": flag(true, "send the media relay's RTCP reports too");
}}

element! {
    /// `account-config`.
    account_config: "account-config" in "[account-config]",
        "call detail records: RADIUS accounting (RFC 2866) to the account-servers and local \
         CSV files, spooled before they are sent" {
    STATE "state": word(AccountState::WORDS, AccountState::DEFAULT.as_str(),
        "generate, spool and deliver a record for every call");
    STRATEGY "strategy": word(AccountStrategy::WORDS, AccountStrategy::DEFAULT.as_str(),
        "hunt: every record to the first server up; failover: the current server until it \
         fails, then the next; roundrobin: in turn (Oracle's fastestrtt and fewestpending are \
         not offered)");
    MAX_WAIT_FAILOVER "max-wait-failover": int32(100,
        "records sent to one server and not answered yet, at most (a count, as Oracle's)")
        .range(1, 10_000);
    FILE_OUTPUT "file-output": word(FileOutput::WORDS, FileOutput::DEFAULT.as_str(),
        "also write each record as a CSV line to the files in file-path");
    FILE_PATH "file-path": text("/var/lib/sbc/cdr", "<absolute directory>",
        "the directory of the CSV files");
    MAX_FILE_SIZE "max-file-size": int(1_000_000,
        "bytes after which a CSV file is closed and a new one started").range(1000, 2_147_483_647);
    MAX_FILES "max-files": int32(5, "closed CSV files kept; the oldest is deleted beyond")
        .range(1, 10_000);
    FILE_ROTATE_TIME "file-rotate-time": int32(60,
        "minutes after which a CSV file is closed (0: by size only)").range(0, 10_080);
    GENERATE_START "generate-start": word(GenerateStart::WORDS, GenerateStart::DEFAULT.as_str(),
        "when a call's Start is generated: ok (answered), invite (INVITE received), none");
    GENERATE_INTERIM "generate-interim": word(GenerateInterim::WORDS,
        GenerateInterim::DEFAULT.as_str(),
        "what generates an Interim-Update: reinvite-response (a re-INVITE answered 2xx), none");
    INTERMEDIATE_PERIOD "intermediate-period": int32(0,
        "seconds between periodic Interim-Updates of an answered call (0: none)")
        .range(0, 86_400);
    SPOOL_PATH "spool-path": text("/var/lib/sbc/accounting", "<absolute directory>",
        "the spool every record is written to before it is sent (our extension, not Oracle's)");
    SPOOL_MAX_SIZE "spool-max-size": int32(8192,
        "the spool's bound, MiB: about a day of records at 100 calls/s (our extension, not \
         Oracle's)").range(1, 1_048_576);
    SPOOL_FULL_ACTION "spool-full-action": word(SpoolFullAction::WORDS,
        SpoolFullAction::DEFAULT.as_str(),
        "a full spool: keep-calls (records refused and counted) or refuse-calls (new calls \
         503 until it has room; our extension, not Oracle's)");
}}

element! {
    /// `account-server`, a sub-element of `account-config`.
    account_server: "account-server" in "[[account-config.account-server]]",
        "a RADIUS accounting server (multi-instance, key: hostname:port)" {
    HOSTNAME "hostname": ip(Dflt::Ip(LOOPBACK), "<IP address>",
        "the server's IP address, IPv4 or IPv6 (no DNS name)");
    PORT "port": port(1813, "its port: UDP 1813; with transport tls, TCP (RadSec's is 2083)");
    STATE "state": word(AccountState::WORDS, "enabled", "send records to it");
    TRANSPORT "transport": word(AccountTransport::WORDS, AccountTransport::DEFAULT.as_str(),
        "udp: RADIUS over UDP (RFC 2866); tls: RADIUS over TLS (RFC 6614, RadSec), many \
         records per write (our extension, not Oracle's)");
    TLS_PROFILE "tls-profile": KeySpec::new(Ty::Str, Dflt::Unset,
        "with transport tls: the CAs that verify the server (and our client certificate)")
        .hint("<tls-profile name | \"\">").optional().example("\"radsec\"");
    TLS_SERVER_NAME "tls-server-name": KeySpec::new(Ty::Str, Dflt::Unset,
        "with transport tls: the name the server's certificate must carry (default its address)")
        .hint("<DNS name | IP address | \"\">").optional().example("\"radius.example.com\"");
    SECRET "secret": text("", "<shared secret>",
        "the RADIUS shared secret, 1 to 128 bytes (shown masked)");
    MIN_ROUND_TRIP "min-round-trip": int32(250,
        "ms; an unanswered record is sent again after four times this (at least 1 s), doubling")
        .range(10, 60_000);
    MAX_INACTIVITY "max-inactivity": int32(60,
        "seconds without an answer after which the server is taken as failed").range(1, 3600);
    RESTART_DELAY "restart-delay": int32(30,
        "seconds a failed server is left alone before it is tried again").range(1, 3600);
}}

/// Every element, in the order of the example file and the reference (Oracle's `show
/// running-config` order, each sub-element after its parent).
pub const ELEMENTS: &[ElementSpec] = &[
    system_config::ELEMENT,
    alarm_threshold::ELEMENT,
    trap_receiver::ELEMENT,
    snmp_community::ELEMENT,
    snmp_user_entry::ELEMENT,
    capture_agent::ELEMENT,
    sip_config::ELEMENT,
    session_router::ELEMENT,
    route::ELEMENT,
    filter_config::ELEMENT,
    sip_monitoring::ELEMENT,
    tls_profile::ELEMENT,
    sip_interface::ELEMENT,
    session_agent::ELEMENT,
    session_agent_group::ELEMENT,
    translation_rules::ELEMENT,
    session_translation::ELEMENT,
    session_timer_profile::ELEMENT,
    realm_config::ELEMENT,
    local_policy::ELEMENT,
    policy_attributes::ELEMENT,
    local_routing_config::ELEMENT,
    redundancy_config::ELEMENT,
    peer::ELEMENT,
    auto_scaling_profile::ELEMENT,
    access_control::ELEMENT,
    media_manager::ELEMENT,
    steering_pool::ELEMENT,
    account_config::ELEMENT,
    account_server::ELEMENT,
];

#[cfg(test)]
mod tests {
    use toml::value::{Table, Value};

    use super::{Bound, Dflt, ElementSpec, Ty, ELEMENTS};
    use crate::model::{
        AccessControl, AlarmThreshold, AutoScalingProfile, CaptureAgent, FilterConfig,
        MediaManager, Peer, RedundancyConfig, SessionRouter, SipConfig, SipMonitoring,
        SnmpCommunity, SnmpUserEntry, SystemConfig, TlsProfile, TrapReceiver,
    };
    use crate::{Config, ConfigError};

    fn table<T: serde::Serialize>(value: &T) -> Table {
        Table::try_from(value).unwrap_or_default()
    }

    /// The model's default instance of each element, as TOML.
    fn model_default(element: &str) -> Option<Table> {
        Some(match element {
            "system-config" => table(&SystemConfig::default()),
            "alarm-threshold" => table(&AlarmThreshold::default()),
            "trap-receiver" => table(&TrapReceiver::default()),
            "snmp-community" => table(&SnmpCommunity::default()),
            "snmp-user-entry" => table(&SnmpUserEntry::default()),
            "sip-config" => table(&SipConfig::default()),
            "session-router" => table(&SessionRouter::default()),
            "tls-profile" => table(&TlsProfile::named("")),
            "redundancy-config" => table(&RedundancyConfig::default()),
            "peer" => table(&Peer::default()),
            "auto-scaling-profile" => table(&AutoScalingProfile::default()),
            "access-control" => table(&AccessControl::default()),
            "media-manager" => table(&MediaManager::default()),
            "sip-monitoring" => table(&SipMonitoring::default()),
            "filter-config" => table(&FilterConfig::named("")),
            "capture-agent" => table(&CaptureAgent::default()),
            "account-config" => table(&crate::AccountConfig::default()),
            "account-server" => table(&crate::AccountServer::default()),
            "sip-interface" => table(&toml::from_str::<crate::SipInterface>("realm = \"a\"").ok()?),
            "session-agent" => {
                table(&toml::from_str::<crate::SessionAgent>("name = \"a\"\nrealm = \"a\"").ok()?)
            }
            _ => return None,
        })
    }

    /// The sub-element lists of an element, which are tables of their own.
    const LISTS: &[&str] = &[
        "alarm-threshold",
        "trap-receiver",
        "snmp-community",
        "snmp-user-entry",
        "peer",
        "route",
        "account-server",
    ];

    #[test]
    fn the_model_defaults_are_the_declared_ones_and_every_key_is_declared() {
        for spec in ELEMENTS {
            let Some(model) = model_default(spec.name) else {
                continue;
            };
            for key in model.keys() {
                assert!(
                    spec.key(key).is_some() || LISTS.contains(&key.as_str()),
                    "{}: key {key} is in the model but not in the key table",
                    spec.name
                );
            }
            for key in spec.keys {
                let have = model.get(key.name);
                let quote = |s: &str| Some(Value::String(s.to_owned()));
                let want = match key.default {
                    Dflt::Int(n) => Some(Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))),
                    Dflt::Bool(b) => Some(Value::Boolean(b)),
                    Dflt::Str(s) => quote(s),
                    Dflt::Ip(ip) => quote(&ip.to_string()),
                    Dflt::List(items) => Some(Value::Array(
                        items
                            .iter()
                            .map(|i| Value::String((*i).to_owned()))
                            .collect(),
                    )),
                    Dflt::Unset => None,
                    Dflt::Required => continue,
                };
                let empty =
                    |v: &Value| v.as_str() == Some("") || v.as_array().is_some_and(Vec::is_empty);
                let same =
                    have == want.as_ref() || (have.is_none() && want.as_ref().is_some_and(empty));
                assert!(
                    same,
                    "{}.{}: the model's default is {have:?}, the table declares {want:?}",
                    spec.name, key.name
                );
            }
        }
    }

    /// A configuration with one key of an element set to `value`, and the key's path.
    fn with(spec: &ElementSpec, key: &str, value: u64) -> Option<(String, String)> {
        let line = format!("{key} = {value}\n");
        Some(match spec.name {
            "system-config" | "sip-config" | "redundancy-config" | "media-manager"
            | "sip-monitoring" | "capture-agent" | "account-config" => (
                format!("{}\n{line}", spec.table),
                format!("{}.{key}", spec.name),
            ),
            "account-server" => (
                format!("[[account-config.account-server]]\nsecret = \"s\"\n{line}"),
                format!("account-config.account-server[0].{key}"),
            ),
            "alarm-threshold" => (
                format!(
                    "[[system-config.alarm-threshold]]\n{}{line}",
                    if key == "value" { "" } else { "value = 50\n" }
                ),
                format!("system-config.alarm-threshold[0].{key}"),
            ),
            "trap-receiver" => (
                format!("[[system-config.trap-receiver]]\n{line}"),
                format!("system-config.trap-receiver[0].{key}"),
            ),
            "tls-profile" => (
                format!("[[tls-profile]]\nname = \"t\"\n{line}"),
                format!("tls-profile[0].{key}"),
            ),
            "auto-scaling-profile" => (
                format!("[[auto-scaling-profile]]\nname = \"p\"\n{line}"),
                format!("auto-scaling-profile[0].{key}"),
            ),
            _ => return None,
        })
    }

    #[test]
    fn every_declared_literal_bound_is_enforced_by_validation() {
        let mut checked = 0;
        for spec in ELEMENTS {
            for key in spec.keys.iter().filter(|k| !k.optional) {
                let (Some((low, high)), Ty::Int(storage)) = (key.range, key.ty) else {
                    continue;
                };
                let mut outside = Vec::new();
                if let Bound::Value(n) = low {
                    outside.extend(n.checked_sub(1));
                }
                if let Bound::Value(n) = high {
                    outside.extend(Some(n + 1).filter(|v| *v <= storage));
                }
                for value in outside {
                    let Some((text, path)) = with(spec, key.name, value) else {
                        continue;
                    };
                    match Config::from_toml_str(&text) {
                        Err(ConfigError::Invalid { key: bad, .. }) => {
                            assert_eq!(bad, path, "{text}");
                        }
                        other => panic!("{text}: expected an error about {path}, got {other:?}"),
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 60, "only {checked} bounds checked");
    }

    #[test]
    fn the_acli_hints_follow_from_the_declarations() {
        use super::{redundancy_config, sip_config, system_config};
        assert_eq!(sip_config::T1_MS.hint_text(), "<10..=10000>");
        assert_eq!(sip_config::T2_MS.hint_text(), "<t1-ms..=60000>");
        assert_eq!(
            sip_config::MAX_QUEUE_DELAY_MS.hint_text(),
            "<0..=32000, 0 = off>"
        );
        assert_eq!(
            redundancy_config::EMERGENCY_THRESHOLD.hint_text(),
            "<0..health-threshold>"
        );
        assert_eq!(
            super::auto_scaling_profile::SCALE_DOWN_TO.hint_text(),
            "<1..scale-up-to | none>"
        );
        assert_eq!(
            system_config::MEMORY_SOURCE.hint_text(),
            "<host | cgroup | process>"
        );
        assert_eq!(system_config::LAB_MODE.hint_text(), "<enabled | disabled>");
    }
}
