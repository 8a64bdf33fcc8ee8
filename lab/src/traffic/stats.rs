//! Counters shared between the calls of one UAC or UAS and whoever watches them.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// Why a call failed. Every failed call has exactly one reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureReason {
    /// The INVITE got no final response in time (timer B, or the answer timeout after a
    /// provisional response); on a UAS: the final response was never ACKed (timer H).
    Timeout,
    /// The INVITE got this final non-2xx response.
    ErrorResponse(u16),
    /// Our BYE got no final response (timer F).
    ByeTimeout,
    /// Our BYE got this final non-2xx response (481: the dialog was unknown).
    ByeRejected(u16),
    /// The BYE we waited for from the other side never came.
    NoBye,
    /// A message that does not fit the call flow (e.g. a BYE before the call was answered).
    Unexpected,
    /// The transport failed (TCP connection refused or closed, send error).
    Transport,
    /// TLS refused the connection the call's request needed: the handshake failed (the
    /// peer's certificate not trusted or not for the name, or ours refused), or the peer
    /// ended the connection with an alert after our request (a TLS 1.3 server refusing our
    /// client certificate). [`Snapshot::last_tls_error`] says why.
    Tls,
}

impl FailureReason {
    /// The key of this reason in [`Snapshot::failures`]: `timeout`, `error_response_486`,
    /// `bye_timeout`, `bye_rejected_481`, `no_bye`, `unexpected`, `transport`, `tls`.
    #[must_use]
    pub fn key(&self) -> String {
        match self {
            Self::Timeout => "timeout".into(),
            Self::ErrorResponse(c) => format!("error_response_{c}"),
            Self::ByeTimeout => "bye_timeout".into(),
            Self::ByeRejected(c) => format!("bye_rejected_{c}"),
            Self::NoBye => "no_bye".into(),
            Self::Unexpected => "unexpected".into(),
            Self::Transport => "transport".into(),
            Self::Tls => "tls".into(),
        }
    }
}

impl std::fmt::Display for FailureReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Timeout => f.write_str("timeout"),
            Self::ErrorResponse(c) => write!(f, "error response {c}"),
            Self::ByeTimeout => f.write_str("BYE timeout"),
            Self::ByeRejected(c) => write!(f, "BYE answered {c}"),
            Self::NoBye => f.write_str("no BYE received"),
            Self::Unexpected => f.write_str("unexpected message"),
            Self::Transport => f.write_str("transport error"),
            Self::Tls => f.write_str("refused by TLS"),
        }
    }
}

/// Log-linear latency histogram: 64 sub-buckets per power of two of microseconds (error
/// under 1.6 %), bounded memory whatever the run length; the maximum is exact.
#[derive(Debug)]
struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max_us: u64,
}

const SUB: u64 = 64;

impl Histogram {
    fn new() -> Self {
        Self {
            buckets: vec![0; 64 * SUB as usize],
            count: 0,
            max_us: 0,
        }
    }

    fn index(us: u64) -> usize {
        if us < SUB {
            return us as usize;
        }
        let exp = 63 - u64::from(us.leading_zeros()); // >= 6
        let shift = exp - 6;
        let mantissa = (us >> shift) - SUB; // 0..64
        ((exp - 5) * SUB + mantissa) as usize
    }

    /// The upper end of a bucket, in µs.
    fn value(index: usize) -> u64 {
        let i = index as u64;
        if i < SUB {
            return i;
        }
        let exp = i / SUB + 5;
        let mantissa = i % SUB + SUB;
        let shift = exp - 6;
        ((mantissa + 1) << shift) - 1
    }

    fn record(&mut self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = Self::index(us).min(self.buckets.len() - 1);
        self.buckets[i] += 1;
        self.count += 1;
        self.max_us = self.max_us.max(us);
    }

    fn percentile(&self, p: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        // The rank of the p-th percentile (nearest-rank method).
        let rank = ((p / 100.0) * self.count as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::value(i).min(self.max_us);
            }
        }
        self.max_us
    }

    fn summary(&self) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        Latency {
            count: self.count,
            p50_ms: ms(self.percentile(50.0)),
            p90_ms: ms(self.percentile(90.0)),
            p99_ms: ms(self.percentile(99.0)),
            max_ms: ms(self.max_us),
        }
    }
}

/// Latency percentiles in milliseconds (0 when `count` is 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Number of samples.
    pub count: u64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
}

/// Counts of the requests a side received, by method (retransmissions included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Received {
    /// INVITE requests.
    pub invite: u64,
    /// ACK requests.
    pub ack: u64,
    /// BYE requests.
    pub bye: u64,
    /// CANCEL requests.
    pub cancel: u64,
    /// Any other request.
    pub other: u64,
    /// Responses.
    pub responses: u64,
}

