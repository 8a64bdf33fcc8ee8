//! sbc-config: the configuration of an SBC node.
//!
//! This crate owns these things and nothing else:
//!
//! - **The key tables** ([`keys`]): every key of every element declared once (name, type,
//!   default, range or words, one line of help). The model's defaults, validation's ranges, the
//!   ACLI's help, hints and completion, the commented example file and the configuration
//!   reference ([`docs`], both committed and checked by a test) follow from them.
//! - **The model**: [`Config`] and its elements, named after Oracle ACLI words
//!   ([`SystemConfig`] `system-config` with its `options`, [`AlarmThreshold`]s and
//!   [`TrapReceiver`]s; [`SipConfig`] `sip-config`; [`SipInterface`] `sip-interface`;
//!   [`SessionAgent`] `session-agent`; [`SessionRouter`] `session-router`; the routing of
//!   issue 28: [`SessionAgentGroup`] `session-agent-group`, [`LocalPolicy`] `local-policy`
//!   with its [`PolicyAttribute`]s (`policy-attributes`), [`LocalRoutingConfig`]
//!   `local-routing-config`, [`TranslationRules`] `translation-rules` and
//!   [`SessionTranslation`] `session-translation`; [`RealmConfig`] `realm-config` (a realm's
//!   translations, session timer and call duration limit); [`SessionTimerProfile`]
//!   `session-timer-profile`;
//!   [`RedundancyConfig`] `redundancy-config` with its [`Peer`]s; [`AutoScalingProfile`]
//!   `auto-scaling-profile`; [`AccessControl`] `access-control`; [`MediaManager`]
//!   `media-manager`; [`SteeringPool`] `steering-pool`; [`TlsProfile`] `tls-profile`; the SIP
//!   trace's [`SipMonitoring`] `sip-monitoring`, [`FilterConfig`] `filter-config` and
//!   [`CaptureAgent`] `capture-agent`), each field with a default.
//! - **The TOML file**: keys are kebab-case ACLI words; an empty file is valid and equals
//!   [`Config::embedded_default`]; an unknown key or a value of the wrong type is refused with
//!   the parser's line and column. [`Config::load`] reads a file, [`Config::save_atomic`]
//!   replaces one atomically and keeps the previous one as `<path>.bak`.
//! - **Validation**: [`Config::validate`] checks ranges and cross-references (agents in known
//!   realms, routes and policies to known agents and groups, translations to known rules, no two interfaces on one socket, known options, alarm
//!   thresholds rising with severity, a complete pair when redundancy is enabled, OpenSIPS's
//!   scaling rules). Every [`ConfigError`] names the full dotted key, the bad value and what is
//!   valid, e.g. `sip-config.t1-ms = 0: out of range (valid: 10..=10000)`.
//! - **The ACLI grammar** ([`acli`]): a pure interpreter of Oracle's command tree that edits a
//!   `Config` one line at a time. The node's operational commands are the node's: it gives each
//!   session their words ([`acli::Operations`]) and gets a line naming one back
//!   ([`acli::OperLine`]) to parse and carry out.
//!
//! It does not open sockets, run timers or talk SIP: the `sbc` crate reads a validated
//! [`Config`] and acts on it, and serves the ACLI over its management socket. Data flows one
//! way: file text → [`Config::from_toml_str`] (parse, fill defaults, validate) → `Config` → the
//! engine; and back for saving: [`acli::Session::execute`] edits a `Config` (each `done`
//! validated) → [`Config::save_atomic`] (validate, [`Config::to_toml_string`], atomic replace).
//!
//! # Defaults of the lists
//!
//! A list absent from the file takes its default; a list present replaces it entirely:
//!
//! - no `[[sip-interface]]`: `access` on 127.0.0.1:5060 and `core` on 127.0.0.1:5062, both UDP
//!   and TCP;
//! - no `[[session-agent]]`: one agent `core` at 127.0.0.1:5080 over UDP in realm `core`, and
//!   then (only then) `session-router.default-route` defaults to `"core"`;
//! - no `[[steering-pool]]`: when the default interfaces apply too (no `[[sip-interface]]`),
//!   `access` on 127.0.0.1 ports 20000..=20999 and `core` on 127.0.0.1 ports 21000..=21999, so
//!   that media is anchored on loopback; with the file's own interfaces, none (media passes
//!   unchanged: pools name addresses of the file's own networks, which no default can guess);
//! - `[[session-router.route]]` defaults to none, as do the routing elements
//!   (`[[session-agent-group]]`, `[[local-policy]]`, `[[local-routing-config]]`,
//!   `[[translation-rules]]`, `[[session-translation]]`), as does `[[session-timer-profile]]`.
//!
//! # Routing: local-policy, and session-router as its compatibility form
//!
//! The routing table is Oracle's `local-policy`; the older `session-router` (per-realm
//! `route`s and a `default-route`) stays valid and is read as more rows of that table, of the
//! highest cost, after the explicit ones: [`Config::effective_local_policies`]. Which next hop
//! a request takes among them is `sbc-proto`'s (`routing::local_policy`); this crate only
//! declares, validates and converts. A `local-routing-config`'s file is loaded by the node.
//!
//! [`Config::to_toml_string`] always writes every list, so a saved file reads back identically.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod acli;
pub mod diff;
pub mod docs;
mod error;
mod file;
pub mod keys;
mod model;
pub mod net;
mod push;
mod validate;

