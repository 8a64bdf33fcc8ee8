//! The `sbc` binary: parses arguments and wires the parts together. Logic lives in the library.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sbc::alarm_service::AlarmService;
use sbc::console::{ConfigState, Console, Control};
use sbc::subsystems::Subsystems;
use sbc_config::Config;
use tracing::{info, warn};

/// jemalloc: its own statistics drive the heap alarms and the heap-gated admission.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A high-availability SIP session border controller (B2BUA) for active/standby pairs.
#[derive(Debug, Parser)]
#[command(name = "sbc", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one SBC node. Without options it uses the embedded default configuration: access
    /// realm on 127.0.0.1:5060 (UDP and TCP), core realm on 127.0.0.1:5062, calls routed to the
    /// core next hop 127.0.0.1:5080.
    Run {
        /// Configuration file (TOML). Every key has a default; an empty file is valid. A file
        /// that does not exist yet starts the node on the defaults and is created by save-config.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Override the access interface's address and port.
        #[arg(long, value_name = "ADDR:PORT")]
        listen: Option<SocketAddr>,
        /// Override the default route's next hop.
        #[arg(long, value_name = "ADDR:PORT")]
        next_hop: Option<SocketAddr>,
        /// Override the number of SIP worker threads.
        #[arg(long)]
        workers: Option<usize>,
        /// The management socket the ACLI connects to. Default: $XDG_RUNTIME_DIR/sbc/sbc.sock,
        /// /run/sbc/sbc.sock for root, else /tmp/sbc-<uid>/sbc.sock; its directory is created
        /// 0700 and must not be writable by anyone else.
        #[arg(long, env = "SBC_MGMT_SOCKET")]
        mgmt_socket: Option<PathBuf>,
    },
    /// The operator's shell (ACLI) of a running node: interactive on a terminal, one-shot with
    /// -c, or a script read from stdin (stops at the first error, exit code 1).
    Acli {
        /// The management socket of the node (default as for `sbc run`).
        #[arg(long, env = "SBC_MGMT_SOCKET")]
        mgmt_socket: Option<PathBuf>,
        /// A command to run (repeat for several lines of one session).
        #[arg(short = 'c', long = "command")]
        commands: Vec<String>,
        /// Machine-readable output of show/display commands.
        #[arg(long)]
        json: bool,
    },
    /// Run the split-brain witness of a pair (`redundancy-config witness`): it grants the
    /// active lease to one node at a time, and a node may only be active while it holds it.
    /// It must run with the pair's shared key.
    Witness {
        /// UDP address to listen on.
        #[arg(long, value_name = "ADDR:PORT")]
        listen: SocketAddr,
        /// A file holding the pair's shared key (its first line), readable by its owner only
        /// (mode 0600). The key is never taken on the command line, where any local user could
        /// read it; the environment variable SBC_SHARED_KEY also works.
        #[arg(long, value_name = "FILE", conflicts_with = "config")]
        key_file: Option<PathBuf>,
        /// A node's configuration file to read redundancy-config shared-key from.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Check a configuration file and print it with every default filled in.
    VerifyConfig {
        /// The file to check.
        config: PathBuf,
    },
    /// Print the embedded default configuration as TOML.
    DefaultConfig,
    /// The demo: an active/standby pair on loopback (child processes of this binary), calls
    /// through it, critical memory on the active, the alarm, its traps and the switchover,
    /// narrated; ends with a summary and a chart (about a minute; --quick: about 25 s).
    Demo(sbc_lab::demo::DemoArgs),
}

/// The first line of a key file that only its owner can read.
fn read_key_file(path: &Path) -> anyhow::Result<String> {
    use std::os::unix::fs::MetadataExt as _;
    let meta = std::fs::metadata(path).with_context(|| format!("key file {}", path.display()))?;
    if meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "key file {} is accessible to group or others (mode {:o}): chmod 600 it",
            path.display(),
            meta.mode() & 0o777
        );
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("key file {}", path.display()))?;
    Ok(text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end()
        .to_owned())
}

fn load(config: Option<&PathBuf>) -> anyhow::Result<Config> {
    match config {
        Some(path) => {
            Config::load(path).with_context(|| format!("configuration {}", path.display()))
        }
        None => Ok(Config::embedded_default()),
    }
}

/// The executable's path as resolved when the process started (for `reboot`).
static STARTED_FROM: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

