//! The accounting thread's memory window, driven by hand (no thread, a server that never
//! answers): records beyond the window wait on disk and come back in order, across segments
//! deleted once delivered; a hand-over marks the replicated ones on disk only; replicated
//! records read back are held, then taken back.

use std::net::UdpSocket;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sbc_accounting::delivery::{DeliverySettings, ServerTimings, Strategy};
use sbc_accounting::{CallRecord, EndedBy, MediaFigures, PackedText, RecordKind, RecordText};

use super::{
    sleep_for, AccountingReport, AccountingSettings, Replication, ServerSettings, Service,
    IDLE_TICK, TICK,
};

const WINDOW: usize = 4;

/// A spool directory of its own, removed when dropped.
struct Dir(std::path::PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("sbc-acct-window-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        Self(p)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn record(call: u32, kind: RecordKind) -> CallRecord {
    CallRecord {
        kind,
        text: PackedText::pack(&RecordText {
            session_id: &format!("{call:016x}"),
            calling: "alice",
            called: "bob",
            ingress_realm: "access",
            egress_realm: "core",
            ingress_call_id: &format!("{call}@a"),
            egress_call_id: &format!("{call}@b"),
            caller_address: "127.0.0.1:5060",
            callee_address: "127.0.0.2:5060",
            node: "sbc1",
            ..RecordText::default()
        }),
        interim: 0,
        setup_ms: 1,
        connect_ms: 2,
        disconnect_ms: if kind == RecordKind::Stop { 3 } else { 0 },
        status: 200,
        ended_by: if kind == RecordKind::Stop {
            EndedBy::Caller
        } else {
            EndedBy::NotEnded
        },
        reroutes: 0,
        caller_to_callee: MediaFigures::default(),
        callee_to_caller: MediaFigures::default(),
        event_ms: 2,
    }
}

/// `calls` calls' Start and Stop, in the order generated, each replicated or not.
fn batch(calls: u32, replicated: impl Fn(u32) -> bool) -> Vec<(CallRecord, bool)> {
    (0..calls)
        .flat_map(|c| {
            [
                (record(c, RecordKind::Start), replicated(c)),
                (record(c, RecordKind::Stop), replicated(c)),
            ]
        })
        .collect()
}

/// A service on `dir` whose one server (`silent`) never answers.
fn service(dir: &Dir, silent: &UdpSocket) -> Service {
    service_bounded(dir, silent, 1 << 30)
}

/// The same with a spool of `max_bytes` (segments of an eighth of it, at least 64 KiB).
fn service_bounded(dir: &Dir, silent: &UdpSocket, max_bytes: u64) -> Service {
    service_with(dir, silent, max_bytes, WINDOW, 100)
}

/// A service on `dir` whose one server is `server`, with a spool of `max_bytes`, holding up
/// to `memory_window` records and `max_wait_failover` unanswered requests.
fn service_with(
    dir: &Dir,
    server: &UdpSocket,
    max_bytes: u64,
    memory_window: usize,
    max_wait_failover: u32,
) -> Service {
    let settings = AccountingSettings {
        node: "sbc1".into(),
        servers: vec![ServerSettings {
            addr: server.local_addr().expect("an address"),
            secret: "s".into(),
            tls: None,
        }],
        delivery: DeliverySettings {
            strategy: Strategy::Hunt,
            max_wait_failover,
            tries: 3,
            servers: vec![ServerTimings {
                retry_after: Duration::from_secs(60),
                restart_delay: Duration::from_secs(60),
                max_inactivity: Duration::from_secs(600),
            }],
        },
        spool_dir: dir.0.clone(),
        spool_max_bytes: max_bytes,
        file_output: None,
        refuse_calls_when_full: false,
        memory_window,
    };
    Service::open(
        settings,
        &crate::runtime::tls::TlsContext::default(),
        Arc::new(Mutex::new(AccountingReport::default())),
        Arc::new(Replication::default()),
        Arc::new(AtomicUsize::new(0)),
    )
    .expect("the service")
}

fn deliver_all_in_memory(s: &mut Service) -> Vec<u64> {
    let mut seqs: Vec<u64> = s.pending.keys().copied().collect();
    seqs.sort_unstable();
    for &seq in &seqs {
        s.delivery.forget(seq);
        s.mark_delivered(seq);
    }
    seqs
}

#[test]
fn records_beyond_the_window_wait_on_disk_and_come_back_in_order() {
    let dir = Dir::new("order");
    let silent = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let mut s = service(&dir, &silent);
    let now = Instant::now();
    s.take(now, batch(15, |_| false));
    assert_eq!((s.pending.len(), s.ledger.pending()), (WINDOW, 30));
    let mut order = Vec::new();
    for _ in 0..30 {
        let seqs = deliver_all_in_memory(&mut s);
        if seqs.is_empty() {
            break;
        }
        order.extend(seqs);
        s.refill(now);
        assert!(s.pending.len() <= WINDOW);
    }
    assert_eq!(order, (1..=30).collect::<Vec<u64>>(), "each once, in order");
    assert_eq!(s.ledger.pending(), 0);
    assert_eq!(s.window.cursor(), None);
    // Caught up: a new record goes straight to memory.
    s.take(now, batch(1, |_| false).into_iter().take(1).collect());
    assert_eq!((s.pending.len(), s.ledger.pending()), (1, 1));
}

#[test]
fn a_hand_over_marks_the_replicated_records_on_disk_only_too() {
    let dir = Dir::new("handover");
    let silent = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let mut s = service(&dir, &silent);
    s.take(Instant::now(), batch(10, |c| c % 2 == 0));
    assert_eq!(s.pending.len(), WINDOW);
    s.hand_over();
    assert_eq!(s.stats.records_handed_over, 10);
    assert_eq!(s.ledger.pending(), 10);
    assert!(s.replicated.is_empty());
    drop(s);
    // The marks are on disk: a restart sends only the records never replicated.
    let s = service(&dir, &silent);
    assert_eq!(s.stats.records_replayed, 10);
    assert_eq!((s.held, s.pending.len()), (0, WINDOW));
}

#[test]
fn replicated_records_read_back_wait_for_the_role_then_are_taken_back_a_window_at_a_time() {
    let dir = Dir::new("held");
    let silent = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let mut s = service(&dir, &silent);
    s.take(Instant::now(), batch(10, |c| c < 8));
    drop(s);
    let mut s = service(&dir, &silent);
    assert_eq!((s.stats.records_replayed, s.held), (20, 16));
    // Only the records never replicated are loaded while the role is unknown.
    let mut seqs: Vec<u64> = s.pending.keys().copied().collect();
    seqs.sort_unstable();
    assert_eq!(seqs, vec![17, 18, 19, 20]);
    deliver_all_in_memory(&mut s);
    s.take_back(Instant::now());
    assert_eq!(s.held, 0);
    let mut order = Vec::new();
    for _ in 0..30 {
        let seqs = deliver_all_in_memory(&mut s);
        if seqs.is_empty() {
            break;
        }
        order.extend(seqs);
        s.refill(Instant::now());
    }
    assert_eq!(order, (1..=16).collect::<Vec<u64>>());
    assert_eq!(s.ledger.pending(), 0);
}

#[test]
fn records_on_disk_only_are_read_back_across_segments_which_go_once_delivered() {
    let dir = Dir::new("segments");
    let silent = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    // Segments of 128 KiB: 3,000 records of about 120 bytes take three.
    let mut s = service_bounded(&dir, &silent, 1 << 20);
    let now = Instant::now();
    s.take(now, batch(1500, |_| false));
    assert!(s.ledger.segments() >= 3, "{} segments", s.ledger.segments());
    assert_eq!(s.pending.len(), WINDOW);
    let mut order = Vec::new();
    for _ in 0..3000 {
        let seqs = deliver_all_in_memory(&mut s);
        if seqs.is_empty() {
            break;
        }
        order.extend(seqs);
        s.delete_delivered_segments();
        s.refill(now);
    }
    assert_eq!(order, (1..=3000).collect::<Vec<u64>>());
    assert_eq!((s.ledger.pending(), s.ledger.segments()), (0, 1));
    let files = std::fs::read_dir(&dir.0).map_or(0, Iterator::count);
    assert_eq!(files, 1, "delivered segments deleted");
}

/// A service on `dir` whose one server is `server` (the test answers for it), holding up to
/// `memory_window` records and `max_wait_failover` unanswered requests.
fn service_answered_by(
    dir: &Dir,
    server: &UdpSocket,
    memory_window: usize,
    max_wait_failover: u32,
) -> Service {
    service_with(dir, server, 1 << 30, memory_window, max_wait_failover)
}

fn answer_to(request: &[u8; super::radius::HEADER], secret: &[u8]) -> Vec<u8> {
    let mut a = vec![5, request[1], 0, 20];
    let mut md5 = md5::Context::new();
    md5.consume(&a);
    md5.consume(&request[4..]);
    md5.consume(secret);
    a.extend_from_slice(&md5.compute().0);
    a
}

/// Review finding: an identifier freed by a resend keeps the old request's header in
/// `Server::sent`; an answer read earlier in the same `receive` gives that identifier to a
/// record waiting for room (not written yet), and the late answer to the old request then
/// passed the check and acknowledged the new record, which was never sent: marked delivered,
/// then dropped as "undeliverable" by the next `send`.
#[test]
fn a_late_answer_to_a_resent_request_never_acknowledges_the_record_given_its_identifier() {
    let dir = Dir::new("late-answer");
    let srv = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let mut s = service_answered_by(&dir, &srv, 1000, 255);
    let t0 = Instant::now();
    // Record 1 sent with identifier 0, unanswered, sent again with identifier 1.
    s.take(t0, vec![(record(0, RecordKind::Start), false)]);
    s.send(Instant::now());
    let (seq, first, _) = s.servers[0].sent[0].expect("the first request");
    assert_eq!(seq, 1);
    let t1 = t0 + Duration::from_secs(61);
    s.delivery.handle_timeout(t1);
    s.send(Instant::now());
    assert_eq!(s.delivery.awaits(0, 1), Some(1));
    // 254 other calls take identifiers 2 to 255: 255 unanswered, no room.
    s.take(
        t1,
        (1..=254)
            .map(|c| (record(c, RecordKind::Start), false))
            .collect(),
    );
    s.send(Instant::now());
    let (_, second_call, _) = s.servers[0].sent[2].expect("identifier 2");
    // Record 256 waits for room; identifier 0 is the next one free.
    s.take(t1, vec![(record(1000, RecordKind::Start), false)]);
    assert_eq!(s.delivery.queued(), 1);
    // The server answers identifier 2, then (late) the first request with identifier 0.
    let super::Link::Udp(socket) = &s.servers[0].link else {
        panic!("a UDP server");
    };
    let port = socket.local_addr().expect("addr").port();
    let to = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    srv.send_to(&answer_to(&second_call, b"s"), to)
        .expect("sent");
    srv.send_to(&answer_to(&first, b"s"), to).expect("sent");
    std::thread::sleep(Duration::from_millis(50));
    s.receive(t1);
    s.send(Instant::now());
    assert!(
        s.ledger.is_pending(256),
        "record 256 was never sent to the server: it must still be pending"
    );
    assert_eq!(s.stats.records_undeliverable, 0);
    assert!(
        s.ledger.is_pending(1),
        "record 1's resend is not answered yet"
    );
}

/// A review finding: a record handed twice (held here since a restart, adopted from the
/// peer's table as well) was kept once only while its twin was in memory; with the window,
/// held records beyond it are on disk only when the adopted copies arrive. The ids of the
/// held records, read at start, keep the adopted copies out.
#[test]
fn a_record_held_on_disk_only_and_adopted_too_is_delivered_once() {
    let dir = Dir::new("adopted-twins");
    let silent = UdpSocket::bind("127.0.0.1:0").expect("a socket");
    let mut s = service(&dir, &silent);
    s.take(Instant::now(), batch(10, |_| true));
    drop(s);
    let mut s = service(&dir, &silent);
    assert_eq!(s.held, 20);
    // This node is the active again; the table still holds the 20 records: adopted.
    s.take_back(Instant::now());
    s.take(Instant::now(), batch(10, |_| true));
    let mut delivered: Vec<(String, &'static str)> = Vec::new();
    for _ in 0..100 {
        let mut seqs: Vec<u64> = s.pending.keys().copied().collect();
        if seqs.is_empty() {
            break;
        }
        seqs.sort_unstable();
        for seq in seqs {
            let r = &s.pending[&seq].record;
            delivered.push((r.session_id().to_owned(), r.kind.as_str()));
            s.delivery.forget(seq);
            s.mark_delivered(seq);
        }
        s.refill(Instant::now());
    }
    assert_eq!(s.ledger.pending(), 0);
    let mut once = delivered.clone();
    once.sort();
    once.dedup();
    assert_eq!(
        delivered.len(),
        once.len(),
        "{} deliveries of {} records",
        delivered.len(),
        once.len()
    );
}

#[test]
fn the_thread_sleeps_a_long_tick_when_idle_and_wakes_for_what_is_due() {
    // A fixed origin and durations from it: no clock is read in the decision.
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    assert_eq!(sleep_for(t0, false, None, None), IDLE_TICK);
    assert_eq!(sleep_for(t0, true, None, None), TICK);
    // A retransmission or a server's return before the tick.
    assert_eq!(sleep_for(t0, true, Some(t0 + ms(3)), None), ms(3));
    assert_eq!(sleep_for(t0, false, Some(t0 + ms(500)), None), IDLE_TICK);
    // The gathered batch's end, and one already past.
    assert_eq!(sleep_for(t0, false, None, Some(t0 + ms(30))), ms(30));
    assert_eq!(
        sleep_for(t0 + ms(40), false, None, Some(t0 + ms(30))),
        ms(0)
    );
    assert_eq!(
        sleep_for(t0, true, Some(t0 + ms(15)), Some(t0 + ms(10))),
        ms(10)
    );
}
