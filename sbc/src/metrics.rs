//! Prometheus `/metrics` (issue 17): an HTTP/1.1 listener on `system-config metrics-address`
//! (off by default) that answers `GET /metrics` in the OpenMetrics text format.
//!
//! Nothing is counted twice: each scrape takes the node's typed status ([`NodeStatus`], the
//! snapshots the console's `show sip-stats`, `show workers`, `show redundancy`, `show health`,
//! `show memory`, `display-alarms` and `show tls` format) live from the cores' counters, and
//! [`encode`], a pure function, maps it to metric families. The numbers a scrape shows are
//! therefore the numbers the console shows.
//!
//! Limits, as on every listener of the node: at most [`MAX_CONNECTIONS`] connections (more are
//! closed at once), the request head within [`HEADER_TIMEOUT`] and [`MAX_HEAD_BYTES`], one
//! request per connection (keep-alive off), each connection done within [`CONNECTION_TIMEOUT`].
//! The listener follows the running configuration: a changed or removed `metrics-address`
//! rebinds or closes it within [`crate::control::follow::CONFIG_POLL`], without a restart.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::text::encode as encode_text;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, MetricEncoder};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use sbc_alarms::AlarmRow;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::control::context::Console;
use crate::status::SessionAgentRow;
use crate::status::{
    HealthReport, MemoryReport, NodeStatus, RedundancyReport, SipStatus, TlsReport,
};
use crate::tasks::Tasks;
use crate::workers::GroupReport;

/// Connections served at once; more are closed on accept.
pub const MAX_CONNECTIONS: usize = 16;
/// The request head must arrive within this.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// A whole connection (head, collection, response) must finish within this.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// The read buffer, hence the largest request head (hyper's minimum).
pub const MAX_HEAD_BYTES: usize = 8192;
/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What one scrape reads: the node's status and how long taking it took.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    /// The node's status, taken for this scrape.
    pub status: NodeStatus,
    /// Seconds the collection took (exported as `sbc_metrics_collection_seconds`).
    pub collection_seconds: f64,
}

/// The capacity a scrape's text starts with (one scrape is about 15 kB).
const OUTPUT_CAPACITY: usize = 24 * 1024;

/// One sample's labels, in order.
type Labels = Vec<(&'static str, String)>;

/// One sample's value: a counter's total or a gauge's reading.
#[derive(Debug, Clone, Copy)]
enum Value {
    Counter(u64),
    Gauge(f64),
}

/// A metric family of one scrape: its samples in the order they were given.
#[derive(Debug)]
struct Family {
    name: String,
    /// The help text as the Prometheus registry writes it (a sentence, with its period).
    help: String,
    counter: bool,
    samples: Vec<(Labels, Value)>,
}

/// The families of one scrape, encoded by prometheus-client as a collector: no registry of
/// live metrics, no hashing of label sets, one pass over the samples.
#[derive(Debug, Default)]
struct Families(Vec<Family>);

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0 {
            let kind = if f.counter {
                MetricType::Counter
            } else {
                MetricType::Gauge
            };
            let mut metric = encoder.encode_descriptor(&f.name, &f.help, None, kind)?;
            match f.samples.as_slice() {
                // A metric without labels (a family of it would print `name{} value`).
                [(labels, value)] if labels.is_empty() => encode_value(*value, metric)?,
                samples => {
                    for (labels, value) in samples {
                        encode_value(*value, metric.encode_family(labels)?)?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn encode_value(value: Value, encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
    match value {
        Value::Counter(n) => ConstCounter::new(n).encode(encoder),
        Value::Gauge(x) => ConstGauge::new(x).encode(encoder),
    }
}

/// Builds one scrape's families: a family is created on first use, its samples follow in
/// order.
struct Builder {
    families: Families,
    /// Family name -> index in `families`.
    index: BTreeMap<String, usize>,
}

impl Builder {
    fn new() -> Self {
        Self {
            families: Families::default(),
            index: BTreeMap::new(),
        }
    }

    fn sample(&mut self, name: &str, help: &'static str, l: &[(&'static str, &str)], v: Value) {
        let counter = matches!(v, Value::Counter(_));
        // Most samples follow one of their family's (a loop over reasons, groups, pools).
        let last = self.families.0.len().checked_sub(1);
        let found = match last {
            Some(i) if self.families.0[i].name == name => Some(i),
            _ => self.index.get(name).copied(),
        };
        let i = match found {
            Some(i) => i,
            None => {
                self.families.0.push(Family {
                    name: name.to_owned(),
                    help: format!("{help}."),
                    counter,
                    samples: Vec::new(),
                });
                self.index
                    .insert(name.to_owned(), self.families.0.len() - 1);
                self.families.0.len() - 1
            }
        };
        let family = &mut self.families.0[i];
        let same = |labels: &Labels| {
            labels.len() == l.len()
                && labels
                    .iter()
                    .zip(l)
                    .all(|((k, v), (k2, v2))| k == k2 && v == v2)
        };
        match family.samples.iter_mut().find(|(labels, _)| same(labels)) {
            // The same series twice: counters add up, a gauge takes the last reading.
            Some((_, Value::Counter(n))) => {
                if let Value::Counter(more) = v {
                    *n += more;
                }
            }
            Some((_, old)) => *old = v,
            None => family
                .samples
                .push((l.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(), v)),
        }
    }

    /// A counter sample; `name` without `_total` (the encoder appends it).
    fn counter(&mut self, name: &str, help: &'static str, l: &[(&'static str, &str)], v: u64) {
        self.sample(name, help, l, Value::Counter(v));
    }

    fn gauge(&mut self, name: &str, help: &'static str, l: &[(&'static str, &str)], v: f64) {
        self.sample(name, help, l, Value::Gauge(v));
    }

    fn finish(self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(self.families));
        // About 15 kB: written once, never grown.
        let mut out = String::with_capacity(OUTPUT_CAPACITY);
        // Writing to a String cannot fail.
        let _ = encode_text(&mut out, &registry);
        out
    }
}

