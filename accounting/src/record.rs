//! The call detail record: one per call attempt and per established call, with a Start, any
//! Interim-Updates and a Stop sharing one Acct-Session-Id.

use serde::{Deserialize, Serialize};

/// Which record of a call's session this is (RFC 2866 Acct-Status-Type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RecordKind {
    /// The call was answered (or, with `generate-start invite`, its INVITE arrived).
    Start,
    /// The call goes on: a re-INVITE was answered, or an `intermediate-period` passed.
    Interim,
    /// The call ended, or the attempt failed.
    Stop,
}

impl RecordKind {
    /// RFC 2866 Acct-Status-Type: Start 1, Stop 2, Interim-Update 3.
    #[must_use]
    pub fn status_type(self) -> u32 {
        match self {
            Self::Start => 1,
            Self::Stop => 2,
            Self::Interim => 3,
        }
    }

    /// The word the CSV file and the console use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Start => "start",
            Self::Interim => "interim",
            Self::Stop => "stop",
        }
    }
}

/// Who or what ended a call (or an attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EndedBy {
    /// Not ended (a Start or an Interim-Update).
    NotEnded,
    /// The caller: its BYE, or its CANCEL of an attempt.
    Caller,
    /// The callee: its BYE, or its final refusal of an attempt.
    Callee,
    /// The SBC refused or gave up on the attempt itself (no route, no answer, 503, ...).
    Sbc,
    /// A session timer expired without a refresh (RFC 4028), or a refresh failed.
    SessionTimer,
    /// No media for `rtp-inactivity`.
    MediaInactivity,
    /// The realm's `session-max-life-limit`.
    MaxDuration,
    /// A transfer the SBC performed took this party out of the call.
    Transfer,
}

impl EndedBy {
    /// The word the CSV file and the console use.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NotEnded => "",
            Self::Caller => "caller",
            Self::Callee => "callee",
            Self::Sbc => "sbc",
            Self::SessionTimer => "session-timer",
            Self::MediaInactivity => "media-inactivity",
            Self::MaxDuration => "max-duration",
            Self::Transfer => "transfer",
        }
    }

    /// RFC 2866 Acct-Terminate-Cause: User-Request 1 (a party hung up), Idle-Timeout 4
    /// (media inactivity), Session-Timeout 5 (a timer or the longest duration), Admin-Reset 6
    /// (the SBC), Service-Unavailable 15 (an attempt the SBC gave up on); `None` for a record
    /// of a call that goes on.
    #[must_use]
    pub fn terminate_cause(self) -> Option<u32> {
        match self {
            Self::NotEnded => None,
            Self::Caller | Self::Callee | Self::Transfer => Some(1),
            Self::MediaInactivity => Some(4),
            Self::SessionTimer | Self::MaxDuration => Some(5),
            Self::Sbc => Some(15),
        }
    }

    /// Oracle's Acme-Disconnect-Initiator: 1 the calling party, 2 the called party, 3 the SBC
    /// (internal), 0 not ended.
    #[must_use]
    pub fn initiator(self) -> u32 {
        match self {
            Self::NotEnded => 0,
            Self::Caller => 1,
            Self::Callee | Self::Transfer => 2,
            Self::Sbc | Self::SessionTimer | Self::MediaInactivity | Self::MaxDuration => 3,
        }
    }
}

/// Media counted by the relay in one direction of a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MediaFigures {
    /// Packets relayed.
    pub packets: u64,
    /// Octets relayed (RTP payload and headers, as received).
    pub octets: u64,
    /// Packets lost, from RTP sequence numbers the relay saw missing.
    pub lost: u64,
}

/// One call detail record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Acct-Session-Id: the call's, shared by its Start, Interim-Updates and Stop.
    pub session_id: String,
    /// Start, Interim-Update or Stop.
    pub kind: RecordKind,
    /// 0 for a Start or a Stop; the Interim-Update's number (1, 2, ...) otherwise.
    pub interim: u32,
    /// Acct-Multi-Session-Id: the session this one follows (a call made by a transfer names
    /// the call it was transferred from); empty otherwise.
    pub linked_session_id: String,
    /// The calling number (the user of From as sent to the callee, after translations).
    pub calling: String,
    /// The called number (the user of the Request-URI as sent to the callee).
    pub called: String,
    /// The realm the INVITE arrived in.
    pub ingress_realm: String,
    /// The realm it was sent into.
    pub egress_realm: String,
    /// The session-agent it came from, or empty.
    pub ingress_agent: String,
    /// The session-agent that finally took it, or empty (a registered phone).
    pub egress_agent: String,
    /// The caller leg's Call-ID.
    pub ingress_call_id: String,
    /// The callee leg's Call-ID.
    pub egress_call_id: String,
    /// The caller's address (`ip:port`).
    pub caller_address: String,
    /// The callee's address (`ip:port`).
    pub callee_address: String,
    /// When the INVITE arrived, in milliseconds since the Unix epoch (UTC).
    pub setup_ms: u64,
    /// When the call was answered (the 2xx relayed), or 0.
    pub connect_ms: u64,
    /// When it ended, or 0 (a Start or Interim-Update).
    pub disconnect_ms: u64,
    /// The final SIP status of the INVITE (200 for an answered call, the refusal otherwise).
    pub status: u16,
    /// Who or what ended it.
    pub ended_by: EndedBy,
    /// Further next hops tried after the first (re-routes), the answering one included.
    pub reroutes: u32,
    /// Media from the caller to the callee, as the relay counted it; zero when not anchored.
    pub caller_to_callee: MediaFigures,
    /// Media from the callee to the caller.
    pub callee_to_caller: MediaFigures,
    /// When this record was generated, in milliseconds since the Unix epoch (its
    /// Acct-Delay-Time counts from here).
    pub event_ms: u64,
    /// The node that generated it (its `hostname`), set by the node, not the engine.
    pub node: String,
}

