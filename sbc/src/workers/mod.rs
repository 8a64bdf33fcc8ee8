//! Worker groups: shards, PRSM queues, worker threads, the timer thread and the autoscaler.
//!
//! **Shards hold the state.** The calls live in [`SHARDS`] engines (shards), fixed for the life
//! of the node; a message goes to shard `call-id key % SHARDS` ([`sbc_proto::shard`]), so both legs
//! of a call share one shard whatever the number of workers. Each shard is behind a mutex;
//! whichever thread processes a message of a shard holds its lock for the time the engine takes
//! (microseconds).
//!
//! **Groups own the work** (seed 000, OpenSIPS): one group per UDP `sip-interface`, one for all
//! TCP traffic, each with its worker threads, and one timer thread for every shard's
//! transaction timers. Inside a group every shard is *assigned* to one worker, and a worker has
//! its own queue ([`sbc_proto::overload::worker_queue`]): PRSM's bounded primary queue (new
//! requests, in-dialog requests, responses) served strictly before a bounded secondary queue
//! (retransmissions), redundant retransmissions removed, and a new request answered 503 at once
//! when the primary queue is full or, in PRSM mode, when its expected wait exceeds
//! `max-queue-delay-ms` (or it waited longer by the time it reaches the head). The rules are
//! the queue's; this module locks it, wakes the worker and sends the 503s.
//! Messages of one shard therefore go through one queue and one thread of a group, in arrival
//! order: per-Call-ID ordering holds with any number of workers.
//!
//! **Scaling moves shards, never state.** A new worker receives shards from the busiest
//! holders; a retired worker (the least loaded, on a scale-down) gives all of its shards to the
//! others and exits. The hand-over runs on the giving worker's own thread between two messages,
//! under its queue lock: it marks the shards as no longer its own, moves their queued messages,
//! in order, to the receiver's queue, then repoints the group's assignment table. A receive
//! thread that picked the old worker finds the shard no longer owned under that worker's lock
//! and looks again, so no message is lost or reordered by a scale-down.
//!
//! **Load** is OpenSIPS's: busy time (processing, including the simulated routing lookup of
//! `routing-cost-us`, which stands for a blocking database or DNS lookup) over the cycle, per
//! worker; the group load is the mean. Every `auto-scaling-cycle-ms` the control thread feeds
//! each group's [`Autoscaler`] with the loads and the queued messages and carries out its
//! decisions.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, MutexGuard, RwLock};
use std::thread;
use std::time::{Duration, Instant};

use tracing::{info, warn};

use sbc_proto::engine::{self, Inbound};
use sbc_proto::overload::autoscale::{Autoscaler, ScaleDecision, ScalingProfile};
use sbc_proto::overload::handover::plan_new_worker;
use sbc_proto::overload::prsm::{Mode, PrsmConfig};
use sbc_proto::overload::worker_queue::{Offered, QueueCounters};
use sbc_proto::sip::classify::Classified;

mod report;
mod shards;
mod timer;
mod worker;

#[cfg(test)]
mod tests;

use report::{describe_reason, describe_record};
pub use report::{DecisionReport, GroupReport, WorkerReport};
pub(crate) use shards::{add_free_shards, sum_shards, total_stats, totals, Outlet, Shards};
pub(crate) use timer::TimerThread;
pub(crate) use worker::Job;
use worker::{worker_loop, Control, Worker};

/// Number of shards (engines): fixed, so a call's shard never changes when workers come and go.
pub const SHARDS: usize = 64;

/// How long the control thread waits for a worker to carry out a hand-over.
const CONFIRM_WAIT: Duration = Duration::from_secs(30);

/// Locks a mutex, recovering the data if a thread panicked while holding it (the engines and
/// queues stay usable: a panic is a bug, not a reason to stop serving every other call).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Settings shared by the workers of every group.
#[derive(Debug, Clone, Copy)]
pub struct WorkSettings {
    /// PRSM or FIFO, and the queue sizes.
    pub prsm: PrsmConfig,
    /// A new request that waited longer than this is refused (PRSM mode; zero: never).
    pub max_queue_delay: Duration,
    /// The simulated routing lookup paid by every routed new request.
    pub routing_cost: Duration,
    /// Retry-After range of the queue's 503s.
    pub retry_after: (u32, u32),
}

