//! What the SIP runtime is started with and what an activation changes live: typed settings,
//! built from the configuration by [`crate::settings`] alone.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use sbc_proto::access::AccessSettings;
use sbc_proto::engine::EngineConfig;
use sbc_proto::media::MediaSettings;
use sbc_proto::overload::autoscale::ScalingProfile;

use super::media::PoolBinding;
use super::tcp::EdgeSettings;
use super::tls::TlsSettings;
use crate::workers::WorkSettings;

/// Everything [`super::start`] needs.
#[derive(Debug, Clone)]
pub struct RuntimeSettings {
    /// Accounting (`account-config`), when on: started with the node (a change waits for a
    /// restart).
    pub accounting: Option<crate::accounting::AccountingSettings>,
    /// The engines' configuration (media anchoring is attached by the runtime).
    pub engine: EngineConfig,
    /// Media anchoring, when the media manager is on and realms have steering pools.
    pub media: Option<MediaPlan>,
    /// The SIP interfaces, in the engine's order.
    pub listeners: Vec<Listener>,
    /// The worker groups' queueing settings.
    pub work: WorkSettings,
    /// The autoscalers' cycle.
    pub autoscale_cycle: Duration,
    /// Workers of each UDP interface's group at start (or fixed).
    pub udp_workers: usize,
    /// Each interface's autoscaling profile (by listener index).
    pub udp_profiles: Vec<Option<ScalingProfile>>,
    /// Workers of the TCP group at start (or fixed).
    pub tcp_workers: usize,
    /// The TCP group's autoscaling profile.
    pub tcp_profile: Option<ScalingProfile>,
    /// What an activation changes live.
    pub live: LiveSettings,
    /// The TLS profiles and who uses which.
    pub tls: TlsSettings,
    /// How long a shutdown lets transactions finish.
    pub shutdown_grace: Duration,
    /// Largest SIP message read.
    pub max_message_size: usize,
    /// The Retry-After range of the 503s the runtime sends.
    pub retry_after: (u32, u32),
    /// The registration cache's settings: the node's and each interface's
    /// ([`crate::settings::registration_settings`]).
    pub registration: (
        sbc_proto::registration::cache::CacheSettings,
        Vec<sbc_proto::registration::cache::CacheSettings>,
    ),
}

/// One SIP interface as the runtime binds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    /// Its realm, with ` ipv6` for the IPv6 interface of a realm (the configuration's key).
    pub realm: String,
    /// The UDP and TCP address.
    pub address: SocketAddr,
    /// Listens on UDP.
    pub udp: bool,
    /// Listens on TCP.
    pub tcp: bool,
    /// The TLS address, when it listens on TLS.
    pub tls: Option<SocketAddr>,
    /// Its transports as configured (`udp+tcp`), for the ready line.
    pub transports: String,
}

impl Listener {
    /// `realm udp+tcp addr (tls addr)`, for the ready line and logs.
    #[must_use]
    pub fn describe(&self) -> String {
        let tls = self.tls.map_or(String::new(), |a| format!(" (tls {a})"));
        format!("{} {} {}{tls}", self.realm, self.transports, self.address)
    }

    /// The interface's IP (the source of connections dialled from it).
    #[must_use]
    pub fn ip(&self) -> IpAddr {
        self.address.ip()
    }
}

/// What `activate-config` changes at the edge without a restart.
#[derive(Debug, Clone)]
pub struct LiveSettings {
    /// TCP and TLS limits and the addresses exempt from the per-source cap.
    pub edge: EdgeSettings,
    /// Per-source rate limits and the access-control lists.
    pub access: AccessSettings,
    /// The media manager's timing.
    pub media_timing: MediaTiming,
    /// The SIP trace: the monitor's filters and ring, HEP capture.
    pub trace: crate::trace::TraceSettings,
}

/// The media manager's timing, which `activate-config` changes live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaTiming {
    /// How long after a stream starts, or a new SDP, it may latch (zero: no latching).
    pub latch_window: Duration,
    /// Latching held to the IP the leg's SDP signalled (`restricted-latching = sdp`).
    pub latch_signalled_ip_only: bool,
    /// `rtp-inactivity`: no RTP this long ends the call (`None`: off).
    pub inactivity: Option<Duration>,
}

/// Media anchoring as the node runs it: the media table's settings, the pools the relay binds,
/// and each interface's pool and media address.
#[derive(Debug, Clone)]
pub struct MediaPlan {
    /// The media table's settings (a pool per `steering-pool`, by index).
    pub table: MediaSettings,
    /// What the relay binds, by pool index.
    pub bindings: Vec<PoolBinding>,
    /// For each `sip-interface` (by index): its realm's pool and media address.
    pub realms: Vec<Option<(usize, IpAddr)>>,
}
