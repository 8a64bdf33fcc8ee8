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

/// The text fields of a record, in the order [`PackedText`] keeps them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TextField {
    /// Acct-Session-Id.
    SessionId,
    /// Acct-Multi-Session-Id.
    LinkedSessionId,
    /// The calling number.
    Calling,
    /// The called number.
    Called,
    /// The realm the INVITE arrived in.
    IngressRealm,
    /// The realm it was sent into.
    EgressRealm,
    /// The session-agent it came from.
    IngressAgent,
    /// The session-agent that finally took it.
    EgressAgent,
    /// The caller leg's Call-ID.
    IngressCallId,
    /// The callee leg's Call-ID.
    EgressCallId,
    /// The caller's address.
    CallerAddress,
    /// The callee's address.
    CalleeAddress,
    /// The node that generated the record.
    Node,
}

impl TextField {
    /// Every text field, in order.
    pub const ALL: [Self; TEXT_FIELDS] = [
        Self::SessionId,
        Self::LinkedSessionId,
        Self::Calling,
        Self::Called,
        Self::IngressRealm,
        Self::EgressRealm,
        Self::IngressAgent,
        Self::EgressAgent,
        Self::IngressCallId,
        Self::EgressCallId,
        Self::CallerAddress,
        Self::CalleeAddress,
        Self::Node,
    ];
}

/// How many text fields a record has.
pub const TEXT_FIELDS: usize = 13;

/// A record's text fields, borrowed: from the call while the record is built, or from a
/// [`PackedText`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordText<'a> {
    /// Acct-Session-Id.
    pub session_id: &'a str,
    /// Acct-Multi-Session-Id, or empty.
    pub linked_session_id: &'a str,
    /// The calling number.
    pub calling: &'a str,
    /// The called number.
    pub called: &'a str,
    /// The realm the INVITE arrived in.
    pub ingress_realm: &'a str,
    /// The realm it was sent into.
    pub egress_realm: &'a str,
    /// The session-agent it came from, or empty.
    pub ingress_agent: &'a str,
    /// The session-agent that took it, or empty.
    pub egress_agent: &'a str,
    /// The caller leg's Call-ID.
    pub ingress_call_id: &'a str,
    /// The callee leg's Call-ID.
    pub egress_call_id: &'a str,
    /// The caller's address (`ip:port`).
    pub caller_address: &'a str,
    /// The callee's address (`ip:port`).
    pub callee_address: &'a str,
    /// The node that generated the record.
    pub node: &'a str,
}

impl<'a> RecordText<'a> {
    /// The fields in [`TextField::ALL`]'s order.
    fn from_fields(f: [&'a str; TEXT_FIELDS]) -> Self {
        let [session_id, linked_session_id, calling, called, ingress_realm, egress_realm, ingress_agent, egress_agent, ingress_call_id, egress_call_id, caller_address, callee_address, node] =
            f;
        Self {
            session_id,
            linked_session_id,
            calling,
            called,
            ingress_realm,
            egress_realm,
            ingress_agent,
            egress_agent,
            ingress_call_id,
            egress_call_id,
            caller_address,
            callee_address,
            node,
        }
    }

    fn fields(&self) -> [&'a str; TEXT_FIELDS] {
        [
            self.session_id,
            self.linked_session_id,
            self.calling,
            self.called,
            self.ingress_realm,
            self.egress_realm,
            self.ingress_agent,
            self.egress_agent,
            self.ingress_call_id,
            self.egress_call_id,
            self.caller_address,
            self.callee_address,
            self.node,
        ]
    }
}

/// A record's text fields in one allocation: a record is made on a SIP worker and freed on the
/// accounting thread, so one buffer rather than a string per field saves a dozen allocations,
/// cross-thread frees and cache misses per record.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct PackedText {
    /// The fields one after another.
    text: Box<str>,
    /// Where each field ends in `text`.
    ends: [u32; TEXT_FIELDS],
}

impl PackedText {
    /// Packs `text` into one buffer. A field that would take the buffer past 4 GiB is left
    /// empty (no SIP message comes near).
    #[must_use]
    pub fn pack(text: &RecordText<'_>) -> Self {
        Self::from_fields(&text.fields())
    }

    fn from_fields(fields: &[&str; TEXT_FIELDS]) -> Self {
        let total = fields.iter().map(|f| f.len()).sum();
        let mut buf = String::with_capacity(total);
        let mut ends = [0u32; TEXT_FIELDS];
        for (end, field) in ends.iter_mut().zip(fields) {
            if let Ok(e) = u32::try_from(buf.len() + field.len()) {
                buf.push_str(field);
                *end = e;
            } else {
                *end = u32::try_from(buf.len()).unwrap_or(u32::MAX);
            }
        }
        Self {
            text: buf.into_boxed_str(),
            ends,
        }
    }

    /// Field `field`.
    #[must_use]
    pub fn get(&self, field: TextField) -> &str {
        let i = field as usize;
        let start = if i == 0 { 0 } else { self.ends[i - 1] } as usize;
        self.text.get(start..self.ends[i] as usize).unwrap_or("")
    }

