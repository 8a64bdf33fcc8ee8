//! `sbc run`: its options and its body, in the library so that two binaries run a node the
//! same way: the `sbc` binary (`sbc run`) and the demo's (`sbc-demo`, whose two nodes are
//! child processes of itself running this same code). The binaries only parse arguments; the
//! global allocator (jemalloc) is each binary's, as Rust requires.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use sbc_config::Config;
use tracing::info;

use super::{shutdown_signal, Exit, Launch};

/// The options of `sbc run` (the subcommand's help is the binary's).
#[derive(Debug, Clone, clap::Args)]
pub struct RunArgs {
    /// Configuration file (TOML). Every key has a default; an empty file is valid. A file
    /// that does not exist yet starts the node on the defaults and is created by
    /// save-config.
    #[arg(long, short, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override the access interface's (sip-interface realm access) address and port.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,
    /// Override the default route's next hop (session-router default-route).
    #[arg(long, value_name = "ADDR:PORT")]
    pub next_hop: Option<SocketAddr>,
    /// Override sip-config workers: the initial (or fixed) number of worker threads of
    /// each UDP worker group, 1..=64.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// The management socket the ACLI connects to. Default: $XDG_RUNTIME_DIR/sbc/sbc.sock,
    /// /run/sbc/sbc.sock for root, else /tmp/sbc-<uid>/sbc.sock; its directory is created
    /// 0700 and must not be writable by anyone else.
    #[arg(long, env = "SBC_MGMT_SOCKET", value_name = "PATH")]
    pub mgmt_socket: Option<PathBuf>,
}

/// Runs one node until SIGTERM or SIGINT, as `sbc run` does: the configuration (the embedded
/// default without a file, or while the file does not exist yet) with the overrides, a tokio
/// runtime of one I/O thread, [`crate::app::run`]; after the ACLI's `reboot`, the executable
/// replaces itself with a fresh copy, run with the same arguments.
///
/// # Errors
/// A configuration that does not load or validate, the runtime, the node's start, and a
/// reboot's exec that failed.
pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    // The executable's path as resolved at start-up, for `reboot`.
    let started_from = std::env::current_exe().ok();
    let RunArgs {
        config,
        listen,
        next_hop,
        workers,
        mgmt_socket,
    } = args;
    init_logging();
    let fresh = config.as_ref().is_some_and(|p| !p.exists());
    let base = if fresh {
        Config::embedded_default()
    } else {
        load(config.as_ref())?
    };
    let mut cfg = base.with_overrides(listen, next_hop)?;
    if let Some(n) = workers {
        cfg.sip_config.workers = n;
        cfg.validate()?;
    }
    if fresh {
        if let Some(p) = &config {
            info!(path = %p.display(), "configuration file does not exist yet: running on the defaults; save-config creates it");
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("sbc-io")
        .enable_all()
        .build()?;
    let mgmt_socket = mgmt_socket.unwrap_or_else(crate::control::mgmt::default_socket_path);
    let launch = Launch {
        config: cfg,
        path: config,
        mgmt_socket,
    };
    let exit = rt.block_on(crate::app::run(launch, shutdown_signal()))?;
    drop(rt);
    if exit == Exit::Reboot {
        return Err(reexec(started_from));
    }
    Ok(ExitCode::SUCCESS)
}

/// The configuration in `config`, or the embedded default without a file.
///
/// # Errors
/// A file that cannot be read, parsed or validated; the error names it.
pub fn load(config: Option<&PathBuf>) -> anyhow::Result<Config> {
    match config {
        Some(path) => {
            Config::load(path).with_context(|| format!("configuration {}", path.display()))
        }
        None => Ok(Config::embedded_default()),
    }
}

/// Logs to stderr, at `info` unless `RUST_LOG` says otherwise; the DNS library's own lines
/// (every packet at `debug`) only from `warn`, unless `RUST_LOG` names it.
pub fn init_logging() {
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned());
    let spec = if spec.contains("hickory") {
        spec
    } else {
        format!("{spec},hickory_net=warn,hickory_proto=warn,hickory_resolver=warn")
    };
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&spec)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
}

/// Replaces this process with a fresh copy of itself (the ACLI's `reboot`).
fn reexec(started_from: Option<PathBuf>) -> anyhow::Error {
    use std::os::unix::process::CommandExt as _;
    // The path this process was started from (resolved at start-up): if the binary was
    // replaced on disk since (an upgrade in place), the new one starts.
    let exe = started_from.unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    anyhow::Error::new(err).context("reboot: exec failed")
}