/// The redundancy states, for `sbc_redundancy_role{role}` (one is 1, the others 0).
pub const ROLES: &[&str] = &[
    "initial",
    "becoming-active",
    "active",
    "relinquishing-active",
    "becoming-standby",
    "standby",
    "out-of-service",
];

/// How a `show sip-stats` counter is exported: (metric without `_total`, label, help).
fn sip_counter(
    key: &str,
) -> (
    &'static str,
    Option<(&'static str, &'static str)>,
    &'static str,
) {
    const REFUSED: &str = "sbc_sip_refused";
    const REFUSED_HELP: &str = "SIP requests refused by the SBC, by reason";
    const DROPPED: &str = "sbc_sip_dropped";
    const DROPPED_HELP: &str = "SIP messages dropped unanswered, by reason";
    const SUBSCRIPTIONS: &str = "sbc_sip_subscriptions";
    const SBC_TRANSFERS_HELP: &str =
        "Transfers the SBC performed itself (refer-call-transfer enabled), by outcome";
    const SUBSCRIPTIONS_HELP: &str =
        "Subscriptions (SUBSCRIBE, REFER) by outcome: accepted, refused, ended by NOTIFY or 481, expired";
    match key {
        "calls_attempted" => (
            "sbc_sip_calls_attempted",
            None,
            "New INVITEs accepted as calls",
        ),
        "calls_answered" => ("sbc_sip_calls_answered", None, "Calls answered with 2xx"),
        "calls_failed" => (
            "sbc_sip_calls_failed",
            None,
            "Calls ended by a final non-2xx",
        ),
        "requests_in" => (
            "sbc_sip_requests_received",
            None,
            "SIP requests received (parsed)",
        ),
        "responses_in" => (
            "sbc_sip_responses_received",
            None,
            "SIP responses received (parsed)",
        ),
        "routed_new" => (
            "sbc_sip_transactions_routed",
            None,
            "New requests (new calls and out-of-dialog requests) routed to a next hop",
        ),
        "timeouts" => (
            "sbc_sip_timeouts",
            None,
            "408s sent: the next hop did not answer",
        ),
        "retransmissions_absorbed" => (
            "sbc_sip_retransmissions",
            Some(("direction", "absorbed")),
            "SIP retransmissions absorbed from peers or sent by the SBC",
        ),
        "retransmissions_sent" => (
            "sbc_sip_retransmissions",
            Some(("direction", "sent")),
            "SIP retransmissions absorbed from peers or sent by the SBC",
        ),
        "malformed_answered" => (REFUSED, Some(("reason", "malformed")), REFUSED_HELP),
        "rejected_503" => (REFUSED, Some(("reason", "admission")), REFUSED_HELP),
        "state_cap_503" => (REFUSED, Some(("reason", "state_cap")), REFUSED_HELP),
        "leg_mismatch" => (REFUSED, Some(("reason", "leg_mismatch")), REFUSED_HELP),
        "sips_refused" => (REFUSED, Some(("reason", "sips")), REFUSED_HELP),
        "media_ports_503" => (REFUSED, Some(("reason", "media_ports")), REFUSED_HELP),
        "media_sdp_refused" => (REFUSED, Some(("reason", "media_sdp")), REFUSED_HELP),
        "malformed_dropped" => (DROPPED, Some(("reason", "malformed")), DROPPED_HELP),
        "stray_responses" => (DROPPED, Some(("reason", "stray_response")), DROPPED_HELP),
        "handover_dropped" => (DROPPED, Some(("reason", "handover")), DROPPED_HELP),
        "response_source_mismatch" => (
            DROPPED,
            Some(("reason", "response_source_mismatch")),
            DROPPED_HELP,
        ),
        "media_anchored" => (
            "sbc_media_calls_anchored",
            None,
            "Calls whose media was anchored",
        ),
        "udp_to_tcp" => (
            "sbc_sip_udp_to_tcp",
            None,
            "New requests sent over TCP because they exceeded the agent's max-udp-length",
        ),
        "trace_dropped" => (TRACE_DROPPED, Some(("stage", "engine")), TRACE_DROPPED_HELP),
        "media_inactive_ended" => (
            "sbc_media_calls_inactive_ended",
            None,
            "Calls ended after rtp-inactivity without RTP",
        ),
        "rerouted" => (
            "sbc_routing_reroutes",
            None,
            "New requests sent on to their next candidate after an attempt failed",
        ),
        "hunts_exhausted" => (
            "sbc_routing_hunts_exhausted",
            None,
            "New requests whose every candidate failed",
        ),
        "attempts_expired" => (
            "sbc_routing_attempts_expired",
            None,
            "Attempts abandoned without any response within the agent's attempt expiry",
        ),
        "abandoned_answers_released" => (
            "sbc_routing_abandoned_answers_released",
            None,
            "Late 2xx answers to abandoned attempts, ACKed and hung up with BYE",
        ),
        "agent_refused" => (
            "sbc_routing_agent_refused",
            None,
            "Candidates passed over: their agent out of service or at its limits",
        ),
        "no_agent_503" => (REFUSED, Some(("reason", "no_agent")), REFUSED_HELP),
        "anonymous_refused" => (REFUSED, Some(("reason", "anonymous")), REFUSED_HELP),
        "to_registered_phones" => (
            "sbc_registration_requests_to_phones",
            None,
            "New requests sent to a registered phone over its flow",
        ),
        "registered_phone_gone" => (
            "sbc_registration_phone_gone",
            None,
            "Requests for a registration Contact whose binding is gone (480)",
        ),
        "auth_on_challenged_leg" => (
            "sbc_sip_auth_on_challenged_leg",
            None,
            "Authenticated INVITEs sent on the leg the next hop challenged (same Call-ID, next CSeq)",
        ),
        "challenges_evicted" => (
            "sbc_sip_challenges_evicted",
            None,
            "Challenged legs forgotten before their caller re-sent with credentials (table full)",
        ),
        "subscriptions_accepted" => (SUBSCRIPTIONS, Some(("outcome", "accepted")), SUBSCRIPTIONS_HELP),
        "subscriptions_refused" => (SUBSCRIPTIONS, Some(("outcome", "refused")), SUBSCRIPTIONS_HELP),
        "subscriptions_ended" => (SUBSCRIPTIONS, Some(("outcome", "ended")), SUBSCRIPTIONS_HELP),
        "subscriptions_expired" => (SUBSCRIPTIONS, Some(("outcome", "expired")), SUBSCRIPTIONS_HELP),
        "subscriptions_source_capped" => (
            "sbc_sip_subscriptions_source_capped",
            None,
            "New SUBSCRIBEs and REFERs refused 503: their source holds max-subscriptions-per-source",
        ),
        "refers_translated" => (
            "sbc_sip_refers_translated",
            None,
            "In-dialog REFERs whose Refer-To (Replaces, our address) was translated for the leg they went out on",
        ),
        "sbc_transfers_performed" => (
            "sbc_sip_sbc_transfers",
            Some(("outcome", "performed")),
            SBC_TRANSFERS_HELP,
        ),
        "sbc_transfers_failed" => (
            "sbc_sip_sbc_transfers",
            Some(("outcome", "failed")),
            SBC_TRANSFERS_HELP,
        ),
        "replaces_matched" => (
            "sbc_sip_replaces",
            Some(("outcome", "matched")),
            "New INVITEs with Replaces: matched to one of our legs (sent to its far end) or not",
        ),
        "replaces_unmatched" => (
            "sbc_sip_replaces",
            Some(("outcome", "unmatched")),
            "New INVITEs with Replaces: matched to one of our legs (sent to its far end) or not",
        ),
        "session_timer_ended" => (
            "sbc_sip_session_timer_ended",
            None,
            "Calls ended with BYE on both legs: the session timer their endpoints negotiated ran out",
        ),
        "session_interval_too_small" => (
            "sbc_sip_session_interval_too_small",
            None,
            "New INVITEs answered 422: Session-Expires below the realm's min-se",
        ),
        "session_422_retried" => (
            "sbc_sip_session_422_retried",
            None,
            "INVITEs sent again with the larger Session-Expires a 422 from the next hop asked for",
        ),
        "session_refreshes_sent" => (
            "sbc_sip_session_refreshes_sent",
            None,
            "Session refreshes (UPDATE, else in-dialog OPTIONS) the SBC sent on legs whose timer it runs",
        ),
        "session_refresh_failed" => (
            "sbc_sip_session_refresh_failed",
            None,
            "Calls ended with BYE on both legs: a refresh of the SBC's was answered 481 or 408, or not at all",
        ),
        "dialog_info_rewritten" => (
            "sbc_sip_dialog_info_rewritten",
            None,
            "NOTIFYs whose dialog-info body (a busy lamp's) was written with the ids of the leg it went out on",
        ),
        "max_life_ended" => (
            "sbc_sip_max_life_ended",
            None,
            "Calls ended with BYE on both legs at their realm's session-max-life-limit",
        ),
        "pings_sent" => (
            "sbc_session_agent_pings",
            None,
            "Health pings sent to session-agents",
        ),
        _ => ("", None, ""),
    }
}