    /// Every field, borrowed.
    #[must_use]
    pub fn unpack(&self) -> RecordText<'_> {
        RecordText::from_fields(TextField::ALL.map(|field| self.get(field)))
    }

    /// Replaces field `field` with `value` (packs the fields again: not for the call path).
    pub fn set(&mut self, field: TextField, value: &str) {
        let mut fields = self.unpack().fields();
        fields[field as usize] = value;
        *self = Self::from_fields(&fields);
    }
}

impl std::fmt::Debug for PackedText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(TextField::ALL.iter().map(|&field| (field, self.get(field))))
            .finish()
    }
}

/// One call detail record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord {
    /// Its text fields (read with the accessors: [`CallRecord::session_id`], ...).
    pub text: PackedText,
    /// Start, Interim-Update or Stop.
    pub kind: RecordKind,
    /// 0 for a Start or a Stop; the Interim-Update's number (1, 2, ...) otherwise.
    pub interim: u32,
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
}

/// The record as bincode (the spool and the sync channel) and serde see it: its fields in this
/// order, each text field a string.
#[derive(Serialize, Deserialize)]
#[serde(rename = "CallRecord")]
struct Wire<T> {
    session_id: T,
    kind: RecordKind,
    interim: u32,
    linked_session_id: T,
    calling: T,
    called: T,
    ingress_realm: T,
    egress_realm: T,
    ingress_agent: T,
    egress_agent: T,
    ingress_call_id: T,
    egress_call_id: T,
    caller_address: T,
    callee_address: T,
    setup_ms: u64,
    connect_ms: u64,
    disconnect_ms: u64,
    status: u16,
    ended_by: EndedBy,
    reroutes: u32,
    caller_to_callee: MediaFigures,
    callee_to_caller: MediaFigures,
    event_ms: u64,
    node: T,
}

impl Serialize for CallRecord {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let t = self.text.unpack();
        Wire {
            session_id: t.session_id,
            kind: self.kind,
            interim: self.interim,
            linked_session_id: t.linked_session_id,
            calling: t.calling,
            called: t.called,
            ingress_realm: t.ingress_realm,
            egress_realm: t.egress_realm,
            ingress_agent: t.ingress_agent,
            egress_agent: t.egress_agent,
            ingress_call_id: t.ingress_call_id,
            egress_call_id: t.egress_call_id,
            caller_address: t.caller_address,
            callee_address: t.callee_address,
            setup_ms: self.setup_ms,
            connect_ms: self.connect_ms,
            disconnect_ms: self.disconnect_ms,
            status: self.status,
            ended_by: self.ended_by,
            reroutes: self.reroutes,
            caller_to_callee: self.caller_to_callee,
            callee_to_caller: self.callee_to_caller,
            event_ms: self.event_ms,
            node: t.node,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for CallRecord {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let w = Wire::<String>::deserialize(d)?;
        Ok(Self {
            text: PackedText::pack(&RecordText {
                session_id: &w.session_id,
                linked_session_id: &w.linked_session_id,
                calling: &w.calling,
                called: &w.called,
                ingress_realm: &w.ingress_realm,
                egress_realm: &w.egress_realm,
                ingress_agent: &w.ingress_agent,
                egress_agent: &w.egress_agent,
                ingress_call_id: &w.ingress_call_id,
                egress_call_id: &w.egress_call_id,
                caller_address: &w.caller_address,
                callee_address: &w.callee_address,
                node: &w.node,
            }),
            kind: w.kind,
            interim: w.interim,
            setup_ms: w.setup_ms,
            connect_ms: w.connect_ms,
            disconnect_ms: w.disconnect_ms,
            status: w.status,
            ended_by: w.ended_by,
            reroutes: w.reroutes,
            caller_to_callee: w.caller_to_callee,
            callee_to_caller: w.callee_to_caller,
            event_ms: w.event_ms,
        })
    }
}

impl CallRecord {
    /// Acct-Session-Id: the call's, shared by its Start, Interim-Updates and Stop.
    #[must_use]
    pub fn session_id(&self) -> &str {
        self.text.get(TextField::SessionId)
    }

    /// Acct-Multi-Session-Id: the session this one follows (a call made by a transfer names
    /// the call it was transferred from); empty otherwise.
    #[must_use]
    pub fn linked_session_id(&self) -> &str {
        self.text.get(TextField::LinkedSessionId)
    }

    /// The calling number (the user of From as sent to the callee, after translations).
    #[must_use]
    pub fn calling(&self) -> &str {
        self.text.get(TextField::Calling)
    }

    /// The called number (the user of the Request-URI as sent to the callee).
    #[must_use]
    pub fn called(&self) -> &str {
        self.text.get(TextField::Called)
    }

    /// The realm the INVITE arrived in.
    #[must_use]
    pub fn ingress_realm(&self) -> &str {
        self.text.get(TextField::IngressRealm)
    }

    /// The realm it was sent into.
    #[must_use]
    pub fn egress_realm(&self) -> &str {
        self.text.get(TextField::EgressRealm)
    }

