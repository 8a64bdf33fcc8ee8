//! The router the engine asks where a new request goes: the `local-policy` table, the
//! `session-agent`s and `session-agent-group`s it names, resolved once per configuration
//! into the ordered list of agents a request is offered to ([`Router::plan`]).
//!
//! The plan is static: built from the table's route preference and the groups' strategies
//! against the agents' live state at the time (the caller says which agents may take a new
//! session now). Each attempt is admitted again when it is made, since an agent may go out
//! of service, or reach its limits, while the request hunts.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::agent::AgentPolicy;
use super::board::{AgentBoard, AgentHandle};
use super::local_policy::{self, LocalPolicy, PolicyAttribute, RouteQuery};
use super::route_file::RouteFile;
use super::table::RouteTable;
use super::translation::SessionTranslation;
use crate::sip::dialog::LegTransport;

/// Where one agent's new requests are sent, as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    /// Session-agent name.
    pub name: String,
    /// Its address.
    pub addr: SocketAddr,
    /// Transport toward it.
    pub transport: LegTransport,
    /// Index of the interface that faces it.
    pub interface: usize,
    /// Over UDP: a new request larger than this many bytes goes over TCP instead (RFC 3261
    /// section 18.1.1), and its dialog stays on TCP; 0 never switches.
    pub max_udp_length: usize,
}

/// A `session-agent` as routing needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteAgent {
    /// Where its requests go.
    pub hop: NextHop,
    /// `hostname`: the Request-URI host of a request whose caller named an IP address
    /// (`None`: the agent's address and port).
    pub hostname: Option<String>,
    /// How long a new request sent to it waits for a first response (even 100) before the
    /// next candidate is tried (`invite-trans-expire`, else `sip-config`'s
    /// `initial-inv-trans-expire`).
    pub attempt_expiry: Duration,
    /// `ping-method`: the method of its health pings (OPTIONS).
    pub ping_method: String,
    /// `in-translationid`: numbers translated in requests that come from it, before routing.
    pub in_translation: Option<Arc<SessionTranslation>>,
    /// `out-translationid`: numbers translated in requests sent to it, after routing.
    pub out_translation: Option<Arc<SessionTranslation>>,
    /// `refer-call-transfer enabled`: the SBC performs the transfers its in-dialog REFERs ask
    /// for (as its realm's `refer-call-transfer` would).
    pub refer_call_transfer: bool,
    /// Its health and admission settings (pings, `out-service-response-codes`, limits); its
    /// `out-service-response-codes` also make a request try the next candidate (besides 503,
    /// a timeout and a transport failure).
    pub health: AgentPolicy,
    /// The DNS name its address comes from (RFC 3263, see [`super::dns`]); `None`: a
    /// configured address. Until the name resolves, the agent is out of service
    /// ([`super::agent::OutReason::Unresolved`]) and `hop.addr` a placeholder.
    pub dns: Option<super::dns::DnsName>,
}

impl RouteAgent {
    /// An agent with nothing but its next hop set: its address as Request-URI host, the
    /// given attempt expiry, Oracle's default health settings (no pings, no limits).
    #[must_use]
    pub fn at(hop: NextHop, attempt_expiry: Duration) -> Self {
        Self {
            hop,
            hostname: None,
            attempt_expiry,
            ping_method: "OPTIONS".to_owned(),
            in_translation: None,
            out_translation: None,
            refer_call_transfer: false,
            health: AgentPolicy::default(),
            dns: None,
        }
    }

    /// The host (and port, for an address) its Request-URIs carry when the caller named no
    /// domain.
    #[must_use]
    pub fn uri_host(&self) -> String {
        match &self.hostname {
            Some(h) => h.clone(),
            None => self.hop.addr.to_string(),
        }
    }
}

pub use super::group::Strategy as GroupStrategy;

/// A `session-agent-group` as routing needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteGroup {
    /// `group-name` (a policy names it `SAG:<group-name>`).
    pub name: String,
    /// `strategy`.
    pub strategy: GroupStrategy,
    /// `dest`: agents, by index into [`Router`]'s agents.
    pub dests: Vec<usize>,
    /// `sag-recursion`: a failed attempt goes on to the group's next agent (else only the
    /// group's first choice is tried).
    pub recursion: bool,
    /// `stop-sag-recurse`: final responses that end the hunt.
    pub stop_recurse: Vec<u16>,
}

