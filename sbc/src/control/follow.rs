//! A management listener that follows its address in the running configuration
//! (`metrics-address`, `snmp-agent-address`): served from the start, moved or stopped after
//! `activate-config` within [`CONFIG_POLL`], taking the socket the activation bound.

use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

/// How often a listener compares its address with the running configuration.
pub const CONFIG_POLL: Duration = Duration::from_secs(1);

/// Serves `first` (bound at start, with its address) and follows `key`'s address: `wanted`
/// reads it from the running configuration, `take_prebound` gives the socket an activation
/// bound for an address (if that one waits), `bind` binds one itself, `served_at` tells the
/// console where it serves, `serve` spawns a socket's task, which ends when the address it
/// is sent is not the socket's own. Never returns.
pub async fn run<S, F>(
    key: &'static str,
    first: Option<(S, SocketAddr)>,
    wanted: impl Fn() -> Option<SocketAddr>,
    take_prebound: impl Fn(SocketAddr) -> Option<S>,
    bind: impl Fn(SocketAddr) -> F,
    served_at: impl Fn(Option<SocketAddr>),
    serve: impl Fn(S, watch::Receiver<Option<SocketAddr>>),
) where
    F: Future<Output = std::io::Result<S>>,
{
    let (tx, _) = watch::channel(None::<SocketAddr>);
    let mut bound: Option<SocketAddr> = None;
    let mut failed: Option<SocketAddr> = None;
    if let Some((socket, addr)) = first {
        bound = Some(addr);
        let _ = tx.send(bound);
        info!(%addr, key, "management listener serving");
        serve(socket, tx.subscribe());
    }
    served_at(bound);
    loop {
        let wanted = wanted();
        if wanted != bound {
            // Stops the current socket's task (if any).
            let _ = tx.send(wanted);
            bound = None;
            if let Some(addr) = wanted {
                // The socket the activation bound, else one bound here (not again after a
                // failure, until an activation binds it).
                let socket = match take_prebound(addr) {
                    Some(s) => Some(Ok(s)),
                    None if Some(addr) != failed => Some(bind(addr).await),
                    None => None,
                };
                match socket {
                    Some(Ok(s)) => {
                        info!(%addr, key, "management listener serving");
                        bound = Some(addr);
                        failed = None;
                        serve(s, tx.subscribe());
                    }
                    Some(Err(e)) => {
                        warn!(%addr, key, error = %e, "management listener: cannot bind");
                        failed = Some(addr);
                    }
                    None => {}
                }
            }
            served_at(bound);
        }
        tokio::time::sleep(CONFIG_POLL).await;
    }
}
