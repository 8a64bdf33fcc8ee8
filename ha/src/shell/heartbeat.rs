//! The heartbeat task, on its own thread.
//!
//! The task runs on a current-thread tokio runtime of its own, on a dedicated OS thread
//! (`sbc-ha`), not on the node's main runtime: the main runtime carries the SIP path, the
//! management socket and the state sync, and a node whose CPU is saturated by SIP work (or by
//! anything else on the host) must still send its heartbeats and hear its peer's on time, or
//! its peer would take over from a node that is only busy. The thread sleeps between
//! heartbeats, so the kernel's scheduler wakes it promptly even when every core is busy. A
//! tokio runtime rather than plain `std` sockets: the shell is the same `select!` over
//! sockets, commands and the machine's timer that it was, and tokio's channels connect it to
//! the owner's runtime unchanged.
//!
//! One reader task per UDP socket forwards datagrams (path, bytes) to the main loop; the main
//! loop owns the [`Redundancy`], sleeps until its `poll_timeout`, and after every input drains
//! `poll_transmit` (sending on the path's socket) and `poll` (sending events to the owner).
//! With a witness configured it also sends the machine's witness probes (`poll_witness`) from
//! one more UDP socket and hands the answers to `handle_witness_datagram`: the machine decides
//! everything about the lease.
//!
//! Dropping the [`HaHandle`] stops the thread and closes its sockets before it returns (a node
//! that dies).

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, info, warn, Instrument};

use crate::machine::{HaEvent, Health, Redundancy, Refused, Status};
use crate::refusals::RefusalLog;
use crate::settings::RedundancySettings;
use crate::wire::{PathId, MAX_DATAGRAM, WITNESS_ANSWER_MAGIC, WITNESS_PROBE_MAGIC};
use crate::witness::WitnessArbiter;

/// Logs a refused datagram from `from`, once per source per interval with the count since.
fn log_refusal(log: &mut RefusalLog, now: std::time::Instant, from: SocketAddr, what: &str) {
    if let Some(line) = log.note(now, from.ip()) {
        warn!(source = %line.source_text(), refused = line.count, what, "datagram refused (logged once per source per 10 s)");
    }
}

/// The first bytes of a witness probe (see [`crate::wire::WitnessProbe`]).
pub const WITNESS_MAGIC: [u8; 4] = WITNESS_PROBE_MAGIC;

/// An order from the owner to the heartbeat task.
#[derive(Debug)]
pub enum Command {
    /// A new health score.
    Health(Health),
    /// `notify berpd force`: the machine's answer (accepted, or why not) goes back on the
    /// channel.
    ForceSwitchover(oneshot::Sender<Result<(), &'static str>>),
    /// Witness news from another source than the built-in probe: `Witness(false)` drops the
    /// lease and the witness's reachability at once (as if it had stopped answering);
    /// `Witness(true)` changes nothing (only a granted answer gives the lease).
    Witness(bool),
    /// The initial state sync finished (from [`super::SyncEvent::Synchronized`]).
    SyncComplete,
    /// The configuration version to announce.
    ConfigVersion(u64),
    /// The state-sync connection with the peer broke (EOF or reset after it was established:
    /// from [`super::SyncEvent::LinkLost`]); see [`Redundancy::handle_peer_link_lost`].
    PeerLinkLost,
    /// A state-sync session with the peer was established (from [`super::SyncEvent::LinkUp`]);
    /// see [`Redundancy::handle_peer_link_up`].
    PeerLinkUp,
}

/// The owner's side of a running heartbeat thread. Dropping it stops the thread and waits
/// until it has closed its sockets.
#[derive(Debug)]
pub struct HaHandle {
    commands: mpsc::UnboundedSender<Command>,
    /// Every [`HaEvent`], in order.
    pub events: mpsc::UnboundedReceiver<HaEvent>,
    /// The latest [`Status`] (for `show redundancy`).
    pub status: watch::Receiver<Status>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
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
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // The loop stops at its next poll (it never blocks on anything but its own sockets,
        // timer and channels); the runtime's drop then closes every socket.
        if let Some(t) = self.thread.take() {
            if t.join().is_err() {
                warn!("the heartbeat thread panicked");
            }
        }
    }
}

/// Binds this node's heartbeat address on every path (`destinations` of the peer named
/// `local`, IPv4 or IPv6, an IPv4-mapped one as its IPv4 address), in path order.
///
/// # Errors
/// The node is not in the configuration, or a bind fails.
pub async fn bind_paths(config: &RedundancySettings, local: &str) -> io::Result<Vec<UdpSocket>> {
    let me = config.peer(local).ok_or_else(|| {
        io::Error::new(io::ErrorKind::NotFound, format!("no peer named {local:?}"))
    })?;
    let mut sockets = Vec::with_capacity(me.destinations.len());
    for addr in &me.destinations {
        sockets.push(UdpSocket::bind(crate::addr::canonical(*addr)).await?);
    }
    Ok(sockets)
}

