//! Accounting's shell (`account-config`): one thread takes the records the engines generate,
//! appends them to the spool and syncs it (a batch per sync), writes them to the CSV files,
//! and sends them to the accounting servers as the delivery machine
//! (`sbc_accounting::delivery`) says, marking each in the spool once a server answered. After
//! a restart the spool's unmarked records are sent again, with their Acct-Delay-Time. At most
//! a window of undelivered records is held in memory ([`sbc_accounting::window`]); the rest
//! stay in the spool only and are read back, oldest first, as deliveries make room.
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
pub mod radsec;
pub mod spool_alarm;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher as _, RandomState};
use std::io::BufWriter;
use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use sbc_accounting::csv_file::{self, Rotation};
use sbc_accounting::delivery::{Delivery, DeliverySettings};
use sbc_accounting::hashing::{self, IdHash, SeqHash};
use sbc_accounting::spool::{self, Append, SpoolEntry, SpoolLedger};
use sbc_accounting::window::{Candidate, Window};
use sbc_accounting::{CallRecord, TextField};

use crate::udp_batch;
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
    /// Replicas to delete, of records delivered while there was no replicator (a new active
    /// between its takeover and its publisher): deleted as soon as there is one.
    deferred_deletes: Mutex<Vec<Vec<u8>>>,
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
        let key = sbc_accounting::replication_key(record);
        match self.replicator() {
            Some(r) => r(key, None),
            None => {
                let mut d = lock(&self.deferred_deletes);
                if d.len() < MAX_REPLICATED as usize {
                    d.push(key);
                }
            }
        }
    }
}

/// What the accounting thread is handed.
#[allow(
    clippy::large_enum_variant,
    reason = "nearly every message is a record: boxing it would cost an allocation each"
)]
enum Handed {
    /// A record, and whether it is replicated to the standby.
    Record {
        /// The record.
        record: CallRecord,
        /// Whether its replica is in the pair's table.
        replicated: bool,
    },
    /// This node became the standby: the records it replicated are the new active's to
    /// deliver (it adopted them); this node stops sending them.
    HandOver,
    /// This node became the active: records it replicated before a restart, held since,
    /// are its own to deliver again.
    TakeBack,
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
/// How often the thread looks at its queue and sockets while requests wait for answers or
/// for a server.
const TICK: Duration = Duration::from_millis(20);
/// How often it looks at its queue when no request is in flight or waiting: a quiet node
/// wakes 20 times a second rather than 50 (the fixed cost that dominates at low call rates).
const IDLE_TICK: Duration = Duration::from_millis(50);
/// How long the thread gathers records into one batch (one spool write and one sync) after
/// the first one arrives: at most four syncs a second, whatever the rate. A record waits at
/// most this long before it is sent; a lone node killed inside it loses the batch (a pair's
/// standby holds the replicas). At 200 calls/s 250 ms rather than 100 ms took the thread from
/// 38 to 25 µs a call: the sync and the writes are the fixed costs of a batch.
const BATCH_WINDOW: Duration = Duration::from_millis(250);
/// How often `show accounting`'s report is refreshed.
const PUBLISH_EVERY: Duration = Duration::from_millis(100);
/// How often the CSV files are synced when accounting servers are the records' delivery: their
/// lines are written (they survive the process's death) a batch at a time and synced at most
/// this often (they would not survive the machine's inside this). With files only, written and
/// synced is delivered: every batch is synced.
const CSV_SYNC_EVERY: Duration = Duration::from_secs(1);

/// One accounting server as the node reaches it.
#[derive(Clone)]
pub struct ServerSettings {
    /// Its address.
    pub addr: SocketAddr,
    /// The shared secret (never printed).
    pub secret: String,
    /// RADIUS over TLS (RFC 6614) rather than UDP: how the server is verified.
    pub tls: Option<ServerTls>,
}

/// How a RADIUS/TLS server is dialled: the `tls-profile` and the name its certificate must
/// carry.
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// The `tls-profile` (its CAs, its certificate).
    pub profile: String,
    /// The name to verify (`tls-server-name`; default the server's IP address).
    pub server_name: Option<String>,
}

impl std::fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSettings")
            .field("addr", &self.addr)
            .field("secret", &"********")
            .field("tls", &self.tls)
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
    /// Undelivered records held in memory, at most ([`sbc_accounting::window::WINDOW`]); the
    /// rest are read back from the spool as deliveries make room.
    pub memory_window: usize,
}

/// One server as `show accounting` and `/metrics` see it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ServerReport {
    /// Its address.
    pub address: String,
    /// udp or tls (RFC 6614).
    pub transport: &'static str,
    /// Over TLS: the connection's state (closed, connecting, up); over UDP, "-".
    pub connection: &'static str,
    /// Over TLS: connections opened.
    pub connects: u64,
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
    /// Records handed over to a new active when this node became the standby.
    pub records_handed_over: u64,
    /// Records handed twice (adopted while still held here): kept once.
    pub records_duplicate: u64,
    /// Records that could not be written to the spool (a write failed): delivered from
    /// memory while the node lives.
    pub records_unspooled: u64,
    /// Records that could not be encoded as RADIUS: dropped, counted.
    pub records_undeliverable: u64,
    /// Replicated records read back at start, waiting for this node's role (in the spool).
    pub records_held: usize,
    /// Undelivered records loaded in memory (at most the window).
    pub records_in_memory: usize,
    /// Records pending in the spool and not in memory (read back as the window empties).
    pub records_on_disk_only: usize,
}