/// Maps one scrape's status to the OpenMetrics text (pure: the unit tests call it).
#[must_use]
pub fn encode(src: &Sources) -> String {
    let status = &src.status;
    let mut m = Builder::new();
    m.gauge(
        "sbc_node_info",
        "The node's name (value 1)",
        &[
            ("hostname", &status.hostname),
            ("version", env!("CARGO_PKG_VERSION")),
        ],
        1.0,
    );
    m.gauge(
        "sbc_metrics_collection_seconds",
        "Time this scrape took to collect its sources",
        &[],
        src.collection_seconds,
    );
    sip(&mut m, &status.sip);
    workers(&mut m, &status.workers);
    redundancy(&mut m, status.redundancy.as_ref());
    health(&mut m, &status.health);
    memory(&mut m, &status.memory);
    alarms(&mut m, &status.alarms);
    tls(&mut m, &status.tls);
    trace(&mut m, &status.trace);
    session_agents(&mut m, &status.session_agents);
    registrations(&mut m, &status.registrations);
    accounting(&mut m, &status.accounting);
    m.finish()
}

fn flag(b: bool) -> f64 {
    f64::from(u8::from(b))
}

fn sip(m: &mut Builder, s: &SipStatus) {
    m.gauge(
        "sbc_sip_calls_active",
        "Calls held by the engine",
        &[],
        s.calls_active as f64,
    );
    m.gauge(
        "sbc_sip_admission_open",
        "1 while new requests are admitted, 0 while they are refused with 503",
        &[],
        flag(s.admission_open()),
    );
    for reason in &s.admission_reasons {
        m.gauge(
            "sbc_sip_admission_closed_reason",
            "Why admission is closed (value 1 per reason)",
            &[("reason", reason)],
            1.0,
        );
    }
    for (key, n) in s.counters.fields() {
        match sip_counter(key) {
            ("", _, _) => {
                let name = format!("sbc_sip_{key}");
                m.counter(&name, "A show sip-stats counter", &[], n);
            }
            (name, None, help) => m.counter(name, help, &[], n),
            (name, Some(l), help) => m.counter(name, help, &[l], n),
        }
    }
    if let Some(media) = &s.media {
        m.gauge(
            "sbc_media_sessions",
            "Media sessions anchored now",
            &[],
            media.sessions as f64,
        );
        for p in &media.pools {
            let realm = p.realm.as_str();
            m.gauge(
                "sbc_media_port_pairs_free",
                "Free port pairs of a steering pool",
                &[("realm", realm)],
                p.free_pairs as f64,
            );
            m.gauge(
                "sbc_media_port_pairs",
                "Port pairs of a steering pool",
                &[("realm", realm)],
                p.total_pairs as f64,
            );
        }
        m.counter(
            "sbc_media_forwarded_packets",
            "RTP/RTCP packets relayed",
            &[],
            media.forwarded,
        );
        m.counter(
            "sbc_media_forwarded_bytes",
            "RTP/RTCP bytes relayed",
            &[],
            media.forwarded_bytes,
        );
        for (n, reason) in [
            (media.dropped_unknown_port, "unknown_port"),
            (media.dropped_stranger, "stranger"),
            (media.dropped_no_destination, "no_destination"),
            (media.send_errors, "send_error"),
        ] {
            m.counter(
                "sbc_media_dropped_packets",
                "Media packets dropped, by reason",
                &[("reason", reason)],
                n,
            );
        }
        m.counter(
            "sbc_media_latched",
            "Media streams latched to a source",
            &[],
            media.latched,
        );
    }
    for (transport, counters) in [("tcp", &s.tcp), ("tls", &s.tls)] {
        for (key, n) in counters.fields() {
            if key.starts_with("handshake") {
                if transport == "tls" {
                    let result = match key {
                        "handshakes" => "completed",
                        "handshake_failed" => "failed",
                        "handshake_timeout" => "timeout",
                        other => other,
                    };
                    m.counter(
                        "sbc_tls_handshakes",
                        "TLS handshakes, by result",
                        &[("result", result)],
                        n,
                    );
                }
            } else if key == "open" {
                m.gauge(
                    &format!("sbc_{transport}_connections_open"),
                    "Connections open now",
                    &[],
                    n as f64,
                );
            } else if let Some(reason) = key.strip_prefix("closed_") {
                m.counter(
                    &format!("sbc_{transport}_connections_closed"),
                    "Connections closed by the SBC, by reason",
                    &[("reason", reason)],
                    n,
                );
            } else if let Some(reason) = key.strip_prefix("refused_") {
                m.counter(
                    &format!("sbc_{transport}_connections_refused"),
                    "Connections refused, by reason",
                    &[("reason", reason)],
                    n,
                );
            } else {
                m.counter(
                    &format!("sbc_{transport}_connections_{key}"),
                    "A connection counter of show sip-stats",
                    &[],
                    n,
                );
            }
        }
    }
}

