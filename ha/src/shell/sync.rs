//! The state-sync channel over TCP: `Framed<TcpStream, LengthDelimitedCodec>` carrying
//! [`SyncFrame`]s (see [`crate::sync`] for the conversation).
//!
//! On the active, a [`SyncPublisher`] owns the table: the engine calls `upsert`/`delete` on
//! it, which changes the table and broadcasts the change; [`serve_sync`] accepts standbys and
//! gives each a snapshot then the stream, taken under one lock so no change falls between
//! them. A standby that falls behind the broadcast buffer gets a fresh snapshot.
//!
//! On the standby, [`run_sync_client`] applies the snapshot and the stream to a shared
//! [`SyncTable`] and reports [`SyncEvent::Synchronized`] once the snapshot is complete (feed
//! it to the heartbeat task as [`super::Command::SyncComplete`]). It returns when the
//! connection ends; the owner reconnects while it is standby.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{broadcast, mpsc};
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tracing::{debug, info, warn};

use crate::sync::{SyncEntry, SyncError, SyncFrame, SyncTable, MAX_FRAME, SNAPSHOT_CHUNK};
use crate::wire::NodeId;

/// How long a peer may take to say Hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

type Conn = Framed<TcpStream, LengthDelimitedCodec>;

fn framed(stream: TcpStream) -> Conn {
    let _ = stream.set_nodelay(true);
    Framed::new(
        stream,
        LengthDelimitedCodec::builder()
            .max_frame_length(MAX_FRAME)
            .new_codec(),
    )
}

async fn send(conn: &mut Conn, frame: &SyncFrame) -> Result<(), SyncError> {
    conn.send(frame.encode()?).await?;
    Ok(())
}

async fn recv(conn: &mut Conn) -> Result<Option<SyncFrame>, SyncError> {
    match conn.next().await {
        None => Ok(None),
        Some(Err(e)) => Err(e.into()),
        Some(Ok(b)) => SyncFrame::decode(&b).map(Some),
    }
}

async fn send_snapshot(conn: &mut Conn, items: Vec<SyncEntry>) -> Result<(), SyncError> {
    if items.is_empty() {
        return send(conn, &SyncFrame::Snapshot { items, last: true }).await;
    }
    let n = items.len().div_ceil(SNAPSHOT_CHUNK);
    let mut it = items.into_iter();
    for i in 0..n {
        let chunk: Vec<SyncEntry> = it.by_ref().take(SNAPSHOT_CHUNK).collect();
        send(
            conn,
            &SyncFrame::Snapshot {
                items: chunk,
                last: i + 1 == n,
            },
        )
        .await?;
    }
    Ok(())
}

#[derive(Debug)]
struct Inner {
    table: SyncTable,
    config: Option<(u64, String)>,
}

/// The active's replicated table and the broadcast of its changes. Cheap to clone.
#[derive(Debug, Clone)]
pub struct SyncPublisher {
    inner: Arc<Mutex<Inner>>,
    tx: broadcast::Sender<SyncFrame>,
}

