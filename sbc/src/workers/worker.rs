//! One worker thread: its PRSM queue and control queue, the loop that serves them, and the
//! hand-over of shards to another worker between two messages.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

use sbc_proto::engine::{self, Inbound};
use sbc_proto::overload::handover::plan_retirement;
use sbc_proto::overload::prsm::Kind;
use sbc_proto::overload::worker_queue::{Next, Served, WorkerQueue};
use sbc_proto::shard;

use super::shards::Shards;
use super::{lock, Ctx, Group, WorkSettings, SHARDS};

/// How long an idle worker waits before looking at its control queue again.
const IDLE_WAIT: Duration = Duration::from_millis(200);

/// One queued message.
pub(crate) struct Job {
    pub(super) shard: usize,
    pub(super) inbound: Inbound,
}

pub(super) enum Control {
    /// Give `shards` (and their queued messages) to `to`.
    Handoff {
        shards: Vec<usize>,
        to: Arc<Worker>,
        done: mpsc::Sender<()>,
    },
    /// Give every shard to `heirs` (round robin) and exit.
    Retire {
        heirs: Vec<Arc<Worker>>,
        done: mpsc::Sender<()>,
    },
}

pub(super) struct QueueState {
    pub(super) queue: WorkerQueue<Job>,
    pub(super) owned: Vec<bool>,
    pub(super) control: VecDeque<Control>,
    pub(super) stop: bool,
}

/// One worker thread of a group.
pub(crate) struct Worker {
    pub(super) id: usize,
    pub(super) queue: Mutex<QueueState>,
    pub(super) ready: Condvar,
    pub(super) busy_ns: AtomicU64,
    /// Demand over the last cycle (busy time plus refused and queued work), per mille.
    pub(super) demand_permille: AtomicU32,
    pub(super) load_permille: AtomicU32,
    pub(super) owned: AtomicUsize,
}

impl Worker {
    pub(super) fn new(id: usize, settings: &WorkSettings) -> Self {
        Self {
            id,
            queue: Mutex::new(QueueState {
                queue: WorkerQueue::new(settings.prsm, settings.max_queue_delay),
                owned: vec![false; SHARDS],
                control: VecDeque::new(),
                stop: false,
            }),
            ready: Condvar::new(),
            busy_ns: AtomicU64::new(0),
            demand_permille: AtomicU32::new(0),
            load_permille: AtomicU32::new(0),
            owned: AtomicUsize::new(0),
        }
    }

    pub(super) fn command(&self, c: Control) {
        lock(&self.queue).control.push_back(c);
        self.ready.notify_one();
    }
}