fn workers(m: &mut Builder, groups: &[GroupReport]) {
    for g in groups {
        let group = g.name.as_str();
        let l = [("group", group)];
        m.gauge(
            "sbc_worker_group_workers",
            "Workers of a group",
            &l,
            g.workers as f64,
        );
        for (percent, name) in [
            (g.load_percent, "sbc_worker_group_load_ratio"),
            (g.demand_percent, "sbc_worker_group_demand_ratio"),
        ] {
            m.gauge(
                name,
                "A worker group's load or demand (1 = all workers busy)",
                &l,
                percent / 100.0,
            );
        }
        m.gauge(
            "sbc_prsm_queued",
            "Messages queued to a group's workers",
            &l,
            g.queued as f64,
        );
        for (n, name, help) in [
            (
                g.removed_retransmissions,
                "sbc_prsm_retransmissions_removed",
                "Queued retransmissions removed",
            ),
            (
                g.answered_from_state,
                "sbc_prsm_answered_from_state",
                "Requests answered from state without a worker",
            ),
            (
                g.secondary_served,
                "sbc_prsm_secondary_served",
                "Messages served from the secondary queue",
            ),
        ] {
            m.counter(name, help, &l, n);
        }
        for (n, reason) in [
            (g.rejected_queue_full, "queue_full"),
            (g.rejected_queue_delay, "queue_delay"),
        ] {
            m.counter(
                "sbc_prsm_refused",
                "New requests refused with 503 by the queues, by reason",
                &[("group", group), ("reason", reason)],
                n,
            );
        }
        m.counter(
            "sbc_prsm_dropped",
            "Messages dropped for a full queue",
            &l,
            g.dropped_queue_full,
        );
        m.gauge(
            "sbc_worker_group_scale_down_guard_cycles",
            "Cycles left before the group may scale down",
            &l,
            g.guard_cycles as f64,
        );
        m.gauge(
            "sbc_worker_group_scaling_decisions",
            "Recent autoscaling decisions listed by show workers",
            &l,
            g.decisions.len() as f64,
        );
        if let Some(last) = g.decisions.iter().max_by_key(|d| d.cycle) {
            m.gauge(
                "sbc_worker_group_last_scaling_cycle",
                "Cycle of the last autoscaling decision",
                &l,
                last.cycle as f64,
            );
            m.gauge(
                "sbc_worker_group_last_scaling_age_seconds",
                "Seconds since the last autoscaling decision",
                &l,
                last.seconds_ago,
            );
        }
        for w in &g.members {
            let id = w.id.to_string();
            let wl = [("group", group), ("worker", id.as_str())];
            m.gauge(
                "sbc_worker_load_ratio",
                "A worker's load (1 = busy all the time)",
                &wl,
                w.load_percent / 100.0,
            );
            for (n, queue) in [
                (w.queued_primary, "primary"),
                (w.queued_secondary, "secondary"),
            ] {
                m.gauge(
                    "sbc_worker_queued",
                    "Messages queued to a worker",
                    &[("group", group), ("worker", id.as_str()), ("queue", queue)],
                    n as f64,
                );
            }
        }
    }
}

