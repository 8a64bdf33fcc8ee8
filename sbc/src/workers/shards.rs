//! The shards: [`SHARDS`] engines, each behind its own lock, and the [`Outlet`] their output
//! goes to.

use std::sync::Mutex;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use rand::rngs::OsRng;
use rand::RngCore;

use sbc_proto::engine::{
    self, DialogChange, Engine, EngineSeed, Inbound, Stats, TraceEvent, Transmit, WallClock,
};

use super::{lock, SHARDS};

/// What a worker group needs from the rest of the node: the shards, and where to send.
pub(crate) trait Outlet: Send + Sync + 'static {
    /// Sends one message (UDP socket or TCP connection).
    fn send(&self, t: Transmit);
    /// Streams a confirmed-dialog change to the HA state sync, if any.
    fn dialog_change(&self, change: DialogChange);
    /// Hands the traced messages `next` yields to the trace, all at once (only engines told to
    /// trace make them).
    fn trace(&self, next: &mut dyn FnMut() -> Option<TraceEvent>) {
        while next().is_some() {}
    }
    /// Hands a call detail record to accounting (which never blocks).
    fn accounting(&self, _record: sbc_accounting::CallRecord) {}
    /// Traces a message refused before any engine saw it, with our answer if any.
    fn refused(&self, _inbound: &Inbound, _note: &'static str, _answer: Option<&Transmit>) {}
}

/// The engines, one per shard.
pub(crate) struct Shards {
    pub(super) cells: Vec<Mutex<Engine>>,
}

impl Shards {
    /// `SHARDS` engines with configuration `cfg`, each drawing its identifiers from a
    /// stream seeded by the operating system.
    pub(crate) fn new(cfg: &engine::EngineConfig) -> Self {
        let wall_clock = WallClock {
            at: Instant::now(),
            unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
        };
        Self {
            cells: (0..SHARDS as u64)
                .map(|shard| {
                    let mut rng = [0; 32];
                    OsRng.fill_bytes(&mut rng);
                    let seed = EngineSeed {
                        shard,
                        rng,
                        wall_clock,
                    };
                    Mutex::new(Engine::new(cfg.clone(), seed))
                })
                .collect(),
        }
    }

    /// The shard of a Call-ID shard key.
    pub(crate) fn of_key(key: u64) -> usize {
        (key % SHARDS as u64) as usize
    }

    /// Runs `f` on shard `i` under its lock, then sends what the engine queued.
    pub(crate) fn with<R>(
        &self,
        i: usize,
        out: &dyn Outlet,
        f: impl FnOnce(&mut Engine) -> R,
    ) -> R {
        let mut e = lock(&self.cells[i]);
        let r = f(&mut e);
        flush(&mut e, out);
        r
    }

    /// Runs `f` on every shard in turn.
    pub(crate) fn each(&self, out: &dyn Outlet, mut f: impl FnMut(usize, &mut Engine)) {
        for i in 0..SHARDS {
            self.with(i, out, |e| f(i, e));
        }
    }
}

pub(super) fn flush(e: &mut Engine, out: &dyn Outlet) {
    while let Some(t) = e.poll_transmit() {
        out.send(t);
    }
    while let Some(c) = e.poll_dialog_change() {
        out.dialog_change(c);
    }
    out.trace(&mut || e.poll_trace());
    while let Some(r) = e.poll_accounting() {
        out.accounting(r);
    }
}

/// Adds the counters and calls of the shards in `pending` whose lock is free now to `total`
/// and `calls`, and keeps in `pending` those a worker holds: the caller comes back for them
/// without ever waiting on a lock.
pub(crate) fn add_free_shards(
    shards: &Shards,
    pending: &mut Vec<usize>,
    total: &mut Stats,
    calls: &mut usize,
) {
    pending.retain(|&i| {
        let e = match shards.cells[i].try_lock() {
            Ok(e) => e,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return true,
        };
        *total += e.stats();
        *calls += e.active_call_count();
        false
    });
}

/// Sums the counters and the calls held of the shards `which`, waiting for each lock.
pub(crate) fn sum_shards(shards: &Shards, which: &[usize]) -> (Stats, usize) {
    let mut total = Stats::default();
    let mut calls = 0;
    for &i in which {
        let e = lock(&shards.cells[i]);
        total += e.stats();
        calls += e.active_call_count();
    }
    (total, calls)
}

/// Sums the counters and the calls held of every shard: one short lock each, no output flushed
/// (what the status of the node reads at every scrape).
pub(crate) fn totals(shards: &Shards) -> (Stats, usize) {
    let mut total = Stats::default();
    let mut calls = 0;
    for cell in &shards.cells {
        let e = lock(cell);
        total += e.stats();
        calls += e.active_call_count();
    }
    (total, calls)
}

/// Sums the counters of every shard.
pub(crate) fn total_stats(shards: &Shards) -> Stats {
    let mut total = Stats::default();
    for cell in &shards.cells {
        total += lock(cell).stats();
    }
    total
}