pub(super) fn worker_loop(w: &Arc<Worker>, group: &Arc<Group>, ctx: &Arc<Ctx>) {
    let settings = group.settings;
    // What the last message cost, reported to the queue the next time it is locked.
    let mut last: Option<Served> = None;
    // Whether a message was served since this thread last gave its allocator cache back.
    let mut served_since_release = false;
    loop {
        let next = {
            let mut q = lock(&w.queue);
            if let Some(s) = last.take() {
                q.queue.record_service(s);
            }
            loop {
                if let Some(c) = q.control.pop_front() {
                    if carry_out(c, w, group, &mut q) {
                        return;
                    }
                    continue;
                }
                if q.stop {
                    return;
                }
                if let Some(next) = q.queue.take(Instant::now()) {
                    break next;
                }
                let (g, waited) = w
                    .ready
                    .wait_timeout(q, IDLE_WAIT)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                q = g;
                if waited.timed_out() {
                    // Nothing came for IDLE_WAIT: expired marks go, and a burst's room.
                    q.queue.handle_idle(Instant::now());
                    if std::mem::take(&mut served_since_release) {
                        sbc_alarms::release_thread_cache();
                    }
                }
            }
        };
        served_since_release = true;
        let started = Instant::now();
        let (kind, processed) = match next {
            Next::Process(job, kind) => {
                let run = std::panic::AssertUnwindSafe(|| process(job, started, settings, ctx));
                if std::panic::catch_unwind(run).is_err() {
                    // A bug, not a reason to stop serving: the shard's engine is used again.
                    tracing::error!(group = %group.name, worker = w.id, "message processing panicked");
                }
                (kind, true)
            }
            Next::Refuse(job) => {
                // It waited too long: its caller is retransmitting and a routed answer would
                // come later still. Refused cheaply; its copies are refused too.
                group.reject(&job, ctx.out.as_ref());
                (Kind::NewRequest, false)
            }
        };
        let busy = started.elapsed();
        w.busy_ns.fetch_add(
            u64::try_from(busy.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        last = Some(Served {
            busy,
            kind,
            processed,
        });
    }
}

fn process(job: Job, now: Instant, settings: WorkSettings, ctx: &Ctx) {
    // A transfer (an INVITE's Replaces, a REFER's Refer-To) or a busy lamp's NOTIFY names a
    // call that is most often in another shard: that shard's engine is asked what it holds of
    // it first, one lock at a time.
    let named = engine::named_call_id(&job.inbound.data).and_then(|call_id| {
        let named = Shards::of_key(shard::call_id_key(call_id.as_bytes()));
        (named != job.shard)
            .then(|| {
                ctx.shards
                    .with(named, ctx.out.as_ref(), |e| e.named_call(&job.inbound.data))
            })
            .flatten()
    });
    let routed = ctx.shards.with(job.shard, ctx.out.as_ref(), |e| {
        let before = e.stats().routed_new;
        match named {
            Some(named) => e.handle_inbound_with_named(now, job.inbound, Some(named)),
            None => e.handle_inbound(now, job.inbound),
        }
        e.stats().routed_new > before
    });
    if routed && !settings.routing_cost.is_zero() {
        // The simulated routing lookup (a database or DNS query): it blocks this worker, not
        // the shard.
        thread::sleep(settings.routing_cost);
    }
}

/// Carries out a control command on the worker's own thread; true when the worker must exit.
fn carry_out(c: Control, w: &Arc<Worker>, group: &Group, q: &mut QueueState) -> bool {
    match c {
        Control::Handoff { shards, to, done } => {
            hand_over(w, q, &shards, &to, group);
            let _ = done.send(());
            false
        }
        Control::Retire { heirs, done } => {
            let mine: Vec<usize> = (0..SHARDS).filter(|&s| q.owned[s]).collect();
            for (heir, part) in heirs.iter().zip(plan_retirement(&mine, heirs.len())) {
                hand_over(w, q, &part, heir, group);
            }
            let left = q.queue.len();
            if left > 0 {
                warn!(group = %group.name, worker = w.id, left, "messages left at retirement");
            }
            let _ = done.send(());
            true
        }
    }
}

/// Moves `shards` and their queued messages from `from` (whose queue `q` is locked) to `to`,
/// then repoints the assignment table. Lock order: giver's queue, receiver's queue, table.
fn hand_over(from: &Worker, q: &mut QueueState, shards: &[usize], to: &Arc<Worker>, group: &Group) {
    let shards: Vec<usize> = shards.iter().copied().filter(|&s| q.owned[s]).collect();
    if shards.is_empty() {
        return;
    }
    let moved = q.queue.extract(|j| shards.contains(&j.shard));
    for &s in &shards {
        q.owned[s] = false;
    }
    from.owned.fetch_sub(shards.len(), Ordering::Relaxed);
    {
        let mut tq = lock(&to.queue);
        for &s in &shards {
            tq.owned[s] = true;
        }
        let n = moved.len();
        tq.queue.take_over(moved, &q.queue);
        debug!(group = %group.name, from = from.id, to = to.id, shards = shards.len(), messages = n, "shards handed over");
    }
    to.owned.fetch_add(shards.len(), Ordering::Relaxed);
    to.ready.notify_one();
    let mut a = match group.assignment.write() {
        Ok(a) => a,
        Err(e) => e.into_inner(),
    };
    for &s in &shards {
        a[s] = to.clone();
    }
}