#[cfg(test)]
mod model_tests;
#[cfg(test)]
mod tests;

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use error::ConfigError;

/// The most workers a worker group may have (`sip-config.workers`, `tcp-workers`, a profile's
/// `scale-up-to`); the autoscaler's own bound is the same (`sbc` tests that they agree).
pub const MAX_WORKERS: usize = 64;
/// The shortest `redundancy-config.shared-key`, in bytes; the pair's own bound is the same
/// (`sbc_ha::crypto::MIN_SHARED_KEY_LEN`, checked to agree by the `sbc` crate's tests).
pub const MIN_SHARED_KEY_LEN: usize = 16;
/// The `cost` of the `local-policy` rows [`Config::effective_local_policies`] makes of
/// `session-router`: the highest (`policy-attributes` `cost` is 0..=999999999), so that an
/// explicit policy of any cost is preferred.
pub const SESSION_ROUTER_COST: u32 = 999_999_999;
pub use model::{
    parse_days_of_week, parse_engine_id, parse_hhmm, split_option, AccessAction, AccessControl,
    AccountConfig, AccountServer, AccountState, AccountStrategy, AccountTransport, AdminState,
    AlarmThreshold, AlarmType, AllowAnonymous, AutoScalingProfile, CaptureAgent, CaptureAgentState,
    CaptureTransport, CriticalMemoryAbort, FileOutput, FilterConfig, FilterLevel, GenerateInterim,
    GenerateStart, InDialogSource, LocalPolicy, LocalRoutingConfig, MediaManager,
    MediaManagerState, MemorySource, NatTraversal, NextHop, Peer, PeerType, PingSendMode,
    PolicyAttribute, RealmConfig, RedundancyConfig, RedundancyState, ReferCallTransfer, Refresher,
    RestrictedLatching, Route, SagStrategy, SessionAgent, SessionAgentGroup, SessionRouter,
    SessionTimerProfile, SessionTranslation, Severity, SipConfig, SipInterface, SipMonitoring,
    SipMonitoringState, SnmpAuthProtocol, SnmpCommunity, SnmpPrivProtocol, SnmpUserEntry,
    SnmpVersion, SpoolFullAction, SteeringPool, SystemConfig, TlsProfile, TlsVersion,
    TranslationIndex, TranslationRules, TranslationType, Transport, TrapReceiver, DAY_LETTERS,
    SAG_PREFIX,
};
pub use net::{parse_net, IpNet};
pub use push::{MASK, NODE_LOCAL, SECRET_KEYS};
pub use validate::MIN_SNMP_PASSWORD;

