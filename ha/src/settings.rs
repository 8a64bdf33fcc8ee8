//! The pair's settings: what the redundancy machine, the heartbeat shell and the sync channel
//! run with, in plain types (durations, not milliseconds; no serde). The operator's
//! `redundancy-config` is modelled, defaulted and validated by `sbc-config`; the `sbc` shell
//! maps it onto [`RedundancySettings`] in one function. [`RedundancySettings::validate`]
//! checks only what the machine relies on (two peers it can tell apart, paths that pair up, a
//! key long enough, thresholds in order), so a library user cannot start it unsound.
//!
//! Both nodes carry the same configuration: it lists both peers, and each node finds itself in
//! it by name (Oracle does the same with the host name). A peer's `destinations` are its own
//! heartbeat addresses, one per heartbeat path, so path `i` runs from `local.destinations[i]` to
//! `peer.destinations[i]`.

use std::net::SocketAddr;
use std::time::Duration;

/// Whether redundancy is on (`state enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdminState {
    /// The node takes part in a pair.
    #[default]
    Enabled,
    /// The node runs stand-alone (no heartbeat).
    Disabled,
}

/// The `type` of a peer: which one the operator thinks of as the primary.
///
/// It is informational (as in Oracle's ACLI): the election uses health, then address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerType {
    /// The primary node.
    Primary,
    /// The secondary node.
    Secondary,
}

/// One `peers` entry of `redundancy-config`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerSettings {
    /// The node's name (its host name, or any unique name); a node finds itself by it.
    pub name: String,
    /// Primary or secondary.
    pub peer_type: PeerType,
    /// The node's heartbeat address on each path, in path order (at least one).
    pub destinations: Vec<SocketAddr>,
}

/// The pair's parameters, named after `redundancy-config`'s (Oracle's) keys.
/// [`Default`] gives the shipped defaults with no peers and no key, for tests and simulations:
/// Oracle's, except the three timers of failure detection, which are shorter (advertisement-time
/// 200 ms instead of 500, percent-drift 300 instead of 210, becoming-active-time 50 ms instead
/// of 100) so that a pair serves again within half a second of its active's death; see
/// `sbc-config`'s `RedundancyConfig` for why each is safe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedundancySettings {
    /// `state`: enabled or disabled.
    pub state: AdminState,
    /// `port`: the default heartbeat port (9090), used by destinations written without one.
    pub port: u16,
    /// `advertisement-time` (200 ms; Oracle: 500): the heartbeat interval on every path.
    pub advertisement_time: Duration,
    /// `percent-drift` (300; Oracle: 210): the peer is dead after advertisement-time ×
    /// percent-drift / 100 without a valid heartbeat (600 ms at the defaults).
    pub percent_drift: u32,
    /// `initial-time` (1250 ms): how long a booting node listens before its election.
    pub initial_time: Duration,
    /// `becoming-active-time` (50 ms; Oracle: 100): the pause between deciding to take over and
    /// taking.
    pub becoming_active_time: Duration,
    /// `becoming-standby-time` (180 s): time to finish the initial state sync, after which the
    /// node goes out-of-service.
    pub becoming_standby_time: Duration,
    /// `health-threshold` (75): the active switches over below it if the standby is at or above.
    pub health_threshold: u8,
    /// `emergency-threshold` (50): below it an active hands over even to a starting standby at
    /// or above it, and keeps the role if the standby is below it too.
    pub emergency_threshold: u8,
    /// `peers`: exactly two, both nodes of the pair.
    pub peers: Vec<PeerSettings>,
    /// `cfg-port` (1987): the TCP port of configuration sync.
    pub config_sync_port: u16,
    /// `sip-port` (1988): the TCP port of dialog (SIP) state sync.
    pub sip_sync_port: u16,
    /// Optional witness (`sbc witness`, run with the same shared key): a node may serve only
    /// while it holds the witness's active lease, which it grants to one node at a time.
    pub witness: Option<SocketAddr>,
    /// The pair's secret: every key of its channels is derived from it ([`crate::crypto`]); at
    /// least 16 bytes. It never travels.
    pub shared_key: String,
}

