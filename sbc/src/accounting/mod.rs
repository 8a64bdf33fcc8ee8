//! Accounting's shell (`account-config`): one thread takes the records the engines generate,
//! appends them to the spool and syncs it (a batch per sync), writes them to the CSV files,
//! and sends them to the accounting servers as the delivery machine
//! (`sbc_accounting::delivery`) says, marking each in the spool once a server answered. After
//! a restart the spool's unmarked records are sent again, with their Acct-Delay-Time.
//!
//! The SIP path never waits on it: a worker hands a record over a bounded queue without
//! blocking; a full queue or a full spool drops the record and counts it
//! (`records_refused`).
//!
//! In a pair, the active also replicates each record as the worker hands it over (the sync
//! table's key `accounting:<record key>`, beside the call's dialog that says it was generated)
//! and deletes it there once a server acknowledged it. A new active adopts the records left in
//! the table ([`AccountingHub::adopt`]): it spools and delivers what the former active had
//! not, so a record is generated once across the pair and delivered at least once (a record
//! whose acknowledgement had not been replicated is sent again: the same record, the same
//! Acct-Session-Id and times).

mod radius;
pub mod spool_alarm;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher as _, RandomState};
use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sbc_accounting::csv_file::{self, Rotation};
use sbc_accounting::delivery::{Delivery, DeliverySettings};
use sbc_accounting::spool::{self, Append, SpoolEntry, SpoolLedger};
use sbc_accounting::CallRecord;
use serde::Serialize;
use tracing::{info, warn};

/// Records waiting between the workers and the accounting thread, at most.
pub const QUEUE: usize = 65_536;
/// Records replicated to the standby and not yet delivered, at most: beyond (a long server
/// outage), a record lives in this node's spool only, and is counted (`records_not_replicated`).
pub const MAX_REPLICATED: u64 = 100_000;

/// What the pair does with a record not yet delivered: its sync-table key and its bytes to
/// replicate, or `None` to delete it (delivered).
pub type Replicator = Arc<dyn Fn(Vec<u8>, Option<Vec<u8>>) + Send + Sync>;

/// What the workers, the accounting thread and the pair share.
#[derive(Default)]
struct Replication {
    replicator: std::sync::RwLock<Option<Replicator>>,
    /// Records replicated and not yet deleted.
    outstanding: AtomicU64,
    not_replicated: AtomicU64,
    adopted: AtomicU64,
}

impl std::fmt::Debug for Replication {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replication")
            .field("outstanding", &self.outstanding)
            .finish_non_exhaustive()
    }
}

impl Replication {
    fn replicator(&self) -> Option<Replicator> {
        self.replicator
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Replicates `record`; whether it was.
    fn upsert(&self, record: &CallRecord) -> bool {
        let Some(r) = self.replicator() else {
            return false;
        };
        if self.outstanding.load(Ordering::Relaxed) >= MAX_REPLICATED {
            self.not_replicated.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.outstanding.fetch_add(1, Ordering::Relaxed);
        r(
            sbc_accounting::replication_key(record),
            Some(record.to_wire()),
        );
        true
    }

    /// `record` was delivered: its replica goes.
    fn delete(&self, record: &CallRecord) {
        let _ = self
            .outstanding
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if let Some(r) = self.replicator() {
            r(sbc_accounting::replication_key(record), None);
        }
    }
}

/// A record handed to the accounting thread, and whether it is replicated.
struct Handed {
    record: CallRecord,
    replicated: bool,
}
/// A spool segment's size before the next one is started.
const SEGMENT_BYTES: u64 = 4 * 1024 * 1024;

/// The segment size for a spool bounded at `max_bytes`: [`SEGMENT_BYTES`], or an eighth of a
/// smaller bound (at least one largest entry). Only a delivered segment that is not the one
/// being written is deleted, so a spool within one segment (`spool-max-size` 1 to 4 MiB)
/// would never have room again once full.
#[must_use]
pub fn segment_bytes(max_bytes: u64) -> u64 {
    SEGMENT_BYTES
        .min(max_bytes / 8)
        .max(spool::MAX_ENTRY as u64)
}
/// How often the thread looks at its sockets when nothing else is due.
const TICK: Duration = Duration::from_millis(10);

/// One accounting server as the node reaches it.
#[derive(Clone)]
pub struct ServerSettings {
    /// Its address.
    pub addr: SocketAddr,
    /// The shared secret (never printed).
    pub secret: String,
}

impl std::fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSettings")
            .field("addr", &self.addr)
            .field("secret", &"********")
            .finish()
    }
}

