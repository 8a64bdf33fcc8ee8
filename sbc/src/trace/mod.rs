//! The node's SIP trace: what the engines trace ([`sbc_proto::engine::TraceEvent`]) and what the
//! edge refuses before them goes through one bounded queue to one thread, which keeps what the
//! monitor's filters select in the capture ring (`show sip-trace`) and sends everything to the
//! capture server as HEPv3 (`capture-agent`).
//!
//! Nothing here can slow the SIP path: a worker hands an event over with `try_send` and counts
//! it as dropped when the queue is full; the HEP sender never blocks the trace thread either
//! (UDP is sent at once; TCP goes through its own bounded queue to its own thread, and a
//! capture server that is down or slow costs only counted drops).

mod hep;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sbc_proto::engine::{Inbound, TraceEvent, Transmit};
use sbc_proto::trace::capture::{Direction, TraceRing};
use sbc_proto::trace::monitor::{ConfiguredFilters, Monitor, MonitorCounters, Topology};
use tracing::warn;

use self::hep::HepSink;
pub use self::hep::{HepSettings, HepTransport};

/// Trace events waiting for the trace thread at most; more are dropped and counted.
pub const TRACE_QUEUE: usize = 8192;

/// Queue slots kept between drains (more are given back after a burst).
const KEPT_ROOM: usize = 1024;

/// How often the trace thread takes what waits (sooner when half the queue is full). A
/// worker's hand-over is a push under an uncontended lock: no wake-up, no system call per
/// message, which is what a per-message channel costs.
const DRAIN_EVERY: Duration = Duration::from_millis(20);

/// One RTCP report the media relay forwarded, for HEP.
#[derive(Debug, Clone)]
pub struct RtcpCapture {
    /// When, microseconds since the UNIX epoch.
    pub at_unix_us: u64,
    /// Where it came from.
    pub src: SocketAddr,
    /// The SBC's port it arrived on.
    pub dst: SocketAddr,
    /// The call's caller-leg Call-ID, when the call is traced.
    pub correlation: Option<Arc<str>>,
    /// The report.
    pub bytes: Vec<u8>,
}

/// What the trace thread is handed.
#[derive(Debug)]
pub(crate) enum Item {
    Sip(TraceEvent),
    Rtcp(RtcpCapture),
}

/// The ring's bounds (`sip-monitoring`'s `max-trace-memory`, `max-captures`,
/// `max-messages-per-capture`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingBounds {
    /// Bytes of messages kept at most.
    pub max_bytes: usize,
    /// Captures kept at most.
    pub max_captures: usize,
    /// Messages per capture at most.
    pub max_messages: usize,
}

impl Default for RingBounds {
    fn default() -> Self {
        Self {
            max_bytes: 16 << 20,
            max_captures: 1000,
            max_messages: 200,
        }
    }
}

/// What the trace runs with, built from the configuration by [`crate::settings`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TraceSettings {
    /// The configured filters (`None`: `sip-monitoring` disabled).
    pub monitor: Option<ConfiguredFilters>,
    /// The ring's bounds.
    pub ring: RingBounds,
    /// Realms by interface and session-agents by address, for the filters.
    pub topology: Topology,
    /// Where HEP goes (`None`: `capture-agent` disabled).
    pub hep: Option<HepSettings>,
}

impl TraceSettings {
    /// Whether the engines must trace: the monitor or HEP capture is on.
    #[must_use]
    pub fn engines_trace(&self) -> bool {
        self.monitor.is_some() || self.hep.is_some()
    }
}

/// The trace's counters.
#[derive(Debug, Default)]
struct Counters {
    queued: AtomicU64,
    queue_dropped: AtomicU64,
}

/// A snapshot of the trace's counters, for `show sip-trace` and `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraceCounters {
    /// Events handed to the trace thread.
    pub queued: u64,
    /// Events dropped because its queue was full.
    pub queue_dropped: u64,
    /// The monitor's counters.
    pub monitor: MonitorCounters,
    /// Captures dropped, oldest first, to stay within the ring's bounds.
    pub captures_evicted: u64,
    /// Messages not kept because their capture was full or too large.
    pub ring_dropped: u64,
    /// HEP packets sent.
    pub hep_sent: u64,
    /// HEP packets dropped (the TCP queue full, the server unreachable).
    pub hep_dropped: u64,
    /// Messages the engines did not trace while the trace was on (switched off while the
    /// capture server was down and no monitor ran, or too many waiting); filled in by the
    /// console from the engines' counters.
    pub not_traced: u64,
}