/// A point-in-time copy of the counters; what [`Stats::snapshot`] returns and what the CLI
/// prints with `--json`.
///
/// At the end of a run, on a UAC: `attempted == completed + failed` and `in_progress == 0`. On a
/// UAS: `attempted == completed + failed + rejected + cancelled`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// `"uac"` or `"uas"`.
    pub role: String,
    /// Time since the generator started, ms.
    pub elapsed_ms: u64,
    /// Calls started (UAC: INVITEs sent; UAS: new INVITEs received).
    pub attempted: u64,
    /// Calls answered with 200 (UAC: 2xx received; UAS: 200 sent).
    pub answered: u64,
    /// Calls that failed, each counted once; the reasons are in `failures`.
    pub failed: u64,
    /// Calls ended by a BYE answered with 200 (whoever sent it).
    pub completed: u64,
    /// UAS only: calls answered with the configured error code (as asked, not failures).
    pub rejected: u64,
    /// UAS only: calls cancelled by the caller before the answer (not failures).
    pub cancelled: u64,
    /// Calls established now (answered, BYE not yet done).
    pub active: u64,
    /// Calls started and not yet ended in any way (ringing or established).
    pub in_progress: u64,
    /// Requests and responses we re-sent on a timer (INVITE, BYE, 2xx, final responses).
    pub retransmissions_sent: u64,
    /// Retransmissions we received and absorbed (answered from state, never a new call).
    pub retransmissions_received: u64,
    /// Messages that matched no call (late retransmissions after the call was forgotten,
    /// garbage); not call failures.
    pub stray_messages: u64,
    /// Failed calls by reason (keys from [`FailureReason::key`]).
    pub failures: BTreeMap<String, u64>,
    /// Requests received by method.
    pub received: Received,
    /// UAC only: INVITE → first response (usually 100 Trying).
    pub invite_to_first_response: Latency,
    /// UAC only: INVITE → 200 OK.
    pub invite_to_200: Latency,
    /// TLS handshakes that failed, either side, and connections ended by a TLS alert.
    #[serde(default)]
    pub tls_failures: u64,
    /// The reason of the last of them (rustls's text, e.g. `invalid peer certificate:
    /// UnknownIssuer`).
    #[serde(default)]
    pub last_tls_error: Option<String>,
}

impl Snapshot {
    /// One line for a progress display.
    #[must_use]
    pub fn progress_line(&self) -> String {
        format!(
            "[{}] {:>6.1}s attempted {} answered {} completed {} failed {} active {} in-progress {} retrans {} | 200 p50 {:.1}ms p99 {:.1}ms",
            self.role,
            self.elapsed_ms as f64 / 1000.0,
            self.attempted,
            self.answered,
            self.completed,
            self.failed,
            self.active,
            self.in_progress,
            self.retransmissions_sent,
            self.invite_to_200.p50_ms,
            self.invite_to_200.p99_ms,
        )
    }

    /// A multi-line human summary.
    #[must_use]
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} summary after {:.1}s\n  attempted  {}\n  answered   {}\n  completed  {}\n  failed     {}\n",
            self.role,
            self.elapsed_ms as f64 / 1000.0,
            self.attempted,
            self.answered,
            self.completed,
            self.failed
        );
        for (reason, n) in &self.failures {
            s.push_str(&format!("    {reason}: {n}\n"));
        }
        if let Some(why) = &self.last_tls_error {
            s.push_str(&format!(
                "  TLS failures {} (last: {why})\n",
                self.tls_failures
            ));
        }
        if self.role == "uas" {
            s.push_str(&format!(
                "  rejected   {}\n  cancelled  {}\n",
                self.rejected, self.cancelled
            ));
        }
        s.push_str(&format!(
            "  active {}  in progress {}\n  retransmissions sent {} received {}  stray messages {}\n",
            self.active,
            self.in_progress,
            self.retransmissions_sent,
            self.retransmissions_received,
            self.stray_messages
        ));
        s.push_str(&format!(
            "  received: INVITE {} ACK {} BYE {} CANCEL {} other {} responses {}\n",
            self.received.invite,
            self.received.ack,
            self.received.bye,
            self.received.cancel,
            self.received.other,
            self.received.responses
        ));
        if self.role == "uac" {
            for (name, l) in [
                ("INVITE->first response", &self.invite_to_first_response),
                ("INVITE->200", &self.invite_to_200),
            ] {
                s.push_str(&format!(
                    "  {name:<23} n={} p50 {:.2}ms p90 {:.2}ms p99 {:.2}ms max {:.2}ms\n",
                    l.count, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms
                ));
            }
        }
        s
    }
}

/// Live counters, updated by the calls and read with [`Stats::snapshot`] at any time.
#[derive(Debug)]
pub struct Stats {
    role: &'static str,
    started: Instant,
    attempted: AtomicU64,
    answered: AtomicU64,
    failed: AtomicU64,
    completed: AtomicU64,
    rejected: AtomicU64,
    cancelled: AtomicU64,
    active: AtomicU64,
    ended: AtomicU64,
    retrans_sent: AtomicU64,
    retrans_received: AtomicU64,
    stray: AtomicU64,
    tls_failures: AtomicU64,
    slow: Mutex<Slow>,
}

#[derive(Debug)]
struct Slow {
    failures: BTreeMap<FailureReason, u64>,
    received: Received,
    first: Histogram,
    ok: Histogram,
    last_tls_error: Option<String>,
}

