//! The engine's trace tap: every message it receives and sends, with the call and leg it
//! belongs to and why the engine refused, dropped or answered it itself, as [`TraceEvent`]s
//! for the on-box trace and HEP capture (`poll_trace`).
//!
//! A *step* is one input: a received message, one timer, one media event. While a step runs,
//! the code that finds the call says so ([`Engine::trace_call`]) and a refusal says why
//! ([`Engine::trace_note`]); when it ends, the received message and every message the step
//! queued are traced with that call and note. Off (`EngineConfig::trace` false) a step costs
//! one branch; on, one [`TraceEvent`] per message (the bytes are shared, not copied), at most
//! [`MAX_PENDING_TRACE_EVENTS`] waiting, beyond which they are counted as dropped.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use super::transactions::{ClientKey, ServerKey};
use super::transmit::Inbound;
use super::Engine;
use crate::shard::scan_call_id;
use crate::sip::dialog::LegTransport;
use crate::trace::capture::{Direction, LegSide};

/// Trace events waiting for the shell at most; more are dropped and counted
/// (`Stats::trace_dropped`). The shell drains them after every input, so only a shell that
/// stopped draining reaches this.
pub const MAX_PENDING_TRACE_EVENTS: usize = 4096;

/// One message the engine received or sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// When, microseconds since the UNIX epoch (the engine's wall clock at the step's time).
    pub at_unix_us: u64,
    /// Received or sent.
    pub direction: Direction,
    /// The interface (index) it went through.
    pub interface: usize,
    /// Its transport.
    pub transport: LegTransport,
    /// The SBC's address on that interface and transport.
    pub local: SocketAddr,
    /// The peer's address.
    pub peer: SocketAddr,
    /// The call it belongs to, if any.
    pub call: Option<TracedCall>,
    /// Why the engine refused or dropped it, or answered it itself; `None` when relayed.
    pub note: Option<Cow<'static, str>>,
    /// The message as received or sent (credentials not masked yet: the consumer masks).
    pub bytes: Bytes,
}

/// The call, or out-of-dialog exchange, a traced message belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedCall {
    /// The engine's call id (the same on both nodes of the pair: it is replicated); `None`
    /// for an out-of-dialog exchange (OPTIONS, REGISTER, MESSAGE, ...).
    pub id: Option<u64>,
    /// The leg the message went over.
    pub leg: LegSide,
    /// The caller leg's Call-ID, shared by both legs' messages: what ties the two legs of
    /// one call together (HEP's correlation id).
    pub correlation: Arc<str>,
}

/// The call or exchange a step is about.
#[derive(Debug)]
struct StepCall {
    /// The call's id (none for an out-of-dialog exchange).
    id: Option<u64>,
    /// The caller leg's Call-ID.
    caller: Arc<str>,
    /// The callee leg's Call-ID (empty when not known).
    callee: Box<str>,
    /// Each leg's interface and peer, when both are known and differ: a message's leg is then
    /// told by where it went, without reading its Call-ID.
    ends: Option<[(usize, SocketAddr); 2]>,
}

impl StepCall {
    fn leg_of(&self, interface: usize, peer: SocketAddr, bytes: &[u8]) -> LegSide {
        if let Some([caller, callee]) = self.ends {
            if (interface, peer) == caller {
                return LegSide::Caller;
            }
            if (interface, peer) == callee {
                return LegSide::Callee;
            }
        }
        if !self.callee.is_empty() && scan_call_id(bytes) == Some(self.callee.as_bytes()) {
            LegSide::Callee
        } else {
            LegSide::Caller
        }
    }
}

/// The tap's state.
#[derive(Debug, Default)]
pub(super) struct Tap {
    events: VecDeque<TraceEvent>,
    /// The step's call or exchange.
    call: Option<StepCall>,
    note: Option<Cow<'static, str>>,
    /// Transmits queued before the step began.
    mark: usize,
    /// Whether this step traces (the configuration and the shell's switch say so).
    active: bool,
}

impl Engine {
    /// Next traced message (only when `EngineConfig::trace` is on).
    #[must_use]
    pub fn poll_trace(&mut self) -> Option<TraceEvent> {
        self.tap.events.pop_front()
    }

    /// Starts a step.
    pub(super) fn trace_begin(&mut self) {
        if self.cfg.trace {
            self.tap.active = self
                .cfg
                .trace_switch
                .as_ref()
                .is_none_or(|s| s.load(Ordering::Relaxed));
            self.tap.call = None;
            self.tap.note = None;
            self.tap.mark = self.out.len();
        }
    }