/// One agent a request is offered to, in the order of [`Router::plan`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// The agent (index into the router's agents).
    pub agent: usize,
    /// The group it was chosen from, if any.
    pub group: Option<usize>,
    /// `terminate-recursion`: when this attempt fails, no further candidate is tried.
    pub terminate: bool,
}

/// A next hop a policy names: an agent, or a group (`SAG:<name>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Agent(usize),
    Group(usize),
}

/// `sip-config`'s default `initial-inv-trans-expire`: how long a new request waits for a
/// first response from an agent before the next candidate is tried.
pub const DEFAULT_ATTEMPT_EXPIRY: Duration = Duration::from_secs(4);

/// How many agents a plan offers a request to at most (a bound on the work of one request,
/// whatever the table holds).
pub const MAX_ATTEMPTS: usize = 16;

/// The routing configuration, immutable once built (a reload builds a new one).
#[derive(Debug, Clone)]
pub struct Router {
    /// The policies and route files, indexed by `to-address` prefix.
    table: Arc<RouteTable>,
    /// Each route file's name (`local-routing-config`), in the table's order.
    file_names: Vec<String>,
    /// What each `next-hop` names (agents by name, groups as lower-case `sag:<name>`).
    targets: HashMap<String, Target>,
    agents: Vec<RouteAgent>,
    groups: Vec<RouteGroup>,
    /// The agents' live state, shared by every engine.
    board: Arc<AgentBoard>,
    /// Per interface (by index): its realm's `in-translationid` and `out-translationid`.
    realm_translations: Vec<RealmTranslations>,
}

/// A realm's translations (`realm-config`), as the interfaces of that realm apply them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RealmTranslations {
    /// `in-translationid`: new requests arriving in the realm, before routing (unless they
    /// come from a session-agent with its own).
    pub inbound: Option<Arc<SessionTranslation>>,
    /// `out-translationid`: new requests sent into the realm, after routing (unless their
    /// session-agent has its own).
    pub outbound: Option<Arc<SessionTranslation>>,
}

impl Default for Router {
    /// A router with no route: every new request gets 404.
    fn default() -> Self {
        Self {
            table: Arc::new(RouteTable::new(Vec::new(), Vec::new())),
            file_names: Vec::new(),
            targets: HashMap::new(),
            agents: Vec::new(),
            groups: Vec::new(),
            board: Arc::default(),
            realm_translations: Vec::new(),
        }
    }
}

/// A `local-policy` names a next hop the router does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("local-policy next-hop {0:?} names no session-agent or session-agent-group")]
pub struct UnknownNextHop(pub String);

impl Router {
    /// A router over `agents`, `groups` and the `policies` naming them by `next-hop` (an
    /// agent's name, or `SAG:<group-name>`).
    ///
    /// # Errors
    /// [`UnknownNextHop`] for a `next-hop` that names nothing.
    pub fn new(
        agents: Vec<RouteAgent>,
        groups: Vec<RouteGroup>,
        policies: Vec<LocalPolicy>,
        now: Instant,
    ) -> Result<Self, UnknownNextHop> {
        Self::with_files(agents, groups, policies, Vec::new(), now)
    }

    /// [`Router::new`] with large route files (`local-routing-config`, each with its name)
    /// beside the policies.
    ///
    /// # Errors
    /// [`UnknownNextHop`] for a `next-hop` (of a policy or a file's row) that names nothing.
    pub fn with_files(
        agents: Vec<RouteAgent>,
        groups: Vec<RouteGroup>,
        policies: Vec<LocalPolicy>,
        files: Vec<(String, RouteFile)>,
        now: Instant,
    ) -> Result<Self, UnknownNextHop> {
        let (file_names, files): (Vec<String>, Vec<RouteFile>) = files.into_iter().unzip();
        let mut targets: HashMap<String, Target> = HashMap::new();
        for (i, a) in agents.iter().enumerate() {
            targets
                .entry(a.hop.name.clone())
                .or_insert(Target::Agent(i));
        }
        for (i, g) in groups.iter().enumerate() {
            targets
                .entry(format!("sag:{}", g.name.to_ascii_lowercase()))
                .or_insert(Target::Group(i));
        }
        let known = |next_hop: &str| -> Result<(), UnknownNextHop> {
            if resolve(&targets, next_hop).is_some() {
                Ok(())
            } else {
                Err(UnknownNextHop(next_hop.to_owned()))
            }
        };
        for p in &policies {
            for a in &p.attributes {
                known(&a.next_hop)?;
            }
        }
        for f in &files {
            for row in f.rows() {
                known(row.next_hop)?;
            }
        }
        let board = Arc::new(AgentBoard::new(
            agents.iter().map(|a| a.health.clone()).collect(),
            groups.len(),
            now,
        ));
        for (i, a) in agents.iter().enumerate() {
            if a.dns.is_some() {
                board.unresolved(i, now);
                // Not a change anyone is told about: the agent starts that way.
                board.drop_transitions(i);
            }
        }
        Ok(Self {
            table: Arc::new(RouteTable::new(policies, files)),
            file_names,
            targets,
            agents,
            groups,
            board,
            realm_translations: Vec::new(),
        })
    }

