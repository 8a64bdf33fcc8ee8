//! Writes the seed corpora of the fuzz targets into `corpus/<target>/` (run from `fuzz/`):
//! genuine heartbeats, probes, answers, handshake messages and frames, each in the framing its
//! target expects (a mode byte, then 1-byte-length-prefixed chunks).
#![forbid(unsafe_code)]

use std::path::Path;

use sbc_fuzz::keys;
use sbc_ha::channel::{connected_pair, Initiator, Responder};
use sbc_ha::wire::{Heartbeat, NodeId, PathId, WitnessAnswer, WitnessProbe};
use sbc_ha::{State, SyncEntry, SyncFrame};

fn chunked(mode: u8, parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![mode];
    for p in parts {
        let n = u8::try_from(p.len()).unwrap_or(0);
        out.push(n);
        out.extend_from_slice(if n == 0 { p } else { &p[..usize::from(n)] });
        if n == 0 {
            break;
        }
    }
    out
}

fn write(dir: &str, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let d = Path::new("corpus").join(dir);
    std::fs::create_dir_all(&d)?;
    std::fs::write(d.join(name), bytes)
}

fn enc<T: serde::Serialize>(v: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(v, bincode::config::standard()).unwrap_or_default()
}

fn main() -> std::io::Result<()> {
    let keys = keys();
    let hb = |seq: u64, echo: u64, state: State| Heartbeat {
        node: NodeId::from_name("b"),
        incarnation: 9,
        echo,
        state,
        health: 100,
        flags: 2 | 8 | 16,
        seq,
        config_version: 1,
        epoch: 3,
        path: PathId(0),
        timestamp_ms: 1000,
    };
    let mut datagrams = Vec::new();
    let mut payloads = Vec::new();
    for (seq, state) in [(1, State::Initial), (2, State::Active), (3, State::Standby)] {
        let h = hb(seq, 7, state);
        let mut d = Vec::new();
        h.encode(&keys, &mut d).map_err(std::io::Error::other)?;
        datagrams.push(d);
        payloads.push(enc(&h));
    }
    write("heartbeat", "raw-genuine", &chunked(0, &datagrams))?;
    write("heartbeat", "sealed-payloads", &chunked(1, &payloads))?;
    write(
        "heartbeat",
        "unverified",
        &chunked(1, &[enc(&hb(4, 0, State::Active))]),
    )?;

    let probe = WitnessProbe {
        node: NodeId::from_name("b"),
        incarnation: 9,
        echo: 5,
        seq: 1,
        epoch: 1,
        want: true,
        lease_ms: 1050,
    };
    let answer = WitnessAnswer {
        node: NodeId::from_name("a"),
        incarnation: 7,
        seq: 1,
        witness: 5,
        granted: true,
        holder: Some(NodeId::from_name("a")),
        remaining_ms: 1000,
    };
    let mut p = Vec::new();
    probe.encode(&keys, &mut p).map_err(std::io::Error::other)?;
    let mut a = Vec::new();
    answer
        .encode(&keys, 1, &mut a)
        .map_err(std::io::Error::other)?;
    write("witness", "raw-genuine", &chunked(0, &[p, a]))?;
    write(
        "witness",
        "sealed-payloads",
        &chunked(1, &[enc(&probe), enc(&answer)]),
    )?;

    let psk = keys.sync_psk;
    let (_, m1) = Initiator::start(&psk, [1; 32]).map_err(std::io::Error::other)?;
    let (_, m2) = Responder::respond(&psk, [2; 32], &m1).map_err(std::io::Error::other)?;
    let mut first = vec![0u8];
    first.extend_from_slice(&m1);
    write("sync_channel", "handshake-1", &first)?;
    let mut second = vec![1u8];
    second.extend_from_slice(&m2);
    write("sync_channel", "handshake-2", &second)?;
    let frames: Vec<Vec<u8>> = [
        SyncFrame::Hello {
            node: NodeId::from_name("b"),
            epoch: 2,
            config_version: 0,
            exchange: true,
        },
        SyncFrame::Snapshot {
            items: vec![SyncEntry {
                key: 42u64.to_be_bytes().to_vec(),
                rev: 1,
                value: Some(vec![1, 2, 3]),
            }],
            last: true,
        },
        SyncFrame::Upsert {
            key: vec![1],
            rev: 2,
            value: vec![9; 40],
        },
        SyncFrame::Delete {
            key: vec![1],
            rev: 3,
        },
        SyncFrame::ConfigPush {
            version: 4,
            toml: "[sip-config]\nt1-ms = 500\n".into(),
        },
        SyncFrame::Ack { received: 5 },
    ]
    .iter()
    .filter_map(|f| f.encode().ok().map(|b| b.to_vec()))
    .collect();
    write("sync_channel", "frames", &chunked(3, &frames))?;
    let (mut a, _) = connected_pair(&psk, &psk, 3).map_err(std::io::Error::other)?;
    let mut messages = Vec::new();
    for f in &frames {
        messages.extend(a.seal(f).map_err(std::io::Error::other)?);
    }
    write("sync_channel", "transport", &chunked(2, &messages))?;

    // The SIP edge: whole messages, as a datagram or one TCP frame.
    let invite = "INVITE sip:bob@127.0.0.1:5060 SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bK-1;rport\r\n\
        Max-Forwards: 70\r\nFrom: <sip:alice@127.0.0.1>;tag=a1\r\nTo: <sip:bob@127.0.0.1>\r\n\
        Call-ID: 1-seed@127.0.0.1\r\nCSeq: 1 INVITE\r\nContact: <sip:alice@127.0.0.1:5090>\r\n\
        Content-Type: application/sdp\r\nContent-Length: 4\r\n\r\nv=0\n";
    let bye = "BYE sip:sbc@127.0.0.1 SIP/2.0\r\nv: SIP/2.0/TCP [::1]:5090;branch=z9hG4bK-2\r\n\
        f: <sip:alice@x>;tag=a1\r\nt: <sip:bob@y>;tag=b1\r\ni: 1-seed@127.0.0.1\r\nCSeq: 2 BYE\r\nl: 0\r\n\r\n";
    let ok = "SIP/2.0 200 OK\r\nVia: SIP/2.0/UDP 127.0.0.1;branch=z9hG4bK-1\r\nFrom: <sip:a@x>;tag=a1\r\n\
        To: <sip:b@y>;tag=b1\r\nCall-ID: c\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n";
    let two_to = invite.replacen(
        "To: <sip:bob@127.0.0.1>\r\n",
        "To: <sip:bob@127.0.0.1>\r\nt: <sip:bob@127.0.0.1>;tag=x\r\n",
        1,
    );
    let tel = invite.replacen("sip:bob@127.0.0.1:5060", "tel:+1-201-555-0123", 1);
    for (name, m) in [("invite", invite), ("bye-compact", bye), ("response", ok)] {
        write("sip_message", name, m.as_bytes())?;
    }
    write("sip_message", "duplicate-to", two_to.as_bytes())?;
    write("sip_message", "tel-uri", tel.as_bytes())?;
    // IPv6 references (RFC 5118): a valid INVITE on [::1] with an IPv6 Via and Contact, the
    // ambiguous-port form, an IPv4-mapped address, and the unbracketed form that is refused.
    let v6 = invite
        .replace("127.0.0.1:5060", "[::1]:5060")
        .replace("127.0.0.1:5090", "[2001:db8::9:1]:5090")
        .replace("127.0.0.1", "[2001:db8::10]");
    write("sip_message", "ipv6-invite", v6.as_bytes())?;
    let ambiguous = v6.replacen("sip:bob@[::1]:5060", "sip:[2001:db8::10:5070]", 1);
    write("sip_message", "ipv6-port-ambiguous", ambiguous.as_bytes())?;
    let mapped = v6.replacen("sip:bob@[::1]:5060", "sip:bob@[::ffff:192.0.2.128]", 1);
    write("sip_message", "ipv6-mapped", mapped.as_bytes())?;
    let unbracketed = v6.replacen("sip:bob@[::1]:5060", "sip:bob@2001:db8::10", 1);
    write("sip_message", "ipv6-unbracketed", unbracketed.as_bytes())?;
    let mut stream = vec![7u8, 200];
    stream.extend_from_slice(b"\r\n\r\n");
    stream.extend_from_slice(invite.as_bytes());
    stream.extend_from_slice(b"\r\n\r\n");
    stream.extend_from_slice(bye.as_bytes());
    write("tcp_framer", "pipelined", &stream)?;
    let mut bad = vec![3u8, 10];
    bad.extend_from_slice(b"OPTIONS sip:x SIP/2.0\r\nContent-Length: x\r\n\r\nrest");
    write("tcp_framer", "bad-length", &bad)?;

    // The ACLI: the README's configuration dialogue and a few operational lines.
    let script =
        "configure terminal\nsystem\nsystem-config\noptions +critical-memory-abort=switchover\n\
        alarm-threshold\ntype memory\nseverity critical\nvalue 80\ndone\nexit\nexit\nexit\nexit\n\
        configure terminal\nsession-router\nsip-config\nt1-ms 400\ntcp-max-connections 10\ndone\n\
        exit\nexit\nshow health\nshow running-config\n";
    write("acli", "readme-dialogue", script.as_bytes())?;
    write("acli", "sip-interface", b"configure terminal\nmedia-manager\nsip-interface\nrealm edge\nport 5070\ntransports udp\ndone\nno edge\n")?;

    // SDP: an offer with ICE and RTCP, an old-style hold, rtcp-mux over IPv6.
    for (name, sdp) in SDP_SEEDS {
        write("sdp", name, sdp.as_bytes())?;
    }

    // Media: open a call with one stream, signal both legs, RTP both ways, a stranger, time
    // passing, close (4 bytes an operation: kind, id, argument, address/byte).
    let ops: [[u8; 4]; 9] = [
        [0, 1, 1, 0],
        [1, 1, 0, 1],
        [1, 1, 1, 2],
        [2, 1, 0, 1],
        [3, 1, 2, 2],
        [5, 0, 60, 0],
        [2, 1, 0, 3],
        [4, 1, 0, 0],
        [2, 1, 0, 1],
    ];
    write("media", "one-call", &ops.concat())?;

    // The trace: a flags byte (direction, interface, call, family, transport, leg), then a
    // message as it may reach the trace, credentials and all.
    let register =
        "REGISTER sip:example.test SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.2:5070;branch=z9hG4bKr1\r\n\
         From: <sip:alice@example.test>;tag=1\r\nTo: <sip:alice@example.test>\r\nCall-ID: r1\r\n\
         CSeq: 2 REGISTER\r\nAuthorization: Digest username=\"alice\", realm=\"example.test\", \
         nonce=\"n\", uri=\"sip:example.test\", response=\"0123456789abcdef\"\r\n\
         Content-Length: 0\r\n\r\n";
    let invite =
        "INVITE sip:bob@[::1]:5060 SIP/2.0\r\nVia: SIP/2.0/TCP [::2]:5070;branch=z9hG4bKi1\r\n\
         f: \"Alice\" <sip:alice@[::2]>;tag=1\r\nt: <tel:+15551234>\r\ni: c1\r\nCSeq: 1 INVITE\r\n\
         l: 0\r\n\r\n";
    let response = "SIP/2.0 200 OK\r\nCSeq: 1 INVITE\r\nCall-ID: c1\r\n\r\n";
    for (name, flags, text) in [
        ("register-received", 0u8, register),
        ("invite-v6-tcp-call", 8 | 16 | 4 | 64, invite),
        ("response-sent-callee", 1 | 2 | 4 | 128, response),
        ("garbage", 0, "\r\n\r\nINVITE"),
    ] {
        let mut seed = vec![flags];
        seed.extend_from_slice(text.as_bytes());
        write("trace", name, &seed)?;
    }

    // The registration cache: 0 + a STUN binding request, 1 + a replicated binding, 2 + a
    // REGISTER.
    let mut stun = vec![0u8, 0x00, 0x01, 0x00, 0x00, 0x21, 0x12, 0xa4, 0x42];
    stun.extend_from_slice(&[7; 12]);
    write("registration", "stun-binding-request", &stun)?;
    let binding = "binding/1\n3735928559\nsip:alice@example.test\nsip:alice@127.0.0.50:5070\n0\nudp\n\
                   127.0.0.50:40000\nabc@127.0.0.50\n7\n1796083230000\n30\n1796086800000\n3600\n\
                   1796083200000";
    let mut seed = vec![1u8];
    seed.extend_from_slice(binding.as_bytes());
    write("registration", "binding", &seed)?;
    let mut seed = vec![2u8];
    seed.extend_from_slice(register.as_bytes());
    write("registration", "register", &seed)?;

    // Accounting: 0 + a replicated record, 1 + a spool segment (a record and its mark).
    let record = sbc_accounting::CallRecord {
        kind: sbc_accounting::RecordKind::Stop,
    text: sbc_accounting::PackedText::pack(&sbc_accounting::RecordText {
        session_id: "00000000deadbeef",
        calling: "alice",
        called: "+15551234",
        ingress_realm: "access",
        egress_realm: "core",
        egress_agent: "core",
        ingress_call_id: "a@127.0.0.1",
        egress_call_id: "b@127.0.0.2",
        caller_address: "127.0.0.1:5070",
        callee_address: "127.0.0.2:5080",
        node: "sbc-a",
        ..sbc_accounting::RecordText::default()
    }),
        interim: 0,
        setup_ms: 1_796_083_200_000,
        connect_ms: 1_796_083_201_250,
        disconnect_ms: 1_796_083_261_500,
        status: 200,
        ended_by: sbc_accounting::EndedBy::Caller,
        reroutes: 1,
        caller_to_callee: sbc_accounting::MediaFigures {
            packets: 3000,
            octets: 516_000,
            lost: 2,
        },
        callee_to_caller: sbc_accounting::MediaFigures::default(),
        event_ms: 1_796_083_261_500,
    };
    let mut seed = vec![0u8];
    seed.extend_from_slice(&record.to_wire());
    write("accounting", "replicated-record", &seed)?;
    let mut seed = vec![1u8];
    seed.extend(sbc_accounting::spool::encode(
        &sbc_accounting::spool::SpoolEntry::Record {
            seq: 7,
            record: Box::new(record),
            replicated: true,
        },
    ));
    seed.extend(sbc_accounting::spool::encode(
        &sbc_accounting::spool::SpoolEntry::Delivered { seq: 7 },
    ));
    write("accounting", "spool-segment", &seed)?;
    Ok(())
}