    /// The step is about call `id` (the first call or exchange named wins).
    pub(super) fn trace_call(&mut self, id: u64) {
        if !self.tap.active || self.tap.call.is_some() {
            return;
        }
        if let Some(call) = self.calls.get(&id) {
            let (a, b) = (&call.dialog.caller, &call.dialog.callee);
            let ends = [(a.interface, a.peer), (b.interface, b.peer)];
            self.tap.call = Some(StepCall {
                id: Some(id),
                caller: Arc::from(a.call_id.as_str()),
                callee: b.call_id.clone().into_boxed_str(),
                ends: (ends[0] != ends[1]).then_some(ends),
            });
        }
    }

    /// The step is about an out-of-dialog exchange (OPTIONS, REGISTER, MESSAGE, ...) whose
    /// caller leg has Call-ID `caller` and callee leg `callee` (empty: not known here).
    pub(super) fn trace_exchange(&mut self, caller: &str, callee: &str) {
        if self.tap.active && self.tap.call.is_none() {
            self.tap.call = Some(StepCall {
                id: None,
                caller: Arc::from(caller),
                callee: Box::from(callee),
                ends: None,
            });
        }
    }

    /// The step is about what our request `key` belongs to: its call, or its exchange.
    pub(super) fn trace_client(&mut self, key: &ClientKey) {
        if !self.tap.active || self.tap.call.is_some() {
            return;
        }
        let Some(entry) = self.client.get(key) else {
            return;
        };
        match (entry.call, &entry.server) {
            (Some(id), _) => self.trace_call(id),
            (None, Some(skey)) => {
                if let Some(server) = self.server.get(skey) {
                    let caller = server.ctx.call_id.clone();
                    let callee = entry.ids.call_id.clone();
                    self.trace_exchange(&caller, &callee);
                }
            }
            (None, None) => {}
        }
    }

    /// The step is about what the request of server transaction `key` belongs to.
    pub(super) fn trace_server(&mut self, key: &ServerKey) {
        if !self.tap.active || self.tap.call.is_some() {
            return;
        }
        let Some(entry) = self.server.get(key) else {
            return;
        };
        match entry.call {
            Some(id) => self.trace_call(id),
            None => {
                let caller = entry.ctx.call_id.clone();
                self.trace_exchange(&caller, "");
            }
        }
    }

    /// Why the step refused, dropped or answered what it did.
    pub(super) fn trace_note(&mut self, note: &'static str) {
        if self.tap.active {
            self.tap.note = Some(Cow::Borrowed(note));
        }
    }

    /// [`Engine::trace_note`] with a note written only when tracing.
    pub(super) fn trace_note_with(&mut self, note: impl FnOnce() -> String) {
        if self.tap.active {
            self.tap.note = Some(Cow::Owned(note()));
        }
    }

    /// Ends a step: traces `received` (if the step was a message) and what the step queued.
    pub(super) fn trace_end(&mut self, now: Instant, received: Option<&Inbound>) {
        if !self.cfg.trace {
            return;
        }
        let mark = self.tap.mark.min(self.out.len());
        if !self.tap.active {
            // Switched off: nobody would take them. Counted, not traced.
            let n = usize::from(received.is_some()) + self.out.len() - mark;
            self.stats.trace_dropped += n as u64;
            return;
        }
        self.tap.active = false;
        let at_unix_us = self.wall_clock.unix_micros_at(now);
        let call = self.tap.call.take();
        let note = self.tap.note.take();
        let received = received.map(|i| {
            (
                Direction::Received,
                i.interface,
                i.transport,
                i.source,
                &i.data,
            )
        });
        let sent = self.out.range(mark..).map(|t| {
            (
                Direction::Sent,
                t.interface,
                t.transport,
                t.dest,
                &t.payload,
            )
        });
        for (direction, interface, transport, peer, bytes) in received.into_iter().chain(sent) {
            if self.tap.events.len() >= MAX_PENDING_TRACE_EVENTS {
                self.stats.trace_dropped += 1;
                continue;
            }
            let local = self
                .cfg
                .interfaces
                .get(interface)
                .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |i| {
                    i.addr_for(transport)
                });
            let call = call.as_ref().map(|c| TracedCall {
                id: c.id,
                leg: c.leg_of(interface, peer, bytes),
                correlation: Arc::clone(&c.caller),
            });
            self.tap.events.push_back(TraceEvent {
                at_unix_us,
                direction,
                interface,
                transport,
                local,
                peer,
                call,
                note: note.clone(),
                bytes: bytes.clone(),
            });
        }
    }
}