    /// The router of a fixed next hop per ingress realm (`routes[i]`: where requests arriving
    /// on interface `i`, of realm `realms[i]`, go), the engine's tests' and benchmarks' form.
    #[must_use]
    pub fn per_realm(realms: &[&str], routes: Vec<Option<RouteAgent>>, now: Instant) -> Self {
        let mut agents: Vec<RouteAgent> = Vec::new();
        let mut policies = Vec::new();
        for (realm, agent) in realms.iter().zip(routes) {
            let Some(agent) = agent else { continue };
            let name = agent.hop.name.clone();
            if !agents.iter().any(|a| a.hop.name == name) {
                agents.push(agent);
            }
            policies.push(LocalPolicy {
                from: local_policy::AddressPattern::Any,
                to: local_policy::AddressPattern::Any,
                source_realm: Some((*realm).to_owned()),
                enabled: true,
                attributes: vec![attribute_to(&name)],
            });
        }
        // Agents are unique by name, so every next hop resolves.
        Self::new(agents, Vec::new(), policies, now).unwrap_or_default()
    }

    /// The router sending everything that arrives in `realm` to `hop` (its attempt expiry
    /// [`DEFAULT_ATTEMPT_EXPIRY`]).
    #[must_use]
    pub fn from_realm(realm: &str, hop: NextHop, now: Instant) -> Self {
        Self::per_realm(
            &[realm],
            vec![Some(RouteAgent::at(hop, DEFAULT_ATTEMPT_EXPIRY))],
            now,
        )
    }

    /// The agents' live state.
    #[must_use]
    pub fn board(&self) -> &Arc<AgentBoard> {
        &self.board
    }

    /// This router with the realms' translations, per interface index.
    #[must_use]
    pub fn with_realm_translations(mut self, per_interface: Vec<RealmTranslations>) -> Self {
        self.realm_translations = per_interface;
        self
    }

    /// The translation of a new request arriving on `interface` from `source`: the sending
    /// session-agent's `in-translationid`, else the realm's.
    #[must_use]
    pub fn inbound_translation(
        &self,
        interface: usize,
        source: SocketAddr,
    ) -> Option<&Arc<SessionTranslation>> {
        self.agent_at(source)
            .and_then(|a| a.in_translation.as_ref())
            .or_else(|| self.realm_translations.get(interface)?.inbound.as_ref())
    }

    /// The translation of a new request sent to `agent`: its `out-translationid`, else its
    /// realm's.
    #[must_use]
    pub fn outbound_translation(&self, agent: &RouteAgent) -> Option<Arc<SessionTranslation>> {
        agent
            .out_translation
            .as_ref()
            .or_else(|| {
                self.realm_translations
                    .get(agent.hop.interface)?
                    .outbound
                    .as_ref()
            })
            .cloned()
    }

    /// A copy of this router in which agent `index` is reached at `addr` (its DNS name
    /// resolved to it), sharing the table, the groups and the board: the agent's live state
    /// and sessions carry over, and dialogs already set up keep the address they had.
    #[must_use]
    pub fn with_agent_addr(&self, index: usize, addr: SocketAddr) -> Self {
        let mut next = self.clone();
        if let Some(agent) = next.agents.get_mut(index) {
            agent.hop.addr = addr;
        }
        next
    }

    /// Agent `index` on this router's board.
    #[must_use]
    pub fn handle(&self, index: usize) -> AgentHandle {
        AgentHandle {
            board: Arc::clone(&self.board),
            index,
        }
    }

