//! `sbc-demo`: the demo of the SBC pair, a binary apart from the product.
//!
//! Without a subcommand it runs the demo (`sbc_lab::demo`): an active/standby pair on
//! loopback, calls, critical memory on the active, the alarm and its traps, the switchover, a
//! summary and a chart. The two nodes are child processes of this same executable started as
//! `sbc-demo run --config FILE --mgmt-socket SOCK`: the hidden `run` subcommand is `sbc run`
//! itself (the same options and the same body, `sbc::app::cli::run`, on the same allocator), so the
//! nodes are the product's code while the `sbc` binary links no lab code.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// jemalloc, as in the `sbc` binary: its statistics drive the nodes' heap alarms and the
/// heap-gated admission.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The demo: an active/standby pair on loopback, calls, critical memory, the switchover.
///
/// The pair runs as child processes of this binary, calls go through it, memory goes
/// critical on the active, the alarm, its traps and the switchover follow, narrated; it
/// ends with a summary and a chart (about a minute; --quick: about 25 s).
#[derive(Debug, Parser)]
#[command(name = "sbc-demo", version, args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(flatten)]
    demo: sbc_lab::demo::DemoArgs,
    #[command(subcommand)]
    node: Option<Node>,
}

#[derive(Debug, Subcommand)]
enum Node {
    /// One node of the demo's pair, run exactly as `sbc run` runs it (the demo starts two).
    #[command(hide = true)]
    Run(sbc::app::cli::RunArgs),
}

fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.node {
        Some(Node::Run(args)) => sbc::app::cli::run(args),
        None => sbc_lab::demo::main(cli.demo),
    }
}
