//! The threaded shell of a worker group, without sockets: messages dispatched from one thread
//! while workers are added and retired (real threads, real hand-overs) must each be processed
//! once, and those of one shard in the order they arrived.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use bytes::Bytes;
use sbc_config::Config;
use sbc_proto::engine::{DialogChange, Inbound, Transmit};
use sbc_proto::shard;
use sbc_proto::sip::classify::classify;
use sbc_proto::sip::dialog::LegTransport;

use super::{lock, Ctx, Group, Outlet, Shards};

/// Records what the engines send, in the order the workers send it.
#[derive(Default)]
struct Recorder {
    sent: Mutex<Vec<Transmit>>,
}

impl Outlet for Recorder {
    fn send(&self, t: Transmit) {
        lock(&self.sent).push(t);
    }

    fn dialog_change(&self, _change: DialogChange) {}
}

impl Recorder {
    /// The Call-IDs of the `100 Trying`s sent so far, in order.
    fn tryings(&self) -> Vec<String> {
        lock(&self.sent)
            .iter()
            .filter_map(|t| {
                let text = std::str::from_utf8(&t.payload).ok()?;
                if !text.starts_with("SIP/2.0 100") {
                    return None;
                }
                text.lines()
                    .find_map(|l| l.strip_prefix("Call-ID: "))
                    .map(str::to_owned)
            })
            .collect()
    }
}

const CALLER: &str = "127.0.0.1:40000";

fn invite(call_id: &str, access: SocketAddr) -> Bytes {
    Bytes::from(format!(
        "INVITE sip:bob@{access} SIP/2.0\r\n\
         Via: SIP/2.0/UDP {CALLER};branch=z9hG4bK-{call_id}\r\n\
         Max-Forwards: 70\r\n\
         From: <sip:alice@127.0.0.1>;tag=a-{call_id}\r\n\
         To: <sip:bob@{access}>\r\n\
         Call-ID: {call_id}\r\n\
         CSeq: 1 INVITE\r\n\
         Contact: <sip:alice@{CALLER}>\r\n\
         Content-Length: 0\r\n\r\n"
    ))
}

#[test]
fn scaling_up_and_down_while_messages_arrive_loses_and_reorders_nothing() {
    const CALLS: usize = 3000;
    let mut cfg = Config::embedded_default();
    // Nothing refused for queueing: this test is about hand-overs, not overload.
    cfg.sip_config.queue_size = 65_536;
    cfg.sip_config.max_queue_delay_ms = 0;
    let engine = crate::settings::engine_config(&cfg).expect("the default configuration");
    let access = cfg.sip_interfaces[0].socket_addr();
    let out = Arc::new(Recorder::default());
    let ctx = Arc::new(Ctx {
        shards: Arc::new(Shards::new(&engine)),
        out: out.clone(),
        router: std::sync::RwLock::new(Arc::clone(&engine.router)),
    });
    let group = Group::start(
        "test".into(),
        1,
        None,
        Duration::from_secs(1),
        crate::settings::work_settings(&cfg),
        &ctx,
    )
    .expect("a group");

    let call_ids: Vec<String> = (0..CALLS).map(|i| format!("call-{i}@127.0.0.1")).collect();
    let dispatcher = {
        let (group, out, call_ids) = (group.clone(), out.clone(), call_ids.clone());
        let source: SocketAddr = CALLER.parse().expect("address");
        thread::spawn(move || {
            for (i, id) in call_ids.iter().enumerate() {
                let data = invite(id, access);
                let c = classify(&data);
                let inbound = Inbound {
                    interface: 0,
                    transport: LegTransport::Udp,
                    source,
                    data,
                };
                group.dispatch(inbound, c, &*out);
                if i % 5 == 0 {
                    // Spread the arrivals over the hand-overs below.
                    thread::sleep(Duration::from_micros(50));
                }
            }
        })
    };
    // Meanwhile: 1 -> 4 workers, then back to 2, retiring the oldest each time.
    for _ in 0..3 {
        group.add_worker(&ctx).expect("a new worker");
    }
    for _ in 0..2 {
        let oldest = lock(&group.workers)[0].clone();
        group.retire(&oldest);
    }
    dispatcher.join().expect("the dispatcher");
    assert_eq!(lock(&group.workers).len(), 2);

    // A bound on completion, not a performance threshold: the workers drain what is queued.
    let deadline = Instant::now() + Duration::from_secs(60);
    while out.tryings().len() < CALLS && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    group.stop();
    let tryings = out.tryings();
    assert_eq!(tryings.len(), CALLS, "every INVITE answered exactly once");
    let mut answered = tryings.clone();
    answered.sort();
    let mut expected = call_ids.clone();
    expected.sort();
    assert_eq!(answered, expected, "no INVITE lost, none answered twice");
    // Within one shard, the answers come in the order the INVITEs arrived.
    for s in 0..super::SHARDS {
        let of_shard = |ids: &[String]| -> Vec<String> {
            ids.iter()
                .filter(|id| Shards::of_key(shard::call_id_key(id.as_bytes())) == s)
                .cloned()
                .collect()
        };
        assert_eq!(
            of_shard(&tryings),
            of_shard(&call_ids),
            "shard {s} reordered"
        );
    }
}

/// A scrape on the I/O thread reads the free shards at once and leaves those a worker holds
/// for later, never waiting; the sum is the blocking one.
#[test]
fn free_shards_are_read_and_held_ones_left_for_later() {
    let cfg = Config::embedded_default();
    let engine = crate::settings::engine_config(&cfg).expect("the default configuration");
    let shards = Shards::new(&engine);
    let (mut total, mut calls) = (sbc_proto::engine::Stats::default(), 0);
    let mut pending: Vec<usize> = (0..super::SHARDS).collect();
    {
        let _held = lock(&shards.cells[7]);
        super::add_free_shards(&shards, &mut pending, &mut total, &mut calls);
        assert_eq!(pending, [7], "only the held shard is left");
    }
    super::add_free_shards(&shards, &mut pending, &mut total, &mut calls);
    assert!(pending.is_empty());
    assert_eq!((total, calls), super::totals(&shards));
    let all: Vec<usize> = (0..super::SHARDS).collect();
    assert_eq!(super::sum_shards(&shards, &all), super::totals(&shards));
}