fn redundancy(m: &mut Builder, r: Option<&RedundancyReport>) {
    m.gauge(
        "sbc_redundancy_enabled",
        "1 when the node is one of a pair",
        &[],
        flag(r.is_some()),
    );
    let Some(r) = r else {
        return;
    };
    let s = &r.status;
    let state = s.state.as_str();
    for role in ROLES {
        m.gauge(
            "sbc_redundancy_role",
            "The node's redundancy state (1 for the current one)",
            &[("role", role)],
            flag(*role == state),
        );
    }
    m.gauge(
        "sbc_redundancy_epoch",
        "The pair's epoch as this node knows it",
        &[],
        s.epoch as f64,
    );
    m.gauge(
        "sbc_redundancy_health_score",
        "Health score the node advertises to its peer",
        &[],
        f64::from(s.health.score),
    );
    for (b, name, help) in [
        (
            s.synced,
            "sbc_redundancy_synchronized",
            "1 when the standby holds the active's state",
        ),
        (
            s.peer_alive,
            "sbc_redundancy_peer_alive",
            "1 while the peer's heartbeats arrive",
        ),
        (
            s.peer_suspected,
            "sbc_redundancy_peer_suspected",
            "1 while the sync link broke and the peer is suspected",
        ),
    ] {
        m.gauge(name, help, &[], flag(b));
    }
    for (i, up) in s.paths_up.iter().enumerate() {
        let path = i.to_string();
        m.gauge(
            "sbc_redundancy_heartbeat_path_up",
            "1 while a heartbeat path is up",
            &[("path", path.as_str())],
            flag(*up),
        );
    }
    m.gauge(
        "sbc_redundancy_replicated_dialogs",
        "Dialogs replicated between the nodes",
        &[],
        r.replicated_dialogs as f64,
    );
    m.gauge(
        "sbc_redundancy_replicated_bindings",
        "Registration bindings replicated between the nodes",
        &[],
        r.replicated_bindings as f64,
    );
    if let Some(w) = s.witness {
        m.gauge(
            "sbc_redundancy_witness_reachable",
            "1 while the witness answers",
            &[],
            flag(w),
        );
    }
    for (key, n) in r.heartbeat_counters() {
        match key {
            "received" | "accepted" | "sent" => m.counter(
                &format!("sbc_ha_heartbeats_{key}"),
                "Heartbeats received, accepted or sent",
                &[],
                n,
            ),
            k if k.starts_with("witness_") => m.counter(
                &format!("sbc_ha_{k}"),
                "Witness probes, answers, drops and challenges",
                &[],
                n,
            ),
            reason => m.counter(
                "sbc_ha_heartbeats_refused",
                "Heartbeats refused, by reason",
                &[("reason", reason)],
                n,
            ),
        }
    }
    m.gauge(
        "sbc_ha_sync_revision",
        "The replicated table's revision (a Lamport clock; active minus standby = the standby's lag in changes)",
        &[],
        r.sync_revision as f64,
    );
    if let Some(lag) = r.sync_lag {
        m.gauge(
            "sbc_ha_sync_lag_changes",
            "On the active: dialog changes not yet written to the standby",
            &[],
            lag as f64,
        );
    }
    for (key, n) in r.sync_counters() {
        if let Some(reason) = key.strip_prefix("refused_") {
            m.counter(
                "sbc_ha_sync_sessions_refused",
                "State sync sessions refused, by reason",
                &[("reason", reason)],
                n,
            );
        } else {
            m.counter(
                &format!("sbc_ha_sync_{key}"),
                "State sync channel counters",
                &[],
                n,
            );
        }
    }
    m.counter(
        "sbc_ha_config_pushes_refused",
        "Configuration pushes from the peer refused",
        &[],
        r.config_pushes_refused,
    );
}