/// One worker group.
pub(crate) struct Group {
    name: String,
    settings: WorkSettings,
    assignment: RwLock<Vec<Arc<Worker>>>,
    workers: Mutex<Vec<Arc<Worker>>>,
    threads: Mutex<Vec<(usize, thread::JoinHandle<()>)>>,
    scaler: Mutex<Autoscaler>,
    /// Set when a hand-over was not confirmed in time: scaling stops for this group (commands
    /// must never overlap), traffic goes on.
    suspended: AtomicBool,
    next_id: AtomicUsize,
    /// Workers being retired (out of `workers`, their counters still counted), and the
    /// counters of those retired, so the group's counters never go down.
    retiring: Mutex<Vec<Arc<Worker>>>,
    retired: Mutex<QueueCounters>,
    /// Each worker's busy time, refused requests and queue length at the start of the current
    /// cycle, by worker id.
    cycle_start: Mutex<(Instant, Vec<CycleStart>)>,
}

/// A worker's counters at the start of a cycle: id, busy ns, refused requests, queue length.
type CycleStart = (usize, u64, u64, u64);

/// Everything a worker thread needs.
pub(crate) struct Ctx {
    pub shards: Arc<Shards>,
    pub out: Arc<dyn Outlet>,
    /// The router the engines use now (its board is pinged from the timer thread).
    pub router: RwLock<Arc<sbc_proto::routing::router::Router>>,
}