/// The workers' side of accounting: a bounded, non-blocking queue to its thread.
#[derive(Debug)]
pub struct AccountingHub {
    refuse_calls_when_full: bool,
    replication: Arc<Replication>,
    tx: Mutex<Option<Sender<Handed>>>,
    /// Records handed over and not yet taken by the thread (the queue's bound, [`QUEUE`]; the
    /// queue itself grows as it fills, nothing is allocated for it up front).
    queued: Arc<AtomicUsize>,
    refused: AtomicU64,
    report: Arc<Mutex<AccountingReport>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl AccountingHub {
    /// No accounting: records offered are dropped (engines make none).
    #[must_use]
    pub fn off() -> Self {
        Self {
            refuse_calls_when_full: false,
            replication: Arc::default(),
            tx: Mutex::new(None),
            queued: Arc::default(),
            refused: AtomicU64::new(0),
            report: Arc::default(),
            thread: Mutex::new(None),
        }
    }

    /// Starts the accounting thread: reads the spool back, then serves.
    ///
    /// # Errors
    /// The spool directory cannot be created or read, a socket cannot be opened, or a
    /// RADIUS/TLS server's `tls-profile` is not loaded in `tls` (or has no trusted CAs).
    pub fn start(
        settings: AccountingSettings,
        tls: &crate::runtime::tls::TlsContext,
    ) -> anyhow::Result<Self> {
        let (tx, rx) = mpsc::channel();
        let queued = Arc::new(AtomicUsize::new(0));
        let report = Arc::new(Mutex::new(AccountingReport {
            enabled: true,
            spool_max_bytes: settings.spool_max_bytes,
            ..AccountingReport::default()
        }));
        let refuse_calls_when_full = settings.refuse_calls_when_full;
        let replication = Arc::new(Replication::default());
        let mut service = Service::open(
            settings,
            tls,
            Arc::clone(&report),
            Arc::clone(&replication),
            Arc::clone(&queued),
        )?;
        let thread = std::thread::Builder::new()
            .name("accounting".into())
            .spawn(move || service.run(&rx))?;
        Ok(Self {
            refuse_calls_when_full,
            replication,
            tx: Mutex::new(Some(tx)),
            queued,
            refused: AtomicU64::new(0),
            report,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Hands a record to the accounting thread without waiting; a full queue drops it and
    /// counts it.
    pub fn offer(&self, record: CallRecord) {
        let guard = lock(&self.tx);
        let Some(tx) = guard.as_ref() else {
            return;
        };
        if self.queued.load(Ordering::Relaxed) >= QUEUE {
            // The thread is this far behind: the record is refused and counted.
            self.refused.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let replicated = self.replication.upsert(&record);
        self.queued.fetch_add(1, Ordering::Relaxed);
        if let Err(mpsc::SendError(h)) = tx.send(Handed::Record { record, replicated }) {
            self.queued.fetch_sub(1, Ordering::Relaxed);
            self.refused.fetch_add(1, Ordering::Relaxed);
            if let Handed::Record {
                record,
                replicated: true,
            } = h
            {
                // Not kept here: its replica goes too (the counters stay true).
                self.replication.delete(&record);
            }
        }
    }

    /// Where records not yet delivered are replicated (the pair's publisher while this node is
    /// active), or nowhere.
    pub fn set_replicator(&self, replicator: Option<Replicator>) {
        let became_active = replicator.is_some();
        *self
            .replication
            .replicator
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = replicator;
        match self.replication.replicator() {
            Some(r) => {
                let deferred = std::mem::take(&mut *lock(&self.replication.deferred_deletes));
                for key in deferred {
                    r(key, None);
                }
            }
            None => self.replication.outstanding.store(0, Ordering::Relaxed),
        }
        if let Some(tx) = lock(&self.tx).as_ref() {
            // Never lost: a blocking send of one small message, from the pair's task.
            let msg = if became_active {
                Handed::TakeBack
            } else {
                Handed::HandOver
            };
            let _ = tx.send(msg);
        }
    }

    /// Takes over the records a former active replicated and had not delivered: spooled and
    /// delivered here, their replicas deleted once acknowledged. Hands them over on a thread of
    /// its own (the queue may be full for a moment); returns how many.
    pub fn adopt(&self, mut records: Vec<CallRecord>) -> usize {
        // The table is in key order (interim 10 before 2, Interims before their Start): each
        // call's records go in the order they were generated.
        records.sort_by_key(|r| {
            let rank = match r.kind {
                sbc_accounting::RecordKind::Start => 0,
                sbc_accounting::RecordKind::Interim => 1,
                sbc_accounting::RecordKind::Stop => 2,
            };
            (r.event_ms, rank, r.interim)
        });
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
        // Counted in the queue like any record (the thread takes each one off).
        self.queued.fetch_add(n, Ordering::Relaxed);
        let _ = std::thread::Builder::new()
            .name("accounting-adopt".into())
            .spawn(move || {
                for record in records {
                    if tx
                        .send(Handed::Record {
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

/// How a server is reached.
enum Link {
    /// RADIUS over UDP: a connected socket, requests sent with `sendmmsg`.
    Udp(UdpSocket),
    /// RADIUS over TLS (RFC 6614).
    Tls(Box<radsec::RadsecLink>),
}

struct Server {
    link: Link,
    address: String,
    secret: Vec<u8>,
    /// The record and header of the request last sent with each Identifier (an answer is
    /// checked against its Request Authenticator, and taken only while the delivery machine
    /// still awaits that record on that Identifier).
    sent: Box<[Option<SentRequest>; 256]>,
    /// Requests written for the next `sendmmsg`: their bytes and where each ends.
    out: Vec<u8>,
    ends: Vec<usize>,
}

/// A request written to a server: its record, its header, and (over TLS) the connection it
/// was written on.
type SentRequest = (u64, [u8; radius::HEADER], u32);

struct CsvFiles {
    out: FileOutput,
    file: Option<(BufWriter<File>, PathBuf, u64, u64)>,
    seq: u64,
}

/// Reads of the spool a refill makes in one round of the thread, at most.
const REFILL_READS: usize = 4;
/// Replicated records handed over per pass (marks written between passes).
const HAND_OVER_CHUNK: usize = 4096;

/// Up to `len` bytes of the file at `path` from `offset`.
fn read_at(path: &Path, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut f = File::open(path)?;
    f.seek(SeekFrom::Start(offset))?;
    let mut out = Vec::new();
    f.take(len).read_to_end(&mut out)?;
    Ok(out)
}

/// How long replicated records read back at start wait for this node's role before they are
/// delivered anyway (a node that never joins a pair again).
const HOLD_FOR_ROLE: Duration = Duration::from_secs(60);

/// An undelivered record in memory, with its id ([`Service::record_id`], hashed once).
struct InMemory {
    record: CallRecord,
    id: u64,
}

struct Service {
    node: String,
    servers: Vec<Server>,
    delivery: Delivery,
    spool_dir: PathBuf,
    ledger: SpoolLedger,
    /// The segment being written: its number, file and length on disk.
    segment: Option<(u64, File, u64)>,
    /// Entries for it not written yet (one write per batch), and the records among them.
    wbuf: Vec<u8>,
    wseqs: Vec<u64>,
    /// Records handed to this thread and not taken yet (the hub's bound).
    queued: Arc<AtomicUsize>,
    last_publish: Option<Instant>,
    /// Records not yet delivered, by spool number, and their keys (a record handed twice, an
    /// adoption of what this node already holds, is one record).
    pending: HashMap<u64, InMemory, SeqHash>,
    keys: HashMap<u64, u64, IdHash>,
    /// The records in memory whose replica is deleted once delivered (and handed over if
    /// this node becomes the standby).
    replicated: std::collections::HashSet<u64, SeqHash>,
    /// Which undelivered records are in memory (`pending`); the others are read back from the
    /// spool as it empties.
    window: Window,
    /// Replicated records read back at start, waiting for this node's role in the spool (the
    /// window skips them): the new active delivers them if this node comes back as standby.
    held: usize,
    held_since: Instant,
    /// The ids of the replicated records read back at start and not delivered yet, with their
    /// spool numbers: a copy the peer's table hands this node again (adopted) is the same
    /// record, kept once even when the held one is on disk only (bounded by what was
    /// replicated: [`MAX_REPLICATED`]).
    held_ids: HashMap<u64, u64, IdHash>,
    replication: Arc<Replication>,
    hasher: RandomState,
    files: Option<CsvFiles>,
    /// A spool write failed since the last one that succeeded (a full disk).
    write_failed: bool,
    /// Where the servers' answers are read, a batch at a time.
    recv_slots: udp_batch::RecvSlots,
    /// Since when CSV lines were written and not synced ([`CSV_SYNC_EVERY`]).
    csv_unsynced_since: Option<Instant>,
    /// A CSV line being written (reused).
    csv_line: Vec<u8>,
    /// A spool entry being encoded (reused).
    entry: Vec<u8>,
    report: Arc<Mutex<AccountingReport>>,
    stats: AccountingReport,
}

impl Service {
    fn open(
        s: AccountingSettings,
        tls: &crate::runtime::tls::TlsContext,
        report: Arc<Mutex<AccountingReport>>,
        replication: Arc<Replication>,
        queued: Arc<AtomicUsize>,
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
            let link = if let Some(t) = &srv.tls {
                let config = tls.client_config(&t.profile).ok_or_else(|| {
                    anyhow::anyhow!(
                        "account-server {}: tls-profile {} is not loaded or has no \
                         trusted-ca-certificates",
                        srv.addr,
                        t.profile
                    )
                })?;
                let name = match &t.server_name {
                    Some(n) => rustls::pki_types::ServerName::try_from(n.clone()).map_err(|e| {
                        anyhow::anyhow!("account-server {} tls-server-name {n}: {e}", srv.addr)
                    })?,
                    None => rustls::pki_types::ServerName::IpAddress(srv.addr.ip().into()),
                };
                Link::Tls(Box::new(radsec::RadsecLink::new(srv.addr, config, name)))
            } else {
                let local: SocketAddr = if srv.addr.is_ipv6() {
                    "[::]:0".parse()?
                } else {
                    "0.0.0.0:0".parse()?
                };
                let socket = UdpSocket::bind(local)?;
                socket.connect(srv.addr)?;
                socket.set_nonblocking(true)?;
                Link::Udp(socket)
            };
            servers.push(Server {
                link,
                address: srv.addr.to_string(),
                secret: srv.secret.as_bytes().to_vec(),
                sent: Box::new([None; 256]),
                out: Vec::new(),
                ends: Vec::new(),
            });
        }
        let mut service = Self {
            node: s.node,
            delivery: Delivery::new(&s.delivery),
            servers,
            ledger: SpoolLedger::new(s.spool_max_bytes, segment_bytes(s.spool_max_bytes)),
            spool_dir: s.spool_dir,
            segment: None,
            wbuf: Vec::new(),
            wseqs: Vec::new(),
            queued,
            last_publish: None,
            csv_unsynced_since: None,
            pending: HashMap::default(),
            keys: HashMap::default(),
            replicated: std::collections::HashSet::default(),
            window: Window::new(s.memory_window),
            held: 0,
            held_since: Instant::now(),
            held_ids: HashMap::default(),
            replication,
            hasher: RandomState::new(),
            files: s.file_output.map(|out| CsvFiles {
                out,
                file: None,
                seq: 0,
            }),
            write_failed: false,
            recv_slots: udp_batch::RecvSlots::new(4096),
            csv_line: Vec::with_capacity(1024),
            entry: Vec::with_capacity(1024),
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

    /// Reads the spool back: every segment in turn (one in memory at a time), for the ledger
    /// to learn which records no mark delivered; none of them is kept. The window then loads
    /// the oldest of them ([`Self::refill`]), the rest wait on disk until it has room. A record
    /// this node had replicated is held in the spool until its role is known (see
    /// [`Handed::HandOver`]). New entries go to a new segment, never after what was read (a
    /// torn tail ends it).
    fn replay(&mut self) -> anyhow::Result<()> {
        let mut numbers: Vec<u64> = fs::read_dir(&self.spool_dir)?
            .filter_map(Result::ok)
            .filter_map(|e| spool::segment_number(&e.file_name().to_string_lossy()))
            .collect();
        numbers.sort_unstable();
        // Replicated records by number, while their marks are read: what is left is held.
        let mut held_by_seq: HashMap<u64, u64, SeqHash> = HashMap::default();
        for n in numbers {
            let path = self.spool_dir.join(spool::segment_name(n));
            let bytes = match fs::read(&path) {
                Ok(b) => b,
                Err(e) => {
                    // One unreadable segment does not stop the node: its records are lost
                    // to this replay, and counted.
                    warn!(segment = %path.display(), error = %e, "spool segment unreadable");
                    self.stats.write_errors += 1;
                    continue;
                }
            };
            let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            self.ledger.replay_segment(n, len);
            let mut entries = spool::entries(&bytes);
            for (_, e) in entries.by_ref() {
                self.ledger.replay_entry(&e);
                match &e {
                    SpoolEntry::Record {
                        seq,
                        record,
                        replicated: true,
                    } => {
                        held_by_seq.insert(*seq, self.record_id(record));
                    }
                    SpoolEntry::Delivered { seq } => {
                        held_by_seq.remove(seq);
                    }
                    SpoolEntry::Record { .. } => {}
                }
            }
            if entries.torn() {
                self.stats.spool_torn += 1;
                warn!(segment = %path.display(), "spool segment ends in a torn entry (cut off)");
            }
        }
        let pending = self.ledger.pending();
        self.stats.records_replayed = pending as u64;
        if pending > 0 {
            info!(
                records = pending,
                "accounting records replayed from the spool"
            );
        }
        self.held = self.ledger.replicated_pending_count();
        self.held_ids = held_by_seq
            .into_iter()
            .filter(|(seq, _)| self.ledger.is_pending(*seq))
            .map(|(seq, id)| (id, seq))
            .collect();
        self.window.start(&self.ledger, self.held > 0);
        self.delete_delivered_segments();
        self.refill(Instant::now());
        Ok(())
    }

    /// Loads records on disk only into the window while it has room (the decisions are
    /// [`Window`]'s): reads the cursor's segment from its offset, a few reads a round at most.
    fn refill(&mut self, now: Instant) {
        for _ in 0..REFILL_READS {
            let Some(read) = self.window.due(&self.ledger, self.pending.len()) else {
                return;
            };
            // The buffered marks are on disk before the segment is read.
            self.flush_writes();
            let path = self.spool_dir.join(spool::segment_name(read.at.segment));
            let bytes = read_at(&path, read.at.offset, read.len).unwrap_or_else(|e| {
                // Its records stay pending (the segment is kept) until a restart reads it.
                warn!(segment = %path.display(), error = %e, "spool segment unreadable");
                self.stats.write_errors += 1;
                Vec::new()
            });
            let mut candidates = Vec::new();
            let mut records = Vec::new();
            let mut entries = spool::entries(&bytes);
            for (at, e) in entries.by_ref() {
                if let SpoolEntry::Record {
                    seq,
                    record,
                    replicated,
                } = e
                {
                    candidates.push(Candidate {
                        seq,
                        offset: read.at.offset + at as u64,
                        replicated,
                    });
                    records.push(Some(record));
                }
            }
            // A read shorter than asked reached the segment's end.
            let read_to =
                (bytes.len() as u64 >= read.len).then(|| read.at.offset + entries.offset() as u64);
            let pending = &self.pending;
            let load = self.window.plan(
                &self.ledger,
                read,
                &candidates,
                read_to,
                pending.len(),
                |seq| pending.contains_key(&seq),
            );
            for i in load {
                let (Some(c), Some(record)) =
                    (candidates.get(i), records.get_mut(i).and_then(Option::take))
                else {
                    continue;
                };
                self.load(now, c.seq, *record, c.replicated);
            }
        }
    }

    /// A record read back from the spool into the window: kept once when its twin is in
    /// memory (the same record adopted from the peer), otherwise queued.
    fn load(&mut self, now: Instant, seq: u64, record: CallRecord, replicated: bool) {
        if self.keys.contains_key(&self.record_id(&record)) {
            self.stats.records_duplicate += 1;
            if self.ledger.delivered(seq) {
                self.write_mark(seq);
            }
            return;
        }
        if replicated {
            self.replicated.insert(seq);
        }
        self.take_over_record(now, seq, record);
    }

    /// A record of the spool that is this node's to deliver: written to the CSV files when
    /// they are the only output (a crash may have lost its line: at least once there too),
    /// then queued.
    fn take_over_record(&mut self, now: Instant, seq: u64, record: CallRecord) {
        if self.servers.is_empty() {
            self.write_csv(&record, unix_ms());
            self.sync_csv();
        }
        self.queue(now, seq, record);
    }

    fn session_hash(&self, r: &CallRecord) -> u64 {
        self.hasher.hash_one(r.session_id())
    }

    /// What tells a record from every other ([`CallRecord::key`]): its session hashed with
    /// this node's secret keys, mixed with its kind and number (no string built per record).
    fn record_id(&self, r: &CallRecord) -> u64 {
        Self::id_in(self.session_hash(r), r)
    }

    fn id_in(session: u64, r: &CallRecord) -> u64 {
        hashing::record_id(session, r.kind.status_type(), r.interim)
    }

    fn queue(&mut self, now: Instant, seq: u64, record: CallRecord) {
        let session = self.session_hash(&record);
        let id = Self::id_in(session, &record);
        self.keys.insert(id, seq);
        self.pending.insert(seq, InMemory { record, id });
        if self.servers.is_empty() {
            // Files only: written (and synced) is delivered.
            self.mark_delivered(seq);
            return;
        }
        self.delivery.enqueue(now, seq, session);
    }

    /// Appends `bytes` where the ledger said (record `seq`, if it is one): buffered, written
    /// by [`Self::flush_writes`] once per batch. Opening a new segment first writes and syncs
    /// what the one left behind still had.
    fn append(&mut self, bytes: &[u8], append: &Append, seq: Option<u64>) -> bool {
        let Append::To { number, new } = append else {
            return false;
        };
        if *new || self.segment.as_ref().is_none_or(|(n, _, _)| n != number) {
            self.flush_writes();
            if let Some((_, old, _)) = self.segment.take() {
                let _ = old.sync_data();
            }
            let path = self.spool_dir.join(spool::segment_name(*number));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => {
                    // The new file's name must survive a crash too.
                    if let Ok(dir) = File::open(&self.spool_dir) {
                        let _ = dir.sync_all();
                    }
                    let len = f.metadata().map_or(0, |m| m.len());
                    self.segment = Some((*number, f, len));
                }
                Err(e) => {
                    warn!(error = %e, "accounting spool: cannot open a segment");
                    self.stats.write_errors += 1;
                    self.ledger.unappend(bytes.len() as u64);
                    self.ledger.seal();
                    self.write_failed = true;
                    if let Some(seq) = seq {
                        self.unspooled(seq);
                    }
                    return false;
                }
            }
        }
        self.wbuf.extend_from_slice(bytes);
        self.wseqs.extend(seq);
        true
    }

    /// A record that is not in the spool after all (its write failed): delivered from memory
    /// while the node lives, counted.
    fn unspooled(&mut self, seq: u64) {
        self.ledger.delivered(seq);
        self.stats.records_unspooled += 1;
        self.stats.records_spooled = self.stats.records_spooled.saturating_sub(1);
    }

    /// Writes the buffered entries in one write; a failed write is cut off and its segment
    /// sealed (nothing is ever written after partial bytes).
    fn flush_writes(&mut self) {
        if self.wbuf.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.wbuf);
        let seqs = std::mem::take(&mut self.wseqs);
        let Some((_, f, len)) = self.segment.as_mut() else {
            return;
        };
        match f.write_all(&bytes) {
            Ok(()) => {
                *len += bytes.len() as u64;
                self.write_failed = false;
            }
            Err(e) => {
                warn!(error = %e, "accounting spool: write failed (disk full?)");
                let _ = f.set_len(*len);
                self.stats.write_errors += 1;
                self.ledger.unappend(bytes.len() as u64);
                self.ledger.seal();
                self.write_failed = true;
                for seq in seqs {
                    self.unspooled(seq);
                }
            }
        }
    }

    fn sync(&mut self) {
        self.flush_writes();
        if let Some((_, f, _)) = self.segment.as_ref() {
            if let Err(e) = f.sync_data() {
                warn!(error = %e, "accounting spool: sync failed");
                self.stats.write_errors += 1;
            }
        }
    }

    fn sync_csv(&mut self) {
        self.csv_unsynced_since = None;
        if let Some((f, _, _, _)) = self.files.as_mut().and_then(|c| c.file.as_mut()) {
            if f.flush().is_err() || f.get_ref().sync_data().is_err() {
                self.stats.write_errors += 1;
            }
        }
    }

    /// Writes the CSV lines buffered (no sync: see [`CSV_SYNC_EVERY`]).
    fn flush_csv(&mut self, now: Instant) {
        if let Some((f, _, _, _)) = self.files.as_mut().and_then(|c| c.file.as_mut()) {
            if f.flush().is_err() {
                self.stats.write_errors += 1;
            }
            self.csv_unsynced_since.get_or_insert(now);
        }
    }

    /// Record `seq` out of memory, and its id out of the keys if the id is still its own.
    fn remove_in_memory(&mut self, seq: u64) -> Option<InMemory> {
        let record = self.pending.remove(&seq)?;
        if self.keys.get(&record.id) == Some(&seq) {
            self.keys.remove(&record.id);
        }
        Some(record)
    }

    fn mark_delivered(&mut self, seq: u64) {
        let record = self.remove_in_memory(seq);
        if self.replicated.remove(&seq) {
            if let Some(InMemory { record, .. }) = &record {
                self.replication.delete(record);
            }
        }
        if !self.ledger.delivered(seq) {
            return;
        }
        self.stats.records_delivered += 1;
        self.write_mark(seq);
    }

    /// Appends record `seq`'s "delivered" mark to the spool (written with the round's marks).
    fn write_mark(&mut self, seq: u64) {
        let mut bytes = std::mem::take(&mut self.entry);
        bytes.clear();
        spool::encode_into(&mut bytes, &SpoolEntry::Delivered { seq });
        let append = self
            .ledger
            .append_mark(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
        self.append(&bytes, &append, None);
        self.entry = bytes;
    }

    /// This node became the standby: what it replicated is the new active's (adopted there),
    /// so it stops sending those records and marks them handed over in its spool: those in
    /// memory, and those on disk only or held (the ledger knows which; no segment is read).
    fn hand_over(&mut self) {
        let replicated: Vec<u64> = self.replicated.drain().collect();
        let mut handed = 0u64;
        for seq in replicated {
            handed += u64::from(self.hand_over_record(seq));
        }
        for _ in 0..=self.ledger.pending() / HAND_OVER_CHUNK {
            let seqs = self.ledger.replicated_pending(HAND_OVER_CHUNK);
            if seqs.is_empty() {
                break;
            }
            for seq in seqs {
                handed += u64::from(self.hand_over_record(seq));
            }
            // The marks written as they come (not a buffer of millions).
            self.flush_writes();
        }
        self.held = 0;
        self.held_ids.clear();
        self.window.end_hold(&self.ledger, false);
        if handed > 0 {
            info!(
                records = handed,
                "accounting records handed over to the new active"
            );
        }
        self.stats.records_handed_over += handed;
        self.sync();
        self.delete_delivered_segments();
    }

    /// Record `seq` is the new active's: out of memory and delivery, marked in the spool;
    /// whether it was pending there.
    fn hand_over_record(&mut self, seq: u64) -> bool {
        // Only a record in memory is in delivery (forgetting scans its queue: not for every
        // record on disk only).
        if self.pending.contains_key(&seq) {
            self.delivery.forget(seq);
        }
        self.remove_in_memory(seq);
        self.replicated.remove(&seq);
        if self.ledger.delivered(seq) {
            self.write_mark(seq);
            return true;
        }
        false
    }

    /// This node became the active: the replicated records it held since its start are its
    /// own to deliver (a copy the peer left in the table is the same record, kept once:
    /// [`Self::load`]); the window reads them back.
    fn take_back(&mut self, now: Instant) {
        self.held = 0;
        self.window.end_hold(&self.ledger, true);
        self.refill(now);
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
    fn take(&mut self, now: Instant, batch: Vec<(CallRecord, bool)>) {
        let mut kept = Vec::with_capacity(batch.len());
        for (mut record, replicated) in batch {
            let id = self.record_id(&record);
            if self.keys.contains_key(&id) || self.held_ids.contains_key(&id) {
                // One record handed twice (adopted while this node still held it).
                self.stats.records_duplicate += 1;
                continue;
            }
            self.stats.records_generated += 1;
            if record.node().is_empty() {
                // The engines stamp their node's name; a record made elsewhere gets this one.
                record.text.set(TextField::Node, &self.node);
            }
            let seq = self.ledger.take_seq();
            let mut bytes = std::mem::take(&mut self.entry);
            bytes.clear();
            spool::encode_record_into(&mut bytes, seq, &record, replicated);
            let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            let append = self.ledger.append_record(seq, len);
            let Append::To { number, .. } = append else {
                self.entry = bytes;
                self.stats.records_refused += 1;
                self.stats.spool_full = true;
                if replicated {
                    self.replication.delete(&record);
                }
                continue;
            };
            // Where its entry starts, should the window leave it on disk only.
            let at = (number, self.ledger.tail_bytes().saturating_sub(len));
            // Counted as spooled; a write that fails un-counts it (`unspooled`): the record
            // is still delivered from memory while the node lives.
            self.stats.records_spooled += 1;
            self.append(&bytes, &append, Some(seq));
            self.entry = bytes;
            if replicated {
                self.ledger.set_replicated(seq);
            }
            kept.push((seq, at, record, replicated));
        }
        self.sync();
        let now_ms = unix_ms();
        for (_, _, record, _) in &kept {
            self.write_csv(record, now_ms);
        }
        if self.servers.is_empty() {
            // Files only: the lines are on disk before their records are marked delivered.
            self.sync_csv();
        } else {
            self.flush_csv(now);
        }
        for (seq, (segment, offset), record, replicated) in kept {
            // Beyond the window, on disk only (read back as it empties); a record whose write
            // failed is not in the spool: delivered from memory whatever the window says.
            let spooled = self.ledger.is_pending(seq);
            if spooled && !self.window.admit(segment, offset, self.pending.len()) {
                continue;
            }
            if replicated {
                self.replicated.insert(seq);
            }
            self.queue(now, seq, record);
        }
    }

    fn write_csv(&mut self, record: &CallRecord, now_ms: u64) {
        if self.files.is_none() {
            return;
        }
        let mut line = std::mem::take(&mut self.csv_line);
        line.clear();
        csv_file::write_record_line(record, &mut line);
        self.write_csv_line(&line, now_ms);
        self.csv_line = line;
    }

    fn write_csv_line(&mut self, line: &[u8], now_ms: u64) {
        let Some(files) = self.files.as_mut() else {
            return;
        };
        let header = csv_header();
        let next = line.len() as u64;
        let hdr = header.len() as u64;
        let due = files.file.as_ref().is_some_and(|(_, _, size, opened)| {
            files.out.rotation.due(*size, hdr, *opened, now_ms, next)
        });
        if due {
            if let Some((mut f, _, _, _)) = files.file.take() {
                let _ = f.flush();
                let _ = f.get_ref().sync_data();
            }
            self.stats.files_rotated += 1;
            prune_files(&files.out.dir, files.out.max_files);
        }
        if files.file.is_none() {
            files.seq += 1;
            let path = files.out.dir.join(csv_file::file_name(now_ms, files.seq));
            match OpenOptions::new().create(true).append(true).open(&path) {
                Ok(f) => {
                    // One write a batch (a batch holds up to a few hundred lines).
                    let mut f = BufWriter::with_capacity(256 * 1024, f);
                    if f.write_all(header).is_err() {
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
            if f.write_all(line).is_ok() {
                *size += next;
                self.stats.file_records += 1;
            } else {
                self.stats.write_errors += 1;
            }
        }
    }

    /// Writes the requests the delivery machine says are due, then sends each server's in as
    /// few system calls as it takes (`sendmmsg`).
    fn send(&mut self, now: Instant) {
        let now_ms = unix_ms();
        while let Some(s) = self.delivery.poll_send() {
            let written = match (self.pending.get(&s.seq), self.servers.get_mut(s.server)) {
                (Some(InMemory { record, .. }), Some(server)) => {
                    if s.resend {
                        server.before_resend(s.seq);
                    }
                    let generation = server.generation();
                    let delay = u32::try_from(now_ms.saturating_sub(record.event_ms) / 1000)
                        .unwrap_or(u32::MAX);
                    radius::write_accounting_request(
                        record,
                        s.identifier,
                        delay,
                        &server.secret,
                        &mut server.out,
                    )
                    .map(|header| {
                        server.ends.push(server.out.len());
                        server.sent[usize::from(s.identifier)] = Some((s.seq, header, generation));
                    })
                }
                _ => None,
            };
            if written.is_none() {
                // Never sendable: dropped from delivery (it would fail every server in turn),
                // marked done in the spool, counted.
                warn!(
                    seq = s.seq,
                    "accounting record cannot be sent as RADIUS: dropped"
                );
                self.delivery.forget(s.seq);
                self.stats.records_undeliverable += 1;
                self.mark_delivered(s.seq);
            }
        }
        for server in &mut self.servers {
            if server.ends.is_empty() {
                continue;
            }
            // A request not sent (the server's port closed: ICMP; the socket's buffer full;
            // no TLS connection yet) is a request not answered: the delivery machine sends it
            // again.
            match &mut server.link {
                Link::Udp(socket) => {
                    let _ = udp_batch::send_datagrams(socket, &server.out, &server.ends);
                }
                Link::Tls(link) => {
                    let _ = link.send(now, &server.out, &server.ends);
                }
            }
            server.out.clear();
            server.ends.clear();
        }
    }

    /// Reads the servers' answers (`recvmmsg`, a batch per call), and marks what they
    /// acknowledged delivered.
    fn receive(&mut self, now: Instant) {
        // Nothing awaited, nothing to read (a late answer to a request given up on waits in
        // the socket's buffer and is ignored when next read).
        let awaiting = self.delivery.in_flight() > 0;
        for i in 0..self.servers.len() {
            let server = &mut self.servers[i];
            let delivery = &mut self.delivery;
            match &mut server.link {
                Link::Tls(link) => {
                    // Read even with nothing awaited: the handshake, the server's close.
                    let sent = &mut server.sent;
                    let secret = &server.secret;
                    link.receive(now, |answer| {
                        take_answer(delivery, now, i, sent, secret, answer);
                    });
                }
                Link::Udp(_) if !awaiting => {}
                Link::Udp(socket) => {
                    // At most 16 batches a server a round: the rest waits for the next round.
                    for _ in 0..16 {
                        // An error is an ICMP error of an earlier send: read on.
                        let Ok(n) = self.recv_slots.recv(socket) else {
                            continue;
                        };
                        if n == 0 {
                            break;
                        }
                        for answer in self.recv_slots.datagrams() {
                            take_answer(delivery, now, i, &mut server.sent, &server.secret, answer);
                        }
                        if n < udp_batch::BATCH {
                            break;
                        }
                    }
                }
            }
        }
        while let Some(seq) = self.delivery.poll_delivered() {
            self.mark_delivered(seq);
        }
        self.delete_delivered_segments();
    }

    fn publish(&mut self) {
        // Full until deliveries made room for records again; a failing disk is full too.
        if self.stats.spool_full
            && self.ledger.bytes() + spool::MAX_ENTRY as u64 <= self.ledger.max_bytes()
        {
            self.stats.spool_full = false;
        }
        let mut stats = self.stats.clone();
        stats.spool_full |= self.write_failed;
        stats.spool_pending = self.ledger.pending();
        stats.records_held = self.held;
        stats.records_in_memory = self.pending.len();
        stats.records_on_disk_only = self.ledger.pending().saturating_sub(self.pending.len());
        stats.spool_bytes = self.ledger.bytes();
        stats.spool_segments = self.ledger.segments();
        stats.queued = self.delivery.queued();
        stats.in_flight = self.delivery.in_flight();
        stats.servers = self
            .delivery
            .servers()
            .zip(&self.servers)
            .map(|((state, c, outstanding), s)| ServerReport {
                address: s.address.clone(),
                transport: match s.link {
                    Link::Udp(_) => "udp",
                    Link::Tls(_) => "tls",
                },
                connection: match &s.link {
                    Link::Udp(_) => "-",
                    Link::Tls(l) => l.state().as_str(),
                },
                connects: match &s.link {
                    Link::Udp(_) => 0,
                    Link::Tls(l) => l.connects,
                },
                state: state.as_str(),
                sent: c.sent,
                resent: c.resent,
                acknowledged: c.acknowledged,
                failures: c.failures,
                outstanding,
            })
            .collect();
        *lock(&self.report) = stats;
    }

    fn run(&mut self, rx: &Receiver<Handed>) {
        let mut open = true;
        let mut role_known = false;
        // Records taken from the queue and not spooled yet, and when the first of them came.
        let mut batch: Vec<(CallRecord, bool)> = Vec::new();
        let mut batch_since: Option<Instant> = None;
        while open {
            // The thread sleeps rather than waiting on the queue: the workers' sends wake
            // nobody (no system call on the SIP path for a record).
            let now = Instant::now();
            let busy = self.delivery.in_flight() > 0 || self.delivery.queued() > 0;
            let batch_due = batch_since.map(|t| t + BATCH_WINDOW);
            let wait = sleep_for(now, busy, self.delivery.poll_timeout(), batch_due);
            if !wait.is_zero() {
                std::thread::sleep(wait);
            }
            // One clock read for what the queue holds (not one per record).
            let now = Instant::now();
            let mut taken = 0;
            let mut records_taken = 0;
            loop {
                let h = match rx.try_recv() {
                    Ok(h) => h,
                    Err(mpsc::TryRecvError::Empty) => break,
                    Err(mpsc::TryRecvError::Disconnected) => {
                        open = false;
                        break;
                    }
                };
                match h {
                    Handed::Record { record, replicated } => {
                        records_taken += 1;
                        batch_since.get_or_insert(now);
                        batch.push((record, replicated));
                    }
                    Handed::HandOver => {
                        self.take(now, std::mem::take(&mut batch));
                        batch_since = None;
                        self.hand_over();
                        role_known = true;
                    }
                    Handed::TakeBack => {
                        self.take(now, std::mem::take(&mut batch));
                        batch_since = None;
                        self.take_back(now);
                        role_known = true;
                    }
                }
                taken += 1;
                if taken >= 16_384 {
                    break;
                }
            }
            if records_taken > 0 {
                let _ = self
                    .queued
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        Some(n.saturating_sub(records_taken))
                    });
            }
            let now = Instant::now();
            // One spool write and one sync per batch window (records are sent once synced).
            let due = batch_since.is_some_and(|t| now.duration_since(t) >= BATCH_WINDOW)
                || batch.len() >= 8192
                || !open;
            if due && !batch.is_empty() {
                self.take(now, std::mem::take(&mut batch));
                batch_since = None;
            }
            if !role_known && self.held > 0 && self.held_since.elapsed() >= HOLD_FOR_ROLE {
                // No pair role in a minute: this node runs alone; what it held is its own.
                self.take_back(now);
                role_known = true;
            }
            self.delivery.handle_timeout(now);
            self.send(now);
            self.receive(now);
            // Deliveries made room: the oldest records on disk only come in.
            self.refill(now);
            self.send(now);
            // Marks are written once per round (a lost mark only means a resend).
            self.flush_writes();
            if self
                .csv_unsynced_since
                .is_some_and(|t| now.duration_since(t) >= CSV_SYNC_EVERY)
            {
                self.sync_csv();
            }
            if self
                .last_publish
                .is_none_or(|t| now.duration_since(t) >= PUBLISH_EVERY)
            {
                self.publish();
                self.last_publish = Some(now);
            }
        }
        self.sync();
        self.sync_csv();
        self.publish();
    }
}

impl Server {
    /// The connection a request written now goes on (over UDP, always 0).
    fn generation(&self) -> u32 {
        match &self.link {
            Link::Udp(_) => 0,
            Link::Tls(l) => l.generation(),
        }
    }

    /// Before record `seq` is sent to this server again: over TLS, if it was written on the
    /// current connection, that connection is closed first (never twice on one connection,
    /// RFC 6613 §2.6.1).
    fn before_resend(&mut self, seq: u64) {
        let Link::Tls(link) = &mut self.link else {
            return;
        };
        let current = link.generation();
        if link.state() != radsec::LinkState::Closed
            && self
                .sent
                .iter()
                .flatten()
                .any(|&(s, _, g)| s == seq && g == current)
        {
            link.reset();
        }
    }
}

/// Takes `answer`, read from server `server`, if it is the authentic answer to the request
/// the delivery machine awaits on its Identifier.
fn take_answer(
    delivery: &mut Delivery,
    now: Instant,
    server: usize,
    sent: &mut [Option<SentRequest>; 256],
    secret: &[u8],
    answer: &[u8],
) {
    let Some(&identifier) = answer.get(1) else {
        return;
    };
    let slot = &mut sent[usize::from(identifier)];
    // The identifier may have gone to a record not written yet (freed by a resend or a
    // failure, given again by an answer earlier in this read): the slot still holds the old
    // request, whose late answer is not the new record's.
    let awaited = delivery.awaits(server, identifier);
    let authentic = slot.as_ref().is_some_and(|(seq, req, _)| {
        awaited == Some(*seq) && radius::is_answer(answer, req, secret)
    });
    if authentic && delivery.handle_answer(now, server, identifier).is_some() {
        *slot = None;
    }
}

/// How long the accounting thread sleeps before its next round at `now`: a tick ([`TICK`]
/// while requests are in flight or wait for a server, [`IDLE_TICK`] otherwise), or less when
/// the delivery machine's next timeout or the gathered batch's end comes first.
fn sleep_for(
    now: Instant,
    busy: bool,
    timeout: Option<Instant>,
    batch_due: Option<Instant>,
) -> Duration {
    let tick = if busy { TICK } else { IDLE_TICK };
    [timeout, batch_due]
        .into_iter()
        .flatten()
        .map(|t| t.saturating_duration_since(now))
        .fold(tick, Duration::min)
}

/// The CDR files' header line (built once).
fn csv_header() -> &'static [u8] {
    static HEADER: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    HEADER.get_or_init(csv_file::header)
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