fn health(m: &mut Builder, h: &HealthReport) {
    m.gauge(
        "sbc_health_score",
        "Health score (100 = healthy)",
        &[],
        f64::from(h.score),
    );
    let mut by_source: BTreeMap<&str, u64> = BTreeMap::new();
    for d in &h.deductions {
        *by_source.entry(d.source.as_str()).or_default() += u64::from(d.points);
    }
    for (source, points) in by_source {
        m.gauge(
            "sbc_health_deduction_points",
            "Points deducted from the health score, by source",
            &[("source", source)],
            points as f64,
        );
    }
    m.gauge(
        "sbc_health_ineligible_until_restart",
        "1 when the node may not become active until restarted",
        &[],
        flag(h.ineligible_until_restart),
    );
    m.gauge(
        "sbc_health_admission_closed",
        "1 while critical memory refuses new requests",
        &[],
        flag(h.admission_closed),
    );
    m.gauge(
        "sbc_config_restart_pending_changes",
        "Activated configuration changes that wait for a reboot (show health restart-needed)",
        &[],
        h.restart_needed.len() as f64,
    );
}

fn memory(m: &mut Builder, mem: &MemoryReport) {
    let r = &mem.readings;
    if let Some(p) = r.memory_percent {
        m.gauge(
            "sbc_memory_utilisation_ratio",
            "Memory utilisation against the memory source",
            &[("source", r.memory_source.as_str())],
            p / 100.0,
        );
    }
    if let Some((used, limit)) = r.memory_bytes {
        m.gauge("sbc_memory_used_bytes", "Memory used", &[], used as f64);
        m.gauge("sbc_memory_limit_bytes", "Memory limit", &[], limit as f64);
    }
    for (n, name, help) in [
        (
            r.heap_allocated,
            "sbc_heap_allocated_bytes",
            "Heap allocated (jemalloc)",
        ),
        (
            r.heap_resident,
            "sbc_heap_resident_bytes",
            "Heap resident (jemalloc)",
        ),
    ] {
        if let Some(n) = n {
            m.gauge(name, help, &[], n as f64);
        }
    }
    for (p, name, help) in [
        (
            r.heap_percent,
            "sbc_heap_utilisation_ratio",
            "Heap against heap-limit-mb",
        ),
        (
            r.cpu_percent,
            "sbc_cpu_utilisation_ratio",
            "CPU utilisation",
        ),
    ] {
        if let Some(p) = p {
            m.gauge(name, help, &[], p / 100.0);
        }
    }
    m.gauge(
        "sbc_process_resident_memory_bytes",
        "Resident memory of the process",
        &[],
        mem.process_resident_bytes as f64,
    );
    m.gauge(
        "sbc_lab_ballast_bytes",
        "Lab memory ballast held",
        &[],
        (mem.ballast_mb << 20) as f64,
    );
}

fn alarms(m: &mut Builder, rows: &[AlarmRow]) {
    m.gauge(
        "sbc_alarms_active",
        "Alarms raised now",
        &[],
        rows.len() as f64,
    );
    for row in rows {
        let l = [
            ("type", row.kind.as_str()),
            ("severity", row.severity.as_str()),
        ];
        m.gauge("sbc_alarm_active", "An alarm raised now (value 1)", &l, 1.0);
        m.gauge(
            "sbc_alarm_raised_count",
            "Times an alarm was raised since it was first seen",
            &l,
            f64::from(row.count),
        );
    }
}

