//! The trap sink: the UDP side of the node's SNMP traps. A bounded queue that any task (the
//! alarm service, the heap gate, the pair, the edge, media and TLS watchers) puts traps on
//! without waiting, and one tokio task that takes them off, lets each `trap-receiver`'s filter
//! level choose, encodes them with `sbc-snmp`'s [`TrapEncoder`] (v2c, or v3 authPriv from our
//! engine) and sends the datagrams. What a trap holds and how it is encoded is `sbc-snmp`'s.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Instant;

use sbc_snmp::{Trap, TrapEncoder, TrapReceiver};
use serde::{Deserialize, Serialize};
use tokio::net::UdpSocket;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::tasks::Tasks;

/// Configuration of a [`TrapSink`].
#[derive(Debug, Clone)]
pub struct TrapSinkConfig {
    /// The receivers.
    pub receivers: Vec<TrapReceiver>,
    /// Traps that may wait to be sent; more are dropped (and counted). Default 256.
    pub queue_capacity: usize,
    /// When the node started: `sysUpTime.0` is the time since, and so is the v3
    /// `snmpEngineTime` (the engine's boots count starts).
    pub started: Instant,
    /// The first AES salt of v3 traps (a counter from there, RFC 3826 §3.1.2.1).
    pub salt_seed: u64,
}

impl TrapSinkConfig {
    /// A configuration with the default queue, started now.
    #[must_use]
    pub fn new(receivers: Vec<TrapReceiver>) -> Self {
        Self {
            receivers,
            queue_capacity: 256,
            started: Instant::now(),
            salt_seed: random_seed(),
        }
    }
}

/// 64 bits from the OS's randomness, as std's hasher keys take it.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish()
}

/// Counters of a [`TrapSink`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TrapStats {
    /// Datagrams handed to the network (one per trap and receiver).
    pub sent: u64,
    /// Traps dropped because the queue was full.
    pub dropped: u64,
    /// Datagrams that could not be encoded or sent.
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Shared {
    receivers: RwLock<Vec<TrapReceiver>>,
    sent: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
}

/// Sends traps to the configured receivers from a tokio task.
///
/// [`TrapSink::send`] never blocks and never waits: it puts the trap on a bounded queue and
/// returns; when the queue is full the new trap is dropped and counted (the oldest traps are
/// the ones a receiver most needs to see, e.g. the first critical alarm). The task encodes
/// each trap once per receiver that its filter level lets through and sends it over UDP; a
/// receiver that cannot be reached is logged and counted, and the others still get theirs.
/// Cloning the sink gives another handle on the same queue (for the HA crate). The task ends
/// once every handle is dropped, or at the node's shutdown, and then only after it has sent
/// what was queued (the clear traps of a node that stops).
#[derive(Debug, Clone)]
pub struct TrapSink {
    tx: mpsc::Sender<Trap>,
    shared: Arc<Shared>,
}

impl TrapSink {
    /// Starts the sending task on the current tokio runtime (panics outside one, as
    /// `tokio::spawn` does) and returns the sink and the task's handle; the task ends when
    /// every handle is dropped.
    #[must_use]
    pub fn spawn(config: TrapSinkConfig) -> (Self, JoinHandle<()>) {
        let (sink, task) = Self::task(config, CancellationToken::new());
        (sink, tokio::spawn(task))
    }

    /// Starts the sending task on the node's `tasks`: at shutdown it sends what is queued, then
    /// ends.
    #[must_use]
    pub fn start(config: TrapSinkConfig, tasks: &Tasks) -> Self {
        let (sink, task) = Self::task(config, tasks.shutdown_signal());
        tasks.spawn_draining(task);
        sink
    }

    fn task(
        config: TrapSinkConfig,
        shutdown: CancellationToken,
    ) -> (Self, impl std::future::Future<Output = ()>) {
        let (tx, rx) = mpsc::channel(config.queue_capacity.max(1));
        let shared = Arc::new(Shared {
            receivers: RwLock::new(config.receivers),
            ..Shared::default()
        });
        let task = run(
            rx,
            Arc::clone(&shared),
            config.started,
            config.salt_seed,
            shutdown,
        );
        (Self { tx, shared }, task)
    }

