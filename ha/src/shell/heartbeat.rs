//! The heartbeat task.
//!
//! One reader task per UDP socket forwards datagrams (path, bytes) to the main loop; the main
//! loop owns the [`Redundancy`], sleeps until its `poll_timeout`, and after every input drains
//! `poll_transmit` (sending on the path's socket) and `poll` (sending events to the owner).
//! With a witness configured it probes it every advertisement-time and reports it reachable
//! while a reply came within the dead time.
//!
//! Dropping the [`HaHandle`] stops the task and closes its sockets (a node that dies).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::{debug, info, warn, Instrument};

use crate::config::RedundancyConfig;
use crate::machine::{HaEvent, Health, Redundancy, Status};
use crate::wire::{PathId, MAX_DATAGRAM};

/// The first bytes of a witness probe and of its echo.
pub const WITNESS_MAGIC: [u8; 4] = *b"SBCW";

/// An order from the owner to the heartbeat task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// A new health score.
    Health(Health),
    /// `notify berpd force`.
    ForceSwitchover,
    /// Witness reachability from another source than the built-in probe.
    Witness(bool),
    /// The initial state sync finished (from [`super::SyncEvent::Synchronized`]).
    SyncComplete,
    /// The configuration version to announce.
    ConfigVersion(u64),
}

/// The owner's side of a running heartbeat task. Dropping it stops the task.
#[derive(Debug)]
pub struct HaHandle {
    commands: mpsc::UnboundedSender<Command>,
    /// Every [`HaEvent`], in order.
    pub events: mpsc::UnboundedReceiver<HaEvent>,
    /// The latest [`Status`] (for `show redundancy`).
    pub status: watch::Receiver<Status>,
    task: JoinHandle<()>,
}

impl HaHandle {
    /// Sends a command; false if the task has stopped.
    pub fn send(&self, command: Command) -> bool {
        self.commands.send(command).is_ok()
    }

    /// The latest status.
    #[must_use]
    pub fn status(&self) -> Status {
        self.status.borrow().clone()
    }
}

impl Drop for HaHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Binds this node's heartbeat address on every path (`destinations` of the peer named
/// `local`), in path order.
///
/// # Errors
/// The node is not in the configuration, or a bind fails.
pub async fn bind_paths(config: &RedundancyConfig, local: &str) -> io::Result<Vec<UdpSocket>> {
    let me = config.peer(local).ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("no peer named {local:?}"))
    })?;
    let mut sockets = Vec::with_capacity(me.destinations.len());
    for addr in &me.destinations {
        sockets.push(UdpSocket::bind(addr).await?);
    }
    Ok(sockets)
}

/// Starts the heartbeat task for `machine`, with `sockets[i]` carrying path `i`; probes
/// `config.witness`, if set, every advertisement-time. Must be called inside a tokio runtime.
#[must_use]
pub fn spawn(config: &RedundancyConfig, machine: Redundancy, sockets: Vec<UdpSocket>) -> HaHandle {
    let witness = config.witness;
    let probe_every = config.advertisement_time();
    let dead = config.dead_time();
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let (st_tx, st_rx) = watch::channel(machine.status());
    let span = tracing::info_span!("ha", node = %machine.status().name);
    let task = tokio::spawn(
        run(
            machine,
            sockets,
            witness,
            probe_every,
            dead,
            cmd_rx,
            ev_tx,
            st_tx,
        )
        .instrument(span),
    );
    HaHandle {
        commands: cmd_tx,
        events: ev_rx,
        status: st_rx,
        task,
    }
}

enum Input {
    Datagram(PathId, Vec<u8>),
    WitnessReply,
}

