//! Generated identifiers: tags and Via branches.

/// Prefix of every Via branch the SBC generates (after the RFC 3261 magic cookie).
pub const BRANCH_PREFIX: &str = "z9hG4bKsbc";

pub(super) fn new_tag() -> String {
    format!("{:016x}", rand::random::<u64>())
}

pub(super) fn new_branch() -> String {
    format!("{BRANCH_PREFIX}{:016x}", rand::random::<u64>())
}
