//! The `sbc` binary: parses arguments and wires the parts together. Logic lives in the library.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use sbc_config::Config;
use tracing::info;

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
        /// Configuration file (TOML). Every key has a default; an empty file is valid.
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
    },
    /// Check a configuration file and print it with every default filled in.
    VerifyConfig {
        /// The file to check.
        config: PathBuf,
    },
    /// Print the embedded default configuration as TOML.
    DefaultConfig,
}

fn load(config: Option<&PathBuf>) -> anyhow::Result<Config> {
    match config {
        Some(path) => {
            Config::load(path).with_context(|| format!("configuration {}", path.display()))
        }
        None => Ok(Config::embedded_default()),
    }
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run {
            config,
            listen,
            next_hop,
            workers,
        } => {
            tracing_subscriber::fmt()
                .with_writer(std::io::stderr)
                .with_env_filter(
                    tracing_subscriber::EnvFilter::try_from_default_env()
                        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
                )
                .init();
            let mut cfg = load(config.as_ref())?.with_overrides(listen, next_hop)?;
            if let Some(n) = workers {
                cfg.sip_config.workers = n;
                cfg.validate()?;
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("sbc-io")
                .enable_all()
                .build()?;
            rt.block_on(run(cfg))
        }
        Command::VerifyConfig { config } => {
            let cfg = load(Some(&config))?;
            print!("{}", cfg.to_toml_string());
            eprintln!("{}: valid", config.display());
            Ok(())
        }
        Command::DefaultConfig => {
            print!("{}", Config::embedded_default().to_toml_string());
            Ok(())
        }
    }
}

async fn run(cfg: Config) -> anyhow::Result<()> {
    let node = sbc::node::start(&cfg, true).await?;
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
        "sbc ready: {}; routes: {}",
        interfaces.join(", "),
        routes.join(", ")
    );
    shutdown_signal().await;
    info!("shutting down: refusing new requests, finishing transactions");
    node.shutdown().await;
    Ok(())
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