/// The local CSV files.
#[derive(Debug, Clone)]
pub struct FileOutput {
    /// Their directory (`file-path`).
    pub dir: PathBuf,
    /// When a file is closed (`max-file-size`, `file-rotate-time`).
    pub rotation: Rotation,
    /// Closed files kept (`max-files`).
    pub max_files: usize,
}

/// What accounting runs with (built by `settings.rs` from `account-config`).
#[derive(Debug, Clone)]
pub struct AccountingSettings {
    /// The node's name, in every record.
    pub node: String,
    /// The servers, in their configured order.
    pub servers: Vec<ServerSettings>,
    /// Strategy, waits and retries.
    pub delivery: DeliverySettings,
    /// The spool's directory.
    pub spool_dir: PathBuf,
    /// The spool's bound, in bytes.
    pub spool_max_bytes: u64,
    /// The CSV files, when on.
    pub file_output: Option<FileOutput>,
    /// Whether new calls are refused while the spool is full (`spool-full-action
    /// refuse-calls`).
    pub refuse_calls_when_full: bool,
}

/// One server as `show accounting` and `/metrics` see it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerReport {
    /// Its address.
    pub address: String,
    /// up, down or probing.
    pub state: &'static str,
    /// Requests sent (first sends and resends).
    pub sent: u64,
    /// Requests sent again.
    pub resent: u64,
    /// Records it acknowledged.
    pub acknowledged: u64,
    /// Times it was taken as failed.
    pub failures: u64,
    /// Records sent to it and not answered yet.
    pub outstanding: usize,
}

/// Accounting's state, for `show accounting`, `/metrics` and the MIB.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AccountingReport {
    /// Whether accounting runs.
    pub enabled: bool,
    /// The servers.
    pub servers: Vec<ServerReport>,
    /// Records generated by the engines and taken by the accounting thread.
    pub records_generated: u64,
    /// Records written to the spool.
    pub records_spooled: u64,
    /// Records acknowledged by a server (or written to the files when no server is set).
    pub records_delivered: u64,
    /// Records replayed from the spool at start.
    pub records_replayed: u64,
    /// Records not kept: the queue to the accounting thread or the spool was full.
    pub records_refused: u64,
    /// Records in the spool not acknowledged yet.
    pub spool_pending: usize,
    /// Bytes the spool holds.
    pub spool_bytes: u64,
    /// The spool's bound.
    pub spool_max_bytes: u64,
    /// Segment files in the spool.
    pub spool_segments: usize,
    /// Whether the spool is full now.
    pub spool_full: bool,
    /// Records waiting for a server.
    pub queued: usize,
    /// Records sent and not answered.
    pub in_flight: usize,
    /// Lines written to the CSV files.
    pub file_records: u64,
    /// CSV files closed (rotated).
    pub files_rotated: u64,
    /// Spool or file write errors.
    pub write_errors: u64,
    /// Torn entries found at the end of a segment when the spool was read back.
    pub spool_torn: u64,
    /// Records replicated to the standby and not yet delivered.
    pub records_replicated_pending: u64,
    /// Records not replicated ([`MAX_REPLICATED`] reached): in this node's spool only.
    pub records_not_replicated: u64,
    /// Records adopted from a former active at a takeover.
    pub records_adopted: u64,
}