impl Group {
    /// A group named `name` with `initial` workers (threads started), following `profile`
    /// (`None`: a fixed count).
    pub(crate) fn start(
        name: String,
        initial: usize,
        profile: Option<ScalingProfile>,
        cycle: Duration,
        settings: WorkSettings,
        ctx: &Arc<Ctx>,
    ) -> anyhow::Result<Arc<Self>> {
        let initial = initial.clamp(1, SHARDS);
        let workers: Vec<Arc<Worker>> = (0..initial)
            .map(|id| Arc::new(Worker::new(id, &settings)))
            .collect();
        let assignment: Vec<Arc<Worker>> =
            (0..SHARDS).map(|s| workers[s % initial].clone()).collect();
        for (s, w) in assignment.iter().enumerate() {
            lock(&w.queue).owned[s] = true;
            w.owned.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        let group = Arc::new(Self {
            name,
            settings,
            assignment: RwLock::new(assignment),
            workers: Mutex::new(workers.clone()),
            threads: Mutex::new(Vec::new()),
            scaler: Mutex::new(Autoscaler::with_profile(profile, initial, now).with_cycle(cycle)),
            next_id: AtomicUsize::new(initial),
            suspended: AtomicBool::new(false),
            retiring: Mutex::new(Vec::new()),
            retired: Mutex::new(QueueCounters::default()),
            cycle_start: Mutex::new((now, Vec::new())),
        });
        for w in workers {
            group.spawn(w, ctx)?;
        }
        Ok(group)
    }

    fn spawn(self: &Arc<Self>, w: Arc<Worker>, ctx: &Arc<Ctx>) -> anyhow::Result<()> {
        let (group, ctx2) = (self.clone(), ctx.clone());
        let name = format!("{}-{}", self.name.replace(':', "-"), w.id);
        let id = w.id;
        let handle = thread::Builder::new()
            .name(name)
            .spawn(move || worker_loop(&w, &group, &ctx2))?;
        lock(&self.threads).push((id, handle));
        Ok(())
    }

    /// Queues a received message on the worker that serves its shard (or refuses it).
    pub(crate) fn dispatch(&self, inbound: Inbound, c: Classified, out: &dyn Outlet) {
        let shard = Shards::of_key(c.shard_key);
        let now = Instant::now();
        let job = Job { shard, inbound };
        // The assignment changes only during a hand-over; a few retries always suffice.
        for _ in 0..10_000 {
            let w = match self.assignment.read() {
                Ok(a) => a[shard].clone(),
                Err(e) => e.into_inner()[shard].clone(),
            };
            let mut q = lock(&w.queue);
            if !q.owned[shard] {
                drop(q);
                thread::yield_now();
                continue;
            }
            let offered = q.queue.offer(now, c.txn_key, c.kind, job);
            drop(q);
            match offered {
                Offered::Queued => w.ready.notify_one(),
                Offered::NotQueued => {}
                Offered::Refuse(job) => self.reject(&job, out),
            }
            return;
        }
        warn!(group = %self.name, shard, "no worker took the message; dropped");
    }

    fn reject(&self, job: &Job, out: &dyn Outlet) {
        let (lo, hi) = self.settings.retry_after;
        let answer = engine::stateless_503(&job.inbound, (lo, hi), &mut rand::thread_rng());
        out.refused(
            &job.inbound,
            "refused 503: the worker's queue is full or the request waited too long in it",
            answer.as_ref(),
        );
        if let Some(t) = answer {
            out.send(t);
        }
    }

    /// Ends one autoscaling cycle: measures the loads, feeds the autoscaler and carries out
    /// its decisions.
    pub(crate) fn run_cycle(self: &Arc<Self>, now: Instant, ctx: &Arc<Ctx>) {
        let workers = lock(&self.workers).clone();
        let loads = self.measure(now, &workers);
        let queued: usize = workers.iter().map(|w| lock(&w.queue).queue.len()).sum();
        if self.suspended.load(Ordering::Relaxed) {
            return;
        }
        let decisions: Vec<ScaleDecision> = {
            let mut s = lock(&self.scaler);
            s.handle_cycle(now, &loads, queued);
            std::iter::from_fn(|| s.poll()).collect()
        };
        for d in decisions {
            match d {
                ScaleDecision::Up { add, reason } => {
                    info!(group = %self.name, add, reason = %describe_reason(&reason), "scaling up");
                    for _ in 0..add {
                        if let Err(e) = self.add_worker(ctx) {
                            warn!(group = %self.name, error = %e, "cannot start a worker");
                        }
                    }
                }
                ScaleDecision::Down { retire, reason } => {
                    if let Some(w) = workers.get(retire) {
                        info!(group = %self.name, worker = w.id, reason = %describe_reason(&reason), "scaling down");
                        self.retire(w);
                    }
                }
            }
        }
    }

    /// Each worker's load since the last cycle, as the autoscaler takes it: busy time plus the
    /// work it was offered and could not do (new requests refused on its behalf, at its recent
    /// cost per new request, and the growth of its queue, at its recent cost per message), so a
    /// saturated worker shows its demand (above 100 %) instead of a flat 100 %. The busy
    /// fraction alone is stored for `show workers` as the load, the demand beside it.
    fn measure(&self, now: Instant, workers: &[Arc<Worker>]) -> Vec<f64> {
        let mut start = lock(&self.cycle_start);
        let elapsed = now.saturating_duration_since(start.0).as_nanos().max(1) as f64;
        let mut next = Vec::with_capacity(workers.len());
        let loads = workers
            .iter()
            .map(|w| {
                let busy = w.busy_ns.load(Ordering::Relaxed);
                let (refused, queued, new_service, service) = {
                    let q = lock(&w.queue);
                    (
                        q.queue.refused(),
                        q.queue.len() as u64,
                        q.queue.new_request_service_time(),
                        q.queue.service_time(),
                    )
                };
                // A worker started during the cycle began at zero.
                let before = start
                    .1
                    .iter()
                    .find(|s| s.0 == w.id)
                    .map_or((w.id, 0, 0, 0), |s| *s);
                next.push((w.id, busy, refused, queued));
                let busy_ns = busy.saturating_sub(before.1) as f64;
                let refused_ns =
                    refused.saturating_sub(before.2) as f64 * new_service.as_nanos() as f64;
                let queued_ns = queued.saturating_sub(before.3) as f64 * service.as_nanos() as f64;
                let load = (busy_ns / elapsed).min(1.0);
                let demand = (busy_ns + refused_ns + queued_ns) / elapsed;
                w.load_permille
                    .store((load * 1000.0).round() as u32, Ordering::Relaxed);
                w.demand_permille.store(
                    (demand.min(sbc_proto::overload::autoscale::MAX_DEMAND) * 1000.0).round()
                        as u32,
                    Ordering::Relaxed,
                );
                demand
            })
            .collect();
        *start = (now, next);
        loads
    }

    /// Starts one worker and gives it a fair share of the shards, taken from the workers that
    /// hold the most.
    fn add_worker(self: &Arc<Self>, ctx: &Arc<Ctx>) -> anyhow::Result<()> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let new = Arc::new(Worker::new(id, &self.settings));
        {
            // Its expected-wait estimate starts from the group's recent service times.
            let ws = lock(&self.workers);
            let n = u32::try_from(ws.len().max(1)).unwrap_or(u32::MAX);
            let (mut service, mut new_service) = (Duration::ZERO, Duration::ZERO);
            for w in ws.iter() {
                let q = lock(&w.queue);
                service += q.queue.service_time();
                new_service += q.queue.new_request_service_time();
            }
            lock(&new.queue)
                .queue
                .seed_service(service / n, new_service / n);
        }
        self.spawn(new.clone(), ctx)?;
        let workers = {
            let mut ws = lock(&self.workers);
            ws.push(new.clone());
            ws.clone()
        };
        let assignment = match self.assignment.read() {
            Ok(a) => a.clone(),
            Err(e) => e.into_inner().clone(),
        };
        let holdings: Vec<(usize, Vec<usize>)> = workers
            .iter()
            .filter(|w| w.id != id)
            .map(|w| {
                let shards = (0..SHARDS)
                    .filter(|&s| Arc::ptr_eq(&assignment[s], w))
                    .collect();
                (w.id, shards)
            })
            .collect();
        for (donor_id, shards) in plan_new_worker(&holdings, workers.len(), SHARDS) {
            let Some(donor) = workers.iter().find(|w| w.id == donor_id) else {
                continue;
            };
            let (tx, rx) = mpsc::channel();
            donor.command(Control::Handoff {
                shards,
                to: new.clone(),
                done: tx,
            });
            if !self.confirmed(&rx, donor.id) {
                break;
            }
        }
        info!(group = %self.name, worker = id, workers = workers.len(), "worker started");
        Ok(())
    }