    /// The agents `query` is offered to at `now`, in order (see [`Router::plan_with`]): each
    /// group ordered by its strategy against the agents' live state; agents named directly
    /// are listed whatever their state (admission, when the attempt is made, decides).
    #[must_use]
    pub fn plan(&self, query: &RouteQuery<'_>, now: Instant) -> Vec<Attempt> {
        let board = &self.board;
        let groups = &self.groups;
        self.plan_with(
            query,
            |_| true,
            |group| {
                let index = groups
                    .iter()
                    .position(|g| std::ptr::eq(g, group))
                    .unwrap_or(usize::MAX);
                board.order_group(index, group.strategy, &group.dests, now)
            },
        )
    }

    /// The agents, indexed as [`Attempt::agent`].
    #[must_use]
    pub fn agents(&self) -> &[RouteAgent] {
        &self.agents
    }

    /// The agent requests from `source` come from, if any: one at that address and port, else
    /// the first at that IP.
    #[must_use]
    pub fn agent_at(&self, source: SocketAddr) -> Option<&RouteAgent> {
        self.agents
            .iter()
            .find(|a| a.hop.addr == source)
            .or_else(|| self.agents.iter().find(|a| a.hop.addr.ip() == source.ip()))
    }

    /// The agent at `index`.
    #[must_use]
    pub fn agent(&self, index: usize) -> Option<&RouteAgent> {
        self.agents.get(index)
    }

    /// The groups, indexed as [`Attempt::group`].
    #[must_use]
    pub fn groups(&self) -> &[RouteGroup] {
        &self.groups
    }

    /// The policies.
    #[must_use]
    pub fn policies(&self) -> &[LocalPolicy] {
        self.table.policies()
    }

    /// The route files with their names (`local-routing-config`), in the table's order.
    pub fn route_files(&self) -> impl Iterator<Item = (&str, &RouteFile)> {
        self.file_names
            .iter()
            .map(String::as_str)
            .zip(self.table.files())
    }

    /// The route table (policies and route files).
    #[must_use]
    pub fn table(&self) -> &RouteTable {
        &self.table
    }

    /// The agents `query` is offered to, in order, at most [`MAX_ATTEMPTS`]: the table's
    /// candidates by route preference, each group expanded by `order_group` (which returns
    /// the group's agents able to take a new session now, in the order its strategy tries
    /// them), only its first choice unless it has `sag-recursion`; `eligible` says whether
    /// an agent named directly may take a new session now. An agent comes once, at its
    /// first place; a candidate with `terminate-recursion` ends the list.
    pub fn plan_with(
        &self,
        query: &RouteQuery<'_>,
        mut eligible: impl FnMut(usize) -> bool,
        mut order_group: impl FnMut(&RouteGroup) -> Vec<usize>,
    ) -> Vec<Attempt> {
        let mut plan: Vec<Attempt> = Vec::new();
        for route in self.table.select(query) {
            let Some(target) = resolve(&self.targets, route.next_hop) else {
                continue;
            };
            let terminate = route.terminate_recursion;
            let before = plan.len();
            match target {
                Target::Agent(agent) => {
                    if eligible(agent) && !plan.iter().any(|a| a.agent == agent) {
                        plan.push(Attempt {
                            agent,
                            group: None,
                            terminate,
                        });
                    }
                }
                Target::Group(g) => {
                    let Some(group) = self.groups.get(g) else {
                        continue;
                    };
                    let take = if group.recursion { usize::MAX } else { 1 };
                    let chosen: Vec<usize> = order_group(group)
                        .into_iter()
                        .filter(|a| !plan.iter().any(|p| p.agent == *a))
                        .take(take)
                        .collect();
                    for agent in chosen {
                        plan.push(Attempt {
                            agent,
                            group: Some(g),
                            terminate: false,
                        });
                    }
                    if terminate && plan.len() > before {
                        if let Some(last) = plan.last_mut() {
                            last.terminate = true;
                        }
                    }
                }
            }
            if plan.len() >= MAX_ATTEMPTS {
                plan.truncate(MAX_ATTEMPTS);
                break;
            }
            if terminate && plan.len() > before {
                break;
            }
        }
        plan
    }