use model::{ACCESS_REALM, CORE};

/// The whole configuration of one node, as read from (and written to) its TOML file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "RawConfig", rename_all = "kebab-case")]
pub struct Config {
    /// `[system-config]`: node-wide settings.
    #[serde(rename = "system-config")]
    pub system: SystemConfig,
    /// `[sip-config]`: SIP timers and limits.
    pub sip_config: SipConfig,
    /// `[[tls-profile]]`: certificates and peer verification for SIP over TLS.
    #[serde(rename = "tls-profile")]
    pub tls_profiles: Vec<TlsProfile>,
    /// `[[sip-interface]]`: where SIP is received, at most one per realm and address family.
    #[serde(rename = "sip-interface")]
    pub sip_interfaces: Vec<SipInterface>,
    /// `[[session-agent]]`: the next hops.
    #[serde(rename = "session-agent")]
    pub session_agents: Vec<SessionAgent>,
    /// `[[session-agent-group]]`: agents a local-policy names together as `SAG:<name>`.
    /// Default none.
    #[serde(rename = "session-agent-group")]
    pub session_agent_groups: Vec<SessionAgentGroup>,
    /// `[[translation-rules]]`: edits of numbers and users. Default none.
    #[serde(rename = "translation-rules")]
    pub translation_rules: Vec<TranslationRules>,
    /// `[[session-translation]]`: the rules of the calling and the called user, which agents
    /// name. Default none.
    #[serde(rename = "session-translation")]
    pub session_translations: Vec<SessionTranslation>,
    /// `[[session-timer-profile]]`: session timers (RFC 4028) the SBC runs on the legs of the
    /// realms that name one. Default none.
    #[serde(rename = "session-timer-profile")]
    pub session_timer_profiles: Vec<SessionTimerProfile>,
    /// `[[realm-config]]`: what a realm (a `sip-interface`'s realm) applies to the requests it
    /// carries: its `in-translationid` and `out-translationid`. Default none.
    #[serde(rename = "realm-config")]
    pub realm_configs: Vec<RealmConfig>,
    /// `[[local-policy]]`: the routing table (see [`Config::effective_local_policies`] for the
    /// rows `session-router` adds). Default none.
    #[serde(rename = "local-policy")]
    pub local_policies: Vec<LocalPolicy>,
    /// `[[local-routing-config]]`: large route tables in files of their own. Default none.
    #[serde(rename = "local-routing-config")]
    pub local_routing_configs: Vec<LocalRoutingConfig>,
    /// `[session-router]`: which agent new requests go to, the compatibility form of
    /// `local-policy`.
    pub session_router: SessionRouter,
    /// `[redundancy-config]`: the HA pair.
    #[serde(rename = "redundancy-config")]
    pub redundancy: RedundancyConfig,
    /// `[[auto-scaling-profile]]`: worker-group scaling rules.
    #[serde(rename = "auto-scaling-profile")]
    pub auto_scaling_profiles: Vec<AutoScalingProfile>,
    /// `[[access-control]]`: allowed and denied SIP sources.
    #[serde(rename = "access-control")]
    pub access_control: Vec<AccessControl>,
    /// `[media-manager]`: media anchoring and latching.
    #[serde(rename = "media-manager")]
    pub media_manager: MediaManager,
    /// `[[steering-pool]]`: the address and ports each realm's media is anchored on, at most
    /// one per realm and address family. Default: see the crate docs (two loopback pools with the default
    /// interfaces, none with the file's own).
    #[serde(rename = "steering-pool")]
    pub steering_pools: Vec<SteeringPool>,
    /// `[[filter-config]]`: the SIP trace's filters, which `sip-monitoring` names. Default
    /// none.
    #[serde(rename = "filter-config")]
    pub filter_configs: Vec<FilterConfig>,
    /// `[sip-monitoring]`: the on-box SIP trace (Oracle's SIP Monitor & Trace).
    #[serde(rename = "sip-monitoring")]
    pub sip_monitoring: SipMonitoring,
    /// `[capture-agent]`: where traced messages are sent as HEPv3.
    #[serde(rename = "capture-agent")]
    pub capture_agent: CaptureAgent,
    /// `[account-config]`: call detail records (RADIUS accounting, CSV files).
    #[serde(rename = "account-config")]
    pub account: AccountConfig,
}

