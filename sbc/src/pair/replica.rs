//! What a replicated dialog must be before this node installs it.
//!
//! The peer is authenticated (the sync channel proves the shared key), but a replica is
//! installed into the live engines at takeover, so it is checked first anyway: against a bug,
//! a peer of another version, or a key that leaked. A dialog from the sync channel
//! ([`ReplicaRules::check`]) must:
//!
//! - decode completely (bincode 2, no trailing bytes) and be stored under its own id;
//! - name, on both legs, an interface (realm) this node has, with a transport that interface
//!   offers;
//! - on the callee leg, go to one of this node's `session-agent`s, in that agent's realm: calls
//!   are only ever routed to session-agents, so a dialog whose callee is anywhere else was not
//!   made by a B2BUA with this configuration (it would make the SBC relay in-dialog requests
//!   to an address of someone's choosing); an agent named by DNS is at whatever address DNS
//!   gave the node that made the dialog, so on its interface any unicast peer is taken; so is
//!   any peer on an interface that caches registrations (`registration-caching`): calls and
//!   subscriptions go to registered phones there, at the flows they registered from (and a
//!   call made by `Replaces` goes to the far end of the call it replaced, a phone there too);
//! - have both legs' Call-IDs in the same shard (the callee leg's generated Call-ID embeds the
//!   caller's shard key), non-empty Call-IDs and local tags, peers with a port and a unicast
//!   address, and every string and the route set within SIP-sized bounds;
//! - carry a set-up record exactly when it is still being set up (`Trying`, `Early`,
//!   `Answered`), with SIP-sized fields, at most [`MAX_VIAS`] Vias, and messages no longer than
//!   the largest SIP message this node accepts;
//! - if its media is anchored: at most [`sbc_proto::sdp::MAX_STREAMS`] streams, each leg's port
//!   an even port of the steering pool of that leg's realm (so a replica cannot make the new
//!   active claim ports it does not own or that another realm uses).
//!
//! A refused dialog is not installed; the sync channel counts it (`invalid_entries`).

use std::net::SocketAddr;

use sbc_proto::shard;
use sbc_proto::sip::dialog::{Dialog, DialogState, Leg, LegTransport};

/// Longest Call-ID, tag, party, target or route accepted in a replica (bytes).
pub const MAX_FIELD: usize = 2048;
/// Most routes in one leg's route set.
pub const MAX_ROUTES: usize = 16;
/// Most Via values of a caller's INVITE in a replicated set-up.
pub const MAX_VIAS: usize = 32;
/// Longest message (our INVITE, the 2xx relayed) in a replicated set-up (bytes).
pub const MAX_SETUP_MESSAGE: usize = 65_535;

/// What this node's configuration allows a replicated dialog to name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplicaRules {
    /// Per interface (by index): whether it offers UDP, TCP, TLS.
    pub interfaces: Vec<(bool, bool, bool)>,
    /// Session-agents: address and the index of the interface of their realm.
    pub agents: Vec<(SocketAddr, usize)>,
    /// Interfaces that face a session-agent named by DNS: its address is whatever DNS said
    /// to the node that made the dialog, so a callee leg there is not tied to an address.
    pub dns_interfaces: Vec<usize>,
    /// Interfaces that cache registrations: new requests go to registered phones there, so a
    /// callee leg there is not tied to an agent's address.
    pub phone_interfaces: Vec<usize>,
    /// Per interface (by index): the index and ports of its realm's steering pool.
    pub pools: Vec<Option<(usize, std::ops::RangeInclusive<u16>)>>,
}

impl ReplicaRules {
    fn media(&self, d: &Dialog) -> Result<(), String> {
        let Some(m) = &d.media else {
            return Ok(());
        };
        if m.streams.len() > sbc_proto::sdp::MAX_STREAMS {
            return Err(format!("media with {} streams", m.streams.len()));
        }
        for (i, leg) in [&d.caller, &d.callee].into_iter().enumerate() {
            let Some((pool, ports)) = self.pools.get(leg.interface).cloned().flatten() else {
                return Err(format!(
                    "anchored media on interface {}, whose realm has no steering-pool",
                    leg.interface
                ));
            };
            if m.pools[i] != pool {
                return Err(format!(
                    "media leg {i} names pool {} (its realm's is {pool})",
                    m.pools[i]
                ));
            }
            for s in &m.streams {
                let port = s[i].port;
                if s[0].port == 0 && s[1].port == 0 {
                    continue; // a rejected stream holds no ports
                }
                if port % 2 != 0
                    || !ports.contains(&port)
                    || !ports.contains(&port.saturating_add(1))
                {
                    return Err(format!(
                        "media port {port} is not a pair of its realm's pool"
                    ));
                }
            }
        }
        Ok(())
    }

