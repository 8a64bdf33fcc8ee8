use super::*;
use serde_json::Value;

pub(crate) fn sample() -> Sources {
    use crate::alarm_service::Readings;
    use crate::runtime::tcp::TcpStatsSnapshot;
    use crate::runtime::tls::CertStatus;
    use crate::status::{HealthReport, MemoryReport, RedundancyReport, SipStatus, TlsReport};
    use crate::workers::{DecisionReport, WorkerReport};
    use sbc_alarms::{AlarmKind, Deduction, Severity};
    use std::time::{Duration, SystemTime};

    let sip = SipStatus {
        admission_reasons: vec!["heap"],
        calls_active: 3,
        counters: sbc_proto::engine::Stats {
            calls_attempted: 10,
            calls_answered: 7,
            calls_failed: 2,
            rejected_503: 4,
            leg_mismatch: 1,
            retransmissions_sent: 5,
            routed_new: 1,
            ..Default::default()
        },
        tcp: TcpStatsSnapshot {
            open: 2,
            accepted: 6,
            closed_idle: 1,
            refused_source_cap: 3,
            ..Default::default()
        },
        tls: TcpStatsSnapshot {
            open: 1,
            handshakes: 8,
            handshake_failed: 2,
            handshake_timeout: 1,
            ..Default::default()
        },
        media: None,
    };
    let group = GroupReport {
        name: "udp".into(),
        profile: None,
        workers: 2,
        load_percent: 50.0,
        demand_percent: 25.0,
        queued: 4,
        scheduling: "prsm",
        guard_cycles: 0,
        removed_retransmissions: 0,
        answered_from_state: 0,
        secondary_served: 0,
        rejected_queue_full: 6,
        rejected_queue_delay: 1,
        dropped_queue_full: 0,
        members: vec![WorkerReport {
            id: 0,
            load_percent: 10.0,
            demand_percent: 10.0,
            queued_primary: 1,
            queued_secondary: 0,
            shards: 64,
        }],
        decisions: vec![DecisionReport {
            cycle: 3,
            seconds_ago: 2.5,
            from: 1,
            to: 2,
            text: "up".into(),
        }],
    };
    let redundancy = RedundancyReport {
        status: sbc_ha::Status {
            name: "sbc1".into(),
            state: sbc_ha::State::Standby,
            since: Instant::now(),
            epoch: 7,
            health: sbc_ha::Health {
                score: 100,
                ineligible_until_restart: false,
            },
            synced: true,
            witness: None,
            lease: None,
            peer_alive: true,
            peer_suspected: false,
            peer: None,
            paths_up: vec![true, false],
            last_transition: None,
            counters: sbc_ha::Counters {
                received: 20,
                accepted: 18,
                bad_mac: 2,
                sent: 21,
                ..Default::default()
            },
        },
        replicated_dialogs: 12,
        replicated_bindings: 3,
        sync: sbc_ha::shell::sync::SyncCountersSnapshot {
            sessions: 1,
            refused_busy: 4,
            streamed_revision: 40,
            resyncs: 1,
            ..Default::default()
        },
        sync_revision: 41,
        sync_lag: Some(1),
        config_pushes_refused: 0,
        last_config_push_refusal: None,
    };
    let health = HealthReport {
        score: 90,
        deductions: vec![Deduction {
            source: "memory".into(),
            reason: "memory major".into(),
            points: 10,
            until_restart: false,
        }],
        ..Default::default()
    };
    let memory = MemoryReport {
        readings: Readings {
            memory_percent: Some(42.0),
            memory_source: "host".into(),
            heap_allocated: Some(1_048_576),
            heap_resident: Some(2_097_152),
            heap_percent: Some(1.5),
            cpu_percent: Some(3.0),
            memory_bytes: None,
        },
        process_resident_bytes: 4096,
        ballast_mb: 2,
    };
    let alarm = AlarmRow {
        id: 131_073,
        task: "mem".into(),
        kind: AlarmKind::Memory,
        volume: None,
        severity: Severity::Major,
        value: 85.0,
        threshold: 80,
        first_seen: SystemTime::UNIX_EPOCH + Duration::from_secs(1),
        last_seen: SystemTime::UNIX_EPOCH + Duration::from_secs(2),
        count: 2,
        description: "memory".into(),
    };
    let tls = TlsReport {
        certificates: vec![CertStatus {
            profile: "edge".into(),
            file: "edge.pem".into(),
            expires: "2030-03-17".into(),
            expires_unix: 1_900_000_000,
            days_left: 1200,
            expiring: false,
        }],
        connections: TcpStatsSnapshot::default(),
    };
    Sources {
        status: NodeStatus {
            hostname: "sbc1".into(),
            uptime: Duration::from_secs(5),
            sip,
            workers: vec![group],
            redundancy: Some(redundancy),
            health,
            memory,
            alarms: vec![alarm],
            tls,
            trace: crate::trace::TraceCounters {
                queued: 12,
                queue_dropped: 1,
                hep_sent: 11,
                hep_dropped: 2,
                ..crate::trace::TraceCounters::default()
            },
            session_agents: vec![SessionAgentRow {
                name: "pbx-a".into(),
                address: "127.0.0.2:5060 Udp".into(),
                state: "in-service".into(),
                in_service: true,
                state_for_s: 30,
                sessions: 4,
                burst_sessions: 1,
                last_ping_rtt_ms: Some(2.5),
                last_ping_code: Some(200),
                last_ping_s_ago: Some(3),
                pings_sent: 10,
                pings_missed: 1,
                refusals: 2,
                pinging: true,
            }],
            route_files: Vec::new(),
            registrations: crate::status::RegistrationsReport::default(),
            accounting: crate::accounting::AccountingReport {
                enabled: true,
                servers: vec![crate::accounting::ServerReport {
                    address: "127.0.0.1:1813".into(),
                    transport: "udp",
                    connection: "-",
                    connects: 0,
                    state: "up",
                    sent: 12,
                    resent: 2,
                    acknowledged: 10,
                    failures: 1,
                    outstanding: 0,
                }],
                records_generated: 10,
                records_spooled: 10,
                records_delivered: 10,
                spool_max_bytes: 1 << 30,
                records_in_memory: 4,
                records_on_disk_only: 6,
                ..crate::accounting::AccountingReport::default()
            },
        },
        collection_seconds: 0.001,
    }
}