/// Starts the heartbeat thread for `machine`, with `sockets[i]` carrying path `i`; sends the
/// machine's lease probes to `config.witness`, if set. The sockets may have been bound on any
/// runtime: they move to the thread's own.
///
/// # Errors
/// A socket cannot be detached from its runtime, or the thread cannot be started.
pub fn spawn(
    config: &RedundancySettings,
    machine: Redundancy,
    sockets: Vec<UdpSocket>,
) -> io::Result<HaHandle> {
    let witness = config.witness.map(crate::addr::canonical);
    let sockets = sockets
        .into_iter()
        .map(UdpSocket::into_std)
        .collect::<io::Result<Vec<_>>>()?;
    let (cmd_tx, cmd_rx) = mpsc::unbounded_channel();
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let (st_tx, st_rx) = watch::channel(machine.status());
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let span = tracing::info_span!("ha", node = %machine.status().name);
    let thread =
        std::thread::Builder::new()
            .name("sbc-ha".to_owned())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        warn!(error = %e, "cannot start the heartbeat runtime");
                        return;
                    }
                };
                rt.block_on(
                async move {
                    let mut tokio_sockets = Vec::with_capacity(sockets.len());
                    for s in sockets {
                        match s.set_nonblocking(true).and_then(|()| UdpSocket::from_std(s)) {
                            Ok(s) => tokio_sockets.push(s),
                            Err(e) => {
                                warn!(error = %e, "heartbeat socket unusable: heartbeat stopped");
                                return;
                            }
                        }
                    }
                    tokio::select! {
                        () = run(machine, tokio_sockets, witness, cmd_rx, ev_tx, st_tx) => {}
                        _ = stop_rx => {}
                    }
                }
                .instrument(span),
            );
                // Dropping the runtime drops the reader tasks and with them every socket.
                drop(rt);
            })?;
    Ok(HaHandle {
        commands: cmd_tx,
        events: ev_rx,
        status: st_rx,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

/// The address the witness probe socket binds: any address, port chosen by the system, of the
/// family of the (canonical) witness address `w`.
fn probe_bind_address(w: SocketAddr) -> SocketAddr {
    if w.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        ([0u16; 8], 0).into()
    }
}

/// Whether a datagram from `from` looks like the witness's answer (the machine authenticates
/// it): it starts with the answer's magic and comes from the witness `w`, compared as one
/// endpoint ([`crate::addr::same_endpoint`]: a received IPv6 source may carry a scope id).
fn is_witness_answer(w: SocketAddr, from: SocketAddr, d: &[u8]) -> bool {
    crate::addr::same_endpoint(from, w) && d.starts_with(&WITNESS_ANSWER_MAGIC)
}

enum Input {
    Datagram(PathId, SocketAddr, Vec<u8>),
    WitnessAnswer(SocketAddr, Vec<u8>),
}

async fn run(
    mut m: Redundancy,
    sockets: Vec<UdpSocket>,
    witness: Option<SocketAddr>,
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
        readers.spawn(read_loop(Arc::clone(s), in_tx.clone(), move |from, d| {
            Some(Input::Datagram(path, from, d))
        }));
    }
    let probe = match witness {
        Some(w) => match UdpSocket::bind(probe_bind_address(w)).await {
            Ok(s) => {
                let s = Arc::new(s);
                readers.spawn(read_loop(Arc::clone(&s), in_tx.clone(), move |from, d| {
                    is_witness_answer(w, from, &d).then_some(Input::WitnessAnswer(from, d))
                }));
                Some((s, w))
            }
            Err(e) => {
                warn!(error = %e, "cannot open the witness probe socket");
                None
            }
        },
        None => None,
    };
    drop(in_tx);
    let mut refusals = RefusalLog::default();
    loop {
        let now = Instant::now();
        while let Some(t) = m.poll_transmit(now.into_std()) {
            if let Some(s) = sockets.get(usize::from(t.path.0)) {
                if let Err(e) = s.send_to(&t.payload, t.destination).await {
                    debug!(path = t.path.0, to = %t.destination, error = %e, "heartbeat not sent");
                }
            }
        }
        while let Some(t) = m.poll_witness(now.into_std()) {
            if let Some((s, _)) = &probe {
                if let Err(e) = s.send_to(&t.payload, t.destination).await {
                    debug!(to = %t.destination, error = %e, "witness probe not sent");
                }
            }
        }
        // The status first: an owner that sees an event finds the status that follows it.
        status.send_replace(m.status());
        while let Some(e) = m.poll() {
            if let HaEvent::Transition { from, to, reason } = &e {
                info!(%from, %to, %reason, "redundancy transition");
            }
            let _ = events.send(e);
        }
        let wake = m
            .poll_timeout()
            .map_or(now + Duration::from_secs(1), Instant::from_std);
        tokio::select! {
            () = tokio::time::sleep_until(wake) => {
                m.handle_timeout(Instant::now().into_std());
            }
            input = inputs.recv() => match input {
                Some(Input::Datagram(path, from, d)) => {
                    let now = Instant::now().into_std();
                    match m.handle_datagram(now, path, &d) {
                        Ok(()) => {}
                        // The normal start of an exchange with a (re)started peer.
                        Err(Refused::Introduction) => debug!(%from, "heartbeat of a new peer incarnation"),
                        Err(e) => log_refusal(&mut refusals, now, from, &format!("heartbeat refused: {e}")),
                    }
                }
                Some(Input::WitnessAnswer(from, d)) => {
                    let now = Instant::now().into_std();
                    if let Err(e) = m.handle_witness_datagram(now, &d) {
                        log_refusal(&mut refusals, now, from, &format!("witness answer dropped: {e}"));
                    }
                }
                None => break,
            },
            cmd = commands.recv() => {
                let now = Instant::now().into_std();
                match cmd {
                    Some(Command::Health(h)) => m.handle_health(now, h),
                    Some(Command::ForceSwitchover(answer)) => {
                        let _ = answer.send(m.force_switchover(now));
                    }
                    Some(Command::Witness(false)) => m.handle_witness_lost(now),
                    Some(Command::Witness(true)) => {}
                    Some(Command::SyncComplete) => m.handle_sync_complete(now),
                    Some(Command::ConfigVersion(v)) => m.set_config_version(v),
                    Some(Command::PeerLinkLost) => m.handle_peer_link_lost(now),
                    Some(Command::PeerLinkUp) => m.handle_peer_link_up(now),
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

/// Without the pair's shared key a witness cannot authenticate probes nor sign its answers,
/// so this returns an [`io::ErrorKind::InvalidInput`] error at once: use
/// [`serve_witness_with_key`]. (It used to echo probes; nodes of this version no longer accept
/// an echo as a lease.)
///
/// # Errors
/// Always.
pub async fn serve_witness(socket: UdpSocket) -> io::Result<()> {
    drop(socket);
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        "the witness needs the pair's shared key (redundancy-config shared-key): \
         use serve_witness_with_key",
    ))
}

/// A witness: the lease arbiter of one pair ([`crate::witness`]) on `socket`, forever. It
/// grants the active lease to at most one node at a time; probes and answers are
/// authenticated with `key`, the pair's `shared-key`. Run it on a third host (or, in the lab,
/// a third loopback address). Restarting it is safe: it grants nothing for one lease time
/// after its start.
///
/// # Errors
/// A receive error other than a transient one.
pub async fn serve_witness_with_key(socket: UdpSocket, key: impl AsRef<[u8]>) -> io::Result<()> {
    // A new incarnation at every start: probes recorded before it are challenged.
    let incarnation = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
    let mut arbiter = WitnessArbiter::new(key.as_ref(), incarnation, Instant::now().into_std());
    let mut refusals = RefusalLog::default();
    let mut buf = vec![0u8; MAX_DATAGRAM + 1];
    loop {
        let (n, from) = match socket.recv_from(&mut buf).await {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => continue,
            Err(e) => return Err(e),
        };
        match arbiter.handle_datagram(Instant::now().into_std(), &buf[..n]) {
            Ok(Some(answer)) => {
                if let Err(e) = socket.send_to(&answer, from).await {
                    debug!(to = %from, error = %e, "witness answer not sent");
                }
            }
            Ok(None) => log_refusal(
                &mut refusals,
                Instant::now().into_std(),
                from,
                "witness: stale or replayed probe dropped",
            ),
            Err(e) => log_refusal(
                &mut refusals,
                Instant::now().into_std(),
                from,
                &format!("witness: probe dropped: {e}"),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().expect("address")
    }

    #[test]
    fn the_probe_socket_is_of_the_witness_family() {
        assert_eq!(probe_bind_address(sa("192.0.2.3:7000")), sa("0.0.0.0:0"));
        assert_eq!(probe_bind_address(sa("[fd00::3]:7000")), sa("[::]:0"));
    }

    #[test]
    fn witness_answers_come_from_the_witness() {
        let mut answer = WITNESS_ANSWER_MAGIC.to_vec();
        answer.extend_from_slice(b"...");
        let w = sa("[fd00::3]:7000");
        assert!(is_witness_answer(w, w, &answer));
        assert!(is_witness_answer(w, sa("[fd00::3%1]:7000"), &answer));
        assert!(!is_witness_answer(w, sa("[fd00::4]:7000"), &answer));
        assert!(!is_witness_answer(w, sa("[fd00::3]:7001"), &answer));
        assert!(!is_witness_answer(w, w, b"SBHA...."));
        let w4 = sa("192.0.2.3:7000");
        assert!(is_witness_answer(
            w4,
            sa("[::ffff:192.0.2.3]:7000"),
            &answer
        ));
    }
}
