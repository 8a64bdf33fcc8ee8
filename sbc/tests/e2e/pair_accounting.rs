//! Accounting across a switchover, against a real FreeRADIUS:
//!
//! - 50 calls of 20 s up through the active, their Starts delivered; kill -9 of the active;
//!   the calls end by BYE through the new active: 50 Starts (from the first node) and 50
//!   Stops (from the second, `NAS-Identifier`), each Stop's duration the whole call (the
//!   replicated connect time), no other entry.
//! - FreeRADIUS down while 20 calls are answered (their Starts only spooled and replicated),
//!   kill -9 of the active, FreeRADIUS back: the survivor adopts the Starts the dead node never
//!   delivered and sends them, then the Stops: 20 of each.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use sbc_e2e::freeradius::{DetailEntry, FreeRadius};
use sbc_e2e::pair::{kill9, mgmt_exec, Pair, PairConfig, NAMES};
use sbc_e2e::TestDir;
use serde_json::Value;

const SECRET: &str = "pair-acct-secret-51c2";

fn account_config(radius: &FreeRadius, spool: &Path) -> String {
    format!(
        "\n[account-config]\nstate = \"enabled\"\nspool-path = \"{}\"\n\
         \n[[account-config.account-server]]\nhostname = \"{}\"\nport = {}\n\
         secret = \"{SECRET}\"\nrestart-delay = 2\n",
        spool.display(),
        radius.addr().ip(),
        radius.port(),
    )
}

fn accounting(pair: &Pair, i: usize) -> Value {
    mgmt_exec(&pair.socket(i), "show accounting")
        .map(|r| r["data"].clone())
        .unwrap_or(Value::Null)
}

fn wait_delivered(pair: &Pair, i: usize, n: u64, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let a = accounting(pair, i);
        if a["records_delivered"].as_u64().unwrap_or(0) >= n || Instant::now() > deadline {
            return a;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn by_session(entries: &[DetailEntry]) -> BTreeMap<String, Vec<&DetailEntry>> {
    let mut out: BTreeMap<String, Vec<&DetailEntry>> = BTreeMap::new();
    for e in entries {
        out.entry(e.get("Acct-Session-Id").unwrap_or_default().to_owned())
            .or_default()
            .push(e);
    }
    out
}

fn kind(e: &DetailEntry) -> &str {
    e.get("Acct-Status-Type").unwrap_or_default()
}

fn pair_with_accounting(dir: &TestDir, radius: &FreeRadius) -> Pair {
    let mut config = PairConfig::new();
    config.node_extra_toml = [
        account_config(radius, &dir.path().join("spool-a")),
        account_config(radius, &dir.path().join("spool-b")),
    ];
    Pair::start(config)
}

#[test]
fn fifty_calls_across_a_kill9_have_fifty_starts_and_fifty_stops_spanning_the_failover() {
    let dir = TestDir::new("pair-accounting");
    let radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut pair = pair_with_accounting(&dir, &radius);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));

    let uas = pair.spawn_uas("uas", 50, Duration::from_secs(90));
    let uac = pair
        .uac("uac", 50, 25, 20_000, Duration::from_secs(60))
        .spawn();
    pair.wait_replicated(standby, 50, Duration::from_secs(20));
    let a = wait_delivered(&pair, active, 50, Duration::from_secs(10));
    assert_eq!(
        a["records_delivered"], 50,
        "the Starts, before the kill: {a}"
    );
    std::thread::sleep(Duration::from_secs(2));

    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    let uac = uac.wait();
    uac.assert_success(50);
    uas.wait_at_most(Duration::from_secs(20)).assert_success(50);

    let b = wait_delivered(&pair, standby, 50, Duration::from_secs(20));
    let _ = radius.wait_for_entries(100, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let entries = radius.entries().into_iter().collect::<Vec<_>>();
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 50, "{b}");
    let mut repeats = 0;
    for v in sessions.values() {
        let starts: Vec<_> = v.iter().filter(|e| kind(e) == "Start").collect();
        let stops: Vec<_> = v.iter().filter(|e| kind(e) == "Stop").collect();
        assert!(!starts.is_empty() && !stops.is_empty(), "{v:?}");
        // A repeat only as a resend of the same record: same times.
        for s in &starts[1..] {
            assert_eq!(
                s.get("h323-connect-time"),
                starts[0].get("h323-connect-time")
            );
            repeats += 1;
        }
        for s in &stops[1..] {
            assert_eq!(
                s.get("h323-disconnect-time"),
                stops[0].get("h323-disconnect-time")
            );
            repeats += 1;
        }
        assert_eq!(starts[0].get("NAS-Identifier"), Some(NAMES[active]));
        assert_eq!(stops[0].get("NAS-Identifier"), Some(NAMES[standby]));
        let ms: u64 = stops[0]
            .get("Acme-Custom-VSA-202")
            .and_then(|d| d.parse().ok())
            .expect("a duration");
        assert!(
            (20_000..20_500).contains(&ms),
            "the whole call, across the failover: {ms} ms"
        );
    }
    eprintln!(
        "MEASURE pair_accounting: {} entries for 50 calls, {repeats} repeats of a record",
        entries.len()
    );
    assert_eq!(entries.len(), 100 + repeats);
    // Delivered records leave the survivor's replica table.
    assert_eq!(b["records_replicated_pending"], 0, "{b}");
}

#[test]
fn records_the_dead_active_never_delivered_are_delivered_by_the_survivor() {
    let dir = TestDir::new("pair-accounting-adopt");
    let mut radius = FreeRadius::start_in(&dir, SECRET).expect("FreeRADIUS");
    let mut pair = pair_with_accounting(&dir, &radius);
    let (active, standby) = pair.wait_roles(Duration::from_secs(15));
    radius.stop().expect("FreeRADIUS stops");

    let uas = pair.spawn_uas("uas", 20, Duration::from_secs(90));
    let uac = pair
        .uac("uac", 20, 20, 10_000, Duration::from_secs(60))
        .spawn();
    pair.wait_replicated(standby, 20, Duration::from_secs(20));
    // Every Start at least 2 s old when the survivor first sends it (Acct-Delay-Time >= 1).
    std::thread::sleep(Duration::from_secs(2));
    let a = accounting(&pair, active);
    assert_eq!(a["records_generated"], 20, "{a}");
    assert_eq!(a["records_delivered"], 0, "{a}");

    kill9(&mut pair.nodes[active]);
    pair.wait_redundancy(standby, Duration::from_secs(10), "active", |r| {
        r.is_active()
    });
    radius.start_again().expect("FreeRADIUS starts again");
    uac.wait().assert_success(20);
    uas.wait_at_most(Duration::from_secs(20)).assert_success(20);

    let b = wait_delivered(&pair, standby, 40, Duration::from_secs(30));
    assert_eq!(b["records_adopted"], 20, "{b}");
    let _ = radius.wait_for_entries(40, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(500));
    let entries = radius.entries();
    let sessions = by_session(&entries);
    assert_eq!(sessions.len(), 20);
    for v in sessions.values() {
        let kinds: Vec<&str> = v.iter().map(|e| kind(e)).collect();
        assert_eq!(kinds, vec!["Start", "Stop"], "in order, once each");
        assert_eq!(
            v[0].get("NAS-Identifier"),
            Some(NAMES[active]),
            "the dead node's Start"
        );
        let delay: u64 = v[0]
            .get("Acct-Delay-Time")
            .and_then(|d| d.parse().ok())
            .unwrap_or(0);
        assert!(delay >= 1, "the Start waited: {:?}", v[0]);
    }
    assert_eq!(entries.len(), 40);
}
