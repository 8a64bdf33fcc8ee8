//! `SBC-PAIR-MIB`'s shared definitions: the module's arc, the redundancy enumerations that both
//! the agent's status objects and the traps carry, and the largest SNMP message we take. The
//! agent ([`crate::agent`]) and the traps ([`crate::trap`]) both read them from here, so
//! neither imports the other.

use serde::{Deserialize, Serialize};

/// The module's arc: `1.3.6.1.3.3261` (experimental; no PEN yet).
pub const ENTERPRISE_ARC: [u32; 6] = [1, 3, 6, 1, 3, 3261];

/// Requests longer than this are dropped unread (and our `msgMaxSize`).
pub const MAX_REQUEST: usize = 4096;

/// Whole KiB (rounded up), saturating at `u32::MAX`: how the MIB carries the accounting
/// spool's sizes (a `Gauge32` counts 4 TiB in KiB, in bytes only 4 GiB).
#[must_use]
pub fn kibibytes(bytes: u64) -> u32 {
    u32::try_from(bytes.div_ceil(1024)).unwrap_or(u32::MAX)
}

/// An enumeration of the MIB: value and name.
pub(crate) type EnumNames = &'static [(i64, &'static str)];

/// The role a node has taken (`sbcRedundancyRole`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RedundancyRole {
    /// Serving traffic.
    Active,
    /// Ready to take over.
    Standby,
    /// Not eligible.
    OutOfService,
}

impl RedundancyRole {
    pub(crate) const NAMES: EnumNames = &[(1, "active"), (2, "standby"), (3, "outOfService")];
    /// The MIB's code.
    #[must_use]
    pub const fn code(self) -> i64 {
        match self {
            Self::Active => 1,
            Self::Standby => 2,
            Self::OutOfService => 3,
        }
    }
}

/// A state of the redundancy machine, with Oracle's names (`sbcRedundancyState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TransitionState {
    /// Booting, learning the peer.
    Initial,
    /// Taking over.
    BecomingActive,
    /// Active.
    Active,
    /// Syncing state from the active.
    BecomingStandby,
    /// Standby.
    Standby,
    /// Handing over to the peer.
    RelinquishingActive,
    /// Out of service.
    OutOfService,
}

impl TransitionState {
    pub(crate) const NAMES: EnumNames = &[
        (1, "initial"),
        (2, "becomingActive"),
        (3, "active"),
        (4, "becomingStandby"),
        (5, "standby"),
        (6, "relinquishingActive"),
        (7, "outOfService"),
    ];
    /// The MIB's code.
    #[must_use]
    pub const fn code(self) -> i64 {
        match self {
            Self::Initial => 1,
            Self::BecomingActive => 2,
            Self::Active => 3,
            Self::BecomingStandby => 4,
            Self::Standby => 5,
            Self::RelinquishingActive => 6,
            Self::OutOfService => 7,
        }
    }
}
