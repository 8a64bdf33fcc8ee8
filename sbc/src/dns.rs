//! The shell that resolves session-agents named by DNS (RFC 3263): it asks the DNS servers
//! of `dns-ip-primary` / `dns-ip-backup1` (else `/etc/resolv.conf`'s) what each agent's
//! [`DnsAgent`] says to ask, when it says to, and installs the answer in the router
//! ([`Node::swap_router`]). The decisions (SRV order, TTLs, backoff, which target) are
//! `sbc_proto::routing::dns`'s.
//!
//! Both nodes of a pair resolve (the standby needs the addresses when it takes over); only
//! the active pings, so only its agents leave a target that stopped answering.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::proto::rr::RData;
use hickory_resolver::TokioResolver;
use sbc_proto::routing::agent::{AgentState, OutReason};
use sbc_proto::routing::dns::{order_srv, DnsAgent, DnsQuery, SrvRecord, MAX_TARGETS};
use sbc_proto::routing::router::Router;
use tracing::{debug, info, warn};

use crate::control::context::Console;
use crate::runtime::Node;

/// How often the resolver looks at its agents (answers due, agents gone out of service).
const TICK: Duration = Duration::from_millis(250);
/// One query's deadline (each server is asked at most twice).
const QUERY_TIMEOUT: Duration = Duration::from_secs(2);

/// One resolved agent, as this task tracks it.
struct Tracked {
    resolution: DnsAgent,
    /// Pings missed when last looked at (a new miss while out of service moves the agent on
    /// to its next target).
    misses_seen: u64,
    out_seen: bool,
}

/// An agent's identity across reloads: a reload that keeps it keeps its resolution.
type AgentKey = (String, String, u16, sbc_proto::sip::dialog::LegTransport);

/// Resolves the router's DNS-named agents until the node stops.
pub async fn run(console: Arc<Console>) {
    let node = Arc::clone(&console.node);
    let mut tracked: HashMap<AgentKey, Tracked> = HashMap::new();
    let mut servers: Option<(Option<SocketAddr>, Option<SocketAddr>)> = None;
    let mut resolver: Option<TokioResolver> = None;
    let mut seen: Option<Arc<Router>> = None;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let router = node.router();
        let names: Vec<(usize, AgentKey)> = router
            .agents()
            .iter()
            .enumerate()
            .filter_map(|(i, a)| {
                let dns = a.dns.clone()?;
                Some((i, (a.hop.name.clone(), dns.name, dns.port, a.hop.transport)))
            })
            .collect();
        if names.is_empty() {
            tracked.clear();
            seen = Some(router);
            continue;
        }
        let now = Instant::now();
        if !seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, &router)) {
            // A new configuration: new servers, perhaps; agents it dropped forgotten, those
            // it kept put at the address they had at once.
            let wanted = crate::settings::dns_servers(&console.running());
            if servers != Some(wanted) {
                resolver = build_resolver(wanted);
                servers = Some(wanted);
            }
            tracked.retain(|key, _| names.iter().any(|(_, k)| k == key));
            for (index, key) in &names {
                let t = tracked.entry(key.clone()).or_insert_with(|| Tracked {
                    resolution: DnsAgent::new(&key.1, key.2, key.3, now),
                    misses_seen: 0,
                    out_seen: false,
                });
                if let Some(addr) = t.resolution.current() {
                    install(&node, *index, addr, now, &mut None);
                }
            }
            seen = Some(node.router());
        }
        let Some(resolver) = resolver.as_ref() else {
            continue;
        };
        let router = node.router();
        let family_v6 = |i: usize| router.agent(i).is_some_and(|a| a.hop.addr.is_ipv6());
        let snapshots = router.board().snapshots(now);
        for (index, key) in &names {
            let Some(t) = tracked.get_mut(key) else {
                continue;
            };
            if t.resolution.is_due(now) {
                match resolve(resolver, &t.resolution, family_v6(*index)).await {
                    Ok((targets, ttl)) => {
                        let listed: Vec<String> = targets.iter().map(ToString::to_string).collect();
                        debug!(session_agent = %key.0, name = %key.1, targets = ?listed, ttl = ttl.as_secs(), "resolved");
                        if let Some(addr) = t.resolution.answered(Instant::now(), targets, ttl) {
                            info!(session_agent = %key.0, name = %key.1, %addr, "session-agent resolved by DNS to a new address");
                            install(&node, *index, addr, Instant::now(), &mut seen);
                        }
                    }
                    Err(why) => {
                        warn!(session_agent = %key.0, name = %key.1, error = %why, "DNS resolution failed: the last answer stays in use");
                        t.resolution.failed(Instant::now(), &why);
                    }
                }
            }
            // A target that stopped answering: the next one (RFC 3263 section 4.3).
            let Some(snap) = snapshots.get(*index) else {
                continue;
            };
            let out = matches!(snap.state, AgentState::OutOfService(why)
                if !matches!(why, OutReason::Disabled | OutReason::Unresolved));
            let newly_failed = out && (!t.out_seen || snap.pings_missed > t.misses_seen);
            t.out_seen = out;
            t.misses_seen = snap.pings_missed;
            if newly_failed {
                if let Some(addr) = t.resolution.rotate() {
                    info!(session_agent = %key.0, %addr, "session-agent out of service on its DNS target: trying the next one");
                    install(&node, *index, addr, Instant::now(), &mut seen);
                }
            }
        }
    }
}