/// The SDP seeds (also what `corpus/sdp/` holds).
const SDP_SEEDS: [(&str, &str); 3] = [
    (
        "offer-ice-rtcp",
        "v=0\r\no=alice 2890844526 2890844526 IN IP4 10.1.1.1\r\ns=-\r\nc=IN IP4 10.1.1.1\r\n\
         t=0 0\r\nm=audio 49170 RTP/AVP 0 8 101\r\na=rtpmap:0 PCMU/8000\r\n\
         a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=ptime:20\r\n\
         a=rtcp:49171 IN IP4 10.1.1.1\r\na=ice-ufrag:8hhY\r\na=ice-pwd:asd88fgpdd777uzjYhagZg\r\n\
         a=candidate:1 1 UDP 2130706431 10.1.1.1 49170 typ host\r\na=sendrecv\r\n\
         m=video 0 RTP/AVP 96\r\na=rtpmap:96 H264/90000\r\n",
    ),
    (
        "hold-by-address",
        "v=0\r\no=- 1 2 IN IP4 10.1.1.1\r\ns=-\r\nc=IN IP4 0.0.0.0\r\nt=0 0\r\n\
         m=audio 49170 RTP/AVP 0\r\na=sendonly\r\n",
    ),
    (
        "ipv6-rtcp-mux",
        "v=0\r\no=- 1 1 IN IP6 2001:db8::1\r\ns=-\r\nc=IN IP6 2001:db8::1\r\nt=0 0\r\n\
         m=audio 4000 RTP/AVP 0\r\nc=IN IP6 2001:db8::2\r\na=rtcp-mux\r\na=rtcp:4000\r\n",
    ),
];