/// The file as written: lists that are absent stay `None` so that their defaults can apply.
#[derive(Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    system_config: SystemConfig,
    sip_config: SipConfig,
    tls_profile: Vec<TlsProfile>,
    sip_interface: Option<Vec<SipInterface>>,
    session_agent: Option<Vec<SessionAgent>>,
    session_agent_group: Vec<SessionAgentGroup>,
    translation_rules: Vec<TranslationRules>,
    session_translation: Vec<SessionTranslation>,
    session_timer_profile: Vec<SessionTimerProfile>,
    realm_config: Vec<RealmConfig>,
    local_policy: Vec<LocalPolicy>,
    local_routing_config: Vec<LocalRoutingConfig>,
    session_router: SessionRouter,
    redundancy_config: RedundancyConfig,
    auto_scaling_profile: Vec<AutoScalingProfile>,
    access_control: Vec<AccessControl>,
    media_manager: MediaManager,
    steering_pool: Option<Vec<SteeringPool>>,
    filter_config: Vec<FilterConfig>,
    sip_monitoring: SipMonitoring,
    capture_agent: CaptureAgent,
    account_config: AccountConfig,
}

impl From<RawConfig> for Config {
    fn from(raw: RawConfig) -> Self {
        let mut session_router = raw.session_router;
        let session_agents = match raw.session_agent {
            Some(agents) => agents,
            None => {
                if session_router.default_route.is_none() {
                    session_router.default_route = Some(CORE.to_owned());
                }
                model::default_agents()
            }
        };
        // The default pools go with the default interfaces only: they anchor on their address.
        let (sip_interfaces, default_pools) = match raw.sip_interface {
            Some(interfaces) => (interfaces, Vec::new()),
            None => (model::default_interfaces(), model::default_pools()),
        };
        Self {
            system: raw.system_config,
            sip_config: raw.sip_config,
            tls_profiles: raw.tls_profile,
            sip_interfaces,
            session_agents,
            session_agent_groups: raw.session_agent_group,
            translation_rules: raw.translation_rules,
            session_translations: raw.session_translation,
            session_timer_profiles: raw.session_timer_profile,
            realm_configs: raw.realm_config,
            local_policies: raw.local_policy,
            local_routing_configs: raw.local_routing_config,
            session_router,
            redundancy: raw.redundancy_config,
            auto_scaling_profiles: raw.auto_scaling_profile,
            access_control: raw.access_control,
            media_manager: raw.media_manager,
            steering_pools: raw.steering_pool.unwrap_or(default_pools),
            filter_configs: raw.filter_config,
            sip_monitoring: raw.sip_monitoring,
            capture_agent: raw.capture_agent,
            account: raw.account_config,
        }
    }
}

impl Default for Config {
    /// The same as [`Config::embedded_default`].
    fn default() -> Self {
        Self::embedded_default()
    }
}

impl Config {
    /// The configuration an empty file gives: interfaces `access` (127.0.0.1:5060) and `core`
    /// (127.0.0.1:5062), both UDP and TCP; session-agent `core` at 127.0.0.1:5080 over UDP;
    /// `default-route = "core"`; no routes; steering-pools `access` (127.0.0.1 ports
    /// 20000..=20999) and `core` (127.0.0.1 ports 21000..=21999) with `media-manager` enabled,
    /// so calls between the two realms have their media anchored on loopback; every
    /// `system-config`, `sip-config` and `media-manager` default.
    #[must_use]
    pub fn embedded_default() -> Self {
        RawConfig::default().into()
    }

