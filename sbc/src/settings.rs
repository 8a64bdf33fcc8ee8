//! The one place that turns a [`Config`] into every subsystem's typed settings.
//!
//! Each core (`sbc-proto`'s engine, access control, overload control; `sbc-ha`'s redundancy
//! machine; `sbc-alarms`) takes a plain struct of its own, never the serde model, so it does
//! not change when the file format does and is tested without a configuration.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use sbc_alarms::{AlarmKind, EvaluatorConfig, MemorySource, Threshold, Thresholds};
use sbc_config::SagStrategy;
use sbc_config::{
    AccessAction, Config, MediaManagerState, RestrictedLatching, SessionAgent, Transport,
};
use sbc_proto::access::AccessSettings;
use sbc_proto::engine::{
    AllowAnonymous, EngineConfig, Interface, InterfaceRegistration, NextHop, Registrations,
    SessionPolicy, SourcePolicy, SubscriptionSources, TimerProfile,
};
use sbc_proto::media::MediaSettings;
use sbc_proto::overload::autoscale::ScalingProfile;
use sbc_proto::overload::prsm::PrsmConfig;
use sbc_proto::registration::cache::CacheSettings;
use sbc_proto::registration::message::NatTraversal;
use sbc_proto::routing::agent::{AgentPolicy, PingSendMode};
use sbc_proto::routing::dns::DnsName;
use sbc_proto::routing::local_policy::{AddressPattern, Days, LocalPolicy, PolicyAttribute};
use sbc_proto::routing::route_file::load_route_file;
use sbc_proto::routing::router::{
    GroupStrategy, RealmTranslations, RouteAgent, RouteGroup, Router,
};
use sbc_proto::routing::translation::{RuleKind, SessionTranslation, StringIndex, TranslationRule};
use sbc_proto::sip::dialog::LegTransport;
use sbc_proto::sip::transaction::Timers;
use sbc_proto::trace::capture::TraceFilter;
use sbc_proto::trace::monitor::{ConfiguredFilters, Topology};
use sbc_snmp::agent::Community;
use sbc_snmp::TrapReceiver;

use crate::alarm_service::{AbortPolicy, AlarmServiceSettings, EvaluationSettings};
use crate::heap_gate::HeapGateSettings;
use crate::pair::replica::ReplicaRules;
use crate::pair::{ActivatedConfig, Hooks, PairSettings};
use crate::runtime::media::PoolBinding;
use crate::runtime::tcp::{EdgeSettings, TcpSettings};
use crate::runtime::tls::{TlsAgent, TlsProfile, TlsSettings, TlsVersion};
use crate::runtime::{Listener, LiveSettings, MediaPlan, MediaTiming, RuntimeSettings};
use crate::snmp_v3::{ReceiverSettings, SnmpSettings, UserSettings};
use crate::trace::{HepSettings, HepTransport, RingBounds, TraceSettings};
use crate::workers::{WorkSettings, SHARDS};

/// Per-source protection: `sip-config source-rate`, `source-burst`, `source-deny-seconds`
/// and `source-ipv6-prefix-length`, the `access-control` lists, and the session-agents
/// (trusted).
#[must_use]
pub fn access(cfg: &Config) -> AccessSettings {
    let s = &cfg.sip_config;
    let (mut allow, mut deny) = (Vec::new(), Vec::new());
    for e in &cfg.access_control {
        // Validated: every source-address parses.
        if let Ok(net) = sbc_config::parse_net(&e.source_address) {
            match e.action {
                AccessAction::Allow => allow.push(net),
                AccessAction::Deny => deny.push(net),
            }
        }
    }
    AccessSettings {
        rate: f64::from(s.source_rate),
        burst: f64::from(s.source_burst),
        deny_for: Duration::from_secs(s.source_deny_seconds),
        allow,
        deny,
        trusted: cfg
            .session_agents
            .iter()
            .filter(|a| a.dns_name().is_none())
            .map(SessionAgent::ip)
            .collect(),
        ipv6_prefix: s.source_ipv6_prefix_length,
    }
}

/// Accounting (`account-config`) as the node runs it; `None` when it is off.
#[must_use]
pub fn accounting(cfg: &Config) -> Option<crate::accounting::AccountingSettings> {
    use sbc_accounting::csv_file::Rotation;
    use sbc_accounting::delivery::{DeliverySettings, ServerTimings, Strategy};
    use sbc_config::{AccountStrategy, FileOutput, SpoolFullAction};
    let a = &cfg.account;
    if !a.enabled() {
        return None;
    }
    let servers: Vec<_> = a.servers().collect();
    Some(crate::accounting::AccountingSettings {
        node: cfg.system.hostname.clone(),
        servers: servers
            .iter()
            .map(|s| crate::accounting::ServerSettings {
                addr: s.address(),
                secret: s.secret.clone(),
                tls: (s.transport == sbc_config::AccountTransport::Tls).then(|| {
                    crate::accounting::ServerTls {
                        profile: s.tls_profile.clone().unwrap_or_default(),
                        server_name: s.tls_server_name.clone(),
                    }
                }),
            })
            .collect(),
        delivery: DeliverySettings {
            strategy: match a.strategy {
                AccountStrategy::Hunt => Strategy::Hunt,
                AccountStrategy::Failover => Strategy::Failover,
                AccountStrategy::Roundrobin => Strategy::RoundRobin,
            },
            max_wait_failover: a.max_wait_failover,
            tries: 3,
            servers: servers
                .iter()
                .map(|s| ServerTimings {
                    retry_after: Duration::from_millis(u64::from(s.min_round_trip) * 4)
                        .max(Duration::from_secs(1)),
                    restart_delay: Duration::from_secs(u64::from(s.restart_delay)),
                    max_inactivity: Duration::from_secs(u64::from(s.max_inactivity)),
                })
                .collect(),
        },
        spool_dir: a.spool_path.clone().into(),
        spool_max_bytes: u64::from(a.spool_max_size) * 1024 * 1024,
        file_output: (a.file_output == FileOutput::Enabled).then(|| {
            crate::accounting::FileOutput {
                dir: a.file_path.clone().into(),
                rotation: Rotation {
                    max_file_size: a.max_file_size,
                    rotate_ms: u64::from(a.file_rotate_time) * 60_000,
                },
                max_files: usize::try_from(a.max_files).unwrap_or(usize::MAX),
            }
        }),
        refuse_calls_when_full: a.spool_full_action == SpoolFullAction::RefuseCalls,
        memory_window: accounting_memory_window(),
    })
}