impl Default for RedundancySettings {
    fn default() -> Self {
        Self {
            state: AdminState::Enabled,
            port: 9090,
            advertisement_time: Duration::from_millis(200),
            percent_drift: 300,
            initial_time: Duration::from_millis(1250),
            becoming_active_time: Duration::from_millis(50),
            becoming_standby_time: Duration::from_secs(180),
            health_threshold: 75,
            emergency_threshold: 50,
            peers: Vec::new(),
            config_sync_port: 1987,
            sip_sync_port: 1988,
            witness: None,
            shared_key: String::new(),
        }
    }
}

/// Settings the pair cannot run with, naming the `redundancy-config` key, the value and what
/// is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    /// A number outside its range.
    #[error("redundancy-config.{key} = {value}: out of range (valid: {valid})")]
    OutOfRange {
        /// The kebab-case key.
        key: &'static str,
        /// The value given.
        value: u64,
        /// The valid range.
        valid: &'static str,
    },
    /// `peers` does not hold exactly two nodes.
    #[error("redundancy-config.peers: {0} peers given (valid: exactly 2, this node and its mate)")]
    PeerCount(usize),
    /// Two peers share a name.
    #[error("redundancy-config.peers: the name {0:?} is used twice")]
    DuplicateName(String),
    /// Both peers are primary, or both secondary.
    #[error(
        "redundancy-config.peers: both peers have type {0:?} (valid: one primary, one secondary)"
    )]
    SameType(PeerType),
    /// A peer without destinations, or peers with different numbers of them.
    #[error("redundancy-config.peers.{name}.destinations: {count} given (valid: 1..=8, and the same number on both peers)")]
    Destinations {
        /// The peer's name.
        name: String,
        /// How many destinations it has.
        count: usize,
    },
    /// The same heartbeat address appears twice.
    #[error("redundancy-config.peers: destination {0} is used twice")]
    DuplicateDestination(SocketAddr),
    /// A heartbeat path whose two ends are of different families.
    #[error("redundancy-config.peers: heartbeat path {path} runs from {first} to {second} (valid: both ends IPv4 or both IPv6)")]
    PathFamily {
        /// The path's index (the destinations' position).
        path: usize,
        /// The first peer's destination on that path.
        first: SocketAddr,
        /// The second peer's destination on that path.
        second: SocketAddr,
    },
    /// The local node's name is not among the peers.
    #[error("redundancy-config.peers: no peer is named {0:?} (this node's name)")]
    UnknownLocal(String),
    /// The shared key is too short.
    #[error("redundancy-config.shared-key: {0} bytes (valid: at least 16)")]
    ShortKey(usize),
    /// The thresholds are in the wrong order.
    #[error("redundancy-config.emergency-threshold = {emergency}: must not exceed health-threshold = {health}")]
    ThresholdOrder {
        /// The emergency threshold.
        emergency: u8,
        /// The health threshold.
        health: u8,
    },
}

impl RedundancySettings {
    /// The time without a valid heartbeat on any path after which the peer is dead:
    /// advertisement-time × percent-drift / 100 (600 ms at the defaults; Oracle's: 1.05 s).
    #[must_use]
    pub fn dead_time(&self) -> Duration {
        self.advertisement_time * self.percent_drift / 100
    }

    /// How long after its last valid heartbeat a peer whose state-sync connection broke is
    /// declared dead: advertisement-time × 3/2 (one interval plus half of one for jitter), at
    /// most the dead time (300 ms at the defaults).
    #[must_use]
    pub fn link_lost_grace(&self) -> Duration {
        (self.advertisement_time * 3 / 2).min(self.dead_time())
    }