    /// Whether a final `code` from `attempt`'s agent sends the request on to the next
    /// candidate: 503 (and a transport failure, which is one), 408 (a timeout), or one of
    /// the agent's `out-service-response-codes`; never a 2xx, a 6xx, a 3xx (relayed to the
    /// caller: `redirect-action` is not recursion) or a code of the group's
    /// `stop-sag-recurse`.
    #[must_use]
    pub fn reroutes(&self, attempt: &Attempt, code: u16) -> bool {
        if !(400..600).contains(&code) {
            return false;
        }
        if let Some(g) = attempt.group.and_then(|g| self.groups.get(g)) {
            if g.stop_recurse.contains(&code) {
                return false;
            }
        }
        code == 503
            || code == 408
            || self
                .agents
                .get(attempt.agent)
                .is_some_and(|a| a.health.out_service_codes.contains(&code))
    }
}

/// What `next_hop` names: an agent by name, or `SAG:<group>` (any case).
fn resolve(targets: &HashMap<String, Target>, next_hop: &str) -> Option<Target> {
    match next_hop.get(..4) {
        Some(p) if p.eq_ignore_ascii_case("SAG:") => targets
            .get(&format!("sag:{}", next_hop[4..].to_ascii_lowercase()))
            .copied(),
        _ => targets.get(next_hop).copied(),
    }
}

/// An attribute sending everything to `next_hop`, at any time, cost 0.
#[must_use]
pub fn attribute_to(next_hop: &str) -> PolicyAttribute {
    PolicyAttribute {
        next_hop: next_hop.to_owned(),
        realm: None,
        cost: 0,
        start: 0,
        end: 2400,
        days: local_policy::Days::ALL,
        terminate_recursion: false,
        enabled: true,
    }
}

