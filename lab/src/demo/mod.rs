//! The demo (`cargo run --release -p sbc-demo`): the product working in about a minute, on
//! loopback, with nothing installed.
//!
//! It writes two node configurations into a fresh temporary directory and starts an active
//! and a standby as child processes of the running executable (`sbc-demo run`, which is
//! `sbc run`: the `sbc-demo` binary runs the product's `sbc::app::cli::run`), listens for their
//! SNMP traps, drives calls through the pair with the lab's own UAC and UAS, then grows the lab
//! ballast on the active past the critical memory threshold and narrates what follows: the
//! alarm and its traps, the health score dropping by 100 on the second critical reading, the
//! switchover, the standby serving new calls, the BYEs of the calls established before the
//! switchover answered by the new active, and the former active reported ineligible until
//! restarted. It ends by itself with a summary (exit 0 only when no call failed) and a chart.
//!
//! Timeline (full run; `--quick` in brackets):
//! ```text
//!  0 s      pair starts, election (about 2 s)
//!  +0       traffic: 10 calls/s, each held 20 s [8 s], BYE from the caller
//!  +10 s    [+4 s] the ballast grows on the active: 65 %, 75 %, then 56 MB [56 MB at once]
//!           alarm iteration 2 s [1 s] instead of Oracle's 15 s: critical reading 1, then 2,
//!           health 100 -> 0, switchover
//!  +10 s    [+4 s] after the switchover: new calls stop; every call runs to its BYE
//! ```

mod chart;
mod pair;
mod traps;

use std::collections::{BTreeMap, VecDeque};
use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _};
use serde_json::json;
use tokio::sync::mpsc;

use crate::traffic::{Snapshot, Uac, UacConfig, Uas, UasConfig};
use chart::{Marker, Sample};
use pair::{AlarmTiming, Layout, Mgmt, NodeProcess, NodeView, MEMORY_LIMIT_MB, NAMES};

/// The demo's options (`sbc-demo`): a pair on loopback, calls, a memory alarm, a switchover, a
/// chart.
#[derive(Debug, Clone, clap::Args)]
pub struct DemoArgs {
    /// A shortened run (about 25 s, for tests): 1 s alarm iteration, 8 s calls, the ballast
    /// in one step.
    #[arg(long)]
    pub quick: bool,
    /// Shift every port by N (5060 becomes 5060+N, the heartbeat 9090+N, the trap listener
    /// 1162+N, ...), to run beside another SBC or demo.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub port_offset: u16,
    /// Where to write the chart (SVG).
    #[arg(long, value_name = "PATH", default_value = "demo.svg")]
    pub chart: PathBuf,
    /// New calls per second.
    #[arg(long, value_name = "CPS", default_value_t = 10.0)]
    pub rate: f64,
    /// End with one machine-readable line: `demo-summary-json: {...}`.
    #[arg(long)]
    pub json_summary: bool,
}

/// Runs the demo; exit code 0 only when it got to its end and no call failed.
///
/// # Errors
/// When the demo cannot start (ports in use, no temporary directory, the runtime).
pub fn main(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let exe = std::env::current_exe().context("locating the demo executable")?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sbc-demo")
        .enable_all()
        .build()?;
    rt.block_on(run(args, exe))
}

/// Durations of one demo run.
#[derive(Debug, Clone, Copy)]
struct Plan {
    timing: AlarmTiming,
    hold: Duration,
    warmup: Duration,
    after_switch: Duration,
    min_new_calls: u64,
    staged_ramp: bool,
}

impl Plan {
    fn new(quick: bool) -> Self {
        if quick {
            Self {
                timing: AlarmTiming {
                    iteration_ms: 1000,
                    subsamples: 5,
                },
                hold: Duration::from_secs(8),
                warmup: Duration::from_secs(4),
                after_switch: Duration::from_secs(4),
                min_new_calls: 20,
                staged_ramp: false,
            }
        } else {
            Self {
                timing: AlarmTiming {
                    iteration_ms: 2000,
                    subsamples: 10,
                },
                hold: Duration::from_secs(20),
                warmup: Duration::from_secs(10),
                after_switch: Duration::from_secs(10),
                min_new_calls: 50,
                staged_ramp: true,
            }
        }
    }
    fn iteration(&self) -> Duration {
        Duration::from_millis(self.timing.iteration_ms)
    }
}

/// Where the demo is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Election,
    Warmup,
    Ramp,
    WaitSwitchover,
    AfterSwitchover,
    Drain,
    Done,
}

