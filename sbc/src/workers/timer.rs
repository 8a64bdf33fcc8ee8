//! The timer thread: every shard's transaction timers fire from one thread, which takes each
//! shard's lock in turn when one of its timers is due.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{lock, Ctx, GroupReport, WorkerReport, SHARDS};

/// The longest the timer thread sleeps (the resolution of SIP timers).
const TIMER_TICK: Duration = Duration::from_millis(10);
/// How often the engines give back the room of a finished burst.
const COMPACT_EVERY: Duration = Duration::from_secs(5);

/// The timer thread: fires every shard's due timers; its busy time is the timer group's load.
pub(crate) struct TimerThread {
    stop: Arc<AtomicBool>,
    busy_ns: Arc<AtomicU64>,
    load_permille: Arc<AtomicU32>,
    handle: Mutex<Option<thread::JoinHandle<()>>>,
}

impl TimerThread {
    /// Starts the timer thread over `ctx`'s shards.
    pub(crate) fn start(ctx: &Arc<Ctx>) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let busy_ns = Arc::new(AtomicU64::new(0));
        let (s, b, c) = (stop.clone(), busy_ns.clone(), ctx.clone());
        let handle = thread::Builder::new()
            .name("sip-timers".into())
            .spawn(move || timer_loop(&c, &s, &b))?;
        Ok(Self {
            stop,
            busy_ns,
            load_permille: Arc::new(AtomicU32::new(0)),
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Stops and joins the thread.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = lock(&self.handle).take() {
            let _ = h.join();
        }
    }

    /// Measures the load of the cycle that ends at `now` (started at `since` with `busy0`).
    pub(crate) fn measure(&self, elapsed: Duration, busy_before: u64) -> u64 {
        let busy = self.busy_ns.load(Ordering::Relaxed);
        let load = busy.saturating_sub(busy_before) as f64 / elapsed.as_nanos().max(1) as f64;
        self.load_permille
            .store((load.min(1.0) * 1000.0).round() as u32, Ordering::Relaxed);
        busy
    }

    /// The timer group, as `show workers` reports it.
    pub(crate) fn report(&self) -> GroupReport {
        let load = f64::from(self.load_permille.load(Ordering::Relaxed)) / 10.0;
        GroupReport {
            name: "timer".into(),
            profile: None,
            workers: 1,
            load_percent: load,
            demand_percent: load,
            queued: 0,
            scheduling: "-",
            guard_cycles: 0,
            removed_retransmissions: 0,
            answered_from_state: 0,
            secondary_served: 0,
            rejected_queue_full: 0,
            rejected_queue_delay: 0,
            dropped_queue_full: 0,
            members: vec![WorkerReport {
                id: 0,
                load_percent: load,
                demand_percent: load,
                queued_primary: 0,
                queued_secondary: 0,
                shards: SHARDS,
            }],
            decisions: Vec::new(),
        }
    }
}

fn timer_loop(ctx: &Ctx, stop: &AtomicBool, busy_ns: &AtomicU64) {
    let mut next_compact = Instant::now() + COMPACT_EVERY;
    while !stop.load(Ordering::Acquire) {
        let started = Instant::now();
        let mut next = started + TIMER_TICK;
        // Now and then, each engine gives back the room a burst left in its tables.
        let compact = started >= next_compact;
        if compact {
            next_compact = started + COMPACT_EVERY;
        }
        for i in 0..SHARDS {
            let now = Instant::now();
            let due = ctx.shards.with(i, ctx.out.as_ref(), |e| {
                if e.poll_timeout().is_some_and(|t| t <= now) {
                    e.handle_timeout(now);
                }
                if compact {
                    e.compact();
                }
                e.poll_timeout()
            });
            if let Some(t) = due {
                next = next.min(t);
            }
        }
        if let Some(t) = ping_agents(ctx) {
            next = next.min(t);
        }
        if compact {
            // What the engines freed sits in this thread's allocator cache: give it back.
            sbc_alarms::release_thread_cache();
        }
        busy_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let wait = next.saturating_duration_since(Instant::now());
        if !wait.is_zero() {
            thread::sleep(wait.max(Duration::from_millis(1)));
        }
    }
}

/// Sends the session-agents' health pings that are due (each from the shard of the agent's
/// index, whose engine then gets the answer); returns the earliest timer of the engines that
/// pinged. (Their state changes are logged and trapped by the node's reporter.)
fn ping_agents(ctx: &Ctx) -> Option<Instant> {
    let router = match ctx.router.read() {
        Ok(r) => Arc::clone(&r),
        Err(poisoned) => Arc::clone(&poisoned.into_inner()),
    };
    let board = router.board();
    let now = Instant::now();
    let mut next: Option<Instant> = None;
    for agent in board.take_due_pings(now) {
        let due = ctx.shards.with(agent % SHARDS, ctx.out.as_ref(), |e| {
            e.send_ping(now, agent);
            e.poll_timeout()
        });
        next = match (next, due) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }
    next
}