#[allow(clippy::too_many_arguments, reason = "private; called once, by spawn")]
async fn run(
    mut m: Redundancy,
    sockets: Vec<UdpSocket>,
    witness: Option<SocketAddr>,
    probe_every: Duration,
    dead: Duration,
    mut commands: mpsc::UnboundedReceiver<Command>,
    events: mpsc::UnboundedSender<HaEvent>,
    status: watch::Sender<Status>,
) {
    let sockets: Vec<Arc<UdpSocket>> = sockets.into_iter().map(Arc::new).collect();
    let (in_tx, mut inputs) = mpsc::channel::<Input>(1024);
    let mut readers = JoinSet::new();
    for (i, s) in sockets.iter().enumerate() {
        let Ok(path) = u8::try_from(i).map(PathId) else {
            break;
        };
        readers.spawn(read_loop(Arc::clone(s), in_tx.clone(), move |_, d| {
            Some(Input::Datagram(path, d))
        }));
    }
    let probe = match witness {
        Some(w) => {
            let bind: SocketAddr = if w.is_ipv4() {
                ([0, 0, 0, 0], 0).into()
            } else {
                ([0u16; 8], 0).into()
            };
            match UdpSocket::bind(bind).await {
                Ok(s) => {
                    let s = Arc::new(s);
                    readers.spawn(read_loop(Arc::clone(&s), in_tx.clone(), move |from, d| {
                        (from == w && d.starts_with(&WITNESS_MAGIC)).then_some(Input::WitnessReply)
                    }));
                    Some((s, w))
                }
                Err(e) => {
                    warn!(error = %e, "cannot open the witness probe socket");
                    None
                }
            }
        }
        None => None,
    };
    drop(in_tx);
    let mut last_reply: Option<Instant> = None;
    let mut next_probe = Instant::now();
    let mut nonce: u64 = 0;
    loop {
        let now = Instant::now();
        while let Some(t) = m.poll_transmit(now.into_std()) {
            if let Some(s) = sockets.get(usize::from(t.path.0)) {
                if let Err(e) = s.send_to(&t.payload, t.destination).await {
                    debug!(path = t.path.0, to = %t.destination, error = %e, "heartbeat not sent");
                }
            }
        }
        while let Some(e) = m.poll() {
            if let HaEvent::Transition { from, to, reason } = &e {
                info!(%from, %to, %reason, "redundancy transition");
            }
            let _ = events.send(e);
        }
        status.send_replace(m.status());
        let mut wake = m
            .poll_timeout()
            .map_or(now + Duration::from_secs(1), Instant::from_std);
        if probe.is_some() {
            wake = wake.min(next_probe);
        }
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {
                let now = Instant::now();
                if let Some((s, w)) = &probe {
                    if now >= next_probe {
                        nonce = nonce.wrapping_add(1);
                        let mut msg = WITNESS_MAGIC.to_vec();
                        msg.extend_from_slice(&nonce.to_be_bytes());
                        if let Err(e) = s.send_to(&msg, w).await {
                            debug!(error = %e, "witness probe not sent");
                        }
                        next_probe = now + probe_every;
                        let reachable = last_reply.is_some_and(|t| now.duration_since(t) < dead);
                        m.handle_witness(now.into_std(), reachable);
                    }
                }
                m.handle_timeout(now.into_std());
            }
            input = inputs.recv() => match input {
                Some(Input::Datagram(path, d)) => {
                    if let Err(e) = m.handle_datagram(Instant::now().into_std(), path, &d) {
                        debug!(path = path.0, error = %e, "heartbeat dropped");
                    }
                }
                Some(Input::WitnessReply) => {
                    let now = Instant::now();
                    last_reply = Some(now);
                    m.handle_witness(now.into_std(), true);
                }
                None => break,
            },
            cmd = commands.recv() => {
                let now = Instant::now().into_std();
                match cmd {
                    Some(Command::Health(h)) => m.handle_health(now, h),
                    Some(Command::ForceSwitchover) => m.force_switchover(now),
                    Some(Command::Witness(r)) => m.handle_witness(now, r),
                    Some(Command::SyncComplete) => m.handle_sync_complete(now),
                    Some(Command::ConfigVersion(v)) => m.set_config_version(v),
                    None => break,
                }
            }
        }
    }
    readers.abort_all();
}

async fn read_loop<F>(socket: Arc<UdpSocket>, out: mpsc::Sender<Input>, make: F)
where
    F: Fn(SocketAddr, Vec<u8>) -> Option<Input>,
{
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    loop {
        match socket.recv_from(&mut buf).await {
            Ok((n, from)) => {
                if let Some(input) = make(from, buf[..n].to_vec()) {
                    if out.send(input).await.is_err() {
                        return;
                    }
                }
            }
            // ICMP port unreachable surfaces here on some systems: not fatal.
            Err(e) => {
                debug!(error = %e, "heartbeat socket error");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
}

/// A witness: echoes every probe it receives on `socket`, forever. Run it on a third host
/// (or, in the lab, a third loopback address).
///
/// # Errors
/// A receive error other than a transient one.
pub async fn serve_witness(socket: UdpSocket) -> io::Result<()> {
    let mut buf = [0u8; 64];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => continue,
            Err(e) => return Err(e),
        };
        if n == 12 && buf[..4] == WITNESS_MAGIC {
            let _ = socket.send_to(&buf[..n], from).await;
        }
    }
}