/// What happened when (instants of the demo).
#[derive(Debug, Default, Clone, Copy)]
struct Times {
    elected: Option<Instant>,
    traffic: Option<Instant>,
    ballast: Option<Instant>,
    alarm: Option<Instant>,
    first_critical: Option<Instant>,
    second_critical: Option<Instant>,
    health_drop: Option<Instant>,
    switchover: Option<Instant>,
    first_new_call: Option<Instant>,
    stop_calls: Option<Instant>,
    all_ended: Option<Instant>,
}

struct Demo {
    args: DemoArgs,
    plan: Plan,
    layout: Layout,
    dir: PathBuf,
    start: Instant,
    tty: bool,
    progress_shown: bool,
    last_progress: Option<Instant>,
    nodes: Vec<NodeProcess>,
    mgmt: Vec<Mgmt>,
    views: [NodeView; 2],
    uas: Option<Uas>,
    uac: Option<Uac>,
    trap_rx: Option<mpsc::UnboundedReceiver<traps::Received>>,
    bad_rx: Option<mpsc::UnboundedReceiver<String>>,
    trap_task: Option<tokio::task::JoinHandle<()>>,
    traps: Vec<traps::Received>,
    critical_traps: u64,
    phase: Phase,
    times: Times,
    first_active: Option<usize>,
    new_active: Option<usize>,
    ramp: VecDeque<u64>,
    next_step: Option<Instant>,
    ballast_mb: u64,
    answered_before_switch: u64,
    established_at_switch: u64,
    completed_at_switch: u64,
    last_bye_report: u64,
    ineligible_reported: bool,
    former_ineligible: bool,
    history: VecDeque<(f64, u64, u64)>,
    samples: Vec<Sample>,
    markers: Vec<Marker>,
    final_uac: Option<Snapshot>,
    final_uas: Option<Snapshot>,
}

async fn run(args: DemoArgs, exe: PathBuf) -> anyhow::Result<ExitCode> {
    let layout = Layout::new(args.port_offset)?;
    if !(args.rate > 0.0 && args.rate <= 500.0) {
        bail!("--rate must be in (0, 500] calls per second");
    }
    layout.check_free()?;
    let plan = Plan::new(args.quick);
    let dir = temp_dir()?;
    let mut demo = Demo {
        tty: std::io::stdout().is_terminal(),
        args,
        plan,
        layout,
        dir,
        start: Instant::now(),
        progress_shown: false,
        last_progress: None,
        nodes: Vec::new(),
        mgmt: Vec::new(),
        views: Default::default(),
        uas: None,
        uac: None,
        trap_rx: None,
        bad_rx: None,
        trap_task: None,
        traps: Vec::new(),
        critical_traps: 0,
        phase: Phase::Election,
        times: Times::default(),
        first_active: None,
        new_active: None,
        ramp: VecDeque::new(),
        next_step: None,
        ballast_mb: 0,
        answered_before_switch: 0,
        established_at_switch: 0,
        completed_at_switch: 0,
        last_bye_report: 0,
        ineligible_reported: false,
        former_ineligible: false,
        history: VecDeque::new(),
        samples: Vec::new(),
        markers: Vec::new(),
        final_uac: None,
        final_uas: None,
    };
    let outcome = {
        let fut = demo.run(&exe);
        tokio::pin!(fut);
        tokio::select! {
            r = &mut fut => r.map_err(|e| format!("{e:#}")),
            sig = interrupt() => Err(format!("interrupted ({sig})")),
        }
    };
    let interrupted = matches!(&outcome, Err(e) if e.starts_with("interrupted"));
    if let Err(e) = &outcome {
        demo.event(&format!("STOPPING: {e}"));
    }
    let ok = demo.finish(outcome.err()).await;
    Ok(if interrupted {
        ExitCode::from(130)
    } else if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Waits for Ctrl-C, SIGTERM or SIGHUP; names it.
async fn interrupt() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        let _ = tokio::signal::ctrl_c().await;
        return "Ctrl-C";
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
        _ = term.recv() => "SIGTERM",
        _ = hup.recv() => "SIGHUP",
    }
}

