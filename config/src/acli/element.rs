//! The elements of the ACLI tree: their values, their attributes and how they print.
//!
//! An attribute is read and written through the element's TOML form (the same serde model the
//! file uses), so the ACLI and the file can never disagree on a name or a type: setting
//! `value 80` on an `alarm-threshold` puts the integer 80 under the key `value` of the
//! element's TOML table and deserializes it back.

use std::net::{IpAddr, SocketAddr};

use toml::value::{Table, Value};

use crate::keys::{self, ElementSpec, KeySpec, Ty};
use crate::model::{
    default_address, AccessControl, AccountConfig, AccountServer, AlarmThreshold,
    AutoScalingProfile, CaptureAgent, FilterConfig, LocalPolicy, LocalRoutingConfig, MediaManager,
    Peer, PolicyAttribute, RealmConfig, RedundancyConfig, SessionAgent, SessionAgentGroup,
    SessionRouter, SessionTimerProfile, SessionTranslation, SipConfig, SipInterface, SipMonitoring,
    SnmpCommunity, SnmpUserEntry, SteeringPool, SystemConfig, TlsProfile, TranslationRules,
    TrapReceiver,
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
    /// `sip-monitoring`.
    SipMonitoring(SipMonitoring),
    /// One `filter-config`.
    FilterConfig(FilterConfig),
    /// `capture-agent`.
    CaptureAgent(CaptureAgent),
    /// One `session-agent-group`.
    SessionAgentGroup(SessionAgentGroup),
    /// One `local-policy`.
    LocalPolicy(LocalPolicy),
    /// One `policy-attributes` of a `local-policy`.
    PolicyAttribute(PolicyAttribute),
    /// One `local-routing-config`.
    LocalRoutingConfig(LocalRoutingConfig),
    /// One `translation-rules`.
    TranslationRules(TranslationRules),
    /// One `session-translation`.
    SessionTranslation(SessionTranslation),
    /// One `session-timer-profile`.
    SessionTimerProfile(SessionTimerProfile),
    /// One `realm-config`.
    RealmConfig(RealmConfig),
    /// `account-config`.
    AccountConfig(AccountConfig),
    /// One `account-server` of `account-config`.
    AccountServer(AccountServer),
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
    SipMonitoring,
    FilterConfig,
    CaptureAgent,
    SessionAgentGroup,
    LocalPolicy,
    PolicyAttribute,
    LocalRoutingConfig,
    TranslationRules,
    SessionTranslation,
    SessionTimerProfile,
    RealmConfig,
    AccountConfig,
    AccountServer,
}

/// One attribute of an element: its key's declaration in the key tables.
pub(crate) type Attr = KeySpec;