/// The node's trace: the queue, the monitor and the HEP sink.
pub struct TraceHub {
    queue: Mutex<VecDeque<Item>>,
    /// Signalled when the queue is half full (the thread also drains every [`DRAIN_EVERY`]).
    half_full: Condvar,
    counters: Counters,
    monitor: Mutex<Monitor>,
    /// The settings the thread applies next (HEP).
    pending_hep: Mutex<Option<Option<HepSettings>>>,
    /// Whether the settings say anything is traced (the edge's refusals are offered only then).
    on: AtomicBool,
    /// Whether the relay's RTCP goes to the capture server.
    rtcp: AtomicBool,
    /// Whether the engines trace now: the monitor is on or the capture server takes packets.
    /// The trace thread sets it at every drain, so a capture server that is down costs the
    /// engines a counter, not an event per message.
    switch: Arc<AtomicBool>,
    stop: AtomicBool,
    hep_counters: Arc<hep::HepCounters>,
    thread: Mutex<Option<thread::JoinHandle<()>>>,
    /// Each interface's address and TLS address, by index (where the edge's refusals were
    /// received).
    interfaces: Vec<(SocketAddr, Option<SocketAddr>)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl TraceHub {
    /// Starts the trace thread with `settings`, for interfaces at these addresses.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn start(
        settings: &TraceSettings,
        interfaces: Vec<(SocketAddr, Option<SocketAddr>)>,
    ) -> std::io::Result<Arc<Self>> {
        let b = settings.ring;
        let hub = Arc::new(Self {
            // Grown as traffic needs (a node that does not trace holds nothing for it).
            queue: Mutex::new(VecDeque::new()),
            half_full: Condvar::new(),
            counters: Counters::default(),
            monitor: Mutex::new(Monitor::new(
                settings.monitor.clone(),
                settings.topology.clone(),
                TraceRing::new(b.max_bytes, b.max_captures, b.max_messages),
            )),
            pending_hep: Mutex::new(Some(settings.hep.clone())),
            on: AtomicBool::new(settings.engines_trace()),
            rtcp: AtomicBool::new(settings.hep.as_ref().is_some_and(|h| h.rtcp)),
            switch: Arc::new(AtomicBool::new(settings.engines_trace())),
            stop: AtomicBool::new(false),
            hep_counters: Arc::new(hep::HepCounters::default()),
            thread: Mutex::new(None),
            interfaces,
        });
        let worker = hub.clone();
        let handle = thread::Builder::new()
            .name("sip-trace".into())
            .spawn(move || worker.run())?;
        *lock(&hub.thread) = Some(handle);
        Ok(hub)
    }

    /// Applies an activation's settings: filters, topology, HEP; the ring is kept unless its
    /// bounds changed (then it starts empty).
    pub fn reconfigure(&self, settings: &TraceSettings) {
        {
            let mut m = lock(&self.monitor);
            let b = settings.ring;
            let (bytes, captures, messages) = m.ring().bounds();
            if (bytes, captures, messages) != (b.max_bytes, b.max_captures, b.max_messages) {
                let live = m.live_filters().to_vec();
                *m = Monitor::new(
                    settings.monitor.clone(),
                    settings.topology.clone(),
                    TraceRing::new(b.max_bytes, b.max_captures, b.max_messages),
                );
                for f in live {
                    m.capture_start(f);
                }
            } else {
                m.reconfigure(settings.monitor.clone(), settings.topology.clone());
            }
        }
        *lock(&self.pending_hep) = Some(settings.hep.clone());
        self.on.store(settings.engines_trace(), Ordering::Relaxed);
        self.rtcp.store(
            settings.hep.as_ref().is_some_and(|h| h.rtcp),
            Ordering::Relaxed,
        );
    }

    /// Whether the media relay should hand its RTCP over.
    pub fn wants_rtcp(&self) -> bool {
        self.rtcp.load(Ordering::Relaxed) && self.switch.load(Ordering::Relaxed)
    }

    /// The switch the engines read at every input (`EngineConfig::trace_switch`).
    pub fn switch(&self) -> Arc<AtomicBool> {
        self.switch.clone()
    }

    /// Hands one RTCP report to the trace thread, or counts it as dropped: never waits.
    pub fn offer_rtcp(&self, report: RtcpCapture) {
        self.push(Item::Rtcp(report));
    }

    /// Hands one traced message to the trace thread, or counts it as dropped: never waits.
    pub fn offer(&self, event: TraceEvent) {
        self.push(Item::Sip(event));
    }

    /// Hands every traced message `next` yields to the trace thread under one lock (a worker
    /// after one input), counting those that do not fit as dropped: never waits.
    pub fn offer_all(&self, next: &mut dyn FnMut() -> Option<TraceEvent>) {
        // Nothing traced (the engines trace only while the trace is on): no lock taken.
        let Some(first) = next() else {
            return;
        };
        let mut q = lock(&self.queue);
        let (mut queued, mut dropped) = (0, 0);
        let stopped = self.stop.load(Ordering::Relaxed);
        let mut pending = Some(first);
        while let Some(event) = pending.take().or_else(&mut *next) {
            if q.len() >= TRACE_QUEUE || stopped {
                dropped += 1;
            } else {
                q.push_back(Item::Sip(event));
                queued += 1;
            }
        }
        let half = q.len() >= TRACE_QUEUE / 2;
        drop(q);
        if queued > 0 {
            self.counters.queued.fetch_add(queued, Ordering::Relaxed);
        }
        if dropped > 0 {
            self.counters
                .queue_dropped
                .fetch_add(dropped, Ordering::Relaxed);
        }
        if half && queued > 0 {
            self.half_full.notify_one();
        }
    }