    /// Queues a trap without waiting. Returns false when it was dropped (queue full, or the
    /// task has ended).
    pub fn send(&self, trap: Trap) -> bool {
        match self.tx.try_send(trap) {
            Ok(()) => true,
            Err(e) => {
                self.shared.dropped.fetch_add(1, Ordering::Relaxed);
                let trap = match &e {
                    mpsc::error::TrySendError::Full(t) | mpsc::error::TrySendError::Closed(t) => {
                        t.name()
                    }
                };
                warn!(trap, "trap dropped: queue full or sender stopped");
                false
            }
        }
    }

    /// Replaces the receivers (after `activate-config`); traps already queued go to the new
    /// ones.
    pub fn set_receivers(&self, receivers: Vec<TrapReceiver>) {
        *self
            .shared
            .receivers
            .write()
            .unwrap_or_else(PoisonError::into_inner) = receivers;
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> TrapStats {
        TrapStats {
            sent: self.shared.sent.load(Ordering::Relaxed),
            dropped: self.shared.dropped.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
        }
    }
}

/// Where a trap for a receiver at `addr` goes: `addr`, with an IPv4-mapped IPv6 address
/// (`::ffff:a.b.c.d`) as the IPv4 address it carries, so that the trap leaves by the IPv4
/// socket (an IPv6 socket carries no IPv4 where `net.ipv6.bindv6only` is set).
fn destination(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(a) => a
            .ip()
            .to_ipv4_mapped()
            .map_or(addr, |v4| SocketAddr::new(v4.into(), a.port())),
        SocketAddr::V4(_) => addr,
    }
}

/// A socket of the family of the receivers it sends to: `[::]:0` for IPv6, `0.0.0.0:0` for
/// IPv4.
async fn bind(v6: bool) -> std::io::Result<UdpSocket> {
    UdpSocket::bind(if v6 { "[::]:0" } else { "0.0.0.0:0" }).await
}