impl Kind {
    /// The element's declaration in the key tables.
    pub(crate) const fn spec(self) -> &'static ElementSpec {
        match self {
            Self::SystemConfig => &keys::system_config::ELEMENT,
            Self::SipConfig => &keys::sip_config::ELEMENT,
            Self::SessionRouter => &keys::session_router::ELEMENT,
            Self::RedundancyConfig => &keys::redundancy_config::ELEMENT,
            Self::SipInterface => &keys::sip_interface::ELEMENT,
            Self::SessionAgent => &keys::session_agent::ELEMENT,
            Self::AlarmThreshold => &keys::alarm_threshold::ELEMENT,
            Self::TrapReceiver => &keys::trap_receiver::ELEMENT,
            Self::SnmpCommunity => &keys::snmp_community::ELEMENT,
            Self::SnmpUserEntry => &keys::snmp_user_entry::ELEMENT,
            Self::Peer => &keys::peer::ELEMENT,
            Self::AutoScalingProfile => &keys::auto_scaling_profile::ELEMENT,
            Self::AccessControl => &keys::access_control::ELEMENT,
            Self::MediaManager => &keys::media_manager::ELEMENT,
            Self::SteeringPool => &keys::steering_pool::ELEMENT,
            Self::TlsProfile => &keys::tls_profile::ELEMENT,
            Self::SipMonitoring => &keys::sip_monitoring::ELEMENT,
            Self::FilterConfig => &keys::filter_config::ELEMENT,
            Self::CaptureAgent => &keys::capture_agent::ELEMENT,
            Self::SessionAgentGroup => &keys::session_agent_group::ELEMENT,
            Self::LocalPolicy => &keys::local_policy::ELEMENT,
            Self::PolicyAttribute => &keys::policy_attributes::ELEMENT,
            Self::LocalRoutingConfig => &keys::local_routing_config::ELEMENT,
            Self::TranslationRules => &keys::translation_rules::ELEMENT,
            Self::SessionTranslation => &keys::session_translation::ELEMENT,
            Self::SessionTimerProfile => &keys::session_timer_profile::ELEMENT,
            Self::RealmConfig => &keys::realm_config::ELEMENT,
            Self::AccountConfig => &keys::account_config::ELEMENT,
            Self::AccountServer => &keys::account_server::ELEMENT,
        }
    }

    /// The word that enters the element, also the first line of its `show`.
    pub(crate) const fn word(self) -> &'static str {
        self.spec().name
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
        self.spec().help
    }

    /// Its attributes, in `show` order.
    pub(crate) const fn attrs(self) -> &'static [Attr] {
        self.spec().keys
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
            Self::LocalPolicy => &[Self::PolicyAttribute],
            Self::AccountConfig => &[Self::AccountServer],
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
                | Self::SipMonitoring
                | Self::CaptureAgent
                | Self::AccountConfig
        )
    }

    /// The TOML key of the element (of its list, for a multi-instance one): the word, but
    /// for `policy-attributes`, whose list is `policy-attribute` in the file.
    pub(crate) const fn toml_key(self) -> &'static str {
        match self {
            Self::PolicyAttribute => "policy-attribute",
            other => other.word(),
        }
    }

    /// A new instance, as entering the element word gives it.
    pub(crate) fn fresh(self) -> Element {
        match self {
            Self::SystemConfig => Element::SystemConfig(SystemConfig::default()),
            Self::SipConfig => Element::SipConfig(SipConfig::default()),
            Self::SessionRouter => Element::SessionRouter(SessionRouter::default()),
            Self::RedundancyConfig => Element::RedundancyConfig(RedundancyConfig::default()),
            Self::SipInterface => Element::SipInterface(SipInterface::with_defaults(
                "",
                crate::model::default_port(),
            )),
            Self::SessionAgent => Element::SessionAgent(SessionAgent::default()),
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
            Self::SipMonitoring => Element::SipMonitoring(SipMonitoring::default()),
            Self::FilterConfig => Element::FilterConfig(FilterConfig::default()),
            Self::CaptureAgent => Element::CaptureAgent(CaptureAgent::default()),
            Self::SessionAgentGroup => Element::SessionAgentGroup(SessionAgentGroup::default()),
            Self::LocalPolicy => Element::LocalPolicy(LocalPolicy::default()),
            Self::PolicyAttribute => Element::PolicyAttribute(PolicyAttribute::default()),
            Self::LocalRoutingConfig => Element::LocalRoutingConfig(LocalRoutingConfig::default()),
            Self::TranslationRules => Element::TranslationRules(TranslationRules::default()),
            Self::SessionTranslation => Element::SessionTranslation(SessionTranslation::default()),
            Self::SessionTimerProfile => {
                Element::SessionTimerProfile(SessionTimerProfile::default())
            }
            Self::RealmConfig => Element::RealmConfig(RealmConfig::default()),
            Self::AccountConfig => Element::AccountConfig(AccountConfig::default()),
            Self::AccountServer => Element::AccountServer(AccountServer::default()),
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
            Self::SipMonitoring(_) => Kind::SipMonitoring,
            Self::FilterConfig(_) => Kind::FilterConfig,
            Self::CaptureAgent(_) => Kind::CaptureAgent,
            Self::SessionAgentGroup(_) => Kind::SessionAgentGroup,
            Self::LocalPolicy(_) => Kind::LocalPolicy,
            Self::PolicyAttribute(_) => Kind::PolicyAttribute,
            Self::LocalRoutingConfig(_) => Kind::LocalRoutingConfig,
            Self::TranslationRules(_) => Kind::TranslationRules,
            Self::SessionTranslation(_) => Kind::SessionTranslation,
            Self::SessionTimerProfile(_) => Kind::SessionTimerProfile,
            Self::RealmConfig(_) => Kind::RealmConfig,
            Self::AccountConfig(_) => Kind::AccountConfig,
            Self::AccountServer(_) => Kind::AccountServer,
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
            Self::SipMonitoring(v) => table_of(v),
            Self::FilterConfig(v) => table_of(v),
            Self::CaptureAgent(v) => table_of(v),
            Self::SessionAgentGroup(v) => table_of(v),
            Self::LocalPolicy(v) => table_of(v),
            Self::PolicyAttribute(v) => table_of(v),
            Self::LocalRoutingConfig(v) => table_of(v),
            Self::TranslationRules(v) => table_of(v),
            Self::SessionTranslation(v) => table_of(v),
            Self::SessionTimerProfile(v) => table_of(v),
            Self::RealmConfig(v) => table_of(v),
            Self::AccountConfig(v) => table_of(v),
            Self::AccountServer(v) => table_of(v),
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
            Kind::SipMonitoring => value.try_into().map(Self::SipMonitoring),
            Kind::FilterConfig => value.try_into().map(Self::FilterConfig),
            Kind::CaptureAgent => value.try_into().map(Self::CaptureAgent),
            Kind::SessionAgentGroup => value.try_into().map(Self::SessionAgentGroup),
            Kind::LocalPolicy => value.try_into().map(Self::LocalPolicy),
            Kind::PolicyAttribute => value.try_into().map(Self::PolicyAttribute),
            Kind::LocalRoutingConfig => value.try_into().map(Self::LocalRoutingConfig),
            Kind::TranslationRules => value.try_into().map(Self::TranslationRules),
            Kind::SessionTranslation => value.try_into().map(Self::SessionTranslation),
            Kind::SessionTimerProfile => value.try_into().map(Self::SessionTimerProfile),
            Kind::RealmConfig => value.try_into().map(Self::RealmConfig),
            Kind::AccountConfig => value.try_into().map(Self::AccountConfig),
            Kind::AccountServer => value.try_into().map(Self::AccountServer),
        };
        result.map_err(|err| err.to_string().trim_end().to_owned())
    }

    /// The key that `select` and `no` take: `"access"` (a realm or a steering-pool's
    /// realm-id; `"access ipv6"` for an IPv6 one, since a realm may have one of each family),
    /// `"memory critical"`,
    /// `"space major /var"`, `"10.0.0.1:162"`; empty for a single-instance element.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::SipInterface(v) => v.key(),
            Self::SessionAgent(v) => v.name.clone(),
            Self::Peer(v) => v.name.clone(),
            Self::AutoScalingProfile(v) => v.name.clone(),
            Self::AccessControl(v) => v.source_address.clone(),
            Self::SteeringPool(v) => v.key(),
            Self::TlsProfile(v) => v.name.clone(),
            Self::FilterConfig(v) => v.name.clone(),
            Self::SessionAgentGroup(v) => v.group_name.clone(),
            Self::LocalPolicy(v) => v.key(),
            Self::PolicyAttribute(v) => v.next_hop.clone(),
            Self::LocalRoutingConfig(v) => v.name.clone(),
            Self::TranslationRules(v) => v.id.clone(),
            Self::SessionTranslation(v) => v.id.clone(),
            Self::SessionTimerProfile(v) => v.name.clone(),
            Self::RealmConfig(v) => v.key(),
            Self::AlarmThreshold(v) if v.volume.is_empty() => {
                format!("{} {}", v.kind, v.severity)
            }
            Self::AlarmThreshold(v) => format!("{} {} {}", v.kind, v.severity, v.volume),
            Self::TrapReceiver(v) => v.socket_addr().to_string(),
            Self::AccountServer(v) => v.address().to_string(),
            Self::SnmpCommunity(v) => v.community_name.clone(),
            Self::SnmpUserEntry(v) => v.user_name.clone(),
            _ => String::new(),
        }
    }

    /// The spellings `select` accepts for this instance: the key, and for a trap receiver its
    /// bare address too.
    pub(crate) fn aliases(&self) -> Vec<String> {
        let mut aliases = vec![self.key()];
        match self {
            Self::TrapReceiver(v) => aliases.push(v.ip_address.to_string()),
            Self::AccountServer(v) => aliases.push(v.hostname.to_string()),
            // The realm alone (ambiguous when it has one of each family), with its family, or
            // with its address.
            Self::SipInterface(v) => family_aliases(&mut aliases, &v.realm, v.address),
            Self::SteeringPool(v) => family_aliases(&mut aliases, &v.realm_id, v.ip_address),
            _ => {}
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
            (Self::LocalPolicy(v), Kind::PolicyAttribute) => v
                .policy_attributes
                .iter()
                .cloned()
                .map(Self::PolicyAttribute)
                .collect(),
            (Self::AccountConfig(v), Kind::AccountServer) => v
                .account_servers
                .iter()
                .cloned()
                .map(Self::AccountServer)
                .collect(),
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
            (Self::LocalPolicy(v), Self::PolicyAttribute(c)) => {
                put(&mut v.policy_attributes, c, at, |a| a.next_hop.clone())
            }
            (Self::AccountConfig(v), Self::AccountServer(c)) => {
                put(&mut v.account_servers, c, at, |s| s.address().to_string())
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
            (Self::LocalPolicy(v), Kind::PolicyAttribute) => {
                v.policy_attributes.remove(index);
            }
            (Self::AccountConfig(v), Kind::AccountServer) => {
                v.account_servers.remove(index);
            }
            _ => {}
        }
    }
}