/// The response the caller gets when every candidate failed, RFC 3261 §16.7 (6): of the
/// final responses collected (a timeout counted as 408), a 6xx if any, else the lowest
/// class, preferring within it a code other than 408 and 503; a 503 is never relayed as
/// such (it would take the SBC itself out of its callers' service, §16.7) but as 500.
#[must_use]
pub fn best_failure(codes: &[u16]) -> u16 {
    let rank = |c: u16| -> (u16, u8) {
        let class = if c >= 600 { 0 } else { c / 100 };
        let generic = u8::from(c == 408 || c == 503);
        (class, generic)
    };
    let best = codes
        .iter()
        .copied()
        .min_by_key(|c| rank(*c))
        .unwrap_or(408);
    if best == 503 {
        500
    } else {
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::local_policy::AddressPattern;

    fn hop(name: &str, port: u16) -> RouteAgent {
        RouteAgent::at(
            NextHop {
                name: name.into(),
                addr: SocketAddr::from(([127, 0, 0, 2], port)),
                transport: LegTransport::Udp,
                interface: 1,
                max_udp_length: 0,
            },
            Duration::from_secs(4),
        )
    }

    fn policy(to: &str, hops: &[(&str, u32)]) -> LocalPolicy {
        LocalPolicy {
            from: AddressPattern::Any,
            to: AddressPattern::parse(to),
            source_realm: None,
            enabled: true,
            attributes: hops
                .iter()
                .map(|(h, cost)| PolicyAttribute {
                    cost: *cost,
                    ..attribute_to(h)
                })
                .collect(),
        }
    }

    fn query(to: &str) -> RouteQuery<'_> {
        RouteQuery {
            from_user: "alice",
            to_user: to,
            source_realm: "access",
            minute: 600,
            weekday: 3,
        }
    }

    fn group(name: &str, dests: Vec<usize>, recursion: bool) -> RouteGroup {
        RouteGroup {
            name: name.into(),
            strategy: GroupStrategy::Hunt,
            dests,
            recursion,
            stop_recurse: vec![401, 407],
        }
    }

    fn agents_of(plan: &[Attempt]) -> Vec<usize> {
        plan.iter().map(|a| a.agent).collect()
    }

    #[test]
    fn plan_follows_cost_then_longest_match_and_lists_an_agent_once() {
        let router = Router::new(
            vec![hop("a", 1), hop("b", 2), hop("c", 3)],
            Vec::new(),
            vec![
                policy("*", &[("c", 0)]),
                policy("1555", &[("b", 5), ("a", 5)]),
                policy("1", &[("a", 5), ("c", 1)]),
            ],
            Instant::now(),
        )
        .expect("a valid table");
        let plan = router.plan_with(&query("15551234"), |_| true, |g| g.dests.clone());
        // cost 0 (c, *), cost 1 (c again: once), cost 5 by longest To: b, a (1555), a (1).
        assert_eq!(agents_of(&plan), vec![2, 1, 0]);
    }

    #[test]
    fn a_group_without_recursion_offers_its_first_choice_only() {
        let router = Router::new(
            vec![hop("a", 1), hop("b", 2), hop("c", 3)],
            vec![
                group("pbx", vec![0, 1], false),
                group("all", vec![0, 1, 2], true),
            ],
            vec![policy("*", &[("SAG:pbx", 0), ("sag:ALL", 1)])],
            Instant::now(),
        )
        .expect("a valid table");
        let plan = router.plan_with(&query("1"), |_| true, |g| g.dests.clone());
        assert_eq!(agents_of(&plan), vec![0, 1, 2]);
        assert_eq!(plan[0].group, Some(0));
        assert_eq!(plan[1].group, Some(1));
        // The group's order is what its strategy and the agents' state say.
        let plan = router.plan_with(
            &query("1"),
            |_| true,
            |g| g.dests.iter().rev().copied().collect(),
        );
        assert_eq!(agents_of(&plan), vec![1, 2, 0]);
    }

    #[test]
    fn ineligible_agents_are_left_out_and_terminate_recursion_ends_the_plan() {
        let mut p = policy("*", &[("a", 0), ("b", 1), ("c", 2)]);
        p.attributes[1].terminate_recursion = true;
        let router = Router::new(
            vec![hop("a", 1), hop("b", 2), hop("c", 3)],
            Vec::new(),
            vec![p],
            Instant::now(),
        )
        .expect("a valid table");
        let plan = router.plan_with(&query("1"), |a| a != 0, |g| g.dests.clone());
        assert_eq!(agents_of(&plan), vec![1]);
        assert!(plan[0].terminate);
        // An ineligible terminating candidate does not end the plan.
        let plan = router.plan_with(&query("1"), |a| a != 1, |g| g.dests.clone());
        assert_eq!(agents_of(&plan), vec![0, 2]);
    }

    #[test]
    fn an_unknown_next_hop_is_an_error() {
        let err = Router::new(
            vec![hop("a", 1)],
            Vec::new(),
            vec![policy("*", &[("SAG:x", 0)])],
            Instant::now(),
        )
        .expect_err("an unknown next hop");
        assert_eq!(err, UnknownNextHop("SAG:x".into()));
    }

    #[test]
    fn the_plan_is_bounded() {
        let agents: Vec<RouteAgent> = (0..40).map(|i| hop(&format!("a{i}"), 1000 + i)).collect();
        let names: Vec<String> = (0..40).map(|i| format!("a{i}")).collect();
        let hops: Vec<(&str, u32)> = names.iter().map(|n| (n.as_str(), 0)).collect();
        let router = Router::new(agents, Vec::new(), vec![policy("*", &hops)], Instant::now())
            .expect("a valid table");
        assert_eq!(
            router
                .plan_with(&query("1"), |_| true, |g| g.dests.clone())
                .len(),
            MAX_ATTEMPTS
        );
    }

    #[test]
    fn which_codes_reroute() {
        let mut b = hop("b", 2);
        b.health.out_service_codes = vec![500, 480];
        let router = Router::new(
            vec![hop("a", 1), b],
            vec![group("g", vec![0, 1], true)],
            vec![policy("*", &[("SAG:g", 0)])],
            Instant::now(),
        )
        .expect("a valid table");
        let direct = Attempt {
            agent: 1,
            group: None,
            terminate: false,
        };
        for (code, expected) in [
            (503, true),
            (408, true),
            (500, true),
            (480, true),
            (486, false),
        ] {
            assert_eq!(router.reroutes(&direct, code), expected, "{code}");
        }
        for code in [200, 302, 603, 180] {
            assert!(!router.reroutes(&direct, code), "{code}");
        }
        let in_group = Attempt {
            group: Some(0),
            ..direct
        };
        assert!(!router.reroutes(&in_group, 401));
        assert!(router.reroutes(&in_group, 503));
    }

    #[test]
    fn the_best_failure_follows_rfc_3261_16_7() {
        assert_eq!(best_failure(&[503, 503]), 500);
        assert_eq!(best_failure(&[503, 408]), 408);
        assert_eq!(best_failure(&[408, 503, 480]), 480);
        assert_eq!(best_failure(&[500, 404]), 404);
        assert_eq!(best_failure(&[503, 603]), 603);
        assert_eq!(best_failure(&[]), 408);
    }
}