/// Undelivered accounting records held in memory, at most: [`sbc_accounting::window::WINDOW`].
/// Not a configuration key (Oracle's `account-config` has none); the tests make it small
/// through the environment variable `SBC_ACCOUNTING_MEMORY_WINDOW`.
fn accounting_memory_window() -> usize {
    std::env::var("SBC_ACCOUNTING_MEMORY_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(sbc_accounting::window::WINDOW)
}

/// What the engines generate for accounting (`None`: nothing).
fn accounting_policy(cfg: &Config) -> Option<sbc_proto::engine::AccountingPolicy> {
    use sbc_config::{GenerateInterim, GenerateStart};
    use sbc_proto::engine::{AccountingPolicy, StartAt};
    let a = &cfg.account;
    a.enabled().then(|| AccountingPolicy {
        node: cfg.system.hostname.clone(),
        start_at: match a.generate_start {
            GenerateStart::None => StartAt::Never,
            GenerateStart::Invite => StartAt::Invite,
            GenerateStart::Ok => StartAt::Answer,
        },
        interim_on_reinvite: a.generate_interim == GenerateInterim::ReinviteResponse,
        interim_period_ms: u64::from(a.intermediate_period) * 1000,
    })
}

/// Everything the SIP runtime starts with: the engines, media anchoring, the interfaces, the
/// worker groups, the edge's live settings and TLS.
///
/// # Errors
/// The engine's view or an autoscaling profile cannot be built (a validated configuration
/// builds).
pub fn runtime(cfg: &Config) -> anyhow::Result<RuntimeSettings> {
    let s = &cfg.sip_config;
    Ok(RuntimeSettings {
        accounting: accounting(cfg),
        engine: engine_config(cfg)?,
        media: media_plan(cfg),
        listeners: cfg
            .sip_interfaces
            .iter()
            .map(|i| Listener {
                realm: i.key(),
                address: i.socket_addr(),
                udp: i.transports.contains(&Transport::Udp),
                tcp: i.transports.contains(&Transport::Tcp),
                tls: i.has(Transport::Tls).then(|| i.addr_of(Transport::Tls)),
                transports: i
                    .transports
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join("+"),
            })
            .collect(),
        work: work_settings(cfg),
        autoscale_cycle: Duration::from_millis(s.auto_scaling_cycle_ms.max(1)),
        udp_workers: s.workers,
        udp_profiles: cfg
            .sip_interfaces
            .iter()
            .map(|i| profile_named(cfg, i.auto_scaling_profile.as_deref()))
            .collect::<anyhow::Result<_>>()?,
        tcp_workers: s.tcp_workers,
        tcp_profile: profile_named(cfg, s.tcp_auto_scaling_profile.as_deref())?,
        live: live(cfg),
        tls: tls(cfg),
        shutdown_grace: Duration::from_millis(s.shutdown_grace_ms),
        max_message_size: s.max_message_size,
        retry_after: (s.retry_after_min, s.retry_after_max),
        registration: registration_settings(cfg),
    })
}

/// What `activate-config` changes at the edge without a restart: TCP and TLS limits, source
/// rates and access-control lists, the media manager's timing.
#[must_use]
pub fn live(cfg: &Config) -> LiveSettings {
    LiveSettings {
        edge: tcp_edge(cfg),
        access: access(cfg),
        media_timing: media_timing(cfg),
        trace: trace(cfg),
    }
}

/// The TCP and TLS edges' limits (`sip-config` `tcp-*`, `max-message-size`,
/// `tls-handshake-timeout-ms`) and the session agents, exempt from the per-source cap.
#[must_use]
pub fn tcp_edge(cfg: &Config) -> EdgeSettings {
    let s = &cfg.sip_config;
    EdgeSettings {
        limits: TcpSettings {
            max_message: s.max_message_size,
            max_connections: s.tcp_max_connections,
            max_per_source: s.tcp_max_connections_per_source,
            source_ipv6_prefix: s.source_ipv6_prefix_length,
            message_timeout: Duration::from_millis(s.tcp_message_timeout_ms),
            idle_timeout: Duration::from_millis(s.tcp_idle_timeout_ms),
            write_queue_bytes: s.tcp_write_queue_bytes,
            write_timeout: Duration::from_millis(s.tcp_write_timeout_ms),
            handshake_timeout: Duration::from_millis(s.tls_handshake_timeout_ms),
        },
        // Peers are canonical (IPv4-mapped addresses made IPv4), so are the agents.
        trusted: cfg
            .session_agents
            .iter()
            .filter(|a| a.dns_name().is_none())
            .map(|a| a.ip().to_canonical())
            .collect(),
    }
}

/// The TLS profiles, each interface's listener profile and the TLS session agents.
#[must_use]
pub fn tls(cfg: &Config) -> TlsSettings {
    TlsSettings {
        profiles: cfg
            .tls_profiles
            .iter()
            .map(|p| TlsProfile {
                name: p.name.clone(),
                end_entity_certificate: p.end_entity_certificate.clone(),
                private_key: p.private_key.clone(),
                trusted_ca_certificates: p.trusted_ca_certificates.clone(),
                mutual_authenticate: p.mutual_authenticate,
                verify_names: p.verify_names.clone(),
                tls_version: match p.tls_version {
                    sbc_config::TlsVersion::Compatibility => TlsVersion::Compatibility,
                    sbc_config::TlsVersion::Tlsv12 => TlsVersion::Tlsv12,
                    sbc_config::TlsVersion::Tlsv13 => TlsVersion::Tlsv13,
                },
                expiry_warning_days: p.expiry_warning_days,
            })
            .collect(),
        interfaces: cfg
            .sip_interfaces
            .iter()
            .map(|i| {
                i.has(Transport::Tls)
                    .then(|| i.tls_profile.clone())
                    .flatten()
            })
            .collect(),
        agents: cfg
            .session_agents
            .iter()
            .filter(|a| a.transport == Transport::Tls)
            .map(|a| TlsAgent {
                name: a.name.clone(),
                address: a.socket_addr(),
                profile: a.tls_profile.clone().unwrap_or_default(),
                server_name: a.tls_server_name.clone(),
            })
            .collect(),
    }
}

/// The router of a validated configuration: every enabled session-agent (with the interface
/// that faces it, its hostname, attempt expiry, health and limits), every enabled
/// session-agent-group, the `local-policy` table (with `session-router`'s compatibility rows:
/// one routing path) and the `local-routing-config` files, each read and checked here.
pub fn router(cfg: &Config) -> anyhow::Result<Router> {
    let default_expiry = Duration::from_secs(u64::from(cfg.sip_config.initial_inv_trans_expire));
    let mut agents = Vec::new();
    for agent in cfg.session_agents.iter().filter(|a| a.state.is_enabled()) {
        let out = cfg
            .agent_interface(agent)
            .with_context(|| format!("session-agent {} has no interface", agent.name))?;
        if !cfg.sip_interfaces[out]
            .transports
            .contains(&agent.transport)
        {
            anyhow::bail!(
                "session-agent {} uses {} but sip-interface {} does not offer it",
                agent.name,
                agent.transport,
                agent.realm
            );
        }
        let secs = |s: u32| Duration::from_secs(u64::from(s));
        // An agent resolved by DNS starts at an unspecified address of its interface's
        // family (out of service until the name resolves: see `crate::dns`).
        let addr = match agent.dns_name() {
            Some(_) if cfg.sip_interfaces[out].address.is_ipv6() => {
                std::net::SocketAddr::new(std::net::Ipv6Addr::UNSPECIFIED.into(), agent.port)
            }
            Some(_) => {
                std::net::SocketAddr::new(std::net::Ipv4Addr::UNSPECIFIED.into(), agent.port)
            }
            None => agent.socket_addr(),
        };
        agents.push(RouteAgent {
            dns: agent.dns_name().map(|name| DnsName {
                name: name.to_owned(),
                port: agent.port,
            }),
            hop: NextHop {
                name: agent.name.clone(),
                addr,
                transport: leg_transport(agent.transport),
                interface: out,
                max_udp_length: usize::from(agent.max_udp_length),
            },
            hostname: agent.hostname.clone(),
            ping_method: agent.ping_method.clone(),
            in_translation: session_translation(cfg, agent.in_translationid.as_deref()),
            out_translation: session_translation(cfg, agent.out_translationid.as_deref()),
            refer_call_transfer: agent.refer_call_transfer
                == sbc_config::ReferCallTransfer::Enabled,
            attempt_expiry: match agent.invite_trans_expire {
                0 => default_expiry,
                s => secs(s),
            },
            health: AgentPolicy {
                ping_interval: (agent.ping_interval > 0).then(|| secs(agent.ping_interval)),
                ping_timeout: Duration::from_millis(u64::from(agent.ping_response_timeout_ms)),
                ping_misses: u32::from(agent.ping_misses),
                send_mode: match agent.ping_send_mode {
                    sbc_config::PingSendMode::KeepAlive => PingSendMode::KeepAlive,
                    sbc_config::PingSendMode::Continuous => PingSendMode::Continuous,
                },
                in_service_codes: agent.ping_in_service_response_codes.clone(),
                out_service_codes: agent.out_service_response_codes.clone(),
                trans_timeouts: agent.trans_timeouts,
                time_to_resume: (agent.time_to_resume > 0).then(|| secs(agent.time_to_resume)),
                max_sessions: agent.max_sessions,
                max_outbound_sessions: agent.max_outbound_sessions,
                max_burst_rate: agent.max_burst_rate,
            },
        });
    }
    let index_of = |name: &str| agents.iter().position(|a| a.hop.name == name);
    let groups: Vec<RouteGroup> = cfg
        .session_agent_groups
        .iter()
        .filter(|g| g.state.is_enabled())
        .map(|g| RouteGroup {
            name: g.group_name.clone(),
            strategy: match g.strategy {
                SagStrategy::Hunt => GroupStrategy::Hunt,
                SagStrategy::RoundRobin => GroupStrategy::RoundRobin,
                SagStrategy::LeastBusy => GroupStrategy::LeastBusy,
                SagStrategy::PropDist => GroupStrategy::PropDist,
            },
            dests: g.dest.iter().filter_map(|d| index_of(d)).collect(),
            recursion: g.sag_recursion,
            stop_recurse: g.stop_sag_recurse.clone(),
        })
        .collect();
    let known = |next_hop: &str| {
        index_of(next_hop).is_some()
            || next_hop
                .get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case("SAG:"))
                && groups
                    .iter()
                    .any(|g| g.name.eq_ignore_ascii_case(&next_hop[4..]))
    };
    let mut policies = Vec::new();
    for p in cfg
        .effective_local_policies()
        .iter()
        .filter(|p| p.state.is_enabled())
    {
        // A disabled agent or group is left out of the attributes that name it.
        let attributes: Vec<PolicyAttribute> = p
            .policy_attributes
            .iter()
            .filter(|a| known(&a.next_hop))
            .map(|a| PolicyAttribute {
                next_hop: a.next_hop.clone(),
                realm: a.realm.clone(),
                cost: a.cost,
                start: a.start().unwrap_or(0),
                end: a.end().unwrap_or(2400),
                days: a.days().and_then(Days::from_bits).unwrap_or(Days::ALL),
                terminate_recursion: a.terminate_recursion,
                enabled: a.state.is_enabled(),
            })
            .collect();
        for from in &p.from_address {
            for to in &p.to_address {
                for realm in &p.source_realm {
                    policies.push(LocalPolicy {
                        from: AddressPattern::parse(from),
                        to: AddressPattern::parse(to),
                        source_realm: (realm != "*").then(|| realm.clone()),
                        enabled: true,
                        attributes: attributes.clone(),
                    });
                }
            }
        }
    }
    let mut files = Vec::new();
    for lrt in cfg
        .local_routing_configs
        .iter()
        .filter(|l| l.state.is_enabled())
    {
        let file = std::fs::File::open(&lrt.file_name).with_context(|| {
            format!(
                "local-routing-config {}: cannot open {}",
                lrt.name, lrt.file_name
            )
        })?;
        let realms = lrt
            .source_realm
            .iter()
            .filter(|r| *r != "*")
            .cloned()
            .collect();
        let table = load_route_file(std::io::BufReader::new(file), realms)
            .with_context(|| format!("local-routing-config {} ({})", lrt.name, lrt.file_name))?;
        files.push((lrt.name.clone(), table));
    }
    let realms = cfg
        .sip_interfaces
        .iter()
        .map(|iface| {
            let realm = cfg.realm_config(&iface.realm);
            RealmTranslations {
                inbound: session_translation(
                    cfg,
                    realm.and_then(|r| r.in_translationid.as_deref()),
                ),
                outbound: session_translation(
                    cfg,
                    realm.and_then(|r| r.out_translationid.as_deref()),
                ),
            }
        })
        .collect();
    Ok(
        Router::with_files(agents, groups, policies, files, std::time::Instant::now())?
            .with_realm_translations(realms),
    )
}