/// The workers' side of accounting: a bounded, non-blocking queue to its thread.
#[derive(Debug)]
pub struct AccountingHub {
    node: String,
    refuse_calls_when_full: bool,
    replication: Arc<Replication>,
    tx: Mutex<Option<SyncSender<Handed>>>,
    refused: AtomicU64,
    report: Arc<Mutex<AccountingReport>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl AccountingHub {
    /// No accounting: records offered are dropped (engines make none).
    #[must_use]
    pub fn off() -> Self {
        Self {
            node: String::new(),
            refuse_calls_when_full: false,
            replication: Arc::default(),
            tx: Mutex::new(None),
            refused: AtomicU64::new(0),
            report: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// Starts the accounting thread: reads the spool back, then serves.
    ///
    /// # Errors
    /// The spool directory cannot be created or read, or a socket cannot be opened.
    pub fn start(settings: AccountingSettings) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let report = Arc::new(Mutex::new(AccountingReport {
            enabled: true,
            spool_max_bytes: settings.spool_max_bytes,
            ..AccountingReport::default()
        }));
        let node = settings.node.clone();
        let refuse_calls_when_full = settings.refuse_calls_when_full;
        let replication = Arc::new(Replication::default());
        let mut service = Service::open(settings, Arc::clone(&report), Arc::clone(&replication))?;
        let thread = std::thread::Builder::new()
            .name("accounting".into())
            .spawn(move || service.run(&rx))?;
        Ok(Self {
            node,
            refuse_calls_when_full,
            replication,
            tx: Mutex::new(Some(tx)),
            refused: AtomicU64::new(0),
            report,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Hands a record to the accounting thread without waiting; a full queue drops it and
    /// counts it.
    pub fn offer(&self, mut record: CallRecord) {
        let guard = lock(&self.tx);
        let Some(tx) = guard.as_ref() else {
            return;
        };
        record.node.clone_from(&self.node);
        let replicated = self.replication.upsert(&record);
        match tx.try_send(Handed { record, replicated }) {
            Ok(()) => {}
            Err(TrySendError::Full(h) | TrySendError::Disconnected(h)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                if h.replicated {
                    // Its replica stays: the standby, should it take over, delivers it.
                    let _ = self.replication.outstanding.fetch_sub(1, Ordering::Relaxed);
                }
            }
        }
    }

    /// Where records not yet delivered are replicated (the pair's publisher while this node is
    /// active), or nowhere.
    pub fn set_replicator(&self, replicator: Option<Replicator>) {
        *self
            .replication
            .replicator
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = replicator;
        if self.replication.replicator().is_none() {
            self.replication.outstanding.store(0, Ordering::Relaxed);
        }
    }

    /// Takes over the records a former active replicated and had not delivered: spooled and
    /// delivered here, their replicas deleted once acknowledged. Hands them over on a thread of
    /// its own (the queue may be full for a moment); returns how many.
    pub fn adopt(&self, records: Vec<CallRecord>) -> usize {
        let n = records.len();
        let Some(tx) = lock(&self.tx).clone() else {
            return 0;
        };
        self.replication
            .adopted
            .fetch_add(n as u64, Ordering::Relaxed);
        self.replication
            .outstanding
            .fetch_add(n as u64, Ordering::Relaxed);
        let _ = std::thread::Builder::new()
            .name("accounting-adopt".into())
            .spawn(move || {
                for record in records {
                    if tx
                        .send(Handed {
                            record,
                            replicated: true,
                        })
                        .is_err()
                    {
                        return;
                    }
                }
            });
        n
    }

    /// Whether new calls are refused while the spool is full (`spool-full-action
    /// refuse-calls`).
    #[must_use]
    pub fn refuses_calls_when_full(&self) -> bool {
        self.refuse_calls_when_full
    }

    /// Accounting's state now.
    #[must_use]
    pub fn report(&self) -> AccountingReport {
        let mut r = lock(&self.report).clone();
        r.records_refused += self.refused.load(Ordering::Relaxed);
        r.records_replicated_pending = self.replication.outstanding.load(Ordering::Relaxed);
        r.records_not_replicated = self.replication.not_replicated.load(Ordering::Relaxed);
        r.records_adopted = self.replication.adopted.load(Ordering::Relaxed);
        r
    }

    /// Stops the thread after it spooled what was queued (records not yet acknowledged stay
    /// in the spool for the next start).
    pub fn stop(&self) {
        lock(&self.tx).take();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

impl Drop for AccountingHub {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

struct Server {
    socket: UdpSocket,
    secret: Vec<u8>,
    /// The request last sent with each Identifier (to check an answer against).
    sent: HashMap<u8, Vec<u8>>,
}

struct CsvFiles {
    out: FileOutput,
    file: Option<(File, PathBuf, u64, u64)>,
    seq: u64,
}

struct Service {
    node: String,
    servers: Vec<Server>,
    delivery: Delivery,
    spool_dir: PathBuf,
    ledger: SpoolLedger,
    segment: Option<(u64, File)>,
    pending: HashMap<u64, CallRecord>,
    /// The records whose replica is deleted once delivered.
    replicated: std::collections::HashSet<u64>,
    replication: Arc<Replication>,
    hasher: RandomState,
    files: Option<CsvFiles>,
    report: Arc<Mutex<AccountingReport>>,
    stats: AccountingReport,
}

impl Service {
    fn open(
        s: AccountingSettings,
        report: Arc<Mutex<AccountingReport>>,
        replication: Arc<Replication>,
    ) -> anyhow::Result<Self> {
        fs::create_dir_all(&s.spool_dir).map_err(|e| {
            anyhow::anyhow!("account-config spool-path {}: {e}", s.spool_dir.display())
        })?;
        if let Some(f) = &s.file_output {
            fs::create_dir_all(&f.dir).map_err(|e| {
                anyhow::anyhow!("account-config file-path {}: {e}", f.dir.display())
            })?;
        }
        let mut servers = Vec::new();
        for srv in &s.servers {
            let local: SocketAddr = if srv.addr.is_ipv6() {
                "[::]:0".parse()?
            } else {
                "0.0.0.0:0".parse()?
            };
            let socket = UdpSocket::bind(local)?;
            socket.connect(srv.addr)?;
            socket.set_nonblocking(true)?;
            servers.push(Server {
                socket,
                secret: srv.secret.as_bytes().to_vec(),
                sent: HashMap::new(),
            });
        }
        let mut service = Self {
            node: s.node,
            delivery: Delivery::new(&s.delivery),
            servers,
            ledger: SpoolLedger::new(s.spool_max_bytes, segment_bytes(s.spool_max_bytes)),
            spool_dir: s.spool_dir,
            segment: None,
            pending: HashMap::new(),
            replicated: std::collections::HashSet::new(),
            replication,
            hasher: RandomState::new(),
            files: s.file_output.map(|out| CsvFiles {
                out,
                file: None,
                seq: 0,
            }),
            stats: AccountingReport {
                enabled: true,
                spool_max_bytes: s.spool_max_bytes,
                ..AccountingReport::default()
            },
            report,
        };
        service.replay()?;
        Ok(service)
    }

    /// Reads the spool back: every record not marked delivered is sent again.
    fn replay(&mut self) -> anyhow::Result<()> {
        let mut numbers: Vec<u64> = fs::read_dir(&self.spool_dir)?
            .filter_map(Result::ok)
            .filter_map(|e| spool::segment_number(&e.file_name().to_string_lossy()))
            .collect();
        numbers.sort_unstable();
        let now = Instant::now();
        let mut replayed = std::collections::BTreeMap::new();
        let mut last = None;
        for n in numbers {
            let path = self.spool_dir.join(spool::segment_name(n));
            let bytes = fs::read(&path)?;
            let (entries, torn) = spool::decode_segment(&bytes);
            if torn {
                self.stats.spool_torn += 1;
                warn!(segment = %path.display(), "spool segment ends in a torn entry (cut off)");
            }
            for e in &entries {
                match e {
                    SpoolEntry::Record { seq, record } => {
                        replayed.insert(*seq, (**record).clone());
                    }
                    SpoolEntry::Delivered { seq } => {
                        replayed.remove(seq);
                    }
                }
            }
            let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            self.ledger.replay(n, len, entries);
            last = Some(n);
        }
        if let Some(last) = last {
            let path = self.spool_dir.join(spool::segment_name(last));
            let file = OpenOptions::new().append(true).open(&path)?;
            self.segment = Some((last, file));
        }
        self.stats.records_replayed = replayed.len() as u64;
        if !replayed.is_empty() {
            info!(
                records = replayed.len(),
                "accounting records replayed from the spool"
            );
        }
        for (seq, record) in replayed {
            self.queue(now, seq, record);
        }
        self.delete_delivered_segments();
        Ok(())
    }

    fn session_hash(&self, r: &CallRecord) -> u64 {
        self.hasher.hash_one(&r.session_id)
    }

    fn queue(&mut self, now: Instant, seq: u64, record: CallRecord) {
        let session = self.session_hash(&record);
        self.pending.insert(seq, record);
        if self.servers.is_empty() {
            // Files only: written is delivered.
            self.mark_delivered(seq);
            return;
        }
        self.delivery.enqueue(now, seq, session);
    }

    fn append(&mut self, bytes: &[u8], append: &Append) -> bool {
        let Append::To { number, new } = append else {
            return false;
        };
        if *new || self.segment.as_ref().is_none_or(|(n, _)| n != number) {
            let path = self.spool_dir.join(spool::segment_name(*number));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => self.segment = Some((*number, f)),
                Err(e) => {
                    warn!(error = %e, "accounting spool: cannot open a segment");
                    self.stats.write_errors += 1;
                    return false;
                }
            }
        }
        let Some((_, f)) = self.segment.as_mut() else {
            return false;
        };
        if let Err(e) = f.write_all(bytes) {
            warn!(error = %e, "accounting spool: write failed");
            self.stats.write_errors += 1;
            return false;
        }
        true
    }

    fn sync(&mut self) {
        if let Some((_, f)) = self.segment.as_ref() {
            if let Err(e) = f.sync_data() {
                warn!(error = %e, "accounting spool: sync failed");
                self.stats.write_errors += 1;
            }
        }
    }

    fn mark_delivered(&mut self, seq: u64) {
        let record = self.pending.remove(&seq);
        if self.replicated.remove(&seq) {
            if let Some(r) = &record {
                self.replication.delete(r);
            }
        }
        if !self.ledger.delivered(seq) {
            return;
        }
        self.stats.records_delivered += 1;
        let bytes = spool::encode(&SpoolEntry::Delivered { seq });
        let append = self
            .ledger
            .append_mark(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        self.append(&bytes, &append);
    }

    fn delete_delivered_segments(&mut self) {
        for n in self.ledger.take_deletable() {
            let path = self.spool_dir.join(spool::segment_name(n));
            if let Err(e) = fs::remove_file(&path) {
                warn!(error = %e, segment = %path.display(), "accounting spool: cannot delete");
            }
        }
    }

    /// Takes a batch of records: spooled and synced first, then written to the files and
    /// queued for the servers.
    fn take(&mut self, now: Instant, batch: Vec<Handed>) {
        let mut kept = Vec::with_capacity(batch.len());
        for Handed {
            mut record,
            replicated,
        } in batch
        {
            self.stats.records_generated += 1;
            if record.node.is_empty() {
                record.node.clone_from(&self.node);
            }
            let seq = self.ledger.take_seq();
            let bytes = spool::encode(&SpoolEntry::Record {
                seq,
                record: Box::new(record.clone()),
            });
            let append = self
                .ledger
                .append_record(seq, u64::try_from(bytes.len()).unwrap_or(u64::MAX));
            if append == Append::Full {
                self.stats.records_refused += 1;
                self.stats.spool_full = true;
                continue;
            }
            self.stats.spool_full = false;
            if self.append(&bytes, &append) {
                self.stats.records_spooled += 1;
                if replicated {
                    self.replicated.insert(seq);
                }
                kept.push((seq, record));
            } else {
                self.ledger.delivered(seq);
                self.stats.records_refused += 1;
            }
        }
        self.sync();
        for (seq, record) in kept {
            self.write_csv(&record);
            self.queue(now, seq, record);
        }
    }

    fn write_csv(&mut self, record: &CallRecord) {
        let Some(files) = self.files.as_mut() else {
            return;
        };
        let line = csv_file::record_line(record);
        let header = csv_file::header();
        let now_ms = unix_ms();
        let next = line.len() as u64;
        let hdr = header.len() as u64;
        let due = files.file.as_ref().is_some_and(|(_, _, size, opened)| {
            files.out.rotation.due(*size, hdr, *opened, now_ms, next)
        });
        if due {
            files.file = None;
            self.stats.files_rotated += 1;
            prune_files(&files.out.dir, files.out.max_files);
        }
        if files.file.is_none() {
            files.seq += 1;
            let path = files.out.dir.join(csv_file::file_name(now_ms, files.seq));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(mut f) => {
                    if f.write_all(&header).is_err() {
                        self.stats.write_errors += 1;
                    }
                    files.file = Some((f, path, hdr, now_ms));
                }
                Err(e) => {
                    warn!(error = %e, path = %path.display(), "cannot open a CDR file");
                    self.stats.write_errors += 1;
                    return;
                }
            }
        }
        if let Some((f, _, size, _)) = files.file.as_mut() {
            if f.write_all(&line).is_ok() {
                *size += next;
                self.stats.file_records += 1;
            } else {
                self.stats.write_errors += 1;
            }
        }
    }

    fn send(&mut self) {
        let now_ms = unix_ms();
        while let Some(s) = self.delivery.poll_send() {
            let Some(record) = self.pending.get(&s.seq) else {
                continue;
            };
            let delay =
                u32::try_from(now_ms.saturating_sub(record.event_ms) / 1000).unwrap_or(u32::MAX);
            let Some(server) = self.servers.get_mut(s.server) else {
                continue;
            };
            let Some(bytes) =
                radius::accounting_request(record, s.identifier, delay, &server.secret)
            else {
                warn!(session = %record.session_id, "accounting record too large for RADIUS");
                continue;
            };
            // A send that fails (the server's port closed: ICMP) is a request not answered.
            let _ = server.socket.send(&bytes);
            server.sent.insert(s.identifier, bytes);
        }
    }

    fn receive(&mut self, now: Instant) {
        let mut buf = [0u8; 4096];
        for i in 0..self.servers.len() {
            for _ in 0..256 {
                let Ok(n) = self.servers[i].socket.recv(&mut buf) else {
                    break;
                };
                let answer = &buf[..n];
                let Some(&identifier) = answer.get(1) else {
                    continue;
                };
                let server = &self.servers[i];
                let authentic = server
                    .sent
                    .get(&identifier)
                    .is_some_and(|req| radius::is_answer(answer, req, &server.secret));
                if !authentic {
                    continue;
                }
                if self.delivery.handle_answer(now, i, identifier).is_some() {
                    self.servers[i].sent.remove(&identifier);
                }
            }
        }
        while let Some(seq) = self.delivery.poll_delivered() {
            self.mark_delivered(seq);
        }
        self.delete_delivered_segments();
    }

    fn publish(&mut self) {
        // Full until deliveries made room for records again.
        if self.stats.spool_full
            && self.ledger.bytes() + spool::MAX_ENTRY as u64 <= self.ledger.max_bytes()
        {
            self.stats.spool_full = false;
        }
        self.stats.spool_pending = self.ledger.pending();
        self.stats.spool_bytes = self.ledger.bytes();
        self.stats.spool_segments = self.ledger.segments();
        self.stats.queued = self.delivery.queued();
        self.stats.in_flight = self.delivery.in_flight();
        self.stats.servers = self
            .delivery
            .servers()
            .zip(&self.servers)
            .map(|((state, c, outstanding), s)| ServerReport {
                address: s
                    .socket
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default(),
                state: state.as_str(),
                sent: c.sent,
                resent: c.resent,
                acknowledged: c.acknowledged,
                failures: c.failures,
                outstanding,
            })
            .collect();
        *lock(&self.report) = self.stats.clone();
    }

    fn run(&mut self, rx: &Receiver<Handed>) {
        let mut open = true;
        while open {
            let now = Instant::now();
            let wait = self
                .delivery
                .poll_timeout()
                .map_or(TICK, |t| t.saturating_duration_since(now).min(TICK));
            let mut batch = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(r) => batch.push(r),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => open = false,
            }
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(r) => batch.push(r),
                    Err(_) => break,
                }
            }
            let now = Instant::now();
            if !batch.is_empty() {
                self.take(now, batch);
            }
            self.delivery.handle_timeout(now);
            self.send();
            self.receive(now);
            self.send();
            self.publish();
        }
        self.sync();
        if let Some(files) = self.files.as_mut() {
            if let Some((f, _, _, _)) = files.file.as_mut() {
                let _ = f.sync_data();
            }
        }
    }
}

/// Deletes the oldest closed CDR files beyond `max_files` (the open one is not counted: it
/// is the newest).
fn prune_files(dir: &Path, max_files: usize) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("cdr-") && n.ends_with(".csv"))
        })
        .collect();
    names.sort();
    while names.len() > max_files {
        let p = names.remove(0);
        let _ = fs::remove_file(p);
    }
}