/// The sample line (`name{labels} value`) of a scrape, value parsed.
pub(crate) fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn snapshots_map_to_conventional_families() {
    let text = encode(&sample());
    let checks: &[(&str, f64)] = &[
        ("sbc_sip_calls_attempted_total", 10.0),
        ("sbc_accounting_records_in_memory", 4.0),
        ("sbc_accounting_records_on_disk_only", 6.0),
        ("sbc_sip_calls_answered_total", 7.0),
        ("sbc_sip_calls_failed_total", 2.0),
        ("sbc_sip_calls_active", 3.0),
        ("sbc_session_agent_in_service{session_agent=\"pbx-a\"}", 1.0),
        ("sbc_session_agent_sessions{session_agent=\"pbx-a\"}", 4.0),
        (
            "sbc_session_agent_pings_missed_total{session_agent=\"pbx-a\"}",
            1.0,
        ),
        (
            "sbc_session_agent_ping_rtt_seconds{session_agent=\"pbx-a\"}",
            0.0025,
        ),
        ("sbc_sip_refused_total{reason=\"admission\"}", 4.0),
        ("sbc_sip_refused_total{reason=\"leg_mismatch\"}", 1.0),
        ("sbc_sip_retransmissions_total{direction=\"sent\"}", 5.0),
        ("sbc_sip_admission_open", 0.0),
        ("sbc_sip_admission_closed_reason{reason=\"heap\"}", 1.0),
        ("sbc_tcp_connections_open", 2.0),
        ("sbc_tcp_connections_closed_total{reason=\"idle\"}", 1.0),
        (
            "sbc_tcp_connections_refused_total{reason=\"source_cap\"}",
            3.0,
        ),
        ("sbc_tls_handshakes_total{result=\"completed\"}", 8.0),
        ("sbc_trace_messages_total", 12.0),
        ("sbc_trace_dropped_total{stage=\"queue\"}", 1.0),
        ("sbc_hep_packets_total{outcome=\"sent\"}", 11.0),
        ("sbc_hep_packets_total{outcome=\"dropped\"}", 2.0),
        ("sbc_tls_handshakes_total{result=\"failed\"}", 2.0),
        ("sbc_tls_handshakes_total{result=\"timeout\"}", 1.0),
        ("sbc_worker_group_workers{group=\"udp\"}", 2.0),
        ("sbc_worker_group_load_ratio{group=\"udp\"}", 0.5),
        ("sbc_prsm_queued{group=\"udp\"}", 4.0),
        (
            "sbc_prsm_refused_total{group=\"udp\",reason=\"queue_full\"}",
            6.0,
        ),
        ("sbc_worker_group_last_scaling_cycle{group=\"udp\"}", 3.0),
        (
            "sbc_worker_queued{group=\"udp\",worker=\"0\",queue=\"primary\"}",
            1.0,
        ),
        ("sbc_redundancy_enabled", 1.0),
        ("sbc_redundancy_role{role=\"standby\"}", 1.0),
        ("sbc_redundancy_role{role=\"active\"}", 0.0),
        ("sbc_redundancy_epoch", 7.0),
        ("sbc_redundancy_heartbeat_path_up{path=\"1\"}", 0.0),
        ("sbc_redundancy_replicated_dialogs", 12.0),
        ("sbc_redundancy_replicated_bindings", 3.0),
        ("sbc_ha_heartbeats_received_total", 20.0),
        ("sbc_ha_heartbeats_accepted_total", 18.0),
        ("sbc_ha_heartbeats_refused_total{reason=\"bad_mac\"}", 2.0),
        ("sbc_ha_sync_sessions_total", 1.0),
        ("sbc_ha_sync_sessions_refused_total{reason=\"busy\"}", 4.0),
        ("sbc_ha_sync_revision", 41.0),
        ("sbc_ha_sync_lag_changes", 1.0),
        ("sbc_ha_sync_resyncs_total", 1.0),
        ("sbc_health_score", 90.0),
        ("sbc_health_deduction_points{source=\"memory\"}", 10.0),
        ("sbc_memory_utilisation_ratio{source=\"host\"}", 0.42),
        ("sbc_heap_allocated_bytes", 1_048_576.0),
        ("sbc_heap_utilisation_ratio", 0.015),
        ("sbc_lab_ballast_bytes", 2_097_152.0),
        ("sbc_alarms_active", 1.0),
        ("sbc_alarm_active{type=\"memory\",severity=\"major\"}", 1.0),
        (
            "sbc_tls_certificate_expiry_timestamp_seconds{profile=\"edge\"}",
            1.9e9,
        ),
    ];
    for (series, want) in checks {
        let got = value(&text, series).unwrap_or_else(|| panic!("{series} missing in\n{text}"));
        assert!((got - want).abs() < 1e-9, "{series} = {got}, want {want}");
    }
    // Counters are typed as counters, the text ends as OpenMetrics requires.
    assert!(text.contains("# TYPE sbc_sip_calls_attempted counter\n"));
    assert!(text.contains("# TYPE sbc_health_score gauge\n"));
    assert!(text.ends_with("# EOF\n"));
    // A TCP "handshakes" key (TLS only) is not exported for TCP.
    assert!(!text.contains("sbc_tcp_connections_handshakes"));
    // The streamed revision is the lag's operand, not a counter of its own.
    assert!(!text.contains("streamed_revision"));
}