/// The `session-translation` `id` names, with its rules in order (a rule validation let
/// through always exists).
fn session_translation(cfg: &Config, id: Option<&str>) -> Option<Arc<SessionTranslation>> {
    let t = cfg.session_translation(id?)?;
    let rules = |ids: &[String]| -> Vec<TranslationRule> {
        ids.iter()
            .filter_map(|id| cfg.translation_rule(id))
            .map(|r| {
                let index = |i: sbc_config::TranslationIndex| match i {
                    sbc_config::TranslationIndex::At(n) => {
                        StringIndex::At(usize::try_from(n).unwrap_or(usize::MAX))
                    }
                    sbc_config::TranslationIndex::End => StringIndex::End,
                };
                TranslationRule {
                    kind: match r.kind {
                        sbc_config::TranslationType::Add => RuleKind::Add,
                        sbc_config::TranslationType::Delete => RuleKind::Delete,
                        sbc_config::TranslationType::Replace => RuleKind::Replace,
                        sbc_config::TranslationType::None => RuleKind::None,
                    },
                    add_string: r.add_string.clone(),
                    add_index: index(r.add_index),
                    delete_string: r.delete_string.clone(),
                    delete_index: index(r.delete_index),
                }
            })
            .collect()
    };
    Some(Arc::new(SessionTranslation {
        calling: rules(&t.rules_calling),
        called: rules(&t.rules_called),
    }))
}