impl SyncPublisher {
    /// A publisher over `table` (the standby's table when it takes over); `buffer` changes may
    /// be in flight per standby before it is resynchronized with a snapshot.
    #[must_use]
    pub fn new(table: SyncTable, buffer: usize) -> Self {
        let (tx, _) = broadcast::channel(buffer.max(16));
        Self {
            inner: Arc::new(Mutex::new(Inner {
                table,
                config: None,
            })),
            tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates or changes `key` and streams it to the standby.
    pub fn upsert(&self, key: Vec<u8>, value: Vec<u8>) {
        let mut g = self.lock();
        let e = g.table.upsert(key, value);
        let _ = self.tx.send(SyncFrame::Upsert {
            key: e.key,
            rev: e.rev,
            value: e.value.unwrap_or_default(),
        });
    }

    /// Deletes `key` and streams the delete to the standby.
    pub fn delete(&self, key: Vec<u8>) {
        let mut g = self.lock();
        let e = g.table.delete(key);
        let _ = self.tx.send(SyncFrame::Delete {
            key: e.key,
            rev: e.rev,
        });
    }

    /// Pushes an activated configuration to the standby (and to any that joins later).
    pub fn push_config(&self, version: u64, toml: String) {
        let mut g = self.lock();
        g.config = Some((version, toml.clone()));
        let _ = self.tx.send(SyncFrame::ConfigPush { version, toml });
    }

    /// Merges entries received from a peer (split-brain exchange) into the table.
    pub fn merge(&self, entries: Vec<SyncEntry>) -> usize {
        self.lock().table.merge(entries)
    }

    /// A copy of the table.
    #[must_use]
    pub fn table(&self) -> SyncTable {
        self.lock().table.clone()
    }

    fn subscribe(
        &self,
    ) -> (
        Vec<SyncEntry>,
        Option<(u64, String)>,
        broadcast::Receiver<SyncFrame>,
    ) {
        let g = self.lock();
        (g.table.snapshot(), g.config.clone(), self.tx.subscribe())
    }
}

/// Accepts standbys on `listener` forever, serving each from `publisher`. `node` and `epoch`
/// go in the Hello.
///
/// # Errors
/// Only if accepting fails for good; a failing connection is logged and dropped.
pub async fn serve_sync(
    listener: TcpListener,
    publisher: SyncPublisher,
    node: NodeId,
    epoch: u64,
) -> std::io::Result<()> {
    loop {
        let (stream, from) = listener.accept().await?;
        let p = publisher.clone();
        tokio::spawn(async move {
            match serve_one(framed(stream), p, node, epoch).await {
                Ok(()) => debug!(%from, "sync connection closed"),
                Err(e) => warn!(%from, error = %e, "sync connection failed"),
            }
        });
    }
}

async fn serve_one(
    mut conn: Conn,
    publisher: SyncPublisher,
    node: NodeId,
    epoch: u64,
) -> Result<(), SyncError> {
    let hello = tokio::time::timeout(HELLO_TIMEOUT, recv(&mut conn))
        .await
        .map_err(|_| SyncError::Protocol("no Hello in time"))??;
    let Some(SyncFrame::Hello {
        node: peer,
        exchange,
        ..
    }) = hello
    else {
        return Err(SyncError::Protocol("first frame is not Hello"));
    };
    info!(peer = %peer, exchange, "standby joined the sync channel");
    if exchange {
        let mut merged = 0;
        loop {
            match recv(&mut conn).await? {
                Some(SyncFrame::Snapshot { items, last }) => {
                    merged += publisher.merge(items);
                    if last {
                        break;
                    }
                }
                _ => {
                    return Err(SyncError::Protocol(
                        "expected the peer's Snapshot after an exchange Hello",
                    ))
                }
            }
        }
        info!(merged, "merged the peer's table (split-brain exchange)");
    }
    let (items, config, mut rx) = publisher.subscribe();
    let config_version = config.as_ref().map_or(0, |c| c.0);
    send(
        &mut conn,
        &SyncFrame::Hello {
            node,
            epoch,
            config_version,
            exchange: false,
        },
    )
    .await?;
    send_snapshot(&mut conn, items).await?;
    if let Some((version, toml)) = config {
        send(&mut conn, &SyncFrame::ConfigPush { version, toml }).await?;
    }
    loop {
        tokio::select! {
            change = rx.recv() => match change {
                Ok(frame) => send(&mut conn, &frame).await?,
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    warn!(lost = n, "standby fell behind: sending a fresh snapshot");
                    let (items, _, fresh) = publisher.subscribe();
                    rx = fresh;
                    send_snapshot(&mut conn, items).await?;
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            frame = recv(&mut conn) => match frame? {
                Some(SyncFrame::Ack { received }) => debug!(received, "standby ack"),
                Some(_) => return Err(SyncError::Protocol("unexpected frame from the standby")),
                None => return Ok(()),
            },
        }
    }
}

/// What the sync client reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncEvent {
    /// A complete snapshot was applied: the table is synchronized (also after a resync).
    Synchronized {
        /// Live keys in the table.
        entries: usize,
    },
    /// The active pushed a configuration.
    Config {
        /// Its version.
        version: u64,
        /// Its text.
        toml: String,
    },
}

/// Connects to the active's sync server at `addr` and keeps `table` a replica of the
/// active's until the connection ends. With `exchange` (after a split brain) it first sends
/// its own table, which the active merges, so the replica received back is the union.
///
/// # Errors
/// Connection or protocol failures; the owner retries while it is standby.
pub async fn run_sync_client(
    addr: SocketAddr,
    table: Arc<Mutex<SyncTable>>,
    node: NodeId,
    epoch: u64,
    exchange: bool,
    events: mpsc::UnboundedSender<SyncEvent>,
) -> Result<(), SyncError> {
    let lock = |t: &Arc<Mutex<SyncTable>>| -> SyncTable {
        t.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    };
    let mut conn = framed(TcpStream::connect(addr).await?);
    send(
        &mut conn,
        &SyncFrame::Hello {
            node,
            epoch,
            config_version: 0,
            exchange,
        },
    )
    .await?;
    if exchange {
        send_snapshot(&mut conn, lock(&table).snapshot()).await?;
    }
    let hello = tokio::time::timeout(HELLO_TIMEOUT, recv(&mut conn))
        .await
        .map_err(|_| SyncError::Protocol("no Hello in time"))??;
    let Some(SyncFrame::Hello {
        node: active,
        epoch: active_epoch,
        ..
    }) = hello
    else {
        return Err(SyncError::Protocol("first frame is not Hello"));
    };
    debug!(%active, active_epoch, "connected to the active's sync server");
    let mut staging: Vec<SyncEntry> = Vec::new();
    let mut received: u64 = 1;
    while let Some(frame) = recv(&mut conn).await? {
        received += 1;
        let ack = {
            let mut t = table
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match frame {
                SyncFrame::Snapshot { items, last } => {
                    staging.extend(items);
                    if last {
                        t.replace(std::mem::take(&mut staging));
                        let entries = t.len();
                        info!(entries, "synchronized");
                        let _ = events.send(SyncEvent::Synchronized { entries });
                    }
                    last
                }
                SyncFrame::Upsert { key, rev, value } => {
                    t.apply(SyncEntry {
                        key,
                        rev,
                        value: Some(value),
                    });
                    false
                }
                SyncFrame::Delete { key, rev } => {
                    t.apply(SyncEntry {
                        key,
                        rev,
                        value: None,
                    });
                    false
                }
                SyncFrame::ConfigPush { version, toml } => {
                    let _ = events.send(SyncEvent::Config { version, toml });
                    true
                }
                SyncFrame::Hello { .. } | SyncFrame::Ack { .. } => {
                    return Err(SyncError::Protocol("unexpected frame from the active"));
                }
            }
        };
        if ack {
            send(&mut conn, &SyncFrame::Ack { received }).await?;
        }
    }
    Ok(())
}
