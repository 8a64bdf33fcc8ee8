//! The generator's calls anchored on rtpengine, signalled over NG as a SIP proxy would: per
//! call, A's SDP offer → `offer` → the SDP for B (rtpengine's port for B's leg), B's SDP
//! answer → `answer` → the SDP for A (its port for A's leg); the ports are read from those
//! SDPs ([`super::sdp::parse`]).

use std::fmt;

use super::ng::{NgClient, NgError, NgOptions};
use super::rtp::{CallEndpoints, MediaCall};
use super::sdp::{self, SdpError};

/// The NG identifiers of one call (for `delete`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NgCall {
    /// `call-id`.
    pub call_id: String,
    /// `from-tag`: the caller's.
    pub from_tag: String,
    /// `to-tag`: the callee's.
    pub to_tag: String,
}

/// Why a call could not be anchored.
#[derive(Debug)]
pub enum SetupError {
    /// The NG exchange failed.
    Ng {
        /// The call's index.
        call: usize,
        /// What failed.
        error: NgError,
    },
    /// rtpengine's SDP does not say where to send.
    Sdp {
        /// The call's index.
        call: usize,
        /// What was wrong.
        error: SdpError,
    },
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ng { call, error } => write!(f, "call {call}: {error}"),
            Self::Sdp { call, error } => write!(f, "call {call}: rtpengine's SDP: {error}"),
        }
    }
}

impl std::error::Error for SetupError {}

/// Calls anchored on rtpengine: their NG identifiers and the generator's calls, in the same
/// order.
#[derive(Debug)]
pub struct Anchored {
    /// For [`release`].
    pub ids: Vec<NgCall>,
    /// For [`super::rtp::run`].
    pub calls: Vec<MediaCall>,
}

/// Offers and answers every call in turn (ids `{prefix}-{i}`, tags `{prefix}-{i}-a` and
/// `-b`) with `options` (e.g. [`NgOptions::anchoring`]).
///
/// # Errors
/// The first call that fails; the calls anchored before it are deleted first (best effort).
pub fn anchor(
    ng: &mut NgClient,
    endpoints: Vec<CallEndpoints>,
    prefix: &str,
    options: &NgOptions,
) -> Result<Anchored, SetupError> {
    let mut out = Anchored {
        ids: Vec::with_capacity(endpoints.len()),
        calls: Vec::with_capacity(endpoints.len()),
    };
    for (i, e) in endpoints.into_iter().enumerate() {
        let id = NgCall {
            call_id: format!("{prefix}-{i}"),
            from_tag: format!("{prefix}-{i}-a"),
            to_tag: format!("{prefix}-{i}-b"),
        };
        match anchor_one(ng, i, e, &id, options) {
            Ok(call) => {
                out.ids.push(id);
                out.calls.push(call);
            }
            Err(err) => {
                out.ids.push(id);
                let _ = release(ng, &out.ids);
                return Err(err);
            }
        }
    }
    Ok(out)
}

fn anchor_one(
    ng: &mut NgClient,
    i: usize,
    e: CallEndpoints,
    id: &NgCall,
    options: &NgOptions,
) -> Result<MediaCall, SetupError> {
    let ng_err = |error| SetupError::Ng { call: i, error };
    let sdp_err = |error| SetupError::Sdp { call: i, error };
    let offer = sdp::endpoint_sdp(e.a_addr(), 2 * i as u64 + 1, None);
    let to_b = ng
        .offer(&id.call_id, &id.from_tag, &offer, options)
        .map_err(ng_err)?;
    let b_relay = sdp::parse(to_b.as_bytes()).map_err(sdp_err)?.rtp;
    let answer = sdp::endpoint_sdp(e.b_addr(), 2 * i as u64 + 2, None);
    let to_a = ng
        .answer(&id.call_id, &id.from_tag, &id.to_tag, &answer, options)
        .map_err(ng_err)?;
    let a_relay = sdp::parse(to_a.as_bytes()).map_err(sdp_err)?.rtp;
    Ok(MediaCall {
        endpoints: e,
        a_relay,
        b_relay,
    })
}

/// `delete` for every call; returns how many rtpengine knew (a reply without `warning`).
///
/// # Errors
/// The first NG exchange that fails.
pub fn release(ng: &mut NgClient, ids: &[NgCall]) -> Result<usize, NgError> {
    let mut known = 0;
    for id in ids {
        if ng.delete(&id.call_id, &id.from_tag)?.warning.is_none() {
            known += 1;
        }
    }
    Ok(known)
}