/// Builds the engine's view of a validated configuration.
pub fn engine_config(cfg: &Config) -> anyhow::Result<EngineConfig> {
    let interfaces: Vec<Interface> = cfg
        .sip_interfaces
        .iter()
        .map(|i| Interface {
            realm: i.realm.clone(),
            addr: i.socket_addr(),
            tls_addr: i.has(Transport::Tls).then(|| i.addr_of(Transport::Tls)),
        })
        .collect();
    let router = router(cfg)?;
    let s = &cfg.sip_config;
    Ok(EngineConfig {
        interfaces,
        router: Arc::new(router),
        timers: Timers {
            t1: Duration::from_millis(s.t1_ms),
            t2: Duration::from_millis(s.t2_ms),
            t4: Duration::from_millis(s.t4_ms),
        },
        timer_c: Duration::from_millis(s.timer_c_ms),
        max_message_size: s.max_message_size,
        max_header_size: s.max_header_size,
        source_policy: match s.in_dialog_source {
            sbc_config::InDialogSource::Address => SourcePolicy::Address,
            sbc_config::InDialogSource::Ip => SourcePolicy::Ip,
            sbc_config::InDialogSource::Any => SourcePolicy::Any,
        },
        agents: cfg.session_agents.iter().map(|a| a.socket_addr()).collect(),
        max_calls: s.max_calls.div_ceil(SHARDS),
        max_transactions: s.max_transactions.div_ceil(SHARDS),
        // The node's media table, fixed at start, is attached by the runtime.
        media: None,
        trace: trace_on(cfg),
        replicate_dialogs: cfg.redundancy.is_enabled(),
        // The node's trace switch, its trace thread's, is attached by the runtime.
        trace_switch: None,
        registration: Registrations {
            // The node's cache, kept across activations, is attached by the runtime.
            cache: None,
            interfaces: cfg
                .sip_interfaces
                .iter()
                .map(|i| InterfaceRegistration {
                    caching: i.registration_caching,
                    nat: match i.nat_traversal {
                        sbc_config::NatTraversal::None => NatTraversal::Off,
                        sbc_config::NatTraversal::Rport => NatTraversal::Rport,
                        sbc_config::NatTraversal::Always => NatTraversal::Always,
                    },
                    allow_anonymous: match cfg
                        .realm_config(&i.realm)
                        .map(|r| r.allow_anonymous)
                        .unwrap_or_default()
                    {
                        sbc_config::AllowAnonymous::All => AllowAnonymous::All,
                        sbc_config::AllowAnonymous::AgentsOnly => AllowAnonymous::AgentsOnly,
                        sbc_config::AllowAnonymous::Registered => AllowAnonymous::Registered,
                    },
                })
                .collect(),
        },
        session_policies: cfg
            .sip_interfaces
            .iter()
            .map(|i| session_policy(cfg, &i.realm))
            .collect(),
        subscription_sources: SubscriptionSources {
            // The node's counts, kept across activations, are attached by the runtime.
            counts: Arc::default(),
            per_source: s.max_subscriptions_per_source,
            ipv6_prefix_len: s.source_ipv6_prefix_length,
        },
        accounting: accounting_policy(cfg),
    })
}