fn tls(m: &mut Builder, t: &TlsReport) {
    for c in &t.certificates {
        let profile = c.profile.as_str();
        m.gauge(
            "sbc_tls_certificate_expiry_timestamp_seconds",
            "notAfter of a tls-profile's certificate, Unix seconds",
            &[("profile", profile)],
            c.expires_unix as f64,
        );
        m.gauge(
            "sbc_tls_certificate_expiring",
            "1 within the profile's expiry-warning-days",
            &[("profile", profile)],
            flag(c.expiring),
        );
    }
}

const TRACE_DROPPED: &str = "sbc_trace_dropped";
const TRACE_DROPPED_HELP: &str =
    "Traced messages not kept: engine (the shell left too many), queue (the trace thread's was full), ring (their capture was full)";

fn trace(m: &mut Builder, t: &crate::trace::TraceCounters) {
    m.counter(
        "sbc_trace_messages",
        "Messages handed to the SIP trace (while sip-monitoring or capture-agent is on)",
        &[],
        t.queued,
    );
    m.counter(
        TRACE_DROPPED,
        TRACE_DROPPED_HELP,
        &[("stage", "queue")],
        t.queue_dropped,
    );
    m.counter(
        TRACE_DROPPED,
        TRACE_DROPPED_HELP,
        &[("stage", "ring")],
        t.ring_dropped,
    );
    m.counter(
        "sbc_trace_kept",
        "Messages the SIP monitor kept in its capture ring",
        &[],
        t.monitor.kept,
    );
    for (outcome, v) in [("sent", t.hep_sent), ("dropped", t.hep_dropped)] {
        m.counter(
            "sbc_hep_packets",
            "HEP packets to the capture server: sent, or dropped (queue full, server down)",
            &[("outcome", outcome)],
            v,
        );
    }
}

/// Takes the status a scrape reads, live: nothing is cached between scrapes (the engines'
/// counters without waiting on a lock a worker holds: see [`crate::status::sip`]).
pub async fn collect(console: &Console) -> Sources {
    let started = Instant::now();
    let status = console.status().await;
    Sources {
        status,
        collection_seconds: started.elapsed().as_secs_f64(),
    }
}

/// The answer to one request: `GET /metrics`, 404 elsewhere, 405 for other methods.
async fn answer(console: Arc<Console>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut r = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *r.status_mut() = status;
        r.headers_mut().insert(
            hyper::header::CONTENT_TYPE,
            hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        r
    };
    if req.uri().path() != "/metrics" {
        return plain(StatusCode::NOT_FOUND, "not found: try /metrics\n");
    }
    if req.method() != Method::GET {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "GET only\n");
        r.headers_mut().insert(
            hyper::header::ALLOW,
            hyper::header::HeaderValue::from_static("GET"),
        );
        return r;
    }
    let text = encode(&collect(&console).await);
    let mut r = Response::new(Full::new(Bytes::from(text)));
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(CONTENT_TYPE),
    );
    r
}

/// Serves one listener until `stop` says the address changed.
async fn serve(
    listener: TcpListener,
    console: Arc<Console>,
    tasks: Tasks,
    mut stop: tokio::sync::watch::Receiver<Option<SocketAddr>>,
) {
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let here = listener.local_addr().ok();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stop.changed() => {
                if *stop.borrow() != here { return; }
                continue;
            }
        };
        let Ok((stream, _peer)) = accepted else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        // Over the cap: closed at once (dropped).
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue;
        };
        let console = console.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let service = hyper::service::service_fn(move |req| {
                let console = console.clone();
                async move { Ok::<_, Infallible>(answer(console, req).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .keep_alive(false)
                .max_buf_size(MAX_HEAD_BYTES)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIMEOUT, conn).await;
        });
    }
}

/// Binds `system-config metrics-address` of the running configuration, if set, before the node
/// says it is ready (a scrape right after the ready line is answered).
///
/// # Errors
/// The address cannot be bound: the node does not start, as for a SIP interface.
pub async fn bind_at_start(console: &Console) -> std::io::Result<Option<TcpListener>> {
    let Some(addr) = console.metrics_address() else {
        return Ok(None);
    };
    TcpListener::bind(addr).await.map(Some).map_err(|e| {
        std::io::Error::new(e.kind(), format!("cannot bind metrics-address {addr}: {e}"))
    })
}

/// The metrics listener: serves `first` (from [`bind_at_start`]) and follows
/// `system-config metrics-address` of the running configuration, (re)binding when it changes;
/// never returns.
pub async fn run(console: Arc<Console>, first: Option<TcpListener>, tasks: Tasks) {
    let first = first.and_then(|l| l.local_addr().ok().map(|a| (l, a)));
    crate::control::follow::run(
        "metrics-address",
        first,
        || console.metrics_address(),
        |addr| {
            let l = console.take_prebound_metrics(addr)?;
            l.set_nonblocking(true).ok()?;
            TcpListener::from_std(l).ok()
        },
        TcpListener::bind,
        |at| console.metrics_served_at(at),
        |l, stop| {
            tasks.spawn(serve(l, console.clone(), tasks.clone(), stop));
        },
    )
    .await;
}

#[cfg(test)]
pub(crate) mod tests;