/// Puts agent `index` at `addr` in the router the node uses now, and in service if it was
/// waiting for its name to resolve (retried on the next router if an activation raced it).
/// `seen` follows the swap when it was the router swapped (an activation's router that
/// raced in stays unseen, so that the next tick handles it as new).
fn install(
    node: &Node,
    index: usize,
    addr: SocketAddr,
    now: Instant,
    seen: &mut Option<Arc<Router>>,
) {
    for _ in 0..3 {
        let current = node.router();
        if current.agent(index).is_some_and(|a| a.hop.addr == addr) {
            current.board().resolved(index, now);
            return;
        }
        if node.swap_router(&current, current.with_agent_addr(index, addr)) {
            current.board().resolved(index, now);
            if seen.as_ref().is_some_and(|s| Arc::ptr_eq(s, &current)) {
                *seen = Some(node.router());
            }
            return;
        }
    }
}

/// A resolver asking `servers` (or the system's), without a cache of its own: the agents'
/// state machines keep each answer for its TTL.
fn build_resolver(servers: (Option<SocketAddr>, Option<SocketAddr>)) -> Option<TokioResolver> {
    let mut opts = ResolverOpts::default();
    opts.cache_size = 0;
    opts.timeout = QUERY_TIMEOUT;
    opts.attempts = 2;
    let config = match servers {
        (None, None) => match hickory_resolver::system_conf::read_system_conf() {
            Ok((config, _)) => config,
            Err(e) => {
                warn!(error = %e, "no dns-ip-primary and no usable /etc/resolv.conf: DNS-named session-agents stay unresolved");
                return None;
            }
        },
        (primary, backup) => {
            let mut config = ResolverConfig::from_parts(None, Vec::new(), Vec::new());
            for server in [primary, backup].into_iter().flatten() {
                let mut ns = NameServerConfig::udp_and_tcp(server.ip());
                for c in &mut ns.connections {
                    c.port = server.port();
                }
                config.add_name_server(ns);
            }
            config
        }
    };
    let mut builder = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default());
    *builder.options_mut() = opts;
    match builder.build() {
        Ok(r) => Some(r),
        Err(e) => {
            warn!(error = %e, "DNS resolver not built: DNS-named session-agents stay unresolved");
            None
        }
    }
}

/// Resolves one agent as its state machine says: SRV (then each target's addresses), or the
/// name's addresses; the addresses of the agent's interface family only. Returns the targets
/// in order and the shortest TTL of the records used.
async fn resolve(
    resolver: &TokioResolver,
    agent: &DnsAgent,
    v6: bool,
) -> Result<(Vec<SocketAddr>, Duration), String> {
    match agent.query() {
        DnsQuery::Srv(name) => {
            let lookup = resolver.srv_lookup(name.as_str()).await;
            let records: Vec<(SrvRecord, u32)> = match &lookup {
                Ok(l) => l
                    .answers()
                    .iter()
                    .filter_map(|r| match &r.data {
                        RData::SRV(srv) => Some((
                            SrvRecord {
                                priority: srv.priority,
                                weight: srv.weight,
                                port: srv.port,
                                target: srv.target.to_utf8().trim_end_matches('.').to_owned(),
                            },
                            r.ttl,
                        )),
                        _ => None,
                    })
                    .collect(),
                Err(_) => Vec::new(),
            };
            if records.is_empty() {
                // RFC 3263 4.2: no SRV records, the name's own addresses.
                return addresses(resolver, &agent.fallback(), v6).await;
            }
            let srv_ttl = records.iter().map(|(_, t)| *t).min().unwrap_or(0);
            let ordered = order_srv(records.into_iter().map(|(r, _)| r).collect(), &mut |n| {
                rand::Rng::gen_range(&mut rand::thread_rng(), 0..=n)
            });
            let mut targets = Vec::new();
            let mut ttl = Duration::from_secs(u64::from(srv_ttl));
            for record in ordered {
                if targets.len() >= MAX_TARGETS {
                    break;
                }
                let query = DnsQuery::Address {
                    name: record.target.clone(),
                    port: record.port,
                };
                if let Ok((found, t)) = addresses(resolver, &query, v6).await {
                    targets.extend(found);
                    ttl = ttl.min(t);
                }
            }
            if targets.is_empty() {
                return Err(format!("{name}: no SRV target has an address"));
            }
            Ok((targets, ttl))
        }
        query @ DnsQuery::Address { .. } => addresses(resolver, &query, v6).await,
    }
}

/// The A (or AAAA, for an IPv6 interface) records of `query`'s name, at its port.
async fn addresses(
    resolver: &TokioResolver,
    query: &DnsQuery,
    v6: bool,
) -> Result<(Vec<SocketAddr>, Duration), String> {
    let DnsQuery::Address { name, port } = query else {
        return Err("not an address query".into());
    };
    // A trailing dot: the name is absolute (no search domains appended).
    let absolute = format!("{}.", name.trim_end_matches('.'));
    let lookup = if v6 {
        resolver.ipv6_lookup(absolute.as_str()).await
    } else {
        resolver.ipv4_lookup(absolute.as_str()).await
    }
    .map_err(|e| format!("{name}: {e}"))?;
    let mut ttl = u32::MAX;
    let found: Vec<SocketAddr> = lookup
        .answers()
        .iter()
        .filter_map(|r| {
            let ip: IpAddr = match &r.data {
                RData::A(a) => a.0.into(),
                RData::AAAA(a) => a.0.into(),
                _ => return None,
            };
            ttl = ttl.min(r.ttl);
            Some(SocketAddr::new(ip, *port))
        })
        .collect();
    if found.is_empty() {
        return Err(format!("{name}: no address record"));
    }
    Ok((found, Duration::from_secs(u64::from(ttl))))
}
