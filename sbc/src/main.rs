//! The `sbc` binary: parses arguments and wires the parts together. Logic lives in the library.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{CommandFactory as _, Parser, Subcommand};
use sbc::app::shutdown_signal;
use sbc_config::Config;

/// jemalloc: its own statistics drive the heap alarms and the heap-gated admission.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A high-availability SIP session border controller (B2BUA) for active/standby pairs.
///
/// `sbc run` runs one node (alone, or one of a pair); `sbc acli` is the operator's shell of a
/// running node, through its management socket; `sbc witness` arbitrates a pair's active
/// lease. The packaged service runs `sbc run --config /etc/sbc/sbc.toml --mgmt-socket
/// /run/sbc/sbc.sock` as the user sbc (see sbc(1) and `systemctl status sbc`).
#[derive(Debug, Parser)]
#[command(name = "sbc", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one SBC node (alone, or one node of an active/standby pair).
    ///
    /// Without options it uses the embedded default configuration (`sbc default-config`):
    /// access realm on 127.0.0.1:5060 (UDP and TCP), core realm on 127.0.0.1:5062, calls
    /// routed to the core next hop 127.0.0.1:5080. It prints one line starting `sbc ready:`
    /// on standard output once it serves, tells systemd READY=1 when started by it
    /// (`Type=notify`), logs to standard error (filter: RUST_LOG, default info), and on SIGTERM
    /// or SIGINT refuses new requests with 503 and lets transactions finish (sip-config
    /// shutdown-grace-ms) before it exits.
    Run(sbc::app::cli::RunArgs),
    /// The operator's shell (ACLI) of a running node.
    ///
    /// Interactive on a terminal (line editing, history, tab completion, `?` for what is valid
    /// here), one-shot with -c, or a script read from standard input, which stops at the first
    /// error with exit code 1. Only the node's own user and root are served.
    Acli {
        /// The management socket of the node (default as for `sbc run`; the packaged service's
        /// is /run/sbc/sbc.sock, the default for root).
        #[arg(long, env = "SBC_MGMT_SOCKET", value_name = "PATH")]
        mgmt_socket: Option<PathBuf>,
        /// A command line to run, e.g. -c "show health" (repeat for several lines of one
        /// session); exit code 1 at the first one refused.
        #[arg(short = 'c', long = "command", value_name = "LINE")]
        commands: Vec<String>,
        /// Machine-readable output (JSON) of show and display commands.
        #[arg(long)]
        json: bool,
    },
    /// Run the split-brain witness of a pair (redundancy-config witness).
    ///
    /// It grants the active lease to one node at a time, and a node may only be active while
    /// it holds it. It must run with the pair's shared key: --key-file, --config, or the
    /// environment variable SBC_SHARED_KEY.
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
        #[arg(long, short, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Check a configuration file and print it with every default filled in.
    ///
    /// Exit code 0 and the whole configuration on standard output when it is valid, its secrets
    /// (shared key, communities, SNMPv3 passwords) printed as ********; otherwise the error
    /// names the key, the value and what is valid.
    VerifyConfig {
        /// The file to check.
        #[arg(value_name = "FILE")]
        config: PathBuf,
    },
    /// Print the embedded default configuration as TOML.
    ///
    /// What a node runs without a file, and what an empty file means: every key with its
    /// default (config/sbc.example.toml, installed as /etc/sbc/sbc.toml, is the same with
    /// comments).
    DefaultConfig,
    /// Print the manual page sbc(1) as roff, generated from these definitions (`sbc man |
    /// man -l -`); the package installs it.
    #[command(hide = true)]
    Man,
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

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => sbc::app::cli::run(args),
        Command::Acli {
            mgmt_socket,
            commands,
            json,
        } => sbc::control::acli_client::run(
            &mgmt_socket.unwrap_or_else(sbc::control::mgmt::default_socket_path),
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
                (None, Some(path), _) => sbc::app::cli::load(Some(&path))?.redundancy.shared_key,
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
            sbc::app::cli::init_logging();
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
            let cfg = sbc::app::cli::load(Some(&config))?;
            print!("{}", cfg.to_masked_toml_string());
            eprintln!(
                "{}: valid (secrets print as {})",
                config.display(),
                sbc_config::MASK
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::DefaultConfig => {
            print!("{}", Config::embedded_default().to_toml_string());
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            use std::io::Write as _;
            let page = sbc::manpage::render(Cli::command())?;
            std::io::stdout()
                .lock()
                .write_all(&page)
                .context("writing the manual page")?;
            Ok(ExitCode::SUCCESS)
        }
    }
}