fn accounting(m: &mut Builder, a: &crate::accounting::AccountingReport) {
    if !a.enabled {
        return;
    }
    for (n, what) in [
        (a.records_generated, "generated"),
        (a.records_spooled, "spooled"),
        (a.records_delivered, "delivered"),
        (a.records_replayed, "replayed"),
        (a.records_refused, "refused"),
    ] {
        m.counter(
            "sbc_accounting_records",
            "Call detail records: generated by the engines, spooled, delivered (acknowledged by a server, or written to the files when none is set), replayed from the spool at start, refused (queue or spool full)",
            &[("outcome", what)],
            n,
        );
    }
    m.gauge(
        "sbc_accounting_spool_records",
        "Records in the spool not acknowledged yet",
        &[],
        a.spool_pending as f64,
    );
    m.gauge(
        "sbc_accounting_records_in_memory",
        "Undelivered records loaded in memory (at most the window)",
        &[],
        a.records_in_memory as f64,
    );
    m.gauge(
        "sbc_accounting_records_on_disk_only",
        "Records pending in the spool and not in memory (read back as the window empties)",
        &[],
        a.records_on_disk_only as f64,
    );
    m.gauge(
        "sbc_accounting_spool_bytes",
        "Bytes the accounting spool holds",
        &[],
        a.spool_bytes as f64,
    );
    m.gauge(
        "sbc_accounting_spool_max_bytes",
        "The accounting spool's bound (spool-max-size)",
        &[],
        a.spool_max_bytes as f64,
    );
    m.gauge(
        "sbc_accounting_spool_full",
        "1 while the accounting spool is full (records are refused)",
        &[],
        flag(a.spool_full),
    );
    m.counter(
        "sbc_accounting_file_records",
        "Lines written to the CDR files",
        &[],
        a.file_records,
    );
    m.counter(
        "sbc_accounting_write_errors",
        "Spool or CDR file write errors",
        &[],
        a.write_errors,
    );
    for s in &a.servers {
        let l = [("server", s.address.as_str())];
        m.gauge(
            "sbc_accounting_server_up",
            "1 while an accounting server answers (up), 0 while it is taken as failed or probed",
            &l,
            flag(s.state == "up"),
        );
        for (n, what) in [
            (s.sent, "sent"),
            (s.resent, "resent"),
            (s.acknowledged, "acknowledged"),
        ] {
            m.counter(
                "sbc_accounting_server_requests",
                "Accounting-Requests to a server: sent (first sends and resends), resent, acknowledged",
                &[("server", s.address.as_str()), ("outcome", what)],
                n,
            );
        }
        m.counter(
            "sbc_accounting_server_failures",
            "Times an accounting server was taken as failed (no answer after its resends)",
            &l,
            s.failures,
        );
    }
}

fn registrations(m: &mut Builder, r: &crate::status::RegistrationsReport) {
    m.gauge(
        "sbc_registration_bindings",
        "Bindings in the registration cache (phones registered through this node)",
        &[],
        r.bindings as f64,
    );
    let c = &r.counters;
    for (n, what) in [
        (c.forwarded, "forwarded"),
        (c.absorbed, "absorbed"),
        (c.refused_full, "refused_full"),
    ] {
        m.counter(
            "sbc_registration_registers",
            "Phones' REGISTERs by outcome: forwarded to the registrar, answered from the cache, refused (reg-cache-limit)",
            &[("outcome", what)],
            n,
        );
    }
    for (n, what) in [
        (c.keepalives_answered, "answered"),
        (c.keepalives_ignored, "ignored"),
    ] {
        m.counter(
            "sbc_registration_stun_keepalives",
            "STUN keep-alives on the SIP port: answered (a registered phone), ignored (any other source)",
            &[("outcome", what)],
            n,
        );
    }
    for (n, what) in [
        (c.created, "created"),
        (c.removed, "removed"),
        (c.expired, "expired"),
    ] {
        m.counter(
            "sbc_registration_binding_changes",
            "Bindings created (the registrar's 2xx), removed (de-registered), expired (purged)",
            &[("change", what)],
            n,
        );
    }
}

fn session_agents(m: &mut Builder, agents: &[SessionAgentRow]) {
    for a in agents {
        let l = [("session_agent", a.name.as_str())];
        m.gauge(
            "sbc_session_agent_in_service",
            "1 while a session-agent is in service, 0 while out of service",
            &l,
            if a.in_service { 1.0 } else { 0.0 },
        );
        m.gauge(
            "sbc_session_agent_sessions",
            "Sessions a session-agent holds (calls set up or in set-up through it)",
            &l,
            f64::from(a.sessions),
        );
        if let Some(rtt) = a.last_ping_rtt_ms {
            m.gauge(
                "sbc_session_agent_ping_rtt_seconds",
                "Round trip of a session-agent's last answered ping",
                &l,
                rtt / 1000.0,
            );
        }
        for (n, name, help) in [
            (
                a.pings_missed,
                "sbc_session_agent_pings_missed",
                "Health pings a session-agent left unanswered",
            ),
            (
                a.refusals,
                "sbc_session_agent_refusals",
                "New sessions a session-agent refused (out of service, at its limits)",
            ),
        ] {
            m.counter(name, help, &l, n);
        }
    }
}