/// What realm `realm`'s `realm-config` bounds its calls by: its `session-timer-profile` and
/// `session-max-life-limit`.
fn session_policy(cfg: &Config, realm: &str) -> SessionPolicy {
    let realm = cfg.realm_config(realm);
    SessionPolicy {
        timer: realm
            .and_then(|r| r.session_timer_profile.as_deref())
            .and_then(|name| cfg.session_timer_profile(name))
            .map(|p| TimerProfile {
                session_expires: p.session_expires,
                min_se: p.min_se,
                sbc_refreshes_callee: p.request_refresher == sbc_config::Refresher::Uac,
                sbc_refreshes_caller: p.response_refresher == sbc_config::Refresher::Uas,
                force_reinvite: p.force_reinvite,
            }),
        max_life_secs: realm.map_or(0, |r| r.session_max_life_limit),
        refer_call_transfer: realm
            .is_some_and(|r| r.refer_call_transfer == sbc_config::ReferCallTransfer::Enabled),
    }
}

/// The registration cache's settings: the node-wide limit (`reg-cache-limit`) with the first
/// caching interface's timings, and each interface's own timings, by index.
#[must_use]
pub fn registration_settings(cfg: &Config) -> (CacheSettings, Vec<CacheSettings>) {
    let limit = usize::try_from(cfg.sip_config.reg_cache_limit).unwrap_or(usize::MAX);
    let of = |i: &sbc_config::SipInterface| CacheSettings {
        registration_interval: Duration::from_secs(u64::from(i.registration_interval)),
        min_reg_expire: Duration::from_secs(u64::from(i.min_reg_expire)),
        nat_interval: Duration::from_secs(u64::from(i.nat_interval)),
        max_bindings: limit,
    };
    let each: Vec<CacheSettings> = cfg.sip_interfaces.iter().map(of).collect();
    let default = cfg
        .sip_interfaces
        .iter()
        .position(|i| i.registration_caching)
        .and_then(|i| each.get(i).copied())
        .unwrap_or_else(|| of(&sbc_config::SipInterface::with_defaults("", 5060)));
    (default, each)
}

/// Media anchoring (`media-manager`, `steering-pool`): `None` when the media manager is
/// disabled or no realm has a steering pool (SDP then passes unchanged).
#[must_use]
pub fn media_plan(cfg: &Config) -> Option<MediaPlan> {
    if cfg.media_manager.state == MediaManagerState::Disabled || cfg.steering_pools.is_empty() {
        return None;
    }
    let MediaTiming {
        latch_window,
        latch_signalled_ip_only,
        inactivity,
    } = media_timing(cfg);
    let realms = (0..cfg.sip_interfaces.len())
        .map(|i| {
            cfg.steering_pool_for(i)
                .map(|k| (k, cfg.steering_pools[k].ip_address))
        })
        .collect();
    Some(MediaPlan {
        table: MediaSettings {
            pools: cfg
                .steering_pools
                .iter()
                .map(|p| p.start_port..=p.end_port)
                .collect(),
            latch_window,
            latch_signalled_ip_only,
            inactivity,
        },
        bindings: cfg
            .steering_pools
            .iter()
            .map(|p| PoolBinding {
                realm: p.key(),
                address: p.ip_address,
                ports: p.start_port..=p.end_port,
            })
            .collect(),
        realms,
    })
}

