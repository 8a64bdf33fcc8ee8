//! `show sip-trace`: the SIP monitor's state and captures; `show sip-trace <id>` draws one as a
//! ladder of both legs, whole (`full`), as JSON, or as pcap for the client to write; `capture
//! start|stop` and `clear-sip-trace` change what is kept.

use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::{json, Value};

use sbc_proto::trace::capture::{ladder, Capture, CaptureKey, Direction, LegSide, TraceFilter};
use sbc_proto::trace::monitor::Monitor;
use sbc_proto::trace::pcap::to_pcap;

use super::Outcome;
use crate::control::oper::TraceView;
use crate::trace::{TraceCounters, TraceHub};

/// A filter as the ACLI writes it: `realm core user alice`, `global *`.
fn describe(f: &TraceFilter) -> String {
    let mut parts = Vec::new();
    if let Some(r) = &f.realm {
        parts.push(format!("realm {r}"));
    }
    if let Some(a) = &f.agent {
        parts.push(format!("session-agent {a}"));
    }
    if parts.is_empty() {
        parts.push("global".to_owned());
    }
    let mut sub = Vec::new();
    if let Some(u) = &f.user {
        sub.push(format!("user {u}"));
    }
    if let Some(a) = &f.address {
        sub.push(format!("addr-prefix {a}"));
    }
    if let Some(m) = &f.method {
        sub.push(format!("method {m}"));
    }
    if sub.is_empty() {
        sub.push("*".to_owned());
    }
    format!("{} {}", parts.join(" "), sub.join(" "))
}

/// `hh:mm:ss.mmm` UTC of a time in ms since the UNIX epoch.
fn clock(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
        unix_ms % 1000
    )
}

fn key_text(key: &CaptureKey) -> String {
    match key {
        CaptureKey::Call(id) => format!("call {id:016x}"),
        CaptureKey::CallId(c) => format!("Call-ID {c}"),
    }
}