    /// The session-agent it came from, or empty.
    #[must_use]
    pub fn ingress_agent(&self) -> &str {
        self.text.get(TextField::IngressAgent)
    }

    /// The session-agent that finally took it, or empty (a registered phone).
    #[must_use]
    pub fn egress_agent(&self) -> &str {
        self.text.get(TextField::EgressAgent)
    }

    /// The caller leg's Call-ID.
    #[must_use]
    pub fn ingress_call_id(&self) -> &str {
        self.text.get(TextField::IngressCallId)
    }

    /// The callee leg's Call-ID.
    #[must_use]
    pub fn egress_call_id(&self) -> &str {
        self.text.get(TextField::EgressCallId)
    }

    /// The caller's address (`ip:port`).
    #[must_use]
    pub fn caller_address(&self) -> &str {
        self.text.get(TextField::CallerAddress)
    }

    /// The callee's address (`ip:port`).
    #[must_use]
    pub fn callee_address(&self) -> &str {
        self.text.get(TextField::CalleeAddress)
    }

    /// The node that generated it (its `hostname`).
    #[must_use]
    pub fn node(&self) -> &str {
        self.text.get(TextField::Node)
    }

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
            self.session_id(),
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
        text: PackedText::pack(&RecordText {
            session_id: "00000000deadbeef",
            calling: "alice",
            called: "+15551234",
            ingress_realm: "access",
            egress_realm: "core",
            egress_agent: "core-proxy",
            ingress_call_id: "a@127.0.0.1",
            egress_call_id: "b@127.0.0.2",
            caller_address: "127.0.0.1:5070",
            callee_address: "127.0.0.2:5080",
            node: "sbc1",
            ..RecordText::default()
        }),
        kind,
        interim: 0,
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

    /// The bytes the record had when it was a struct of strings (before `PackedText`): the
    /// spool and the sync channel read records written by earlier builds.
    #[test]
    fn a_packed_record_encodes_as_the_struct_of_strings_did_and_reads_it_back() {
        #[derive(Serialize)]
        struct Before {
            session_id: String,
            kind: RecordKind,
            interim: u32,
            linked_session_id: String,
            calling: String,
            called: String,
            ingress_realm: String,
            egress_realm: String,
            ingress_agent: String,
            egress_agent: String,
            ingress_call_id: String,
            egress_call_id: String,
            caller_address: String,
            callee_address: String,
            setup_ms: u64,
            connect_ms: u64,
            disconnect_ms: u64,
            status: u16,
            ended_by: EndedBy,
            reroutes: u32,
            caller_to_callee: MediaFigures,
            callee_to_caller: MediaFigures,
            event_ms: u64,
            node: String,
        }
        let mut r = sample(RecordKind::Stop);
        r.text
            .set(TextField::LinkedSessionId, "0000000000000001-t1");
        r.text.set(TextField::IngressAgent, "édge");
        r.interim = 7;
        r.caller_to_callee.lost = 3;
        let t = r.text.unpack();
        let before = Before {
            session_id: t.session_id.into(),
            kind: r.kind,
            interim: 7,
            linked_session_id: "0000000000000001-t1".into(),
            calling: "alice".into(),
            called: "+15551234".into(),
            ingress_realm: "access".into(),
            egress_realm: "core".into(),
            ingress_agent: "édge".into(),
            egress_agent: "core-proxy".into(),
            ingress_call_id: "a@127.0.0.1".into(),
            egress_call_id: "b@127.0.0.2".into(),
            caller_address: "127.0.0.1:5070".into(),
            callee_address: "127.0.0.2:5080".into(),
            setup_ms: r.setup_ms,
            connect_ms: r.connect_ms,
            disconnect_ms: r.disconnect_ms,
            status: r.status,
            ended_by: r.ended_by,
            reroutes: r.reroutes,
            caller_to_callee: r.caller_to_callee,
            callee_to_caller: r.callee_to_caller,
            event_ms: r.event_ms,
            node: "sbc1".into(),
        };
        let old =
            bincode::serde::encode_to_vec(&before, bincode::config::standard()).expect("encodes");
        assert_eq!(r.to_wire(), old);
        assert_eq!(CallRecord::from_wire(&old), Some(r));
    }

    #[test]
    fn packed_fields_read_back_as_packed_and_one_replaced_leaves_the_others() {
        let mut p = PackedText::pack(&RecordText {
            session_id: "s",
            called: "ü",
            node: "n1",
            ..RecordText::default()
        });
        assert_eq!(p.get(TextField::SessionId), "s");
        assert_eq!(p.get(TextField::LinkedSessionId), "");
        assert_eq!(p.get(TextField::Called), "ü");
        assert_eq!(p.get(TextField::Node), "n1");
        p.set(TextField::Calling, "+1 555");
        p.set(TextField::Node, "");
        let t = p.unpack();
        assert_eq!(
            (t.session_id, t.calling, t.called, t.node),
            ("s", "+1 555", "ü", "")
        );
        assert!(format!("{p:?}").contains(r#"Calling: "+1 555""#));
        assert_eq!(PackedText::default().get(TextField::Node), "");
    }
}