/// The media manager's timing, which `activate-config` changes live: the latch window (zero
/// with `latching = false`), whether latching is held to the signalled IP
/// (`restricted-latching = sdp`), and `rtp-inactivity` (`None`: off).
#[must_use]
pub fn media_timing(cfg: &Config) -> MediaTiming {
    let m = &cfg.media_manager;
    MediaTiming {
        latch_window: if m.latching {
            Duration::from_millis(m.latching_window_ms)
        } else {
            Duration::ZERO
        },
        latch_signalled_ip_only: m.restricted_latching == RestrictedLatching::Sdp,
        inactivity: (m.rtp_inactivity > 0).then(|| Duration::from_secs(m.rtp_inactivity)),
    }
}

/// The engine's name for a configured transport.
pub fn leg_transport(t: Transport) -> LegTransport {
    match t {
        Transport::Udp => LegTransport::Udp,
        Transport::Tcp => LegTransport::Tcp,
        Transport::Tls => LegTransport::Tls,
    }
}

/// The autoscaling profile named `name` in `cfg`, as the autoscaler takes it.
pub fn profile_named(cfg: &Config, name: Option<&str>) -> anyhow::Result<Option<ScalingProfile>> {
    let Some(name) = name else { return Ok(None) };
    let p = cfg
        .auto_scaling_profiles
        .iter()
        .find(|p| p.name == name)
        .with_context(|| format!("auto-scaling-profile {name} is not defined"))?;
    let profile = ScalingProfile::from_settings(
        p.scale_up_to,
        p.scale_up_on,
        p.scale_up_for,
        p.scale_up_within,
        p.scale_down_to,
        p.scale_down_on,
        p.scale_down_for,
    )
    .map_err(|e| anyhow::anyhow!("auto-scaling-profile {name}: {e}"))?;
    Ok(Some(profile))
}

/// The worker settings of `cfg`'s `sip-config`.
pub fn work_settings(cfg: &Config) -> WorkSettings {
    let s = &cfg.sip_config;
    let mut prsm = if s.prsm {
        PrsmConfig::default()
    } else {
        PrsmConfig::fifo()
    };
    prsm.primary_capacity = s.queue_size;
    prsm.secondary_capacity = s.queue_size;
    prsm.in_dialog_reserve = s.queue_size / 8;
    WorkSettings {
        prsm,
        max_queue_delay: Duration::from_millis(s.max_queue_delay_ms),
        routing_cost: Duration::from_micros(s.routing_cost_us),
        retry_after: (s.retry_after_min, s.retry_after_max),
    }
}

/// The pair's settings from `redundancy-config` (durations from its milliseconds).
pub fn redundancy(cfg: &Config) -> sbc_ha::RedundancySettings {
    let r = &cfg.redundancy;
    sbc_ha::RedundancySettings {
        state: if r.is_enabled() {
            sbc_ha::AdminState::Enabled
        } else {
            sbc_ha::AdminState::Disabled
        },
        port: r.port,
        advertisement_time: Duration::from_millis(r.advertisement_time),
        percent_drift: r.percent_drift,
        initial_time: Duration::from_millis(r.initial_time),
        becoming_active_time: Duration::from_millis(r.becoming_active_time),
        becoming_standby_time: Duration::from_millis(r.becoming_standby_time),
        health_threshold: r.health_threshold,
        emergency_threshold: r.emergency_threshold,
        peers: r
            .peers
            .iter()
            .map(|p| sbc_ha::PeerSettings {
                name: p.name.clone(),
                peer_type: match p.kind {
                    sbc_config::PeerType::Primary => sbc_ha::PeerType::Primary,
                    sbc_config::PeerType::Secondary => sbc_ha::PeerType::Secondary,
                },
                destinations: p.destinations.clone(),
            })
            .collect(),
        config_sync_port: r.config_sync_port,
        sip_sync_port: r.sip_sync_port,
        witness: r.witness,
        shared_key: r.shared_key.clone(),
    }
}

/// Everything the pair's machinery starts with: the redundancy machine's settings, this
/// node's name, the replica rules, the configuration it starts on and the transition hooks.
#[must_use]
pub fn pair(cfg: &Config) -> PairSettings {
    PairSettings {
        ha: redundancy(cfg),
        name: cfg.system.hostname.clone(),
        rules: replica_rules(cfg),
        config: activated(cfg),
        hooks: Hooks {
            active: cfg.redundancy.notify_active.clone(),
            standby: cfg.redundancy.notify_standby.clone(),
            fault: cfg.redundancy.notify_fault.clone(),
        },
    }
}

/// The pushable part of `cfg` and its version, as the pair compares and pushes it.
#[must_use]
pub fn activated(cfg: &Config) -> ActivatedConfig {
    ActivatedConfig::new(cfg.pushable_toml())
}

/// What `cfg` allows a replicated dialog to name: its interfaces' transports, its session
/// agents' interfaces, the interfaces of registered phones, its realms' steering pools.
#[must_use]
pub fn replica_rules(cfg: &Config) -> ReplicaRules {
    let interfaces = cfg
        .sip_interfaces
        .iter()
        .map(|i| {
            (
                i.has(Transport::Udp),
                i.has(Transport::Tcp),
                i.has(Transport::Tls),
            )
        })
        .collect();
    let agents = cfg
        .session_agents
        .iter()
        .filter(|a| a.dns_name().is_none())
        .filter_map(|a| {
            let iface = cfg.interface_for(&a.realm, a.ip())?;
            Some((a.socket_addr(), iface))
        })
        .collect();
    let dns_interfaces = cfg
        .session_agents
        .iter()
        .filter(|a| a.dns_name().is_some())
        .filter_map(|a| cfg.agent_interface(a))
        .collect();
    let phone_interfaces = cfg
        .sip_interfaces
        .iter()
        .enumerate()
        .filter(|(_, i)| i.registration_caching)
        .map(|(index, _)| index)
        .collect();
    let pools = (0..cfg.sip_interfaces.len())
        .map(|i| {
            let k = cfg.steering_pool_for(i)?;
            let p = &cfg.steering_pools[k];
            Some((k, p.start_port..=p.end_port))
        })
        .collect();
    ReplicaRules {
        interfaces,
        agents,
        dns_interfaces,
        phone_interfaces,
        pools,
    }
}