    /// Decodes and checks a replicated dialog stored under `key`.
    ///
    /// # Errors
    /// What is wrong with it, for the log.
    pub fn check(&self, key: &[u8], value: &[u8]) -> Result<Dialog, String> {
        // The limit: a length prefix beyond the entry is refused before anything is allocated.
        let cfg = bincode::config::standard().with_limit::<{ sbc_ha::sync::MAX_ENTRY_BYTES }>();
        let (d, used): (Dialog, usize) = bincode::serde::decode_from_slice(value, cfg)
            .map_err(|e| format!("not a dialog: {e}"))?;
        if used != value.len() {
            return Err("trailing bytes after the dialog".into());
        }
        if key != d.id.to_be_bytes() {
            return Err(format!("dialog {} stored under another key", d.id));
        }
        self.leg("caller", &d.caller)?;
        self.leg("callee", &d.callee)?;
        if !self
            .agents
            .iter()
            .any(|&(addr, iface)| addr == d.callee.peer && iface == d.callee.interface)
            && !self.dns_interfaces.contains(&d.callee.interface)
            && !self.phone_interfaces.contains(&d.callee.interface)
        {
            return Err(format!(
                "callee leg goes to {} on interface {}, which is no session-agent of this node \
                 (nor an interface of registered phones)",
                d.callee.peer, d.callee.interface
            ));
        }
        if shard::call_id_key(d.callee.call_id.as_bytes())
            != shard::call_id_key(d.caller.call_id.as_bytes())
        {
            return Err("the legs' Call-IDs are in different shards".into());
        }
        self.media(&d)?;
        Self::setup(&d)?;
        Ok(d)
    }

    fn setup(d: &Dialog) -> Result<(), String> {
        let in_setup = matches!(
            d.state,
            DialogState::Trying | DialogState::Early | DialogState::Answered
        );
        let s = match (&d.setup, in_setup) {
            (None, false) => return Ok(()),
            (Some(s), true) => s,
            (None, true) => return Err(format!("a {:?} dialog without its set-up", d.state)),
            (Some(_), false) => return Err(format!("a {:?} dialog with a set-up", d.state)),
        };
        let e = &s.caller_echo;
        let mut fields = vec![
            &s.caller_branch,
            &s.caller_sent_by,
            &e.from,
            &e.to,
            &e.call_id,
            &e.cseq,
            &s.callee_branch,
        ];
        fields.extend(&e.vias);
        if let Some(c) = &s.callee_echo {
            fields.extend([&c.uri, &c.via, &c.from, &c.to, &c.call_id]);
            fields.extend(&c.routes);
            if c.routes.len() > MAX_ROUTES {
                return Err("a set-up with too many routes".into());
            }
        }
        if s.caller_branch.is_empty() || s.callee_branch.is_empty() || e.vias.is_empty() {
            return Err("a set-up without its branches or Vias".into());
        }
        if e.vias.len() > MAX_VIAS
            || fields.iter().any(|f| f.len() > MAX_FIELD)
            || s.invite.len() > MAX_SETUP_MESSAGE
            || s.caller_2xx.len() > MAX_SETUP_MESSAGE
        {
            return Err("a set-up with a field beyond SIP-sized bounds".into());
        }
        if e.call_id != d.caller.call_id {
            return Err("a set-up answering another Call-ID than its caller leg's".into());
        }
        Ok(())
    }

