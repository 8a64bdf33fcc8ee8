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
    write("heartbeat", "unverified", &chunked(1, &[enc(&hb(4, 0, State::Active))]))?;

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
    answer.encode(&keys, 1, &mut a).map_err(std::io::Error::other)?;
    write("witness", "raw-genuine", &chunked(0, &[p, a]))?;
    write("witness", "sealed-payloads", &chunked(1, &[enc(&probe), enc(&answer)]))?;

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
        SyncFrame::Delete { key: vec![1], rev: 3 },
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
    Ok(())
}
