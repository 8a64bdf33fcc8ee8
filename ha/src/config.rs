//! `redundancy-config`: the parameters of the pair, with Oracle's names and defaults.
//!
//! Both nodes carry the same configuration: it lists both peers, and each node finds itself in
//! it by name (Oracle does the same with the host name). A peer's `destinations` are its own
//! heartbeat addresses, one per heartbeat path, so path `i` runs from `local.destinations[i]` to
//! `peer.destinations[i]`.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Whether redundancy is on (`state enabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PeerType {
    /// The primary node.
    Primary,
    /// The secondary node.
    Secondary,
}

/// One `peers` entry of `redundancy-config`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct PeerConfig {
    /// The node's name (its host name, or any unique name); a node finds itself by it.
    pub name: String,
    /// Primary or secondary.
    #[serde(rename = "type")]
    pub peer_type: PeerType,
    /// The node's heartbeat address on each path, in path order (at least one).
    pub destinations: Vec<SocketAddr>,
}

/// `redundancy-config`: every field has Oracle's name (kebab-case in TOML) and default.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", default)]
pub struct RedundancyConfig {
    /// `state`: enabled or disabled.
    pub state: AdminState,
    /// `port`: the default heartbeat port (9090), used by destinations written without one.
    pub port: u16,
    /// `advertisement-time` in ms (500): the heartbeat interval on every path.
    pub advertisement_time_ms: u64,
    /// `percent-drift` (210): the peer is dead after advertisement-time × percent-drift / 100.
    pub percent_drift: u32,
    /// `initial-time` in ms (1250): how long a booting node listens before its election.
    pub initial_time_ms: u64,
    /// `becoming-active-time` in ms (100): the pause between deciding to take over and taking.
    pub becoming_active_time_ms: u64,
    /// `becoming-standby-time` in ms (180000): time to finish the initial state sync, after
    /// which the node goes out-of-service.
    pub becoming_standby_time_ms: u64,
    /// `health-threshold` (75): the active switches over below it if the standby is at or above.
    pub health_threshold: u8,
    /// `emergency-threshold` (50): below it an active hands over even to a starting standby at
    /// or above it, and keeps the role if the standby is below it too.
    pub emergency_threshold: u8,
    /// `peers`: exactly two, both nodes of the pair.
    pub peers: Vec<PeerConfig>,
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

impl Default for RedundancyConfig {
    fn default() -> Self {
        Self {
            state: AdminState::Enabled,
            port: 9090,
            advertisement_time_ms: 500,
            percent_drift: 210,
            initial_time_ms: 1250,
            becoming_active_time_ms: 100,
            becoming_standby_time_ms: 180_000,
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

/// A `redundancy-config` that cannot be used, naming the key, the value and what is valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
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

impl RedundancyConfig {
    /// `advertisement-time` as a duration.
    #[must_use]
    pub fn advertisement_time(&self) -> Duration {
        Duration::from_millis(self.advertisement_time_ms)
    }

    /// The time without a valid heartbeat on any path after which the peer is dead:
    /// advertisement-time × percent-drift / 100 (1.05 s at the defaults).
    #[must_use]
    pub fn dead_time(&self) -> Duration {
        Duration::from_millis(self.advertisement_time_ms * u64::from(self.percent_drift) / 100)
    }

    /// `initial-time` as a duration.
    #[must_use]
    pub fn initial_time(&self) -> Duration {
        Duration::from_millis(self.initial_time_ms)
    }

    /// `becoming-active-time` as a duration.
    #[must_use]
    pub fn becoming_active_time(&self) -> Duration {
        Duration::from_millis(self.becoming_active_time_ms)
    }

    /// `becoming-standby-time` as a duration.
    #[must_use]
    pub fn becoming_standby_time(&self) -> Duration {
        Duration::from_millis(self.becoming_standby_time_ms)
    }

    /// The peer entry named `name`.
    #[must_use]
    pub fn peer(&self, name: &str) -> Option<&PeerConfig> {
        self.peers.iter().find(|p| p.name == name)
    }

    /// The peer entry that is not `local`.
    #[must_use]
    pub fn mate(&self, local: &str) -> Option<&PeerConfig> {
        self.peers.iter().find(|p| p.name != local)
    }

    /// Validates the configuration for `local` and returns its own entry and its mate's.
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn validated_pair(&self, local: &str) -> Result<(&PeerConfig, &PeerConfig), ConfigError> {
        self.validate(local)?;
        let me = self
            .peer(local)
            .ok_or_else(|| ConfigError::UnknownLocal(local.to_owned()))?;
        let mate = self.mate(local).ok_or(ConfigError::PeerCount(1))?;
        Ok((me, mate))
    }

    /// Checks ranges and the peer list; `local` is this node's name.
    ///
    /// # Errors
    /// The first problem found, as a [`ConfigError`] naming the key.
    pub fn validate(&self, local: &str) -> Result<(), ConfigError> {
        fn range(
            key: &'static str,
            value: u64,
            lo: u64,
            hi: u64,
            valid: &'static str,
        ) -> Result<(), ConfigError> {
            if (lo..=hi).contains(&value) {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { key, value, valid })
            }
        }
        range("port", u64::from(self.port), 1, 65535, "1..=65535")?;
        range(
            "advertisement-time",
            self.advertisement_time_ms,
            50,
            999_999,
            "50..=999999 ms",
        )?;
        range(
            "percent-drift",
            u64::from(self.percent_drift),
            100,
            65535,
            "100..=65535",
        )?;
        range(
            "initial-time",
            self.initial_time_ms,
            5,
            999_999,
            "5..=999999 ms",
        )?;
        range(
            "becoming-active-time",
            self.becoming_active_time_ms,
            5,
            999_999,
            "5..=999999 ms",
        )?;
        range(
            "becoming-standby-time",
            self.becoming_standby_time_ms,
            5,
            9_999_999,
            "5..=9999999 ms",
        )?;
        range(
            "health-threshold",
            u64::from(self.health_threshold),
            1,
            100,
            "1..=100",
        )?;
        range(
            "emergency-threshold",
            u64::from(self.emergency_threshold),
            0,
            100,
            "0..=100",
        )?;
        range(
            "cfg-port",
            u64::from(self.config_sync_port),
            1,
            65535,
            "1..=65535",
        )?;
        range(
            "sip-port",
            u64::from(self.sip_sync_port),
            1,
            65535,
            "1..=65535",
        )?;
        if self.emergency_threshold > self.health_threshold {
            return Err(ConfigError::ThresholdOrder {
                emergency: self.emergency_threshold,
                health: self.health_threshold,
            });
        }
        if self.shared_key.len() < crate::crypto::MIN_SHARED_KEY_LEN {
            return Err(ConfigError::ShortKey(self.shared_key.len()));
        }
        if self.peers.len() != 2 {
            return Err(ConfigError::PeerCount(self.peers.len()));
        }
        let (a, b) = (&self.peers[0], &self.peers[1]);
        if a.name == b.name {
            return Err(ConfigError::DuplicateName(a.name.clone()));
        }
        if a.peer_type == b.peer_type {
            return Err(ConfigError::SameType(a.peer_type));
        }
        for p in &self.peers {
            let n = p.destinations.len();
            if !(1..=8).contains(&n) || n != a.destinations.len().max(b.destinations.len()) {
                return Err(ConfigError::Destinations {
                    name: p.name.clone(),
                    count: n,
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for d in a.destinations.iter().chain(&b.destinations) {
            if !seen.insert(*d) {
                return Err(ConfigError::DuplicateDestination(*d));
            }
        }
        if self.peer(local).is_none() {
            return Err(ConfigError::UnknownLocal(local.to_owned()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> RedundancyConfig {
        let a = |s: &str| -> SocketAddr { s.parse().expect("addr") };
        RedundancyConfig {
            peers: vec![
                PeerConfig {
                    name: "sbc1".into(),
                    peer_type: PeerType::Primary,
                    destinations: vec![a("10.0.0.1:9090")],
                },
                PeerConfig {
                    name: "sbc2".into(),
                    peer_type: PeerType::Secondary,
                    destinations: vec![a("10.0.0.2:9090")],
                },
            ],
            shared_key: "a-shared-key-of-enough-length".into(),
            ..RedundancyConfig::default()
        }
    }

    #[test]
    fn defaults_are_oracles() {
        let c = RedundancyConfig::default();
        assert_eq!(
            (
                c.port,
                c.advertisement_time_ms,
                c.percent_drift,
                c.initial_time_ms
            ),
            (9090, 500, 210, 1250)
        );
        assert_eq!(
            (
                c.becoming_active_time_ms,
                c.health_threshold,
                c.emergency_threshold
            ),
            (100, 75, 50)
        );
        assert_eq!((c.config_sync_port, c.sip_sync_port), (1987, 1988));
        assert_eq!(c.dead_time(), Duration::from_millis(1050));
        assert!(pair().validate("sbc1").is_ok());
    }

    #[test]
    fn errors_name_the_key() {
        let mut c = pair();
        c.advertisement_time_ms = 0;
        assert_eq!(
            c.validate("sbc1").map_err(|e| e.to_string()),
            Err(
                "redundancy-config.advertisement-time = 0: out of range (valid: 50..=999999 ms)"
                    .into()
            )
        );
        let mut c = pair();
        c.emergency_threshold = 80;
        assert!(matches!(
            c.validate("sbc1"),
            Err(ConfigError::ThresholdOrder { .. })
        ));
        assert_eq!(
            pair().validate("sbc3"),
            Err(ConfigError::UnknownLocal("sbc3".into()))
        );
        let mut c = pair();
        c.shared_key = "short".into();
        assert_eq!(c.validate("sbc1"), Err(ConfigError::ShortKey(5)));
        let mut c = pair();
        c.peers[1].peer_type = PeerType::Primary;
        assert!(matches!(c.validate("sbc1"), Err(ConfigError::SameType(_))));
        let mut c = pair();
        c.peers[1]
            .destinations
            .push("10.1.0.2:9090".parse().expect("addr"));
        assert!(matches!(
            c.validate("sbc1"),
            Err(ConfigError::Destinations { .. })
        ));
        let mut c = pair();
        c.peers.pop();
        assert_eq!(c.validate("sbc1"), Err(ConfigError::PeerCount(1)));
    }
}