    /// The peer entry named `name`.
    #[must_use]
    pub fn peer(&self, name: &str) -> Option<&PeerSettings> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// The peer entry that is not `local`.
    #[must_use]
    pub fn mate(&self, local: &str) -> Option<&PeerSettings> {
        self.peers.iter().find(|p| p.name != local)
    }

    /// Validates the configuration for `local` and returns its own entry and its mate's.
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn validated_pair(
        &self,
        local: &str,
    ) -> Result<(&PeerSettings, &PeerSettings), SettingsError> {
        self.validate(local)?;
        let me = self
            .peer(local)
            .ok_or_else(|| SettingsError::UnknownLocal(local.to_owned()))?;
        let mate = self.mate(local).ok_or(SettingsError::PeerCount(1))?;
        Ok((me, mate))
    }

    /// Checks what the machine relies on (the ranges an operator may choose are
    /// `sbc-config`'s to check); `local` is this node's name.
    ///
    /// # Errors
    /// The first problem found, as a [`SettingsError`] naming the key.
    pub fn validate(&self, local: &str) -> Result<(), SettingsError> {
        if self.advertisement_time.is_zero() {
            return Err(SettingsError::OutOfRange {
                key: "advertisement-time",
                value: 0,
                valid: "more than 0 ms",
            });
        }
        if self.percent_drift < 100 {
            return Err(SettingsError::OutOfRange {
                key: "percent-drift",
                value: u64::from(self.percent_drift),
                valid: "100 or more: the peer is dead after more than one interval",
            });
        }
        if self.health_threshold > 100 || self.emergency_threshold > 100 {
            return Err(SettingsError::OutOfRange {
                key: "health-threshold",
                value: u64::from(self.health_threshold.max(self.emergency_threshold)),
                valid: "0..=100",
            });
        }
        if self.emergency_threshold > self.health_threshold {
            return Err(SettingsError::ThresholdOrder {
                emergency: self.emergency_threshold,
                health: self.health_threshold,
            });
        }
        if self.shared_key.len() < crate::crypto::MIN_SHARED_KEY_LEN {
            return Err(SettingsError::ShortKey(self.shared_key.len()));
        }
        if self.peers.len() != 2 {
            return Err(SettingsError::PeerCount(self.peers.len()));
        }
        let (a, b) = (&self.peers[0], &self.peers[1]);
        if a.name == b.name {
            return Err(SettingsError::DuplicateName(a.name.clone()));
        }
        if a.peer_type == b.peer_type {
            return Err(SettingsError::SameType(a.peer_type));
        }
        for p in &self.peers {
            let n = p.destinations.len();
            if !(1..=8).contains(&n) || n != a.destinations.len().max(b.destinations.len()) {
                return Err(SettingsError::Destinations {
                    name: p.name.clone(),
                    count: n,
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for d in a.destinations.iter().chain(&b.destinations) {
            if !seen.insert(crate::addr::canonical(*d)) {
                return Err(SettingsError::DuplicateDestination(*d));
            }
        }
        for (path, (first, second)) in a.destinations.iter().zip(&b.destinations).enumerate() {
            if !crate::addr::same_family(first.ip(), second.ip()) {
                return Err(SettingsError::PathFamily {
                    path,
                    first: *first,
                    second: *second,
                });
            }
        }
        if self.peer(local).is_none() {
            return Err(SettingsError::UnknownLocal(local.to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> RedundancySettings {
        let a = |s: &str| -> SocketAddr { s.parse().expect("addr") };
        RedundancySettings {
            peers: vec![
                PeerSettings {
                    name: "sbc1".into(),
                    peer_type: PeerType::Primary,
                    destinations: vec![a("10.0.0.1:9090")],
                },
                PeerSettings {
                    name: "sbc2".into(),
                    peer_type: PeerType::Secondary,
                    destinations: vec![a("10.0.0.2:9090")],
                },
            ],
            shared_key: "a-shared-key-of-enough-length".into(),
            ..RedundancySettings::default()
        }
    }

    #[test]
    fn defaults_are_oracles_but_the_detection_timers() {
        let c = RedundancySettings::default();
        assert_eq!(
            (
                c.port,
                c.advertisement_time,
                c.percent_drift,
                c.initial_time
            ),
            (
                9090,
                Duration::from_millis(200),
                300,
                Duration::from_millis(1250)
            )
        );
        assert_eq!(
            (
                c.becoming_active_time,
                c.health_threshold,
                c.emergency_threshold
            ),
            (Duration::from_millis(50), 75, 50)
        );
        assert_eq!((c.config_sync_port, c.sip_sync_port), (1987, 1988));
        assert_eq!(c.dead_time(), Duration::from_millis(600));
        assert_eq!(c.link_lost_grace(), Duration::from_millis(300));
        assert!(pair().validate("sbc1").is_ok());
    }

    #[test]
    fn errors_name_the_key() {
        let mut c = pair();
        c.advertisement_time = Duration::ZERO;
        assert_eq!(
            c.validate("sbc1").map_err(|e| e.to_string()),
            Err(
                "redundancy-config.advertisement-time = 0: out of range (valid: more than 0 ms)"
                    .into()
            )
        );
        let mut c = pair();
        c.emergency_threshold = 80;
        assert!(matches!(
            c.validate("sbc1"),
            Err(SettingsError::ThresholdOrder { .. })
        ));
        assert_eq!(
            pair().validate("sbc3"),
            Err(SettingsError::UnknownLocal("sbc3".into()))
        );
        let mut c = pair();
        c.shared_key = "short".into();
        assert_eq!(c.validate("sbc1"), Err(SettingsError::ShortKey(5)));
        let mut c = pair();
        c.peers[1].peer_type = PeerType::Primary;
        assert!(matches!(
            c.validate("sbc1"),
            Err(SettingsError::SameType(_))
        ));
        let mut c = pair();
        c.peers[1]
            .destinations
            .push("10.1.0.2:9090".parse().expect("addr"));
        assert!(matches!(
            c.validate("sbc1"),
            Err(SettingsError::Destinations { .. })
        ));
        let mut c = pair();
        c.peers.pop();
        assert_eq!(c.validate("sbc1"), Err(SettingsError::PeerCount(1)));
    }

    #[test]
    fn paths_of_either_family_with_both_ends_of_one() {
        let a = |s: &str| -> SocketAddr { s.parse().expect("addr") };
        let mut c = pair();
        c.peers[0].destinations = vec![a("[fd00::1]:9090"), a("10.0.0.1:9091")];
        c.peers[1].destinations = vec![a("[fd00::2]:9090"), a("[::ffff:10.0.0.2]:9091")];
        assert_eq!(
            c.validate("sbc1"),
            Ok(()),
            "IPv6, then IPv4 (one end mapped)"
        );
        c.peers[1].destinations = vec![a("10.0.0.2:9090"), a("10.0.0.2:9091")];
        assert_eq!(
            c.validate("sbc1"),
            Err(SettingsError::PathFamily {
                path: 0,
                first: a("[fd00::1]:9090"),
                second: a("10.0.0.2:9090"),
            })
        );
        assert!(SettingsError::PathFamily {
            path: 0,
            first: a("[fd00::1]:9090"),
            second: a("10.0.0.2:9090"),
        }
        .to_string()
        .contains("runs from [fd00::1]:9090 to 10.0.0.2:9090"));
        // One address in two spellings is one address.
        let mut c = pair();
        c.peers[1].destinations = vec![a("[::ffff:10.0.0.1]:9090")];
        assert_eq!(
            c.validate("sbc1"),
            Err(SettingsError::DuplicateDestination(a(
                "[::ffff:10.0.0.1]:9090"
            )))
        );
    }
}