/// Replaces the item whose key is `at`, or appends; returns the index.
/// The other spellings of a per-family element's key: the realm alone, `realm ipv4`, and
/// `realm ADDRESS`.
fn family_aliases(aliases: &mut Vec<String>, realm: &str, address: IpAddr) {
    let family = if address.is_ipv4() { "ipv4" } else { "ipv6" };
    for alias in [
        realm.to_owned(),
        format!("{realm} {family}"),
        format!("{realm} {address}"),
    ] {
        if !aliases.contains(&alias) {
            aliases.push(alias);
        }
    }
}

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
        Kind::SipMonitoring => Element::SipMonitoring(config.sip_monitoring.clone()),
        Kind::CaptureAgent => Element::CaptureAgent(config.capture_agent.clone()),
        Kind::AccountConfig => Element::AccountConfig(config.account.clone()),
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
        Kind::FilterConfig => config
            .filter_configs
            .iter()
            .cloned()
            .map(Element::FilterConfig)
            .collect(),
        Kind::SessionAgentGroup => config
            .session_agent_groups
            .iter()
            .cloned()
            .map(Element::SessionAgentGroup)
            .collect(),
        Kind::LocalPolicy => config
            .local_policies
            .iter()
            .cloned()
            .map(Element::LocalPolicy)
            .collect(),
        Kind::LocalRoutingConfig => config
            .local_routing_configs
            .iter()
            .cloned()
            .map(Element::LocalRoutingConfig)
            .collect(),
        Kind::TranslationRules => config
            .translation_rules
            .iter()
            .cloned()
            .map(Element::TranslationRules)
            .collect(),
        Kind::RealmConfig => config
            .realm_configs
            .iter()
            .cloned()
            .map(Element::RealmConfig)
            .collect(),
        Kind::SessionTranslation => config
            .session_translations
            .iter()
            .cloned()
            .map(Element::SessionTranslation)
            .collect(),
        Kind::SessionTimerProfile => config
            .session_timer_profiles
            .iter()
            .cloned()
            .map(Element::SessionTimerProfile)
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
        Element::SipMonitoring(v) => config.sip_monitoring = v,
        Element::CaptureAgent(v) => config.capture_agent = v,
        Element::AccountConfig(v) => config.account = v,
        Element::SipInterface(v) => {
            return put(&mut config.sip_interfaces, v, at, SipInterface::key)
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
            return put(&mut config.steering_pools, v, at, SteeringPool::key)
        }
        Element::TlsProfile(v) => return put(&mut config.tls_profiles, v, at, |p| p.name.clone()),
        Element::FilterConfig(v) => {
            return put(&mut config.filter_configs, v, at, |f| f.name.clone())
        }
        Element::SessionAgentGroup(v) => {
            return put(&mut config.session_agent_groups, v, at, |g| {
                g.group_name.clone()
            })
        }
        Element::LocalPolicy(v) => return put(&mut config.local_policies, v, at, LocalPolicy::key),
        Element::LocalRoutingConfig(v) => {
            return put(&mut config.local_routing_configs, v, at, |r| r.name.clone())
        }
        Element::TranslationRules(v) => {
            return put(&mut config.translation_rules, v, at, |r| r.id.clone())
        }
        Element::SessionTranslation(v) => {
            return put(&mut config.session_translations, v, at, |t| t.id.clone())
        }
        Element::SessionTimerProfile(v) => {
            return put(&mut config.session_timer_profiles, v, at, |p| {
                p.name.clone()
            })
        }
        Element::RealmConfig(v) => return put(&mut config.realm_configs, v, at, RealmConfig::key),
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
        Kind::FilterConfig => {
            config.filter_configs.remove(index);
        }
        Kind::SessionAgentGroup => {
            config.session_agent_groups.remove(index);
        }
        Kind::LocalPolicy => {
            config.local_policies.remove(index);
        }
        Kind::LocalRoutingConfig => {
            config.local_routing_configs.remove(index);
        }
        Kind::TranslationRules => {
            config.translation_rules.remove(index);
        }
        Kind::SessionTranslation => {
            config.session_translations.remove(index);
        }
        Kind::SessionTimerProfile => {
            config.session_timer_profiles.remove(index);
        }
        Kind::RealmConfig => {
            config.realm_configs.remove(index);
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
        Ty::Index if word == crate::TranslationIndex::END => Ok(Value::String(word.to_owned())),
        Ty::Index => match word.parse::<u32>() {
            Ok(n) => Ok(Value::Integer(i64::from(n))),
            Err(_) => Err("not a position: a whole number from 0, or $ for the end".to_owned()),
        },
        Ty::List(_) => unreachable!("lists are parsed item by item"),
    }
}