impl CallRecord {
    /// The record's duration: from the answer to its end (a Stop) or to the event (an
    /// Interim-Update), in milliseconds; 0 for an attempt that was never answered.
    #[must_use]
    pub fn duration_ms(&self) -> u64 {
        if self.connect_ms == 0 {
            return 0;
        }
        let end = match self.kind {
            RecordKind::Stop => self.disconnect_ms,
            RecordKind::Interim => self.event_ms,
            RecordKind::Start => self.connect_ms,
        };
        end.saturating_sub(self.connect_ms)
    }

    /// What tells this record from every other: its session, kind and interim number. Two
    /// records with one key are one record sent twice.
    #[must_use]
    pub fn key(&self) -> String {
        format!(
            "{}/{}/{}",
            self.session_id,
            self.kind.as_str(),
            self.interim
        )
    }

    /// The record as the pair's sync channel carries it (bincode).
    #[must_use]
    pub fn to_wire(&self) -> Vec<u8> {
        bincode::serde::encode_to_vec(self, bincode::config::standard()).unwrap_or_default()
    }

    /// A record from the sync channel's bytes; `None` if they are not one (or exceed
    /// [`MAX_WIRE`]).
    #[must_use]
    pub fn from_wire(bytes: &[u8]) -> Option<Self> {
        let cfg = bincode::config::standard().with_limit::<MAX_WIRE>();
        match bincode::serde::decode_from_slice::<Self, _>(bytes, cfg) {
            Ok((r, used)) if used == bytes.len() => Some(r),
            _ => None,
        }
    }
}

/// The largest record the sync channel or the spool takes.
pub const MAX_WIRE: usize = 64 * 1024;

/// The sync-table keys of records not yet delivered: this prefix and [`CallRecord::key`].
pub const REPLICATION_PREFIX: &[u8] = b"accounting:";

/// The sync-table key of `record`.
#[must_use]
pub fn replication_key(record: &CallRecord) -> Vec<u8> {
    [REPLICATION_PREFIX, record.key().as_bytes()].concat()
}

/// The record key of a sync-table key; `None` for any other key.
#[must_use]
pub fn key_of_replication(key: &[u8]) -> Option<&str> {
    std::str::from_utf8(key.strip_prefix(REPLICATION_PREFIX)?).ok()
}

#[cfg(test)]
pub(crate) fn sample(kind: RecordKind) -> CallRecord {
    CallRecord {
        session_id: "00000000deadbeef".into(),
        kind,
        interim: 0,
        linked_session_id: String::new(),
        calling: "alice".into(),
        called: "+15551234".into(),
        ingress_realm: "access".into(),
        egress_realm: "core".into(),
        ingress_agent: String::new(),
        egress_agent: "core-proxy".into(),
        ingress_call_id: "a@127.0.0.1".into(),
        egress_call_id: "b@127.0.0.2".into(),
        caller_address: "127.0.0.1:5070".into(),
        callee_address: "127.0.0.2:5080".into(),
        setup_ms: 1_764_849_600_000,
        connect_ms: if kind == RecordKind::Start {
            1_764_849_601_250
        } else {
            0
        },
        disconnect_ms: 0,
        status: 200,
        ended_by: EndedBy::NotEnded,
        reroutes: 0,
        caller_to_callee: MediaFigures::default(),
        callee_to_caller: MediaFigures::default(),
        event_ms: 1_764_849_601_250,
        node: "sbc1".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_lasts_from_the_answer_to_the_end_and_an_attempt_not_at_all() {
        let mut r = sample(RecordKind::Stop);
        r.connect_ms = 1_000;
        r.disconnect_ms = 61_234;
        assert_eq!(r.duration_ms(), 60_234);
        r.connect_ms = 0;
        assert_eq!(r.duration_ms(), 0);
        assert_eq!(r.key(), "00000000deadbeef/stop/0");
    }

    #[test]
    fn a_record_crosses_the_sync_channel_whole_and_garbage_does_not() {
        let r = sample(RecordKind::Start);
        assert_eq!(CallRecord::from_wire(&r.to_wire()), Some(r.clone()));
        assert_eq!(CallRecord::from_wire(b"\xff\xff garbage"), None);
        let key = replication_key(&r);
        assert_eq!(key_of_replication(&key), Some("00000000deadbeef/start/0"));
        assert_eq!(key_of_replication(b"registration:00"), None);
    }
}
