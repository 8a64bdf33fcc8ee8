//! The SIP trace: whatever bytes a stranger sends reach the trace (refused and dropped messages
//! are traced too), so the monitor's reading of a message (users, method, Call-ID), the
//! credential masking, the ring, the ladder, the pcap export and the HEP encoding must take any
//! bytes without panicking; a HEP packet decodes back to what was encoded, with the credentials
//! of `Authorization` lines masked. The first byte chooses the direction, the leg, the
//! transport, the address family and whether the message belongs to a call.
#![no_main]

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use sbc_proto::engine::{TraceEvent, TracedCall};
use sbc_proto::sip::dialog::LegTransport;
use sbc_proto::trace::capture::{ladder, Direction, LegSide, TraceFilter, TraceRing};
use sbc_proto::trace::hep;
use sbc_proto::trace::mask::mask_credentials;
use sbc_proto::trace::monitor::{ConfiguredFilters, Monitor, Topology};
use sbc_proto::trace::pcap::to_pcap;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, message)) = data.split_first() else {
        return;
    };
    let v6 = flags & 8 != 0;
    let (local, peer): (SocketAddr, SocketAddr) = if v6 {
        ("[::1]:5060".parse().unwrap(), "[::2]:5070".parse().unwrap())
    } else {
        (
            "127.0.0.1:5060".parse().unwrap(),
            "127.0.0.2:5070".parse().unwrap(),
        )
    };
    let event = TraceEvent {
        at_unix_us: 1_796_083_200_000_000,
        direction: if flags & 1 == 0 {
            Direction::Received
        } else {
            Direction::Sent
        },
        interface: usize::from(flags & 2 != 0),
        transport: match (flags >> 4) % 3 {
            0 => LegTransport::Udp,
            1 => LegTransport::Tcp,
            _ => LegTransport::Tls,
        },
        local,
        peer,
        call: (flags & 4 != 0).then(|| TracedCall {
            id: (flags & 64 != 0).then_some(7),
            leg: if flags & 128 == 0 {
                LegSide::Caller
            } else {
                LegSide::Callee
            },
            correlation: Arc::from("fuzz-call@127.0.0.1"),
        }),
        note: None,
        bytes: Bytes::copy_from_slice(message),
    };
    let mut monitor = Monitor::new(
        Some(ConfiguredFilters {
            filters: vec![
                TraceFilter {
                    user: Some("alice".into()),
                    ..TraceFilter::default()
                },
                TraceFilter {
                    agent: Some("pbx".into()),
                    method: Some("INVITE".into()),
                    ..TraceFilter::default()
                },
            ],
            match_any: true,
        }),
        Topology {
            realms: vec!["access".into(), "core".into()],
            agents: vec![(peer.ip(), "pbx".into())],
        },
        TraceRing::new(1 << 16, 8, 8),
    );
    monitor.capture_start(TraceFilter::default());
    monitor.record(&event);
    monitor.record(&event);
    for capture in monitor.ring().captures() {
        let _ = ladder(capture);
        if message.len() < 60_000 {
            to_pcap(capture).expect("a message that fits one packet exports");
        }
    }
    let masked = mask_credentials(message);
    let mut packet = Vec::new();
    if hep::encode_event(&event, 2001, Some(b"id"), &mut packet).is_ok() {
        let back = hep::decode(&packet).expect("what was encoded decodes");
        assert_eq!(back.payload, &masked[..]);
        let (src, dst) = match event.direction {
            Direction::Received => (peer, local),
            Direction::Sent => (local, peer),
        };
        assert_eq!((back.src, back.dst), (src, dst));
        assert_eq!(
            back.correlation_id,
            event.call.as_ref().map(|c| c.correlation.as_bytes())
        );
    }
});