/// The TOML value of one list item as the ACLI parsed it (`parse_item`'s text): an integer
/// for a list of integers, else the string.
pub(crate) fn list_item_value(item_ty: Ty, item: String) -> Value {
    match (item_ty, item.parse::<i64>()) {
        (Ty::Int(_), Ok(n)) => Value::Integer(n),
        _ => Value::String(item),
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
/// `system-config`, `capture-agent`, `sip-config`, `session-router`, each `filter-config`,
/// `sip-monitoring`, each `tls-profile`, each `sip-interface`, each `session-agent`, each
/// `session-agent-group`, each `translation-rules`, each `session-translation`, each
/// `session-timer-profile`, each `realm-config`, each `local-policy` (with its `policy-attributes`), each `local-routing-config`,
/// `redundancy-config`, each `auto-scaling-profile`, each `access-control`, `media-manager`,
/// each `steering-pool`, `account-config` (with its `account-server`s). (The session-router's `route` list is only in the TOML form.)
#[must_use]
pub fn render_config(config: &Config) -> String {
    let mut elements = vec![
        top_single(config, Kind::SystemConfig),
        top_single(config, Kind::CaptureAgent),
        top_single(config, Kind::SipConfig),
        top_single(config, Kind::SessionRouter),
    ];
    elements.extend(top_list(config, Kind::FilterConfig));
    elements.push(top_single(config, Kind::SipMonitoring));
    elements.extend(top_list(config, Kind::TlsProfile));
    elements.extend(top_list(config, Kind::SipInterface));
    elements.extend(top_list(config, Kind::SessionAgent));
    for kind in [
        Kind::SessionAgentGroup,
        Kind::TranslationRules,
        Kind::SessionTranslation,
        Kind::SessionTimerProfile,
        Kind::RealmConfig,
        Kind::LocalPolicy,
        Kind::LocalRoutingConfig,
    ] {
        elements.extend(top_list(config, kind));
    }
    elements.push(top_single(config, Kind::RedundancyConfig));
    elements.extend(top_list(config, Kind::AutoScalingProfile));
    elements.extend(top_list(config, Kind::AccessControl));
    elements.push(top_single(config, Kind::MediaManager));
    elements.extend(top_list(config, Kind::SteeringPool));
    elements.push(top_single(config, Kind::AccountConfig));
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