/// A fresh directory under the system's temporary directory.
fn temp_dir() -> anyhow::Result<PathBuf> {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("sbc-demo-{}-{stamp}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

impl Demo {
    fn t(&self, at: Instant) -> f64 {
        at.saturating_duration_since(self.start).as_secs_f64()
    }

    fn clear_progress(&mut self) {
        if self.tty && self.progress_shown {
            print!("\r\x1b[2K");
            self.progress_shown = false;
        }
    }

    /// One line of narration, with the time since the start.
    fn event(&mut self, text: &str) {
        self.event_at(Instant::now(), text);
    }

    fn event_at(&mut self, at: Instant, text: &str) {
        self.clear_progress();
        let t = self.t(at);
        let mut lines = text.lines();
        println!("[{t:>6.2}s] {}", lines.next().unwrap_or_default());
        for l in lines {
            println!("          {l}");
        }
        let _ = std::io::stdout().flush();
    }

    fn mark(&mut self, at: Instant, label: &str, color: &'static str) {
        let t = self.t(at);
        self.markers.push(Marker {
            t,
            label: label.to_owned(),
            color,
        });
    }

    async fn run(&mut self, exe: &Path) -> anyhow::Result<()> {
        let plan = self.plan;
        println!(
            "sbc demo: an active/standby SBC pair on loopback, calls through it, a memory alarm on \
             the active, a switchover.\n\
             - node configurations and logs: {}\n\
             - SIP service address 127.0.0.1:{} (UDP), core next hop (the lab UAS) 127.0.0.1:{}, \
             heartbeat 127.0.0.11/12:{}, traps to 127.0.0.1:{}\n\
             - memory alarms: process resident memory against memory-limit-mb {MEMORY_LIMIT_MB}; \
             minor 60 %, major 70 %, critical 80 %; critical-memory-abort=switchover\n\
             - alarm iteration {} s instead of Oracle's 15 s so the demo takes {}; a reading is \
             the minimum of the last 3 sub-samples, the switchover comes on the second critical \
             reading\n\
             - traffic: {} calls/s, each held {} s, BYE from the caller",
            self.dir.display(),
            self.layout.access,
            self.layout.agent,
            self.layout.heartbeat,
            self.layout.traps,
            plan.timing.iteration_ms as f64 / 1000.0,
            if self.args.quick {
                "about 25 s"
            } else {
                "about a minute"
            },
            self.args.rate,
            plan.hold.as_secs(),
        );

        // Traps first, so that none is missed.
        let socket = traps::bind(self.layout.traps_addr()).await?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (btx, brx) = mpsc::unbounded_channel();
        self.trap_task = Some(traps::spawn(socket, tx, btx));
        self.trap_rx = Some(rx);
        self.bad_rx = Some(brx);

        for (i, name) in NAMES.iter().enumerate() {
            let path = self.dir.join(format!("{name}.toml"));
            std::fs::write(&path, pair::node_config(&self.layout, plan.timing, i))
                .with_context(|| format!("writing {}", path.display()))?;
        }
        for name in NAMES {
            let node = NodeProcess::start(exe, &self.dir, name)?;
            self.event(&format!(
                "started {name} (pid {}): {} run --config {}/{name}.toml --mgmt-socket {}",
                node.pid(),
                exe.display(),
                self.dir.display(),
                node.socket.display()
            ));
            self.mgmt.push(Mgmt::new(node.socket.clone()));
            self.nodes.push(node);
        }

        let tick = Duration::from_millis(250);
        let mut next = tokio::time::Instant::now();
        // Every phase is bounded; this bounds the whole run.
        let limit = Instant::now() + Duration::from_secs(if self.args.quick { 120 } else { 240 });
        while self.phase != Phase::Done {
            if Instant::now() > limit {
                bail!("the demo did not finish in time (phase {:?})", self.phase);
            }
            next += tick;
            tokio::time::sleep_until(next).await;
            for n in &mut self.nodes {
                n.check_alive()?;
            }
            self.poll().await;
            self.drain_traps();
            self.step().await?;
            self.record();
            self.progress();
        }
        Ok(())
    }

    async fn poll(&mut self) {
        let (a, b) = self.mgmt.split_at_mut(1);
        let (va, vb) = tokio::join!(NodeView::read(&mut a[0]), NodeView::read(&mut b[0]));
        self.views = [va, vb];
    }

    fn active(&self) -> Option<usize> {
        match (self.views[0].is_active(), self.views[1].is_active()) {
            (true, false) => Some(0),
            (false, true) => Some(1),
            _ => None,
        }
    }

    fn drain_traps(&mut self) {
        let mut got = Vec::new();
        if let Some(rx) = self.trap_rx.as_mut() {
            while let Ok(t) = rx.try_recv() {
                got.push(t);
            }
        }
        let mut bad = Vec::new();
        if let Some(rx) = self.bad_rx.as_mut() {
            while let Ok(b) = rx.try_recv() {
                bad.push(b);
            }
        }
        for b in bad {
            self.event(&format!("trap listener: {b}"));
        }
        for t in got {
            self.on_trap(t);
        }
    }

    fn on_trap(&mut self, t: traps::Received) {
        let name = t.name().to_owned();
        let first_of_kind = !self.traps.iter().any(|x| x.name() == name);
        let node = t.node().to_owned();
        let mut text = format!("TRAP   {}", t.one_line());
        let mut quiet = false;
        match name.as_str() {
            "sbcAlarmTrap" => {
                let severity = t.word("sbcAlarmSeverity").to_owned();
                if self.times.alarm.is_none() {
                    self.times.alarm = Some(t.at);
                    self.mark(t.at, &format!("alarm raised ({severity})"), "#d4b106");
                } else if severity == "major" && !self.markers.iter().any(|m| m.label == "major") {
                    self.mark(t.at, "major", "#e8740c");
                }
                if severity == "critical" {
                    self.critical_traps += 1;
                    match self.critical_traps {
                        1 => {
                            self.times.first_critical = Some(t.at);
                            if self.times.alarm != Some(t.at) {
                                self.mark(t.at, "1st critical reading", "#d62728");
                            }
                            text.push_str("\n       first critical reading: stored; a second one switches over");
                        }
                        2 => {
                            self.times.second_critical = Some(t.at);
                            self.mark(t.at, "2nd critical reading", "#d62728");
                            text.push_str("\n       second consecutive critical reading: critical-memory-abort=switchover");
                        }
                        n => {
                            // Re-sent every iteration while it holds: one line in five.
                            quiet = n % 5 != 0;
                            text.push_str(&format!(
                                "\n       (still critical: re-sent every iteration until cleared or restarted; {n} so far)"
                            ));
                        }
                    }
                }
            }
            "sbcHealthTrap"
                if t.trap.get("sbcHealthScore") == Some("0")
                    && self.times.health_drop.is_none() =>
            {
                self.times.health_drop = Some(t.at);
                self.mark(t.at, &format!("{node} health 100 -> 0"), "#9467bd");
            }
            "sbcRedundancyTrap" => {
                let state = t.word("sbcRedundancyState");
                let is_new_active = self
                    .first_active
                    .is_some_and(|a| NAMES[a] != node && state == "active");
                if is_new_active && self.times.switchover.is_none() {
                    self.times.switchover = Some(t.at);
                }
            }
            _ => {}
        }
        if !quiet {
            if first_of_kind {
                // The first of each notification in full, as a trap receiver prints it.
                let full: String = t
                    .trap
                    .to_string()
                    .lines()
                    .skip(1)
                    .map(|l| format!("\n       {}", l.trim()))
                    .collect();
                text.push_str(&full);
            }
            self.event_at(t.at, &text);
        }
        self.traps.push(t);
    }

    async fn step(&mut self) -> anyhow::Result<()> {
        let now = Instant::now();
        match self.phase {
            Phase::Election => {
                let Some(a) = self.active() else {
                    if now.duration_since(self.start) > Duration::from_secs(30) {
                        bail!(
                            "no election after 30 s: {} is {:?}, {} is {:?} (logs in {})",
                            NAMES[0],
                            self.views[0].state,
                            NAMES[1],
                            self.views[1].state,
                            self.dir.display()
                        );
                    }
                    return Ok(());
                };
                if self.views[1 - a].state != "standby" {
                    return Ok(());
                }
                self.first_active = Some(a);
                self.times.elected = Some(now);
                self.event(&format!(
                    "ELECTED {} active, {} standby (show redundancy on both management sockets)",
                    NAMES[a],
                    NAMES[1 - a]
                ));
                self.start_traffic().await?;
                self.times.traffic = Some(Instant::now());
                self.phase = Phase::Warmup;
            }
            Phase::Warmup => {
                let since = self.times.traffic.map_or(Duration::ZERO, |t| now - t);
                if since >= self.plan.warmup {
                    let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
                    if s.answered == 0 {
                        bail!(
                            "no call answered through the pair in {} ({} attempted, failures {:?}); \
                             see the node logs in {}",
                            secs(since),
                            s.attempted,
                            s.failures,
                            self.dir.display()
                        );
                    }
                    self.begin_ramp();
                    self.phase = Phase::Ramp;
                }
            }
            Phase::Ramp => {
                if self.next_step.is_some_and(|n| now < n) {
                    return Ok(());
                }
                let a = self.first_active.unwrap_or(0);
                if let Some(mb) = self.ramp.pop_front() {
                    self.mgmt[a].exec(&format!("lab ballast {mb}")).await?;
                    self.ballast_mb = mb;
                    let mem = self.views[a]
                        .memory
                        .map_or("?".to_owned(), |m| format!("{m:.0} %"));
                    if self.times.ballast.is_none() {
                        self.times.ballast = Some(now);
                        self.mark(now, "ballast grows", "#7f7f7f");
                    }
                    self.event(&format!(
                        "MEMORY {}: lab ballast {mb} MB (\"lab ballast {mb}\" on its management socket; memory was {mem})",
                        NAMES[a]
                    ));
                    // Each step is held for one whole alarm iteration, so it makes a reading.
                    self.next_step = Some(now + self.plan.iteration() + Duration::from_millis(700));
                }
                if self.ramp.is_empty() {
                    self.phase = Phase::WaitSwitchover;
                }
            }
            Phase::WaitSwitchover => {
                let a = self.first_active.unwrap_or(0);
                let b = 1 - a;
                if self.views[b].is_active() && !self.views[a].is_active() {
                    self.on_switchover(a, b, now);
                    self.phase = Phase::AfterSwitchover;
                } else {
                    let since = self.times.ballast.map_or(Duration::ZERO, |t| now - t);
                    if since > self.plan.iteration() * 12 + Duration::from_secs(10) {
                        bail!(
                            "no switchover {} after the ballast ({} is {}, health {}; {} is {})",
                            secs(since),
                            NAMES[a],
                            self.views[a].state,
                            self.views[a].health,
                            NAMES[b],
                            self.views[b].state
                        );
                    }
                    self.answered_before_switch = self.views[b].answered;
                }
            }
            Phase::AfterSwitchover => {
                self.after_switchover(now).await;
                let b = self.new_active.unwrap_or(1);
                let new_calls = self.views[b]
                    .answered
                    .saturating_sub(self.answered_before_switch);
                let since = self.times.switchover.map_or(Duration::ZERO, |t| now - t);
                if since >= self.plan.after_switch && new_calls >= self.plan.min_new_calls {
                    if let Some(uac) = &self.uac {
                        uac.stop();
                    }
                    self.times.stop_calls = Some(now);
                    self.mark(now, "new calls stop", "#2ca02c");
                    self.event(&format!(
                        "STOP   no more new calls ({new_calls} answered through {} since it took over); \
                         waiting for every call to end with its BYE (at most {} s)",
                        NAMES[b],
                        self.plan.hold.as_secs() + 40
                    ));
                    self.phase = Phase::Drain;
                } else if since > self.plan.after_switch + Duration::from_secs(30) {
                    bail!(
                        "only {new_calls} new calls answered through {} within {}",
                        NAMES[b],
                        secs(since)
                    );
                }
            }
            Phase::Drain => {
                self.after_switchover(now).await;
                let done = self.uac.as_ref().is_some_and(Uac::is_done);
                if done {
                    self.times.all_ended = Some(now);
                    let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
                    self.event(&format!(
                        "ENDED  every call has ended: {} attempted, {} answered, {} completed with BYE 200, {} failed",
                        s.attempted, s.answered, s.completed, s.failed
                    ));
                    self.phase = Phase::Done;
                } else {
                    let since = self.times.stop_calls.map_or(Duration::ZERO, |t| now - t);
                    if since > self.plan.hold + Duration::from_secs(40) {
                        bail!(
                            "calls still in progress {} after new calls stopped",
                            secs(since)
                        );
                    }
                }
            }
            Phase::Done => {}
        }
        Ok(())
    }

    async fn start_traffic(&mut self) -> anyhow::Result<()> {
        let mut uas_cfg = UasConfig::new(self.layout.agent_addr());
        uas_cfg.hold = self.plan.hold;
        // Answer at once (as SIPp's uas does): only confirmed dialogs are replicated, so a call
        // still ringing when the active lets go of the service address would be lost.
        uas_cfg.ring = Duration::ZERO;
        let uas = Uas::start(uas_cfg)
            .await
            .with_context(|| format!("lab UAS on {}", self.layout.agent_addr()))?;
        let mut cfg = UacConfig::new(self.layout.access_addr());
        cfg.rate = self.args.rate;
        cfg.calls = None;
        cfg.duration = None;
        cfg.hold = self.plan.hold;
        cfg.max_concurrent = 100_000;
        let uac = Uac::start(cfg).await.context("lab UAC")?;
        self.event(&format!(
            "CALLS  lab UAS answering on {} (the core next hop); lab UAC calling {} from {}: \
             {} calls/s, held {} s, BYE from the caller",
            uas.local_addr(),
            self.layout.access_addr(),
            uac.local_addr(),
            self.args.rate,
            self.plan.hold.as_secs()
        ));
        self.uas = Some(uas);
        self.uac = Some(uac);
        Ok(())
    }

    /// Plans the ballast steps: in the full run 65 % and 75 % of the limit (a minor, then a
    /// major reading), then 56 MB (critical whatever the node's own footprint).
    fn begin_ramp(&mut self) {
        let a = self.first_active.unwrap_or(0);
        let limit = MEMORY_LIMIT_MB as f64;
        let used_mb = self.views[a]
            .memory_used
            .map_or(0.0, |b| b as f64 / f64::from(1u32 << 20));
        let mut steps = VecDeque::new();
        if self.plan.staged_ramp {
            for pct in [0.65, 0.75] {
                let mb = (pct * limit - used_mb).round();
                if mb >= 1.0 && steps.back().is_none_or(|&last: &u64| (mb as u64) > last) {
                    steps.push_back(mb as u64);
                }
            }
        }
        steps.retain(|&mb| mb < 56);
        steps.push_back(56);
        self.event(&format!(
            "MEMORY growing the lab ballast on the active {} ({:.0} MB resident now): {} MB, each \
             step held one alarm iteration",
            NAMES[a],
            used_mb,
            steps
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(" -> ")
        ));
        self.ramp = steps;
    }

    fn on_switchover(&mut self, a: usize, b: usize, polled: Instant) {
        self.new_active = Some(b);
        let at = self.times.switchover.unwrap_or(polled);
        self.times.switchover = Some(at);
        self.mark(at, &format!("switchover: {} active", NAMES[b]), "#ff7f0e");
        let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
        self.established_at_switch = s.active;
        self.completed_at_switch = s.completed;
        let since = |x: Option<Instant>, what: &str| {
            x.map(|x| {
                format!(
                    ", {} after the {what}",
                    secs(at.saturating_duration_since(x))
                )
            })
            .unwrap_or_default()
        };
        self.event_at(
            at,
            &format!(
                "SWITCHOVER {} is active, {} is {}{}{}\n\
                 {} calls established through {} carry on: their dialogs were replicated to {}",
                NAMES[b],
                NAMES[a],
                self.views[a].state,
                since(self.times.second_critical, "second critical reading"),
                since(self.times.health_drop, "health drop"),
                s.active,
                NAMES[a],
                NAMES[b]
            ),
        );
    }

    /// After the switchover: the first new call, the BYEs of the old calls, the former
    /// active's ineligibility.
    async fn after_switchover(&mut self, now: Instant) {
        let (Some(a), Some(b)) = (self.first_active, self.new_active) else {
            return;
        };
        if self.times.first_new_call.is_none()
            && self.views[b].answered > self.answered_before_switch
        {
            self.times.first_new_call = Some(now);
            self.mark(now, &format!("first new call via {}", NAMES[b]), "#2ca02c");
            let d = self
                .times
                .switchover
                .map(|s| secs(now.saturating_duration_since(s)))
                .unwrap_or_default();
            self.event(&format!(
                "SERVING {} answers new calls ({} so far), {d} after the switchover",
                NAMES[b],
                self.views[b].answered - self.answered_before_switch
            ));
        }
        let switched = self.times.switchover.map_or(Duration::ZERO, |s| now - s);
        if !self.ineligible_reported && switched > Duration::from_millis(1200) {
            self.ineligible_reported = true;
            let health = self.mgmt[a]
                .text("show health")
                .await
                .unwrap_or_else(|e| format!("(show health failed: {e})"));
            let red = self.mgmt[a]
                .data("show redundancy")
                .await
                .unwrap_or_default();
            self.former_ineligible = health.contains("NOT AVAILABLE")
                || red["ineligible_until_restart"].as_bool() == Some(true);
            let lines: Vec<String> = health
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| format!("  {l}"))
                .collect();
            self.event(&format!(
                "FORMER ACTIVE {} is {} (show redundancy: health {}{}); show health says:\n{}",
                NAMES[a],
                red["state"].as_str().unwrap_or("?"),
                red["health"],
                if red["ineligible_until_restart"].as_bool() == Some(true) {
                    ", ineligible until restart"
                } else {
                    ""
                },
                lines.join("\n")
            ));
        }
        // The BYEs of the calls established before the switchover, answered by the new active.
        let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
        let ended_old = s
            .completed
            .saturating_sub(self.completed_at_switch)
            .min(self.established_at_switch);
        let step = (self.established_at_switch / 4).max(1);
        if self.established_at_switch > 0
            && ended_old > self.last_bye_report
            && (ended_old >= self.last_bye_report + step || ended_old == self.established_at_switch)
        {
            self.last_bye_report = ended_old;
            self.event(&format!(
                "BYE    {ended_old} of the {} calls established before the switchover ended with \
                 BYE answered 200 through {}{}",
                self.established_at_switch,
                NAMES[b],
                if s.failed > 0 {
                    format!(" ({} calls failed so far)", s.failed)
                } else {
                    String::new()
                }
            ));
        }
    }

    fn record(&mut self) {
        let now = Instant::now();
        let t = self.t(now);
        let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
        self.history.push_back((t, s.attempted, s.answered));
        while self.history.len() > 2 && self.history[1].0 <= t - 1.0 {
            self.history.pop_front();
        }
        let (cps_attempted, cps_answered) = match (self.history.front(), self.history.back()) {
            (Some(f), Some(l)) if l.0 - f.0 > 0.2 => (
                (l.1 - f.1) as f64 / (l.0 - f.0),
                (l.2 - f.2) as f64 / (l.0 - f.0),
            ),
            _ => (0.0, 0.0),
        };
        let v = &self.views;
        let up = |i: usize| v[i].up;
        self.samples.push(Sample {
            t,
            cps_attempted,
            cps_answered,
            established: s.active,
            dialogs: self.active().map(|i| v[i].calls),
            memory: [0, 1].map(|i| v[i].memory.filter(|_| up(i))),
            health: [0, 1].map(|i| up(i).then_some(v[i].health)),
            active: self.active(),
        });
    }

    fn progress(&mut self) {
        let now = Instant::now();
        let every = if self.tty {
            Duration::ZERO
        } else {
            Duration::from_secs(2)
        };
        if self.last_progress.is_some_and(|l| now - l < every) {
            return;
        }
        self.last_progress = Some(now);
        let s = self.uac.as_ref().map(Uac::snapshot).unwrap_or_default();
        let cps = self.samples.last().map_or(0.0, |x| x.cps_answered);
        let node = |i: usize| {
            let v = &self.views[i];
            if !v.up {
                return format!("{} down", NAMES[i]);
            }
            format!(
                "{} {} mem {} health {}",
                NAMES[i],
                short_state(&v.state),
                v.memory.map_or("-".to_owned(), |m| format!("{m:.0}%")),
                v.health
            )
        };
        let line = format!(
            "[{:>6.2}s] calls {} attempted, {} answered, {} failed, {} active | {cps:.1} cps | {} | {}",
            self.t(now),
            s.attempted,
            s.answered,
            s.failed,
            s.active,
            node(0),
            node(1)
        );
        if self.tty {
            print!("\r\x1b[2K{line}");
            self.progress_shown = true;
        } else {
            println!("{line}");
        }
        let _ = std::io::stdout().flush();
    }

    /// Stops what the demo started, writes the chart and the summary; true when it succeeded.
    async fn finish(&mut self, error: Option<String>) -> bool {
        self.clear_progress();
        if let Some(uac) = self.uac.take() {
            let s = if uac.is_done() {
                uac.snapshot()
            } else {
                uac.close().await
            };
            self.final_uac = Some(s);
        }
        if let Some(uas) = self.uas.take() {
            self.final_uas = Some(uas.close().await);
        }
        // Traps still in flight, then the nodes.
        self.drain_traps();
        for node in &mut self.nodes {
            node.stop(Duration::from_secs(3)).await;
        }
        if let Some(t) = self.trap_task.take() {
            t.abort();
        }
        let chart = self.write_chart();
        self.summary(error, chart)
    }

    fn write_chart(&self) -> Result<u64, String> {
        let title = "sbc demo: critical memory on the active, switchover, every call survives";
        let uac = self.final_uac.clone().unwrap_or_default();
        let subtitle = format!(
            "{} calls attempted, {} answered, {} failed; alarm iteration {} s; memory-limit-mb {MEMORY_LIMIT_MB}; {} calls/s held {} s",
            uac.attempted,
            uac.answered,
            uac.failed,
            self.plan.timing.iteration_ms as f64 / 1000.0,
            self.args.rate,
            self.plan.hold.as_secs()
        );
        let svg = chart::svg(title, &subtitle, &self.samples, &self.markers);
        let path = &self.args.chart;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        std::fs::write(path, &svg).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(svg.len() as u64)
    }

    fn summary(&self, error: Option<String>, chart: Result<u64, String>) -> bool {
        let uac = self.final_uac.clone().unwrap_or_default();
        let uas = self.final_uas.clone().unwrap_or_default();
        let t = |x: Option<Instant>| x.map(|x| self.t(x));
        let between = |a: Option<Instant>, b: Option<Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_duration_since(a).as_secs_f64()),
            _ => None,
        };
        let tm = &self.times;
        let mut trap_counts: BTreeMap<String, u64> = BTreeMap::new();
        for tr in &self.traps {
            *trap_counts.entry(tr.name().to_owned()).or_default() += 1;
        }
        let after_second = match (tm.second_critical, tm.switchover) {
            (Some(c), Some(s)) => s >= c,
            _ => false,
        };
        let ended_old = uac
            .completed
            .saturating_sub(self.completed_at_switch)
            .min(self.established_at_switch);
        let new_calls = self.new_active.map_or(0, |b| {
            self.views[b]
                .answered
                .saturating_sub(self.answered_before_switch)
        });
        let chart_ok = chart.is_ok();
        let all_ended = uac.in_progress == 0 && uac.attempted > 0;
        let ok =
            error.is_none() && uac.failed == 0 && all_ended && tm.switchover.is_some() && chart_ok;
        let f = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.2} s"));
        let name = |i: Option<usize>| i.map_or("-", |i| NAMES[i]);
        println!();
        println!("summary");
        println!("  calls attempted                 {}", uac.attempted);
        println!("  calls answered                  {}", uac.answered);
        println!(
            "  calls failed                    {}{}",
            uac.failed,
            if uac.failures.is_empty() {
                String::new()
            } else {
                format!(" {:?}", uac.failures)
            }
        );
        println!(
            "  calls completed (BYE 200)       {} (still in progress: {})",
            uac.completed, uac.in_progress
        );
        println!(
            "  INVITE -> 200 (caller)          p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            uac.invite_to_200.p50_ms, uac.invite_to_200.p99_ms, uac.invite_to_200.max_ms
        );
        if uac.failed > 0 && tm.switchover.is_some() {
            println!(
                "  note: only confirmed dialogs are replicated to the standby; a call whose INVITE \
                 was still in transit through the active when it released the service address \
                 (its 200 reaching the new active, which has no transaction for it) fails as \
                 `timeout`"
            );
        }
        println!(
            "  callee side (lab UAS)           {} answered, {} completed, {} failed",
            uas.answered, uas.completed, uas.failed
        );
        println!(
            "  active before / after           {} / {}",
            name(self.first_active),
            name(self.new_active)
        );
        println!(
            "  calls established at switchover {} ({} ended with BYE 200 through {})",
            self.established_at_switch,
            ended_old,
            name(self.new_active)
        );
        println!(
            "  second critical reading -> switchover  {}",
            f(between(tm.second_critical, tm.switchover))
        );
        println!(
            "  health drop -> switchover              {}",
            f(between(tm.health_drop, tm.switchover))
        );
        println!(
            "  switchover -> first new call answered  {} (on {}; {} new calls answered there)",
            f(between(tm.switchover, tm.first_new_call)),
            name(self.new_active),
            new_calls
        );
        println!(
            "  former active ineligible until restart {}",
            if self.former_ineligible { "yes" } else { "no" }
        );
        println!(
            "  traps received                  {} ({})",
            self.traps.len(),
            trap_counts
                .iter()
                .map(|(k, v)| format!("{k} x{v}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        match &chart {
            Ok(bytes) => println!(
                "  chart                           {} ({bytes} bytes)",
                self.args.chart.display()
            ),
            Err(e) => println!("  chart                           NOT WRITTEN: {e}"),
        }
        println!("  node configurations and logs    {}", self.dir.display());
        if let Some(e) = &error {
            println!("  error                           {e}");
        }
        println!(
            "  result                          {}",
            if ok {
                "OK: the pair switched over on critical memory and no call failed"
            } else {
                "FAILED"
            }
        );
        if self.args.json_summary {
            let v = json!({
                "ok": ok,
                "error": error,
                "quick": self.args.quick,
                "port_offset": self.layout.offset,
                "attempted": uac.attempted,
                "answered": uac.answered,
                "failed": uac.failed,
                "completed": uac.completed,
                "in_progress": uac.in_progress,
                "failures": uac.failures,
                "uas_answered": uas.answered,
                "uas_failed": uas.failed,
                "invite_to_200_p50_ms": uac.invite_to_200.p50_ms,
                "invite_to_200_p99_ms": uac.invite_to_200.p99_ms,
                "first_active": self.first_active.map(|i| NAMES[i]),
                "new_active": self.new_active.map(|i| NAMES[i]),
                "established_at_switchover": self.established_at_switch,
                "established_ended_through_new_active": ended_old,
                "new_calls_on_new_active": new_calls,
                "t_elected_s": t(tm.elected),
                "t_ballast_s": t(tm.ballast),
                "t_alarm_s": t(tm.alarm),
                "t_first_critical_s": t(tm.first_critical),
                "t_second_critical_s": t(tm.second_critical),
                "t_health_drop_s": t(tm.health_drop),
                "t_switchover_s": t(tm.switchover),
                "t_first_new_call_s": t(tm.first_new_call),
                "t_stop_calls_s": t(tm.stop_calls),
                "t_all_ended_s": t(tm.all_ended),
                "second_critical_to_switchover_s": between(tm.second_critical, tm.switchover),
                "health_drop_to_switchover_s": between(tm.health_drop, tm.switchover),
                "switchover_to_first_new_call_s": between(tm.switchover, tm.first_new_call),
                "switchover_after_second_critical": after_second,
                "former_active_ineligible": self.former_ineligible,
                "traps": trap_counts,
                "traps_total": self.traps.len(),
                "chart": self.args.chart,
                "chart_bytes": chart.as_ref().ok(),
                "samples": self.samples.len(),
                "dir": self.dir,
            });
            println!("demo-summary-json: {v}");
        }
        let _ = std::io::stdout().flush();
        ok
    }
}

fn short_state(s: &str) -> &str {
    match s {
        "out-of-service" => "OOS",
        other => other,
    }
}