    /// Parses TOML text, fills in defaults and validates the result.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for bad TOML, a wrong type, a missing required key or an unknown
    /// key; [`ConfigError::Invalid`] when a rule of [`Config::validate`] is broken.
    pub fn from_toml_str(s: &str) -> Result<Self, ConfigError> {
        let config: Self = toml::from_str(s)?;
        config.validate()?;
        Ok(config)
    }

    /// Reads the file at `path` and parses it with [`Config::from_toml_str`].
    ///
    /// # Errors
    /// [`ConfigError::Io`] naming `path` when it cannot be read; otherwise as
    /// [`Config::from_toml_str`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::from_toml_str(&file::read(path)?)
    }

    /// Writes the configuration as TOML, every list included, so that
    /// [`Config::from_toml_str`] gives back an equal `Config`.
    #[must_use]
    pub fn to_toml_string(&self) -> String {
        match toml::to_string(self) {
            Ok(text) => text,
            // The model has only string keys, scalars, strings, arrays and tables, all of which
            // TOML can express; the tests serialize every shape of it.
            Err(err) => unreachable!("the configuration model always serializes to TOML: {err}"),
        }
    }

    /// Validates, then atomically replaces the file at `path` with [`Config::to_toml_string`]:
    /// writes a temporary file in the same directory, flushes it, renames it over `path` and
    /// flushes the directory. An existing file is first kept as `<path>.bak`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] (the file is then left untouched) or [`ConfigError::Io`].
    pub fn save_atomic(&self, path: &Path) -> Result<(), ConfigError> {
        self.validate()?;
        file::save_atomic(&self.to_toml_string(), path)
    }

    /// Checks every rule, reporting the first one broken:
    ///
    /// - `system-config.hostname` is not empty;
    /// - `sip-config` values are in range (`t2-ms` between `t1-ms` and 60000);
    /// - at least one `sip-interface`; realms non-empty, at most one interface per realm and
    ///   address family (IPv4, IPv6); ports not 0; `transports`
    ///   non-empty without duplicates; no two interfaces on the same address:port (a wildcard
    ///   address overlaps every address of its family);
    /// - `session-agent` names non-empty and unique; each agent's realm has an interface of the
    ///   agent's address family;
    ///   ports not 0;
    /// - `session-router.default-route` and each route's `session-agent` name an agent; each
    ///   route's `from-realm` is an interface's realm;
    /// - a session-agent's routing keys: `hostname` a DNS name or IP address, `ping-method` a
    ///   method answered outside a dialog, the ranges, response codes 100..=699 each once and
    ///   none both up and down, `max-outbound-sessions` at most `max-sessions`, the
    ///   translation ids a `session-translation`'s;
    /// - `translation-rules`: unique ids, the strings their `type` needs;
    ///   `session-translation`: unique ids naming known rules, each once per list;
    /// - `session-agent-group`: unique names, `dest` non-empty and known agents each once,
    ///   `stop-sag-recurse` codes 300..=699;
    /// - `local-policy`: `from-address`, `to-address`, `source-realm` non-empty, `*` alone or
    ///   entries without spaces (realms an interface's); no two with the same three; each
    ///   attribute's `next-hop` an agent or `SAG:<group>` once per policy, `realm` an
    ///   interface's, `cost` in range, `start-time`/`end-time` `hhmm` with a non-empty window,
    ///   `days-of-week` Oracle's letters;
    /// - `local-routing-config`: unique names, a `file-name`, known source realms (the file
    ///   itself is not read);
    /// - `system-config`: known options with valid values, each once; a memory limit for the
    ///   `process` source; alarm iteration and sub-sample ranges; alarm thresholds (value
    ///   1..=100, volume only and always for `space`, one per type and severity, values rising
    ///   with severity); trap receivers (port, community, no duplicates);
    /// - `sip-config` heap thresholds (resume below reject), Retry-After range, worker counts,
    ///   queue size, queue delay and routing cost;
    /// - `redundancy-config`: ranges, distinct ports, emergency below health threshold, unique
    ///   peers with at least one destination each; when enabled, a shared key and exactly one
    ///   primary and one secondary peer;
    /// - `auto-scaling-profile`: unique names, ranges, within ≥ for, the three scale-down keys
    ///   together with down-to below up-to and down-on below up-on;
    /// - `access-control`: each source an IP address or network, each once;
    /// - `media-manager`: `latching-window-ms` and `rtp-inactivity` ranges;
    /// - `steering-pool`: each `realm-id` a sip-interface's realm, at most one pool per realm and
    ///   address family, and a realm with pools has one for each family it has an interface of
    ///   (a leg's SDP names its own family only);
    ///   `ip-address` not a wildcard; `start-port` at least 1024; `end-port` above it with at
    ///   least two RTP/RTCP pairs; no two pools' port ranges overlapping, even on different
    ///   addresses (the media relay finds a call by its port alone); no pool's range holding
    ///   the port of a sip-interface on the same address;
    /// - `filter-config`: names non-empty, unique and not `*`; `address` an IP address or
    ///   network; `user` without spaces; `realm` a sip-interface's realm; `session-agent` an
    ///   agent's name; `method` a SIP method token in capitals;
    /// - `sip-monitoring`: each of `monitoring-filters` a filter-config's name, at most once,
    ///   or `*` alone; the ring's bounds in range;
    /// - `capture-agent`: an `address` (not a wildcard, port not 0) when enabled; `capture-id`
    ///   and `queue-size` in range;
    /// - worker groups: each `sip-interface.auto-scaling-profile` and
    ///   `sip-config.tcp-auto-scaling-profile` names a profile, and the group's initial count
    ///   (`workers` for UDP groups, `tcp-workers` for TCP) lies within that profile's
    ///   `scale-down-to` (1 without a down rule)..=`scale-up-to`.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] naming the key, the value and what is valid.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate::validate(self)
    }

    /// The (first) steering-pool of `realm` (its `realm-id`), if any.
    #[must_use]
    pub fn steering_pool(&self, realm: &str) -> Option<&SteeringPool> {
        self.steering_pools.iter().find(|p| p.realm_id == realm)
    }

    /// The (first) sip-interface of `realm`, if any.
    #[must_use]
    pub fn interface(&self, realm: &str) -> Option<&SipInterface> {
        self.sip_interfaces.iter().find(|i| i.realm == realm)
    }

    /// The index of the sip-interface through which `realm` reaches a peer at `peer`: the
    /// realm's interface of the peer's address family (a realm has at most one per family), so
    /// a leg's Via, Contact, Record-Route and SDP name only addresses of its peer's family.
    #[must_use]
    pub fn interface_for(&self, realm: &str, peer: IpAddr) -> Option<usize> {
        self.sip_interfaces
            .iter()
            .position(|i| i.realm == realm && i.address.is_ipv4() == peer.is_ipv4())
    }

    /// The index of the sip-interface that faces session-agent `agent`: its realm's
    /// interface of its address's family; for an agent resolved by DNS, its realm's first
    /// interface (whose family its DNS answers are then taken in).
    #[must_use]
    pub fn agent_interface(&self, agent: &SessionAgent) -> Option<usize> {
        if agent.dns_name().is_some() {
            self.sip_interfaces
                .iter()
                .position(|i| i.realm == agent.realm)
        } else {
            self.interface_for(&agent.realm, agent.ip())
        }
    }

    /// The index of the steering-pool that anchors the legs of sip-interface `index`: its
    /// realm's pool of the interface's address family (a realm has at most one per family).
    #[must_use]
    pub fn steering_pool_for(&self, index: usize) -> Option<usize> {
        let iface = self.sip_interfaces.get(index)?;
        self.steering_pools.iter().position(|p| {
            p.realm_id == iface.realm && p.ip_address.is_ipv4() == iface.address.is_ipv4()
        })
    }

    /// The `auto-scaling-profile` called `name`, if any.
    #[must_use]
    pub fn auto_scaling_profile(&self, name: &str) -> Option<&AutoScalingProfile> {
        self.auto_scaling_profiles.iter().find(|p| p.name == name)
    }

    /// The session-agent called `name`, if any.
    #[must_use]
    pub fn session_agent(&self, name: &str) -> Option<&SessionAgent> {
        self.session_agents.iter().find(|a| a.name == name)
    }

    /// The `filter-config` named `name`, if any.
    #[must_use]
    pub fn filter_config(&self, name: &str) -> Option<&FilterConfig> {
        self.filter_configs.iter().find(|f| f.name == name)
    }

    /// The `tls-profile` named `name`, if any.
    #[must_use]
    pub fn tls_profile(&self, name: &str) -> Option<&TlsProfile> {
        self.tls_profiles.iter().find(|p| p.name == name)
    }

    /// The `session-agent-group` called `name` (its `group-name`), if any.
    #[must_use]
    pub fn session_agent_group(&self, name: &str) -> Option<&SessionAgentGroup> {
        self.session_agent_groups
            .iter()
            .find(|g| g.group_name == name)
    }

    /// The `translation-rules` whose `id` is `id`, if any.
    #[must_use]
    pub fn translation_rule(&self, id: &str) -> Option<&TranslationRules> {
        self.translation_rules.iter().find(|r| r.id == id)
    }

    /// The `realm-config` of realm `realm`, if any.
    #[must_use]
    pub fn realm_config(&self, realm: &str) -> Option<&RealmConfig> {
        self.realm_configs.iter().find(|r| r.identifier == realm)
    }

    /// The `session-timer-profile` named `name`.
    #[must_use]
    pub fn session_timer_profile(&self, name: &str) -> Option<&SessionTimerProfile> {
        self.session_timer_profiles.iter().find(|p| p.name == name)
    }

    /// The `session-translation` named `id`.
    #[must_use]
    pub fn session_translation(&self, id: &str) -> Option<&SessionTranslation> {
        self.session_translations.iter().find(|t| t.id == id)
    }

    /// The whole routing table as `local-policy` rows: the file's `local-policy` elements, in
    /// file order, followed by `session-router` (the compatibility form) converted to rows of
    /// the highest cost ([`SESSION_ROUTER_COST`], 999999999), so that any explicit policy is
    /// preferred to them:
    ///
    /// - each `[[session-router.route]]` becomes a policy from `*` to `*` with `source-realm`
    ///   its `from-realm` and one attribute, `next-hop` its `session-agent` (only the first
    ///   route of a realm: later ones were never used by [`Config::route_for`] either);
    /// - `default-route` becomes one policy for each realm (in sip-interface order) that has
    ///   no route and is not the default agent's own realm (no hairpin, as
    ///   [`Config::route_for`]).
    ///
    /// The rows of `session-router` have a `description` naming where they come from
    /// (`session-router.route[0]`, `session-router.default-route`).
    #[must_use]
    pub fn effective_local_policies(&self) -> Vec<LocalPolicy> {
        let mut rows = self.local_policies.clone();
        let row = |realm: &str, agent: &str, from: String| {
            let mut attribute = PolicyAttribute::to(agent);
            attribute.cost = SESSION_ROUTER_COST;
            LocalPolicy {
                source_realm: vec![realm.to_owned()],
                description: Some(from),
                policy_attributes: vec![attribute],
                ..LocalPolicy::default()
            }
        };
        let router = &self.session_router;
        let mut routed: Vec<&str> = Vec::new();
        for (i, route) in router.routes.iter().enumerate() {
            if routed.contains(&route.from_realm.as_str()) {
                continue;
            }
            routed.push(&route.from_realm);
            rows.push(row(
                &route.from_realm,
                &route.session_agent,
                format!("session-router.route[{i}]"),
            ));
        }
        let default = router
            .default_route
            .as_deref()
            .and_then(|name| self.session_agent(name));
        if let Some(agent) = default {
            for iface in &self.sip_interfaces {
                let realm = iface.realm.as_str();
                if realm == agent.realm || routed.contains(&realm) {
                    continue;
                }
                routed.push(realm);
                rows.push(row(
                    realm,
                    &agent.name,
                    "session-router.default-route".to_owned(),
                ));
            }
        }
        rows
    }

    /// The session-agent a new request arriving on realm `ingress_realm` is routed to: the first
    /// `session-router.route` whose `from-realm` matches, else `default-route` unless that agent
    /// is in the ingress realm itself (no hairpin), else `None`.
    ///
    /// Superseded by [`Config::effective_local_policies`], which gives the same choice as
    /// `local-policy` rows next to the explicit ones; kept until the engine routes by those.
    #[must_use]
    pub fn route_for(&self, ingress_realm: &str) -> Option<&SessionAgent> {
        let router = &self.session_router;
        if let Some(route) = router.routes.iter().find(|r| r.from_realm == ingress_realm) {
            return self.session_agent(&route.session_agent);
        }
        let agent = self.session_agent(router.default_route.as_deref()?)?;
        (agent.realm != ingress_realm).then_some(agent)
    }

    /// Applies command-line overrides and re-validates.
    ///
    /// `listen` replaces the address and port of the `access` interface (or of the first
    /// interface when there is no `access` realm); when that is the `access` interface and its
    /// steering-pool is the default one (127.0.0.1 ports 20000..=20999), the pool's
    /// `ip-address` follows the new address (its ports stay). `next_hop` replaces the address
    /// and port of the `default-route` agent; when there is none, the agent `core` (created in
    /// realm `core` over UDP if missing) is updated and becomes the default route.
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] when the result breaks a rule, e.g. `listen` collides with
    /// another interface, or `next_hop` needs a `core` realm that no interface has.
    pub fn with_overrides(
        mut self,
        listen: Option<SocketAddr>,
        next_hop: Option<SocketAddr>,
    ) -> Result<Self, ConfigError> {
        if let Some(listen) = listen {
            let index = self
                .sip_interfaces
                .iter()
                .position(|i| i.realm == ACCESS_REALM)
                .unwrap_or(0);
            if let Some(iface) = self.sip_interfaces.get_mut(index) {
                iface.address = listen.ip();
                iface.port = listen.port();
                if iface.realm == ACCESS_REALM {
                    let default = model::default_pools()
                        .into_iter()
                        .find(|p| p.realm_id == ACCESS_REALM);
                    if let Some(pool) = self
                        .steering_pools
                        .iter_mut()
                        .find(|p| Some(&**p) == default.as_ref())
                    {
                        pool.ip_address = listen.ip();
                    }
                }
            }
        }
        if let Some(next_hop) = next_hop {
            let existing = self
                .session_router
                .default_route
                .as_deref()
                .and_then(|name| self.session_agents.iter().position(|a| a.name == name));
            let index = match existing {
                Some(index) => index,
                None => {
                    let index = match self.session_agents.iter().position(|a| a.name == CORE) {
                        Some(index) => index,
                        None => {
                            self.session_agents.push(SessionAgent {
                                name: CORE.to_owned(),
                                realm: CORE.to_owned(),
                                address: Some(next_hop.ip()),
                                port: next_hop.port(),
                                transport: Transport::Udp,
                                ..SessionAgent::default()
                            });
                            self.session_agents.len() - 1
                        }
                    };
                    self.session_router.default_route = Some(CORE.to_owned());
                    index
                }
            };
            if let Some(agent) = self.session_agents.get_mut(index) {
                agent.address = Some(next_hop.ip());
                agent.port = next_hop.port();
            }
        }
        self.validate()?;
        Ok(self)
    }

    /// Where [`Config::save_atomic`] keeps the previous file: `<path>.bak`.
    #[must_use]
    pub fn backup_path(path: &Path) -> std::path::PathBuf {
        file::backup_path(path)
    }
}
