//! The generator's calls signalled through a SIP relay (the SBC) with the traffic generator:
//! a UAC toward the relay's access address and a UAS where the relay routes calls, sharing a
//! [`MediaPlan`], so that each call's INVITE and 200 carry its RTP endpoints' real ports and
//! each endpoint learns from the SDP it received where the relay wants its media.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use sbc_lab::media::{rtp, sip::{SipCalls, SipMediaConfig}};
//!
//! let cfg = SipMediaConfig::new("127.0.0.1:5060".parse().unwrap(), "127.0.0.1:5080".parse().unwrap(), 50);
//! let (sip, calls) = SipCalls::establish(&cfg).await?;
//! let rtp_cfg = rtp::RtpConfig::default();
//! let report = tokio::task::spawn_blocking(move || rtp::run(calls, &rtp_cfg)).await??;
//! let (uac, uas) = sip.hang_up(std::time::Duration::from_secs(40)).await;
//! # let _ = (report, uac, uas); Ok(()) }
//! ```

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::rtp::{CallEndpoints, MediaCall};
use crate::traffic::{
    ByeFrom, MediaPlan, PlanStatus, Snapshot, Transport, Uac, UacConfig, Uas, UasConfig,
};

/// How the calls are placed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SipMediaConfig {
    /// Where the UAC sends its INVITEs: the relay's access address.
    pub target: SocketAddr,
    /// Where the UAS listens: the relay's next hop for the calls.
    pub uas: SocketAddr,
    /// Calls (all held until [`SipCalls::hang_up`]).
    pub calls: usize,
    /// New calls per second.
    pub rate: f64,
    /// The RTP endpoints' address.
    pub media_ip: IpAddr,
    /// SIP transport.
    pub transport: Transport,
    /// How long every call may take to be answered.
    pub setup_timeout: Duration,
    /// The calls' hold time if nobody hangs them up (a bound, not the plan).
    pub max_hold: Duration,
}

impl SipMediaConfig {
    /// `calls` calls toward `target`, answered at `uas`, at 100 calls/s over UDP, media on
    /// 127.0.0.1, 30 s to set them all up, held at most 10 minutes.
    #[must_use]
    pub fn new(target: SocketAddr, uas: SocketAddr, calls: usize) -> Self {
        Self {
            target,
            uas,
            calls,
            rate: 100.0,
            media_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            transport: Transport::Udp,
            setup_timeout: Duration::from_secs(30),
            max_hold: Duration::from_secs(600),
        }
    }
}

/// Established SDP-carrying calls: the UAC and UAS that hold them.
pub struct SipCalls {
    uac: Uac,
    uas: Uas,
    plan: Arc<MediaPlan>,
    setup: Duration,
}

impl SipCalls {
    /// Binds one pair of RTP endpoints per call, starts the UAS and the UAC, and waits until
    /// every call's two endpoints know where to send (or the setup timeout, or every call
    /// has ended); returns the calls that are ready, in order. Compare their number with
    /// `cfg.calls` ([`SipCalls::status`] says what is missing).
    ///
    /// # Errors
    /// An endpoint, the UAS or the UAC cannot be bound.
    pub async fn establish(cfg: &SipMediaConfig) -> io::Result<(Self, Vec<MediaCall>)> {
        let endpoints = CallEndpoints::bind_many(cfg.calls, cfg.media_ip)?;
        let plan = Arc::new(MediaPlan::new(endpoints));
        let mut uas_cfg = UasConfig::new(cfg.uas);
        uas_cfg.transport = cfg.transport;
        uas_cfg.ring = Duration::ZERO;
        uas_cfg.hold = cfg.max_hold;
        uas_cfg.bye_from = ByeFrom::Caller;
        let uas = Uas::start_with_media(uas_cfg, plan.clone()).await?;
        let mut uac_cfg = UacConfig::new(cfg.target);
        uac_cfg.transport = cfg.transport;
        uac_cfg.rate = cfg.rate;
        uac_cfg.calls = Some(cfg.calls as u64);
        uac_cfg.max_concurrent = cfg.calls.max(1);
        uac_cfg.hold = cfg.max_hold;
        uac_cfg.bye_from = ByeFrom::Caller;
        uac_cfg.answer_timeout = cfg.setup_timeout;
        let t0 = Instant::now();
        let uac = Uac::start_with_media(uac_cfg, plan.clone()).await?;
        let deadline = t0 + cfg.setup_timeout;
        while plan.ready() < cfg.calls && Instant::now() < deadline && !uac.is_done() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let calls = plan.take_calls();
        let me = Self {
            uac,
            uas,
            plan,
            setup: t0.elapsed(),
        };
        Ok((me, calls))
    }

    /// How far the calls' SDP exchanges got.
    #[must_use]
    pub fn status(&self) -> PlanStatus {
        self.plan.status()
    }

    /// How long [`SipCalls::establish`] waited.
    #[must_use]
    pub fn setup_time(&self) -> Duration {
        self.setup
    }

    /// The UAC's and the UAS's counters now.
    #[must_use]
    pub fn snapshots(&self) -> (Snapshot, Snapshot) {
        (self.uac.snapshot(), self.uas.snapshot())
    }

    /// Sends every call's BYE and waits (at most `limit`) until the UAC's calls have all
    /// ended and the UAS has seen them end; returns both sides' counters.
    pub async fn hang_up(self, limit: Duration) -> (Snapshot, Snapshot) {
        self.uac.hang_up();
        let end = Instant::now() + limit;
        let uac = tokio::time::timeout_at(end, self.uac.wait())
            .await
            .unwrap_or_else(|_| self.uac.snapshot());
        let answered = uac.answered;
        let uas = tokio::time::timeout_at(end, self.uas.wait_for_calls(answered))
            .await
            .unwrap_or_else(|_| self.uas.snapshot());
        (uac, uas)
    }
}
