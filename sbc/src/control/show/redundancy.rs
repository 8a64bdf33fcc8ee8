//! `show redundancy`: role, state, peer, heartbeat paths, witness, epochs, the sync channel.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::RedundancyReport;

/// The text view of a node that runs alone (`redundancy-config state` as configured).
pub(crate) fn text_standalone(state: impl std::fmt::Display) -> String {
    format!("redundancy-config state {state}: this node runs alone and serves SIP\n")
}

/// The JSON view of a node that runs alone.
pub(crate) fn json_standalone() -> Value {
    json!({"state": "standalone"})
}

/// The text view.
pub(crate) fn text(r: &RedundancyReport) -> String {
    let s = &r.status;
    let mut out = String::new();
    let _ = writeln!(out, "{:<22} {}", "node", s.name);
    let _ = writeln!(
        out,
        "{:<22} {} (for {:.1} s)",
        "state",
        s.state.as_str(),
        s.since.elapsed().as_secs_f64()
    );
    let _ = writeln!(out, "{:<22} {}", "epoch", s.epoch);
    let ineligible = if s.health.ineligible_until_restart {
        " (ineligible until restart)"
    } else {
        ""
    };
    let _ = writeln!(out, "{:<22} {}{ineligible}", "health", s.health.score);
    let _ = writeln!(out, "{:<22} {}", "synchronized", s.synced);
    let _ = writeln!(out, "{:<22} {}", "peer-alive", s.peer_alive);
    if s.peer_suspected {
        let _ = writeln!(
            out,
            "{:<22} yes: the sync link broke; dead without a heartbeat within the grace",
            "peer-suspected"
        );
    }
    if let Some(p) = &s.peer {
        let _ = writeln!(out, "{:<22} {:?}", "peer", p);
    }
    let paths: Vec<&str> = s
        .paths_up
        .iter()
        .map(|up| if *up { "up" } else { "down" })
        .collect();
    let _ = writeln!(out, "{:<22} {}", "heartbeat-paths", paths.join(", "));
    let witness = match s.witness {
        None => "none configured",
        Some(true) => "reachable",
        Some(false) => "unreachable",
    };
    let _ = writeln!(out, "{:<22} {witness}", "witness");
    if let Some(lease) = s.lease {
        let held = if lease { "held" } else { "not held" };
        let _ = writeln!(out, "{:<22} {held}", "witness-lease");
    }
    if let Some((from, to, reason)) = s.last_transition {
        let _ = writeln!(
            out,
            "{:<22} {} -> {} ({})",
            "last-transition",
            from.as_str(),
            to.as_str(),
            reason.as_str()
        );
    }
    let _ = writeln!(out, "{:<22} {:?}", "counters", s.counters);
    let sync = &r.sync;
    let revision = r.sync_revision;
    let _ = match r.sync_lag {
        Some(lag) => writeln!(
            out,
            "{:<22} revision {revision}, {lag} changes not yet sent to the standby; \
             resyncs {}",
            "sync-lag", sync.resyncs
        ),
        None => writeln!(out, "{:<22} revision {revision}", "sync-lag"),
    };
    let _ = writeln!(
        out,
        "{:<22} sessions {}, replaced {}; refused: address {}, busy {}, handshake {}, \
         timeout {}, node {}, frame {}; entries refused {}",
        "sync-channel",
        sync.sessions,
        sync.replaced,
        sync.refused_address,
        sync.refused_busy,
        sync.refused_handshake,
        sync.refused_timeout,
        sync.refused_node,
        sync.refused_frame,
        sync.invalid_entries
    );
    let _ = writeln!(
        out,
        "{:<22} {} refused{}",
        "config-pushes",
        r.config_pushes_refused,
        r.last_config_push_refusal
            .as_ref()
            .map_or(String::new(), |w| format!("; last: {w}"))
    );
    out
}

/// The JSON view.
pub(crate) fn json(r: &RedundancyReport) -> Value {
    let s = &r.status;
    let counters: serde_json::Map<String, Value> = r
        .heartbeat_counters()
        .into_iter()
        .map(|(name, n)| (name.to_owned(), Value::from(n)))
        .collect();
    json!({
        "node": s.name,
        "state": s.state.as_str(),
        "epoch": s.epoch,
        "health": s.health.score,
        "ineligible_until_restart": s.health.ineligible_until_restart,
        "synchronized": s.synced,
        "peer_alive": s.peer_alive,
        "peer_suspected": s.peer_suspected,
        "peer": s.peer.as_ref().map(|p| format!("{p:?}")),
        "paths_up": s.paths_up,
        "replicated_dialogs": r.replicated_dialogs,
        "replicated_bindings": r.replicated_bindings,
        "witness": s.witness,
        "witness_lease": s.lease,
        "counters": counters,
        "sync": r.sync,
        "sync_revision": r.sync_revision,
        "sync_lag_changes": r.sync_lag,
        "config_pushes_refused": r.config_pushes_refused,
        "last_config_push_refusal": r.last_config_push_refusal,
        "last_transition": s.last_transition.map(|(f, t, why)| json!({
            "from": f.as_str(), "to": t.as_str(), "reason": why.as_str()
        })),
    })
}