/// The DNS servers that resolve session-agents named by DNS (`dns-ip-primary`,
/// `dns-ip-backup1`; both `None`: the system's, from `/etc/resolv.conf`).
#[must_use]
pub fn dns_servers(cfg: &Config) -> (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>) {
    (cfg.system.dns_ip_primary, cfg.system.dns_ip_backup1)
}

/// Maps the configuration's memory source onto the sampler's.
pub fn memory_source(cfg: &Config) -> MemorySource {
    match cfg.system.memory_source {
        sbc_config::MemorySource::Host => MemorySource::Host,
        sbc_config::MemorySource::Cgroup => MemorySource::Cgroup { dir: None },
        sbc_config::MemorySource::Process => MemorySource::Process {
            limit_bytes: cfg.system.memory_limit_mb << 20,
        },
    }
}

/// How the memory figure is described in `show health`.
pub fn describe_source(cfg: &Config) -> String {
    match cfg.system.memory_source {
        sbc_config::MemorySource::Host => "host used/total".into(),
        sbc_config::MemorySource::Cgroup => "cgroup usage/memory.max".into(),
        sbc_config::MemorySource::Process => format!(
            "process resident / memory-limit-mb {}",
            cfg.system.memory_limit_mb
        ),
    }
}

/// The configuration's alarm-thresholds as the evaluator takes them.
pub fn thresholds(cfg: &Config) -> anyhow::Result<Thresholds> {
    let mut out = Vec::new();
    for t in &cfg.system.alarm_thresholds {
        let kind: AlarmKind = t.kind.as_str().parse()?;
        let severity = t.severity.as_str().parse()?;
        let mut th = Threshold::new(kind, severity, t.value).with_health_penalty(t.health_penalty);
        if !t.volume.is_empty() {
            th.volume = Some(t.volume.clone());
        }
        out.push(th);
    }
    Ok(Thresholds::new(out)?)
}

/// The node's SNMP settings: its engine ID, its SNMPv3 users, its trap receivers (v2c, or v3
/// naming their user).
#[must_use]
pub fn snmp(cfg: &Config) -> SnmpSettings {
    let system = &cfg.system;
    SnmpSettings {
        engine_id: system.engine_id(),
        users: system
            .snmp_users
            .iter()
            .map(|u| UserSettings {
                name: u.user_name.clone(),
                auth_password: u.auth_password.clone(),
                priv_password: u.priv_password.clone(),
                // Validated: every address parses.
                sources: u
                    .ip_addresses
                    .iter()
                    .filter_map(|a| sbc_config::parse_net(a).ok())
                    .collect(),
            })
            .collect(),
        // A v3 receiver without its user is left out (validation refuses it): never sent v2c
        // with a community it was not given.
        receivers: system
            .trap_receivers
            .iter()
            .filter(|r| r.version != sbc_config::SnmpVersion::V3 || r.user_name.is_some())
            .map(|r| ReceiverSettings {
                receiver: TrapReceiver {
                    address: r.socket_addr(),
                    community: r.community.clone(),
                    filter_level: match r.filter_level {
                        sbc_config::FilterLevel::All => sbc_snmp::FilterLevel::All,
                        sbc_config::FilterLevel::Minor => sbc_snmp::FilterLevel::Minor,
                        sbc_config::FilterLevel::Major => sbc_snmp::FilterLevel::Major,
                        sbc_config::FilterLevel::Critical => sbc_snmp::FilterLevel::Critical,
                        sbc_config::FilterLevel::None => sbc_snmp::FilterLevel::None,
                    },
                    v3: None,
                },
                v3_user: (r.version == sbc_config::SnmpVersion::V3)
                    .then(|| r.user_name.clone())
                    .flatten(),
            })
            .collect(),
    }
}

/// The SNMP agent's read-only v2c communities (addresses that do not parse were refused by
/// validation; any left are skipped).
#[must_use]
pub fn snmp_communities(cfg: &Config) -> Vec<Community> {
    cfg.system
        .snmp_communities
        .iter()
        .map(|c| Community {
            name: c.community_name.clone(),
            sources: c
                .ip_addresses
                .iter()
                .filter_map(|a| sbc_config::parse_net(a).ok())
                .collect(),
        })
        .collect()
}