fn main() -> anyhow::Result<ExitCode> {
    if let Ok(exe) = std::env::current_exe() {
        let _ = STARTED_FROM.set(exe);
    }
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            config,
            listen,
            next_hop,
            workers,
            mgmt_socket,
        } => {
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .init();
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
            let mgmt_socket = mgmt_socket.unwrap_or_else(sbc::mgmt::default_socket_path);
            let reboot = rt.block_on(run(cfg, config, mgmt_socket))?;
            drop(rt);
            if reboot {
                return Err(reexec());
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Acli {
            mgmt_socket,
            commands,
            json,
        } => sbc::acli_client::run(
            &mgmt_socket.unwrap_or_else(sbc::mgmt::default_socket_path),
            &commands,
            json,
        ),
        Command::Witness {
            listen,
            key_file,
            config,
        } => {
            let key = match (key_file, config, std::env::var("SBC_SHARED_KEY").ok()) {
                (Some(path), _, _) => read_key_file(&path)?,
                (None, Some(path), _) => load(Some(&path))?.redundancy.shared_key,
                (None, None, Some(k)) => k,
                (None, None, None) => anyhow::bail!(
                    "the witness needs the pair's shared key: --key-file FILE, --config FILE \
                     or the environment variable SBC_SHARED_KEY"
                ),
            };
            if key.len() < sbc_ha::crypto::MIN_SHARED_KEY_LEN {
                anyhow::bail!(
                    "the shared key must be at least {} bytes, as in redundancy-config",
                    sbc_ha::crypto::MIN_SHARED_KEY_LEN
                );
            }
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .init();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let socket = tokio::net::UdpSocket::bind(listen).await?;
                println!("sbc witness ready on {listen}");
                tokio::select! {
                    r = sbc_ha::shell::serve_witness_with_key(socket, key.as_bytes()) => r.map_err(anyhow::Error::from),
                    _ = shutdown_signal() => Ok(()),
                }
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::VerifyConfig { config } => {
            let cfg = load(Some(&config))?;
            print!("{}", cfg.to_toml_string());
            eprintln!("{}: valid", config.display());
            Ok(ExitCode::SUCCESS)
        }
        Command::DefaultConfig => {
            print!("{}", Config::embedded_default().to_toml_string());
            Ok(ExitCode::SUCCESS)
        }
        Command::Demo(args) => sbc_lab::demo::main(args),
    }
}

/// Replaces this process with a fresh copy of itself (the ACLI's `reboot`).
fn reexec() -> anyhow::Error {
    use std::os::unix::process::CommandExt as _;
    // The path this process was started from (resolved at start-up): if the binary was
    // replaced on disk since (an upgrade in place), the new one starts.
    let exe = STARTED_FROM
        .get()
        .cloned()
        .unwrap_or_else(|| PathBuf::from("/proc/self/exe"));
    let err = std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .exec();
    anyhow::Error::new(err).context("reboot: exec failed")
}

/// Runs the node until a signal (returns false) or a reboot request (returns true).
async fn run(cfg: Config, path: Option<PathBuf>, mgmt_socket: PathBuf) -> anyhow::Result<bool> {
    let paired = cfg.redundancy.is_enabled();
    // In a pair the redundancy machine decides who binds the service address.
    let node = Arc::new(sbc::node::start(&cfg, !paired).await?);
    let (control_tx, mut control_rx) = tokio::sync::mpsc::unbounded_channel();
    let alarms = AlarmService::spawn(&cfg, node.clone(), cfg.redundancy.is_enabled())?;
    let (pushed_tx, mut pushed_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let pair = if paired {
        Some(sbc::pair::Pair::spawn(&cfg, node.clone(), alarms.clone(), pushed_tx).await?)
    } else {
        None
    };
    let (heap_tx, heap_rx) = tokio::sync::watch::channel(sbc::overload::HeapGateSettings::of(&cfg));
    let subsystems = Arc::new(Subsystems::new(alarms.clone(), pair.clone(), heap_tx));
    let console = Arc::new(Console {
        config: Mutex::new(ConfigState {
            running: cfg.clone(),
            editing: cfg.clone(),
            path,
        }),
        node: node.clone(),
        subsystems: subsystems.clone(),
        started: Instant::now(),
        control: control_tx,
    });
    tokio::spawn(sbc::overload::run_heap_gate(
        node.clone(),
        alarms.clone(),
        heap_rx,
    ));
    let (c, p) = (console.clone(), pair.clone());
    tokio::spawn(async move {
        while let Some(toml) = pushed_rx.recv().await {
            if let Err(e) = c.apply_pushed(&toml).await {
                warn!(error = %e, "configuration pushed by the active refused: nothing changed");
                if let Some(p) = &p {
                    p.note_push_refused(e);
                }
            }
        }
    });
    // Source denies at the SIP edge: logged and trapped as they start and end.
    let (n, a, hostname) = (node.clone(), alarms.clone(), cfg.system.hostname.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
        loop {
            tick.tick().await;
            for e in n.access_events() {
                let (source, seconds) = match e {
                    sbc_proto::access::AccessEvent::Denied { source, for_ } => {
                        warn!(%source, seconds = for_.as_secs(), "source denied: it kept exceeding its rate of new requests");
                        (source, u32::try_from(for_.as_secs()).unwrap_or(u32::MAX))
                    }
                    sbc_proto::access::AccessEvent::Released { source } => {
                        info!(%source, "source deny ended");
                        (source, 0)
                    }
                };
                a.sink().send(sbc_alarms::Trap::SourceDenied {
                    source: source.to_string(),
                    seconds,
                    node: hostname.clone(),
                });
            }
        }
    });
    let listener = sbc::mgmt::bind(&mgmt_socket)?;
    let mgmt = tokio::spawn(sbc::mgmt::serve(listener, mgmt_socket.clone(), console));

    let routes: Vec<String> = cfg
        .sip_interfaces
        .iter()
        .filter_map(|i| {
            cfg.route_for(&i.realm)
                .map(|a| format!("{} -> {} {}", i.realm, a.name, a.socket_addr()))
        })
        .collect();
    let interfaces = node.describe_interfaces();
    info!(
        ?interfaces,
        ?routes,
        workers = cfg.sip_config.workers,
        "listening"
    );
    // The ready line: scripts and tests wait for it on stdout.
    println!(
        "sbc ready: {}{}; routes: {}; mgmt {}",
        interfaces.join(", "),
        if paired {
            " (bound only while active in the pair)"
        } else {
            ""
        },
        routes.join(", "),
        mgmt_socket.display()
    );
    let reboot = tokio::select! {
        _ = shutdown_signal() => false,
        c = control_rx.recv() => c == Some(Control::Reboot),
    };
    if reboot {
        warn!("rebooting: draining, then restarting the process");
    } else {
        info!("shutting down: refusing new requests, finishing transactions");
    }
    node.shutdown().await;
    alarms.clear_for_restart();
    // Give the trap sink a moment to send the clear traps.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    mgmt.abort();
    remove_socket(&mgmt_socket);
    Ok(reboot)
}

fn remove_socket(path: &Path) {
    let _ = std::fs::remove_file(path);
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