    fn push(&self, item: Item) {
        let mut q = lock(&self.queue);
        if q.len() >= TRACE_QUEUE || self.stop.load(Ordering::Relaxed) {
            drop(q);
            self.counters.queue_dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(item);
        let half = q.len() == TRACE_QUEUE / 2;
        drop(q);
        self.counters.queued.fetch_add(1, Ordering::Relaxed);
        if half {
            self.half_full.notify_one();
        }
    }

    /// Traces a message the edge refused before any engine saw it (a full worker queue, a
    /// source over its rate), with our answer if there was one.
    pub fn refused(&self, inbound: &Inbound, note: &'static str, answer: Option<&Transmit>) {
        if !self.on.load(Ordering::Relaxed) || !self.switch.load(Ordering::Relaxed) {
            return;
        }
        let at_unix_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let local = self.local(inbound.interface, inbound.transport);
        self.offer(TraceEvent {
            at_unix_us,
            direction: Direction::Received,
            interface: inbound.interface,
            transport: inbound.transport,
            local,
            peer: inbound.source,
            call: None,
            note: Some(note.into()),
            bytes: inbound.data.clone(),
        });
        if let Some(t) = answer {
            self.offer(TraceEvent {
                at_unix_us,
                direction: Direction::Sent,
                interface: t.interface,
                transport: t.transport,
                local,
                peer: t.dest,
                call: None,
                note: Some(note.into()),
                bytes: t.payload.clone(),
            });
        }
    }

    fn local(
        &self,
        interface: usize,
        transport: sbc_proto::sip::dialog::LegTransport,
    ) -> SocketAddr {
        match self.interfaces.get(interface) {
            Some((_, Some(tls))) if transport == sbc_proto::sip::dialog::LegTransport::Tls => *tls,
            Some((addr, _)) => *addr,
            None => SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }

    /// The monitor, for the console (`show sip-trace`, `capture start|stop`).
    pub fn monitor(&self) -> MutexGuard<'_, Monitor> {
        lock(&self.monitor)
    }

    /// The counters now.
    pub fn counters(&self) -> TraceCounters {
        let (monitor, ring) = lock(&self.monitor).counters();
        TraceCounters {
            queued: self.counters.queued.load(Ordering::Relaxed),
            queue_dropped: self.counters.queue_dropped.load(Ordering::Relaxed),
            monitor,
            captures_evicted: ring.captures_evicted,
            ring_dropped: ring.messages_dropped,
            hep_sent: self.hep_counters.sent.load(Ordering::Relaxed),
            hep_dropped: self.hep_counters.dropped.load(Ordering::Relaxed),
            not_traced: 0,
        }
    }

    /// Stops the trace thread (at shutdown).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = lock(&self.thread).take() {
            let _ = h.join();
        }
    }

    fn run(&self) {
        let mut sink: Option<HepSink> = None;
        let mut batch: VecDeque<Item> = VecDeque::new();
        loop {
            if let Some(next) = lock(&self.pending_hep).take() {
                sink = match next {
                    Some(s) => match HepSink::new(&s, self.hep_counters.clone()) {
                        Ok(sink) => Some(sink),
                        Err(e) => {
                            warn!(error = %e, "HEP capture not started");
                            None
                        }
                    },
                    None => None,
                };
            }
            if self.stop.load(Ordering::Relaxed) {
                return;
            }
            {
                let mut q = lock(&self.queue);
                if q.is_empty() {
                    q = self
                        .half_full
                        .wait_timeout(q, DRAIN_EVERY)
                        .map_or_else(|e| e.into_inner().0, |(q, _)| q);
                }
                std::mem::swap(&mut *q, &mut batch);
            }
            if let Some(sink) = sink.as_mut() {
                if !batch.is_empty() {
                    sink.send_batch(&batch);
                }
            }
            let mut monitor = lock(&self.monitor);
            self.switch.store(
                monitor.is_on() || sink.as_ref().is_some_and(HepSink::is_up),
                Ordering::Relaxed,
            );
            if batch.is_empty() {
                continue;
            }
            if monitor.is_on() {
                for item in &batch {
                    if let Item::Sip(event) = item {
                        monitor.record(event);
                    }
                }
            }
            drop(monitor);
            batch.clear();
            // A burst's room goes back (the queue's own comes here at the next swap).
            batch.shrink_to(KEPT_ROOM);
        }
    }
}