#[test]
fn standalone_node_exports_no_roles_and_no_media() {
    let mut src = sample();
    src.status.redundancy = None;
    let text = encode(&src);
    assert_eq!(value(&text, "sbc_redundancy_enabled"), Some(0.0));
    assert!(!text.contains("sbc_redundancy_role"));
    assert!(!text.contains("sbc_media_sessions"));
    // A node with nothing to report still gives a valid page.
    let text = encode(&Sources::default());
    assert!(text.ends_with("# EOF\n"));
    assert_eq!(value(&text, "sbc_sip_admission_open"), Some(1.0));
}

/// Every metric the Grafana dashboard (docs/grafana-sbc-pair.json) queries is one this exporter
/// emits (a name, or a name with `_total`, `_bucket`... suffixes is not accepted: exact names).
#[test]
fn grafana_dashboard_is_json_and_names_exported_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/grafana-sbc-pair.json");
    let text = std::fs::read_to_string(path).expect("dashboard file");
    let dash: Value = serde_json::from_str(&text).expect("dashboard is JSON");
    let exported = exported_names();
    let mut exprs = Vec::new();
    collect_exprs(&dash, &mut exprs);
    assert!(exprs.len() >= 12, "{} expressions", exprs.len());
    for e in &exprs {
        let names = metric_names(e);
        assert!(!names.is_empty(), "no metric in {e}");
        for n in names {
            assert!(exported.contains(&n), "{n} (in {e}) is not exported");
        }
    }
    assert!(dash.pointer("/templating/list").is_some());
}

/// Every metric the alerting rules (docs/prometheus-alerts.yml) name is one this exporter emits.
#[test]
fn alert_rules_name_exported_metrics() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/prometheus-alerts.yml");
    let text = std::fs::read_to_string(path).expect("rules file");
    let exported = exported_names();
    let mut named = 0;
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for n in metric_names(line).into_iter().filter(|n| n.len() > 4) {
            assert!(exported.contains(&n), "{n} (in {line}) is not exported");
            named += 1;
        }
    }
    assert!(named >= 16, "{named} names");
}

fn exported_names() -> std::collections::BTreeSet<String> {
    let mut src = sample();
    src.status.sip.media = Some(crate::runtime::MediaReport {
        sessions: 1,
        forwarded: 10,
        latched: 2,
        pools: vec![crate::runtime::PoolReport {
            realm: "access".into(),
            address: std::net::Ipv4Addr::LOCALHOST.into(),
            ports: "20000-20999".into(),
            free_pairs: 499,
            total_pairs: 500,
        }],
        ..Default::default()
    });
    let text = encode(&src);
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| l.split(['{', ' ']).next().map(str::to_owned))
        .collect()
}

fn collect_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", Value::String(s)) => out.push(s.clone()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

/// The identifiers of a PromQL expression that start with `sbc_`.
fn metric_names(expr: &str) -> Vec<String> {
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("sbc_"))
        .map(str::to_owned)
        .collect()
}