async fn run(
    mut rx: mpsc::Receiver<Trap>,
    shared: Arc<Shared>,
    started: Instant,
    seed: u64,
    shutdown: CancellationToken,
) {
    let mut encoder = TrapEncoder::new(seed);
    let mut v4: Option<UdpSocket> = None;
    let mut v6: Option<UdpSocket> = None;
    let mut stopping = false;
    loop {
        // At shutdown, what is queued is still sent; then the task ends.
        let trap = if stopping {
            match rx.try_recv() {
                Ok(t) => t,
                Err(_) => return,
            }
        } else {
            tokio::select! {
                biased;
                t = rx.recv() => match t {
                    Some(t) => t,
                    None => return,
                },
                () = shutdown.cancelled() => {
                    stopping = true;
                    continue;
                }
            }
        };
        let receivers = shared
            .receivers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let uptime = started.elapsed();
        for receiver in receivers.iter().filter(|r| r.filter_level.passes(&trap)) {
            let bytes = match encoder.encode(&trap, receiver, uptime) {
                Ok(b) => b,
                Err(e) => {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    warn!(trap = trap.name(), error = %e, "trap not encoded");
                    continue;
                }
            };
            let to = destination(receiver.address);
            let is_v6 = to.is_ipv6();
            let slot = if is_v6 { &mut v6 } else { &mut v4 };
            if slot.is_none() {
                match bind(is_v6).await {
                    Ok(s) => *slot = Some(s),
                    Err(e) => {
                        shared.failed.fetch_add(1, Ordering::Relaxed);
                        warn!(receiver = %receiver.address, error = %e, "trap socket not bound");
                        continue;
                    }
                }
            }
            let Some(socket) = slot.as_ref() else {
                continue;
            };
            match socket.send_to(&bytes, to).await {
                Ok(_) => {
                    shared.sent.fetch_add(1, Ordering::Relaxed);
                    debug!(trap = trap.name(), receiver = %receiver.address, "trap sent");
                }
                Err(e) => {
                    shared.failed.fetch_add(1, Ordering::Relaxed);
                    warn!(trap = trap.name(), receiver = %receiver.address, error = %e,
                        "trap receiver unreachable");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sbc_alarms::{AlarmKind, Severity};
    use sbc_snmp::{decode_trap, AlarmInfo, FilterLevel};

    use super::*;

    fn alarm() -> AlarmInfo {
        AlarmInfo {
            kind: AlarmKind::Memory,
            value: 87,
            severity: Severity::Critical,
            threshold: 80,
            alarm_id: 131_073,
            task: "sbcd".into(),
            node: "sbc-a".into(),
        }
    }

    #[tokio::test]
    async fn sink_sends_filters_and_survives_an_unreachable_receiver() {
        let listener = UdpSocket::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let receivers = vec![
            // Port 9 on an unrouteable documentation address: sending may fail or vanish.
            TrapReceiver {
                address: "[100::1]:9".parse().expect("addr"),
                community: "x".into(),
                filter_level: FilterLevel::All,
                v3: None,
            },
            TrapReceiver {
                address: addr,
                community: "secret".into(),
                filter_level: FilterLevel::Critical,
                v3: None,
            },
        ];
        let (sink, task) = TrapSink::spawn(TrapSinkConfig::new(receivers));
        assert!(sink.send(Trap::Alarm(AlarmInfo {
            severity: Severity::Minor,
            ..alarm()
        })));
        assert!(sink.send(Trap::Alarm(alarm())));
        let mut buf = vec![0u8; 2048];
        let (n, _) = tokio::time::timeout(Duration::from_secs(5), listener.recv_from(&mut buf))
            .await
            .expect("in time")
            .expect("recv");
        let d = decode_trap(&buf[..n]).expect("dec");
        assert_eq!(d.community, "secret");
        assert_eq!(
            d.get("sbcAlarmSeverity"),
            Some("critical(4)"),
            "minor was filtered"
        );
        let stats = sink.stats();
        drop(sink);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("task ends when every handle is dropped")
            .expect("no panic");
        assert_eq!(stats.dropped, 0);
    }

    #[test]
    fn ipv4_mapped_receivers_are_sent_to_as_ipv4() {
        let d = |s: &str| destination(s.parse().expect("addr")).to_string();
        assert_eq!(d("[::ffff:192.0.2.7]:162"), "192.0.2.7:162");
        assert_eq!(d("[2001:db8::7]:162"), "[2001:db8::7]:162");
        assert_eq!(d("[::1]:10162"), "[::1]:10162");
        assert_eq!(d("192.0.2.7:162"), "192.0.2.7:162");
    }

    /// An IPv6 receiver gets its trap from the IPv6 socket, a receiver written as an
    /// IPv4-mapped address from the IPv4 one.
    #[tokio::test]
    async fn ipv6_and_ipv4_mapped_receivers_get_their_traps() {
        let v6 = UdpSocket::bind("[::1]:0").await.expect("bind [::1]");
        let v4 = UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        let v6_addr = v6.local_addr().expect("addr");
        let mapped: SocketAddr = format!(
            "[::ffff:127.0.0.1]:{}",
            v4.local_addr().expect("addr").port()
        )
        .parse()
        .expect("addr");
        let receiver = |address, community: &str| TrapReceiver {
            address,
            community: community.into(),
            filter_level: FilterLevel::All,
            v3: None,
        };
        let (sink, _task) = TrapSink::spawn(TrapSinkConfig::new(vec![
            receiver(v6_addr, "six"),
            receiver(mapped, "four"),
        ]));
        assert!(sink.send(Trap::Alarm(alarm())));
        let mut buf = vec![0u8; 2048];
        for (socket, community, family_v6) in [(&v6, "six", true), (&v4, "four", false)] {
            let (n, from) =
                tokio::time::timeout(Duration::from_secs(5), socket.recv_from(&mut buf))
                    .await
                    .expect("in time")
                    .expect("recv");
            assert_eq!(from.is_ipv6(), family_v6, "{from}");
            assert_eq!(decode_trap(&buf[..n]).expect("trap").community, community);
        }
        assert_eq!(sink.stats().failed, 0);
    }

    #[tokio::test]
    async fn a_full_queue_drops_and_counts() {
        // A current-thread runtime: the task cannot run while this test does not await.
        let mut config = TrapSinkConfig::new(Vec::new());
        config.queue_capacity = 2;
        let (sink, _task) = TrapSink::spawn(config);
        let results: Vec<bool> = (0..4).map(|_| sink.send(Trap::Alarm(alarm()))).collect();
        assert_eq!(results, [true, true, false, false]);
        assert_eq!(sink.stats().dropped, 2);
    }
}
