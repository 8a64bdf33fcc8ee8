//! Health pings: an OPTIONS (the agent's `ping-method`) to a session-agent, sent when the
//! node's board says one is due ([`crate::routing::board::AgentBoard::take_due_pings`]), its
//! answer handed back to the board. The shell picks the engine whose shard is the agent's
//! index modulo the shard count; the ping's Call-ID carries that shard's key, so its answer
//! comes back to the same engine.

use std::sync::Arc;
use std::time::Instant;

use super::build::empty_message;
use super::transactions::Purpose;
use super::Engine;
use crate::sip::dialog::{Leg, Side};
use crate::sip::message::{uri_host, Method};

impl Engine {
    /// Sends a health ping to agent `agent` (an index into the router's agents).
    pub fn send_ping(&mut self, now: Instant, agent: usize) {
        self.now = Some(now);
        let router = Arc::clone(&self.cfg.router);
        let Some(target) = router.agent(agent) else {
            return;
        };
        let Some(our_host) = self
            .cfg
            .interfaces
            .get(target.hop.interface)
            .map(|i| uri_host(i.addr.ip()))
        else {
            return;
        };
        self.trace_begin();
        let uri = format!("sip:{}", target.uri_host());
        let key = self.ids.shard();
        let leg = Leg {
            interface: target.hop.interface,
            transport: target.hop.transport,
            peer: target.hop.addr,
            call_id: self.ids.b2b_call_id(key),
            local_tag: self.ids.tag(),
            remote_tag: None,
            local_party: format!("<sip:ping@{our_host}>"),
            remote_party: format!("<{uri}>"),
            remote_target: uri,
            route_set: Vec::new(),
            local_cseq: 1,
            last_invite_cseq: 0,
        };
        self.trace_exchange(&leg.call_id, &leg.call_id);
        let name = target.hop.name.clone();
        self.trace_note_with(|| format!("health ping to session-agent {name}"));
        let method = Method::parse(&target.ping_method);
        let key = self.send_request(
            now,
            &leg,
            None,
            Side::Callee,
            &method,
            1,
            &empty_message(),
            70,
            None,
        );
        if let Some(entry) = self.client.get_mut(&key) {
            entry.agent = Some(router.handle(agent));
            entry.purpose = Purpose::Ping;
        }
        self.stats.pings_sent += 1;
        self.trace_end(now, None);
    }
}