/// The alarm service's settings: the evaluator and samplers, `critical-memory-abort`, the
/// hostname, the 503s' Retry-After, SNMP.
///
/// # Errors
/// A threshold the evaluator refuses (validation refuses it first).
pub fn alarm_service(cfg: &Config) -> anyhow::Result<AlarmServiceSettings> {
    let s = &cfg.system;
    Ok(AlarmServiceSettings {
        evaluation: EvaluationSettings {
            evaluator: EvaluatorConfig {
                iteration: Duration::from_millis(s.alarm_iteration_ms),
                sub_samples: s.alarm_subsamples,
                sustain: s.spike_subsamples,
                ..EvaluatorConfig::default()
            },
            thresholds: thresholds(cfg)?,
            memory_source: memory_source(cfg),
            memory_source_text: describe_source(cfg),
            heap_limit_bytes: s.heap_limit_mb << 20,
        },
        policy: match s.critical_memory_abort() {
            sbc_config::CriticalMemoryAbort::Disabled => AbortPolicy::Disabled,
            sbc_config::CriticalMemoryAbort::Enabled => AbortPolicy::Enabled,
            sbc_config::CriticalMemoryAbort::Switchover => AbortPolicy::Switchover,
        },
        hostname: s.hostname.clone(),
        retry_after: (
            cfg.sip_config.retry_after_min,
            cfg.sip_config.retry_after_max,
        ),
        snmp: snmp(cfg),
    })
}

/// The heap gate's settings: `system-config heap-limit-mb` and `sip-config
/// heap-reject-threshold` / `heap-resume-threshold`.
pub fn heap_gate(cfg: &Config) -> HeapGateSettings {
    HeapGateSettings {
        limit_bytes: cfg.system.heap_limit_mb << 20,
        reject_at: cfg.sip_config.heap_reject_threshold,
        resume_at: cfg.sip_config.heap_resume_threshold,
    }
}

/// Whether the engines trace every message: while the on-box trace (`sip-monitoring`) or HEP
/// capture (`capture-agent`) is on.
fn trace_on(cfg: &Config) -> bool {
    trace(cfg).engines_trace()
}

/// The SIP trace (`sip-monitoring`, its `filter-config`s, `capture-agent`), and what its
/// filters need of the topology: each interface's realm, each agent's address.
#[must_use]
pub fn trace(cfg: &Config) -> TraceSettings {
    let m = &cfg.sip_monitoring;
    let filter = |f: &sbc_config::FilterConfig| TraceFilter {
        user: f.user.clone(),
        address: f.network(),
        realm: f.realm.clone(),
        agent: f.session_agent.clone(),
        method: f.method.clone(),
    };
    let monitor = m.is_enabled().then(|| ConfiguredFilters {
        filters: m
            .monitoring_filters
            .iter()
            .map(|name| {
                if name == sbc_config::SipMonitoring::ALL {
                    TraceFilter::default()
                } else {
                    // Validation refuses a name that is no filter-config.
                    cfg.filter_config(name)
                        .map_or_else(TraceFilter::default, filter)
                }
            })
            .collect(),
        match_any: m.match_any_filter,
    });
    let c = &cfg.capture_agent;
    TraceSettings {
        monitor,
        ring: RingBounds {
            max_bytes: m.max_trace_bytes(),
            max_captures: usize::try_from(m.max_captures).unwrap_or(usize::MAX),
            max_messages: usize::try_from(m.max_messages_per_capture).unwrap_or(usize::MAX),
        },
        topology: Topology {
            realms: cfg.sip_interfaces.iter().map(|i| i.realm.clone()).collect(),
            agents: cfg
                .session_agents
                .iter()
                .filter(|a| a.dns_name().is_none())
                .map(|a| (a.ip(), a.name.clone()))
                .collect(),
        },
        hep: c
            .address
            .filter(|_| c.is_enabled())
            .map(|server| HepSettings {
                server,
                transport: match c.transport {
                    sbc_config::CaptureTransport::Udp => HepTransport::Udp,
                    sbc_config::CaptureTransport::Tcp => HepTransport::Tcp,
                },
                capture_id: c.capture_id,
                password: c.password.clone(),
                queue_size: usize::try_from(c.queue_size).unwrap_or(usize::MAX),
                rtcp: c.rtcp,
            }),
    }
}

#[cfg(test)]
mod tests {
    /// The leaf crates do not depend on one another, so the rules the operator's configuration
    /// is validated by (`sbc-config`) and the bounds the cores defend (`sbc-ha`,
    /// `sbc-proto`) are written in each; this is where they are held to one value.
    #[test]
    fn the_configuration_and_the_cores_agree_on_their_limits() {
        assert_eq!(
            sbc_config::MIN_SHARED_KEY_LEN,
            sbc_ha::crypto::MIN_SHARED_KEY_LEN
        );
        assert_eq!(
            sbc_config::MAX_WORKERS,
            sbc_proto::overload::autoscale::MAX_WORKERS as usize
        );
        let sip = sbc_config::SipConfig::default();
        assert_eq!(
            sip.source_ipv6_prefix_length,
            sbc_proto::access::DEFAULT_IPV6_PREFIX
        );
    }

    /// `source-ipv6-prefix-length` reaches the rate buckets and the TCP caps; session-agents
    /// written IPv4-mapped are trusted as the IPv4 peers they are.
    #[test]
    fn the_ipv6_prefix_length_reaches_access_control_and_the_tcp_caps() {
        let mut cfg = sbc_config::Config::default();
        cfg.sip_config.source_ipv6_prefix_length = 56;
        assert!(!cfg.session_agents.is_empty(), "the default agent");
        for a in &mut cfg.session_agents {
            a.address = Some("::ffff:192.0.2.9".parse().expect("address"));
        }
        assert_eq!(super::access(&cfg).ipv6_prefix, 56);
        let edge = super::tcp_edge(&cfg);
        assert_eq!(edge.limits.source_ipv6_prefix, 56);
        assert!(edge
            .trusted
            .contains(&std::net::IpAddr::from([192, 0, 2, 9])));
    }
}