    fn leg(&self, side: &str, leg: &Leg) -> Result<(), String> {
        let Some(&(udp, tcp, tls)) = self.interfaces.get(leg.interface) else {
            return Err(format!(
                "{side} leg names interface {} (this node has {})",
                leg.interface,
                self.interfaces.len()
            ));
        };
        let offered = match leg.transport {
            LegTransport::Udp => udp,
            LegTransport::Tcp => tcp,
            LegTransport::Tls => tls,
        };
        if !offered {
            return Err(format!(
                "{side} leg uses {} on interface {}, which does not offer it",
                leg.transport.via_token(),
                leg.interface
            ));
        }
        let ip = leg.peer.ip();
        if leg.peer.port() == 0 || ip.is_unspecified() || ip.is_multicast() {
            return Err(format!(
                "{side} leg's peer {} is not a unicast address",
                leg.peer
            ));
        }
        if leg.call_id.is_empty() || leg.local_tag.is_empty() {
            return Err(format!("{side} leg has an empty Call-ID or tag"));
        }
        let fields = [
            &leg.call_id,
            &leg.local_tag,
            &leg.local_party,
            &leg.remote_party,
            &leg.remote_target,
        ];
        if fields.iter().any(|f| f.len() > MAX_FIELD)
            || leg.remote_tag.as_ref().is_some_and(|t| t.len() > MAX_FIELD)
            || leg.route_set.len() > MAX_ROUTES
            || leg.route_set.iter().any(|r| r.len() > MAX_FIELD)
        {
            return Err(format!("{side} leg has a field beyond SIP-sized bounds"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sbc_config::{Config, Transport};

    fn leg(interface: usize, peer: &str, call_id: &str) -> Leg {
        Leg {
            interface,
            transport: LegTransport::Udp,
            peer: peer.parse().expect("addr"),
            call_id: call_id.into(),
            local_tag: "t1".into(),
            remote_tag: Some("t2".into()),
            local_party: "<sip:a@x>".into(),
            remote_party: "<sip:b@y>".into(),
            remote_target: "sip:b@y".into(),
            route_set: Vec::new(),
            local_cseq: 1,
            last_invite_cseq: 1,
        }
    }

    fn dialog() -> Dialog {
        let caller_cid = "abc@caller";
        let key = shard::call_id_key(caller_cid.as_bytes());
        Dialog {
            id: 42,
            caller: leg(0, "127.0.0.1:5090", caller_cid),
            callee: leg(1, "127.0.0.1:5080", &format!("b2b-{key:016x}-1")),
            state: DialogState::Confirmed,
            created_unix: 0,
            sdp_origin: [1, 2],
            sdp_version: [(0, 0); 2],
            media: None,
            setup: None,
            subscription: None,
            session_timer: None,
            leg_timers: None,
            accounting: None,
        }
    }

    use sbc_proto::media::{LegCounters, LegRecord, MediaRecord};

    fn enc(d: &Dialog) -> Vec<u8> {
        bincode::serde::encode_to_vec(d, bincode::config::standard()).expect("enc")
    }

    #[test]
    fn a_dialog_of_this_configuration_passes_and_forgeries_do_not() {
        let rules = crate::settings::replica_rules(&Config::embedded_default());
        let d = dialog();
        assert_eq!(rules.check(&42u64.to_be_bytes(), &enc(&d)), Ok(d.clone()));
        let refused = |d: &Dialog, key: u64| rules.check(&key.to_be_bytes(), &enc(d)).is_err();
        assert!(refused(&d, 7), "another key");
        let mut open_relay = d.clone();
        open_relay.callee.peer = "127.0.0.66:5060".parse().expect("addr");
        assert!(refused(&open_relay, 42), "callee not a session-agent");
        let mut bad = d.clone();
        bad.caller.interface = 9;
        assert!(refused(&bad, 42), "no such interface");
        let mut bad = d.clone();
        bad.callee.interface = 0;
        assert!(refused(&bad, 42), "agent reached through another realm");
        let mut bad = d.clone();
        bad.callee.call_id = "b2b-0000000000000001-1".into();
        assert!(refused(&bad, 42), "legs in different shards");
        let mut bad = d.clone();
        bad.caller.call_id = "x".repeat(MAX_FIELD + 1);
        assert!(refused(&bad, 42), "oversized field");
        let mut bad = d.clone();
        bad.caller.peer = "0.0.0.0:5060".parse().expect("addr");
        assert!(refused(&bad, 42), "unspecified peer");
        // Anchored media: ports of each leg's realm's pool (the default: access 20000..=20999,
        // core 21000..=21999), and nothing else.
        let leg = |port| LegRecord {
            port,
            signalled: None,
            remote: None,
            mux: false,
            latched: false,
            counters: LegCounters::default(),
        };
        let mut media = d.clone();
        media.media = Some(Box::new(MediaRecord {
            pools: [0, 1],
            streams: vec![[leg(20_000), leg(21_000)]],
        }));
        assert_eq!(
            rules.check(&42u64.to_be_bytes(), &enc(&media)),
            Ok(media.clone())
        );
        let mut bad = media.clone();
        if let Some(m) = bad.media.as_mut() {
            m.streams[0][0].port = 21_002;
        }
        assert!(refused(&bad, 42), "a port of the other realm's pool");
        let mut bad = media.clone();
        if let Some(m) = bad.media.as_mut() {
            m.streams[0][1].port = 21_001;
        }
        assert!(refused(&bad, 42), "an odd port");
        let mut bad = media.clone();
        if let Some(m) = bad.media.as_mut() {
            m.pools = [1, 1];
        }
        assert!(refused(&bad, 42), "another pool");
        let mut bytes = enc(&d);
        bytes.push(0);
        assert!(
            rules.check(&42u64.to_be_bytes(), &bytes).is_err(),
            "trailing"
        );
        assert!(rules.check(&42u64.to_be_bytes(), b"garbage").is_err());
        // A Call-ID claiming 2^60 bytes is an error, not an allocation: id 0, interface 0,
        // UDP, peer 127.0.0.1:5090, then the Call-ID's length.
        let mut huge = vec![0u8, 0, 0, 0, 127, 0, 0, 1, 251, 0xe2, 0x13, 0xfd];
        huge.extend_from_slice(&(1u64 << 60).to_le_bytes());
        let e = rules
            .check(&42u64.to_be_bytes(), &huge)
            .expect_err("refused");
        assert!(e.contains("LimitExceeded"), "{e}");
    }

    #[test]
    fn a_set_up_passes_only_with_its_state_and_within_bounds() {
        use sbc_proto::sip::dialog::{CallSetup, RequestEcho, ResponseEcho};
        let rules = crate::settings::replica_rules(&Config::embedded_default());
        let mut d = dialog();
        d.state = DialogState::Early;
        d.callee.remote_tag = None;
        d.setup = Some(Box::new(CallSetup {
            caller_branch: "z9hG4bKa".into(),
            caller_sent_by: "127.0.0.1:5090".into(),
            caller_echo: ResponseEcho {
                vias: vec!["SIP/2.0/UDP 127.0.0.1:5090;branch=z9hG4bKa".into()],
                from: "<sip:a@x>;tag=1".into(),
                to: "<sip:b@y>".into(),
                call_id: d.caller.call_id.clone(),
                cseq: "1 INVITE".into(),
            },
            callee_branch: "z9hG4bKsbc".into(),
            callee_echo: Some(RequestEcho {
                uri: "sip:b@127.0.0.1:5080".into(),
                via: "SIP/2.0/UDP 127.0.0.1:5062;branch=z9hG4bKsbc".into(),
                from: "<sip:a@127.0.0.1>;tag=t1".into(),
                to: "<sip:b@127.0.0.1:5080>".into(),
                call_id: d.callee.call_id.clone(),
                cseq: 1,
                routes: Vec::new(),
            }),
            invite: b"INVITE sip:b@127.0.0.1:5080 SIP/2.0\r\n".to_vec(),
            caller_2xx: Vec::new(),
        }));
        let refused = |d: &Dialog| rules.check(&42u64.to_be_bytes(), &enc(d)).is_err();
        assert_eq!(rules.check(&42u64.to_be_bytes(), &enc(&d)), Ok(d.clone()));
        let mut bad = d.clone();
        bad.state = DialogState::Confirmed;
        assert!(refused(&bad), "a confirmed dialog with a set-up");
        let mut bad = d.clone();
        bad.setup = None;
        assert!(refused(&bad), "a ringing dialog without one");
        let mut bad = d.clone();
        if let Some(s) = bad.setup.as_mut() {
            s.caller_echo.vias = vec!["v".into(); MAX_VIAS + 1];
        }
        assert!(refused(&bad), "too many Vias");
        let mut bad = d.clone();
        if let Some(s) = bad.setup.as_mut() {
            s.invite = vec![b'x'; MAX_SETUP_MESSAGE + 1];
        }
        assert!(refused(&bad), "an oversized INVITE");
        let mut bad = d.clone();
        if let Some(s) = bad.setup.as_mut() {
            s.caller_echo.call_id = "another".into();
        }
        assert!(refused(&bad), "answers to another call");
    }

    #[test]
    fn a_transport_the_interface_does_not_offer_is_refused() {
        let mut cfg = Config::embedded_default();
        cfg.sip_interfaces[0].transports = vec![Transport::Udp];
        let rules = crate::settings::replica_rules(&cfg);
        let mut d = dialog();
        d.caller.transport = LegTransport::Tcp;
        assert!(rules.check(&42u64.to_be_bytes(), &enc(&d)).is_err());
    }

    #[test]
    fn a_callee_leg_to_a_phone_passes_only_where_phones_register() {
        let mut d = dialog();
        d.callee.interface = 0;
        d.callee.peer = "127.0.0.66:5060".parse().expect("addr");
        let rules = crate::settings::replica_rules(&Config::embedded_default());
        assert!(rules.check(&42u64.to_be_bytes(), &enc(&d)).is_err());
        let mut cfg = Config::embedded_default();
        cfg.sip_interfaces[0].registration_caching = true;
        let rules = crate::settings::replica_rules(&cfg);
        assert_eq!(rules.check(&42u64.to_be_bytes(), &enc(&d)), Ok(d.clone()));
        let mut core = d.clone();
        core.callee.interface = 1;
        assert!(
            rules.check(&42u64.to_be_bytes(), &enc(&core)).is_err(),
            "not toward the core, where only agents are"
        );
    }
}