    /// Drains and stops `w`: its shards and queued messages go to the other workers.
    fn retire(&self, w: &Arc<Worker>) {
        let heirs: Vec<Arc<Worker>> = {
            let mut ws = lock(&self.workers);
            if ws.len() < 2 {
                return;
            }
            ws.retain(|x| !Arc::ptr_eq(x, w));
            // Still counted while it hands its shards over.
            lock(&self.retiring).push(w.clone());
            ws.clone()
        };
        let (tx, rx) = mpsc::channel();
        w.command(Control::Retire { heirs, done: tx });
        if self.confirmed(&rx, w.id) {
            info!(group = %self.name, worker = w.id, "worker drained and stopped");
            {
                let mut retiring = lock(&self.retiring);
                retiring.retain(|x| !Arc::ptr_eq(x, w));
                *lock(&self.retired) += &lock(&w.queue).queue.counters();
            }
            let handle = {
                let mut threads = lock(&self.threads);
                threads
                    .iter()
                    .position(|(id, _)| *id == w.id)
                    .map(|i| threads.swap_remove(i).1)
            };
            if let Some(h) = handle {
                let _ = h.join();
            }
        }
    }

    /// Waits for a worker to confirm a command; a worker that does not within
    /// [`CONFIRM_WAIT`] (stuck in a bug) suspends this group's scaling for good, so that no
    /// second command ever overlaps the pending one.
    fn confirmed(&self, rx: &mpsc::Receiver<()>, worker: usize) -> bool {
        if rx.recv_timeout(CONFIRM_WAIT).is_ok() {
            return true;
        }
        self.suspended.store(true, Ordering::Relaxed);
        tracing::error!(
            group = %self.name,
            worker,
            "a worker did not confirm a hand-over within {} s: autoscaling of this group stops",
            CONFIRM_WAIT.as_secs()
        );
        false
    }

    /// Stops every worker (after the node drained) and joins the threads.
    pub(crate) fn stop(&self) {
        for w in lock(&self.workers).iter() {
            lock(&w.queue).stop = true;
            w.ready.notify_all();
        }
        let threads = std::mem::take(&mut *lock(&self.threads));
        for (_, t) in threads {
            let _ = t.join();
        }
    }

    /// The group as `show workers` reports it.
    pub(crate) fn report(&self, now: Instant) -> GroupReport {
        // One snapshot of who counts: running, retiring, retired.
        let (workers, c) = {
            let ws = lock(&self.workers);
            let retiring = lock(&self.retiring);
            let mut c = *lock(&self.retired);
            for w in ws.iter().chain(retiring.iter()) {
                c += &lock(&w.queue).queue.counters();
            }
            (ws.clone(), c)
        };
        let members: Vec<WorkerReport> = workers
            .iter()
            .map(|w| {
                let q = lock(&w.queue);
                WorkerReport {
                    id: w.id,
                    load_percent: f64::from(w.load_permille.load(Ordering::Relaxed)) / 10.0,
                    demand_percent: f64::from(w.demand_permille.load(Ordering::Relaxed)) / 10.0,
                    queued_primary: q.queue.primary_len(),
                    queued_secondary: q.queue.secondary_len(),
                    shards: w.owned.load(Ordering::Relaxed),
                }
            })
            .collect();
        let s = lock(&self.scaler);
        GroupReport {
            name: self.name.clone(),
            profile: s.profile().map(ToString::to_string),
            workers: members.len(),
            load_percent: mean(members.iter().map(|m| m.load_percent)),
            demand_percent: mean(members.iter().map(|m| m.demand_percent)),
            queued: members
                .iter()
                .map(|m| m.queued_primary + m.queued_secondary)
                .sum(),
            scheduling: match self.settings.prsm.mode {
                Mode::Prsm => "prsm",
                Mode::Fifo => "fifo",
            },
            guard_cycles: s.guard_remaining(),
            removed_retransmissions: c.removed_retransmissions,
            answered_from_state: c.answered_from_state,
            secondary_served: c.secondary_served,
            rejected_queue_full: c.rejected_full,
            rejected_queue_delay: c.rejected_delay,
            dropped_queue_full: c.dropped_full,
            members,
            decisions: s.history().map(|r| describe_record(r, now)).collect(),
        }
    }
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = xs.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}