/// `show sip-trace`: the monitor's state, the live filters, the counters and the captures.
pub(crate) fn list(hub: &TraceHub, not_traced: u64, json: bool) -> Outcome {
    let counters = TraceCounters {
        not_traced,
        ..hub.counters()
    };
    let m = hub.monitor();
    let mut out = String::new();
    match m.configured() {
        None => out.push_str("sip-monitoring disabled"),
        Some(c) if c.filters.is_empty() => {
            out.push_str("sip-monitoring enabled, no monitoring-filters");
        }
        Some(c) => {
            let _ = write!(
                out,
                "sip-monitoring enabled, {} of: {}",
                if c.match_any { "any" } else { "every one" },
                c.filters
                    .iter()
                    .map(describe)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
    }
    out.push('\n');
    for f in m.live_filters() {
        let _ = writeln!(out, "live: capture {}", describe(f));
    }
    let (bytes, captures, messages) = m.ring().bounds();
    let _ = writeln!(
        out,
        "{} captures, {} KiB of {} KiB (at most {captures} captures of {messages} messages)",
        m.ring().captures().count(),
        m.ring().bytes() / 1024,
        bytes / 1024
    );
    write_counters(&mut out, &counters);
    let _ = writeln!(
        out,
        "{:>6}  {:<12}  {:>4}  {:<36}  first message",
        "id", "started", "msgs", "call"
    );
    for c in m.ring().captures() {
        let _ = writeln!(
            out,
            "{:>6}  {:<12}  {:>4}  {:<36}  {}",
            c.id,
            clock(c.started_unix_ms()),
            c.messages.len(),
            key_text(&c.key),
            c.summary()
        );
    }
    let data = json.then(|| list_json(&m, &counters));
    Ok((out, data))
}

fn write_counters(out: &mut String, c: &TraceCounters) {
    let _ = writeln!(
        out,
        "traced {} (not traced {}, dropped {} at the queue), kept {}, unmatched {}, captures \
         evicted {}, messages not kept {}; HEP sent {}, dropped {}",
        c.queued,
        c.not_traced,
        c.queue_dropped,
        c.monitor.kept,
        c.monitor.unmatched,
        c.captures_evicted,
        c.ring_dropped,
        c.hep_sent,
        c.hep_dropped
    );
}

fn list_json(m: &Monitor, counters: &TraceCounters) -> Value {
    json!({
        "enabled": m.configured().is_some(),
        "live_filters": m.live_filters().iter().map(describe).collect::<Vec<_>>(),
        "counters": counters,
        "captures": m.ring().captures().map(|c| json!({
            "id": c.id,
            "started_unix_ms": c.started_unix_ms(),
            "messages": c.messages.len(),
            "key": key_text(&c.key),
            "first": c.summary(),
        })).collect::<Vec<_>>(),
    })
}

/// `show sip-trace <id> [full | json | pcap]`.
pub(crate) fn one(hub: &TraceHub, id: u64, view: TraceView, json: bool) -> Outcome {
    let m = hub.monitor();
    let Some(c) = m.ring().get(id) else {
        let ids: Vec<String> = m.ring().captures().map(|c| c.id.to_string()).collect();
        return Err(format!(
            "no capture {id}: valid: {}",
            if ids.is_empty() {
                "none kept (show sip-trace lists them)".to_owned()
            } else {
                ids.join(", ")
            }
        ));
    };
    match view {
        TraceView::Ladder => Ok((
            format!("{}: {}\n{}", key_text(&c.key), c.summary(), ladder(c)),
            json.then(|| capture_json(c)),
        )),
        TraceView::Full => Ok((full(c), json.then(|| capture_json(c)))),
        TraceView::Json => Ok((
            serde_json::to_string_pretty(&capture_json(c)).unwrap_or_default(),
            Some(capture_json(c)),
        )),
        TraceView::Pcap => {
            let pcap = to_pcap(c).map_err(|e| format!("capture {id} not written as pcap: {e}"))?;
            Ok((
                format!(
                    "capture {id}: {} messages, {} bytes of pcap",
                    c.messages.len(),
                    pcap.len()
                ),
                Some(json!({
                    "id": id,
                    "messages": c.messages.len(),
                    "pcap": base64::engine::general_purpose::STANDARD.encode(&pcap),
                })),
            ))
        }
    }
}

fn arrow(direction: Direction, leg: LegSide) -> &'static str {
    match (leg, direction) {
        (LegSide::Caller, Direction::Received) => "caller -> sbc",
        (LegSide::Caller, Direction::Sent) => "caller <- sbc",
        (LegSide::Callee, Direction::Sent) => "sbc -> callee",
        (LegSide::Callee, Direction::Received) => "sbc <- callee",
    }
}

fn full(c: &Capture) -> String {
    let mut out = format!("{}\n", key_text(&c.key));
    for m in &c.messages {
        let (from, to) = match m.direction {
            Direction::Received => (m.remote, m.local),
            Direction::Sent => (m.local, m.remote),
        };
        let _ = writeln!(
            out,
            "--- {} {} {} {from} -> {to}{}",
            clock(m.at_unix_ms),
            arrow(m.direction, m.leg),
            m.transport,
            m.note.as_ref().map_or(String::new(), |n| format!(" ! {n}"))
        );
        out.push_str(&String::from_utf8_lossy(&m.bytes).replace("\r\n", "\n"));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

fn capture_json(c: &Capture) -> Value {
    json!({
        "id": c.id,
        "key": key_text(&c.key),
        "messages_dropped": c.messages_dropped,
        "messages": c.messages.iter().map(|m| json!({
            "at_unix_ms": m.at_unix_ms,
            "direction": match m.direction { Direction::Received => "received", Direction::Sent => "sent" },
            "leg": match m.leg { LegSide::Caller => "caller", LegSide::Callee => "callee" },
            "transport": m.transport,
            "local": m.local.to_string(),
            "remote": m.remote.to_string(),
            "note": m.note,
            "first_line": m.first_line(),
            "message": String::from_utf8_lossy(&m.bytes),
        })).collect::<Vec<_>>(),
    })
}

/// `capture start|stop`.
pub(crate) fn capture(hub: &TraceHub, start: bool, filter: TraceFilter, json: bool) -> Outcome {
    let mut m = hub.monitor();
    let text = describe(&filter);
    let done = if start {
        if m.configured().is_none() {
            return Err(
                "capture is refused: sip-monitoring is disabled (valid once sip-monitoring state \
                 is enabled and activated: the engines trace only then)"
                    .to_owned(),
            );
        }
        m.capture_start(filter)
    } else {
        m.capture_stop(&filter)
    };
    let out = match (start, done) {
        (true, true) => format!("capture started: {text}"),
        (true, false) => format!("capture already running: {text}"),
        (false, true) => format!("capture stopped: {text}"),
        (false, false) => {
            let running: Vec<String> = m.live_filters().iter().map(describe).collect();
            return Err(format!(
                "no live capture {text}: valid: {}",
                if running.is_empty() {
                    "none runs".to_owned()
                } else {
                    running.join("; ")
                }
            ));
        }
    };
    Ok((
        out,
        json.then(|| json!({ "started": start, "filter": text })),
    ))
}

/// `clear-sip-trace`.
pub(crate) fn clear(hub: &TraceHub, json: bool) -> Outcome {
    let mut m = hub.monitor();
    let n = m.ring().captures().count();
    m.clear();
    Ok((
        format!("{n} captures forgotten"),
        json.then(|| json!({ "cleared": n })),
    ))
}
