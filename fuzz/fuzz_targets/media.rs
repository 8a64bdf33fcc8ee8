//! The media table driven by arbitrary operations (open in two pools, extend, signal with and
//! without RTCP mux, packets from anyone, records restored into a second table, close, time
//! passing): it never panics, each pool's free and used pairs always add up, a packet is only
//! ever sent out of a port of an open session, and a closed session's ports forward nothing.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use libfuzzer_sys::fuzz_target;
use sbc_proto::media::{MediaSettings, MediaTable, Side};

fuzz_target!(|data: &[u8]| {
    let t0 = Instant::now();
    let mut now = t0;
    let mut m = MediaTable::new(MediaSettings {
        pools: vec![30_000..=30_031, 30_032..=30_063],
        latch_window: Duration::from_secs(10),
        latch_signalled_ip_only: data.first().is_some_and(|b| b & 1 == 1),
        inactivity: Some(Duration::from_secs(30)),
    });
    let total = m.pool(0).1 + m.pool(1).1;
    let mut standby = MediaTable::new(m.settings().clone());
    let mut open: Vec<u64> = Vec::new();
    let addr = |b: u8| SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, b % 4)), 4000 + u16::from(b % 8));
    for op in data.chunks(4) {
        let [kind, a, b, c] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0), *op.get(3).unwrap_or(&0)];
        let id = u64::from(a % 8);
        match kind % 8 {
            0 => {
                let pools = [usize::from(c & 1), usize::from((c >> 1) & 1)];
                // Up to three streams, each accepted or rejected by a bit of `b`.
                let accepted: Vec<bool> = (0..usize::from(b % 4)).map(|i| b & (0x10 << i) != 0).collect();
                if m.open(now, id, 0, pools, &accepted).is_ok() {
                    open.push(id);
                }
            }
            1 => {
                let side = if b & 1 == 0 { Side::Caller } else { Side::Callee };
                let _ = m.signal(now, id, usize::from(b >> 1) % 3, side, addr(c), None, c & 0x80 != 0);
            }
            6 => {
                let accepted: Vec<bool> = (0..usize::from(b % 5)).map(|i| c & (1 << i) != 0).collect();
                let _ = m.extend(now, id, &accepted);
            }
            7 => {
                // A record restores on a fresh standby table, or is refused whole.
                if let Some(r) = m.record(id) {
                    let before = standby.pool(0).0 + standby.pool(1).0;
                    match standby.restore(now, id, 0, &r) {
                        Ok(()) => assert!(standby.session(id).is_some()),
                        Err(_) => assert_eq!(standby.pool(0).0 + standby.pool(1).0, before),
                    }
                }
            }
            2 | 3 => {
                let port = 30_000 + u16::from(b % 64);
                let packet = [0x80, c, 0, c, 0, 0, 0, 0, 0, 0, 0, a];
                if let Ok(f) = m.handle_packet(now, port, addr(c), &packet) {
                    // Sent from a port of an open session.
                    let owners: Vec<u64> = open
                        .iter()
                        .copied()
                        .filter(|s| {
                            m.session(*s).is_some_and(|x| {
                                [Side::Caller, Side::Callee].iter().any(|side| {
                                    x.ports(*side)
                                        .iter()
                                        .any(|p| *p == f.from_port || *p + 1 == f.from_port)
                                })
                            })
                        })
                        .collect();
                    assert!(!owners.is_empty(), "sent from a port no session holds");
                }
            }
            4 => {
                if m.close(id).is_some() {
                    open.retain(|s| *s != id);
                }
            }
            _ => {
                now += Duration::from_millis(u64::from(b) * 250);
                m.handle_timeout(now);
                while m.poll_event().is_some() {}
            }
        }
        let used: usize = open
            .iter()
            .filter_map(|s| m.session(*s))
            .map(|s| {
                [Side::Caller, Side::Callee]
                    .iter()
                    .map(|side| s.ports(*side).iter().filter(|p| **p != 0).count())
                    .sum::<usize>()
            })
            .sum();
        assert_eq!(m.pool(0).0 + m.pool(1).0 + used, total, "the pools' pairs do not add up");
        assert_eq!(m.len(), open.len());
    }
});