fn inc(a: &AtomicU64) {
    a.fetch_add(1, Ordering::Relaxed);
}

impl Stats {
    pub(crate) fn new(role: &'static str) -> Self {
        Self {
            role,
            started: Instant::now(),
            attempted: AtomicU64::new(0),
            answered: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            cancelled: AtomicU64::new(0),
            active: AtomicU64::new(0),
            ended: AtomicU64::new(0),
            retrans_sent: AtomicU64::new(0),
            retrans_received: AtomicU64::new(0),
            stray: AtomicU64::new(0),
            tls_failures: AtomicU64::new(0),
            slow: Mutex::new(Slow {
                failures: BTreeMap::new(),
                received: Received::default(),
                first: Histogram::new(),
                ok: Histogram::new(),
                last_tls_error: None,
            }),
        }
    }

    fn slow(&self) -> std::sync::MutexGuard<'_, Slow> {
        self.slow
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn attempted(&self) {
        inc(&self.attempted);
    }
    pub(crate) fn answered(&self) {
        inc(&self.answered);
    }
    pub(crate) fn established(&self) {
        inc(&self.active);
    }
    pub(crate) fn released(&self) {
        self.active.fetch_sub(1, Ordering::Relaxed);
    }
    pub(crate) fn completed(&self) {
        inc(&self.completed);
        inc(&self.ended);
    }
    pub(crate) fn rejected(&self) {
        inc(&self.rejected);
        inc(&self.ended);
    }
    pub(crate) fn cancelled(&self) {
        inc(&self.cancelled);
        inc(&self.ended);
    }
    pub(crate) fn failed(&self, reason: FailureReason) {
        *self.slow().failures.entry(reason).or_default() += 1;
        inc(&self.failed);
        inc(&self.ended);
    }
    pub(crate) fn retransmitted(&self) {
        inc(&self.retrans_sent);
    }
    pub(crate) fn absorbed(&self) {
        inc(&self.retrans_received);
    }
    pub(crate) fn stray(&self) {
        inc(&self.stray);
    }
    pub(crate) fn tls_failed(&self, why: &str) {
        inc(&self.tls_failures);
        self.slow().last_tls_error = Some(why.to_owned());
    }
    pub(crate) fn received(&self, method: Option<&str>) {
        let mut s = self.slow();
        let r = &mut s.received;
        match method {
            None => r.responses += 1,
            Some("INVITE") => r.invite += 1,
            Some("ACK") => r.ack += 1,
            Some("BYE") => r.bye += 1,
            Some("CANCEL") => r.cancel += 1,
            Some(_) => r.other += 1,
        }
    }
    pub(crate) fn first_response(&self, d: Duration) {
        self.slow().first.record(d);
    }
    pub(crate) fn ok_response(&self, d: Duration) {
        self.slow().ok.record(d);
    }

    /// Calls that reached an end (completed, failed, rejected or cancelled).
    #[must_use]
    pub fn ended(&self) -> u64 {
        self.ended.load(Ordering::Relaxed)
    }

    /// A consistent-enough copy of every counter (each counter is read atomically).
    #[must_use]
    pub fn snapshot(&self) -> Snapshot {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let slow = self.slow();
        let attempted = load(&self.attempted);
        Snapshot {
            role: self.role.to_owned(),
            elapsed_ms: u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX),
            attempted,
            answered: load(&self.answered),
            failed: load(&self.failed),
            completed: load(&self.completed),
            rejected: load(&self.rejected),
            cancelled: load(&self.cancelled),
            active: load(&self.active),
            in_progress: attempted.saturating_sub(load(&self.ended)),
            retransmissions_sent: load(&self.retrans_sent),
            retransmissions_received: load(&self.retrans_received),
            stray_messages: load(&self.stray),
            failures: slow.failures.iter().map(|(k, v)| (k.key(), *v)).collect(),
            received: slow.received.clone(),
            invite_to_first_response: slow.first.summary(),
            invite_to_200: slow.ok.summary(),
            tls_failures: load(&self.tls_failures),
            last_tls_error: slow.last_tls_error.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_round_trip() {
        for us in [
            0u64,
            1,
            63,
            64,
            65,
            127,
            128,
            1000,
            12_345,
            1_000_000,
            987_654_321,
        ] {
            let i = Histogram::index(us);
            let hi = Histogram::value(i);
            assert!(hi >= us, "{us} -> bucket {i} upper {hi}");
            assert!((hi - us) as f64 <= us as f64 / 60.0 + 1.0, "{us} -> {hi}");
        }
    }

    #[test]
    fn percentiles() {
        let mut h = Histogram::new();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        let l = h.summary();
        assert_eq!(l.count, 100);
        assert!((l.p50_ms - 50.0).abs() < 1.0, "{l:?}");
        assert!((l.p99_ms - 99.0).abs() < 2.0, "{l:?}");
        assert!((l.max_ms - 100.0).abs() < 1e-9, "{l:?}");
    }
}
