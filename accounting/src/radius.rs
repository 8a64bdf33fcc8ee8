//! A record as RADIUS accounting attributes (RFC 2866), as Oracle's SBC sends them: the
//! standard attributes, Cisco's `h323-*-time` strings (vendor 9) for the three times, and
//! Acme Packet's vendor-specific attributes (vendor 9148, FreeRADIUS's `dictionary.acme`)
//! where no standard attribute says it. The packet itself (Identifier, Request Authenticator)
//! is built by the node with the `radius` crate; this is only what goes in it.

use crate::record::CallRecord;
use crate::time;

/// Acme Packet's IANA enterprise number.
pub const VENDOR_ACME: u32 = 9148;
/// Cisco's IANA enterprise number (the `h323-*` time attributes).
pub const VENDOR_CISCO: u32 = 9;

/// An attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// A string (text).
    Text(String),
    /// A 32-bit integer.
    Integer(u32),
}

/// One attribute of an Accounting-Request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attribute {
    /// A standard attribute: its type number and value.
    Standard(u8, Value),
    /// A vendor-specific attribute (type 26): vendor, vendor type and value.
    Vendor(u32, u8, Value),
}

/// RFC 2865/2866 attribute numbers used here.
pub mod std_type {
    /// User-Name.
    pub const USER_NAME: u8 = 1;
    /// NAS-IP-Address.
    pub const NAS_IP_ADDRESS: u8 = 4;
    /// Called-Station-Id.
    pub const CALLED_STATION_ID: u8 = 30;
    /// Calling-Station-Id.
    pub const CALLING_STATION_ID: u8 = 31;
    /// NAS-Identifier.
    pub const NAS_IDENTIFIER: u8 = 32;
    /// Acct-Status-Type.
    pub const ACCT_STATUS_TYPE: u8 = 40;
    /// Acct-Delay-Time.
    pub const ACCT_DELAY_TIME: u8 = 41;
    /// Acct-Input-Octets.
    pub const ACCT_INPUT_OCTETS: u8 = 42;
    /// Acct-Output-Octets.
    pub const ACCT_OUTPUT_OCTETS: u8 = 43;
    /// Acct-Session-Id.
    pub const ACCT_SESSION_ID: u8 = 44;
    /// Acct-Session-Time.
    pub const ACCT_SESSION_TIME: u8 = 46;
    /// Acct-Input-Packets.
    pub const ACCT_INPUT_PACKETS: u8 = 47;
    /// Acct-Output-Packets.
    pub const ACCT_OUTPUT_PACKETS: u8 = 48;
    /// Acct-Terminate-Cause.
    pub const ACCT_TERMINATE_CAUSE: u8 = 49;
    /// Acct-Multi-Session-Id.
    pub const ACCT_MULTI_SESSION_ID: u8 = 50;
    /// Acct-Input-Gigawords (RFC 2869 §5.1).
    pub const ACCT_INPUT_GIGAWORDS: u8 = 52;
    /// Acct-Output-Gigawords (RFC 2869 §5.2).
    pub const ACCT_OUTPUT_GIGAWORDS: u8 = 53;
}

/// Acme Packet vendor types used here (`dictionary.acme`).
pub mod acme_type {
    /// Acme-Session-Ingress-CallId.
    pub const INGRESS_CALL_ID: u8 = 3;
    /// Acme-Session-Egress-CallId.
    pub const EGRESS_CALL_ID: u8 = 4;
    /// Acme-Calling-RTP-Packets-Lost_FS1.
    pub const CALLING_LOST: u8 = 37;
    /// Acme-Session-Ingress-Realm.
    pub const INGRESS_REALM: u8 = 41;
    /// Acme-Session-Egress-Realm.
    pub const EGRESS_REALM: u8 = 42;
    /// Acme-Session-Protocol-Type.
    pub const PROTOCOL_TYPE: u8 = 43;
    /// Acme-Called-RTP-Packets-Lost_FS1.
    pub const CALLED_LOST: u8 = 51;
    /// Acme-CDR-Sequence-Number.
    pub const CDR_SEQUENCE: u8 = 59;
    /// Acme-Disconnect-Initiator.
    pub const DISCONNECT_INITIATOR: u8 = 61;
    /// Acme-SIP-Status.
    pub const SIP_STATUS: u8 = 71;
    /// Acme-Ingress-Remote-Addr.
    pub const INGRESS_REMOTE_ADDR: u8 = 75;
    /// Acme-Egress-Remote-Addr.
    pub const EGRESS_REMOTE_ADDR: u8 = 77;
    /// Acme-Originating-Trunk-Group (the ingress session-agent).
    pub const ORIGINATING_TRUNK_GROUP: u8 = 65;
    /// Acme-Terminating-Trunk-Group (the egress session-agent).
    pub const TERMINATING_TRUNK_GROUP: u8 = 66;
    /// Acme-Custom-VSA-200: the node that generated the record (ours).
    pub const NODE: u8 = 200;
    /// Acme-Custom-VSA-201: who ended the call, as the CSV says it (ours).
    pub const ENDED_BY: u8 = 201;
    /// Acme-Custom-VSA-202: the duration in milliseconds (ours; Acct-Session-Time is whole
    /// seconds).
    pub const DURATION_MS: u8 = 202;
    /// Acme-Custom-VSA-203: re-routes (ours).
    pub const REROUTES: u8 = 203;
}

/// Cisco vendor types (`dictionary.cisco`).
pub mod cisco_type {
    /// h323-setup-time.
    pub const SETUP_TIME: u8 = 25;
    /// h323-connect-time.
    pub const CONNECT_TIME: u8 = 28;
    /// h323-disconnect-time.
    pub const DISCONNECT_TIME: u8 = 29;
}

/// A time as Cisco's `h323-*-time` string with milliseconds, as Oracle's SBC writes it
/// (`10:15:00.123 UTC Fri Dec 04 2026`); `None` for 0.
#[must_use]
pub fn h323_time(ms: u64) -> Option<String> {
    time::to_string(|o| time::write_h323(o, ms))
}

fn u32_of(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// Where an attribute goes: a standard type, or a vendor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Key {
    Standard(u8),
    Vendor(u32, u8),
}

/// An attribute's value as the record holds it, formatted only when it is written.
#[derive(Debug, Clone, Copy)]
enum Field<'a> {
    /// A string; an empty one is left out (RFC 2865: a string has at least one octet).
    Text(&'a str),
    /// A 32-bit integer.
    Integer(u32),
    /// A number as a decimal string.
    Decimal(u64),
    /// A time as an `h323-*-time` string; left out for 0.
    Time(u64),
}

/// Gives `f` each attribute of `record`'s Accounting-Request sent `delay_secs` after it was
/// generated, in the order they are sent. One list for the encoder and the owned form.
fn each_attribute(record: &CallRecord, delay_secs: u32, f: &mut impl FnMut(Key, Field<'_>)) {
    use Field::{Decimal, Integer, Text, Time};
    use Key::{Standard, Vendor};
    let r = record;
    f(
        Standard(std_type::ACCT_STATUS_TYPE),
        Integer(r.kind.status_type()),
    );
    f(Standard(std_type::ACCT_SESSION_ID), Text(r.session_id()));
    f(
        Standard(std_type::ACCT_MULTI_SESSION_ID),
        Text(r.linked_session_id()),
    );
    f(Standard(std_type::ACCT_DELAY_TIME), Integer(delay_secs));
    f(Standard(std_type::NAS_IDENTIFIER), Text(r.node()));
    f(Standard(std_type::USER_NAME), Text(r.calling()));
    f(Standard(std_type::CALLING_STATION_ID), Text(r.calling()));
    f(Standard(std_type::CALLED_STATION_ID), Text(r.called()));
    if r.kind != crate::record::RecordKind::Start {
        let (i, o) = (&r.caller_to_callee, &r.callee_to_caller);
        f(
            Standard(std_type::ACCT_SESSION_TIME),
            Integer(u32_of(r.duration_ms() / 1000)),
        );
        // RFC 2869 §5.1-5.2: octets modulo 2^32, and how many times they wrapped (sent when
        // they did).
        let low = |n: u64| (u32_of(n & 0xFFFF_FFFF), u32_of(n >> 32));
        let (in_low, in_wraps) = low(i.octets);
        let (out_low, out_wraps) = low(o.octets);
        f(Standard(std_type::ACCT_INPUT_OCTETS), Integer(in_low));
        f(Standard(std_type::ACCT_OUTPUT_OCTETS), Integer(out_low));
        if in_wraps > 0 {
            f(Standard(std_type::ACCT_INPUT_GIGAWORDS), Integer(in_wraps));
        }
        if out_wraps > 0 {
            f(
                Standard(std_type::ACCT_OUTPUT_GIGAWORDS),
                Integer(out_wraps),
            );
        }
        f(
            Standard(std_type::ACCT_INPUT_PACKETS),
            Integer(u32_of(i.packets)),
        );
        f(
            Standard(std_type::ACCT_OUTPUT_PACKETS),
            Integer(u32_of(o.packets)),
        );
        f(
            Vendor(VENDOR_ACME, acme_type::CALLING_LOST),
            Integer(u32_of(i.lost)),
        );
        f(
            Vendor(VENDOR_ACME, acme_type::CALLED_LOST),
            Integer(u32_of(o.lost)),
        );
        f(
            Vendor(VENDOR_ACME, acme_type::DURATION_MS),
            Decimal(r.duration_ms()),
        );
    }
    if let Some(cause) = r.ended_by.terminate_cause() {
        f(Standard(std_type::ACCT_TERMINATE_CAUSE), Integer(cause));
        f(
            Vendor(VENDOR_ACME, acme_type::DISCONNECT_INITIATOR),
            Integer(r.ended_by.initiator()),
        );
        f(
            Vendor(VENDOR_ACME, acme_type::ENDED_BY),
            Text(r.ended_by.as_str()),
        );
    }
    f(
        Vendor(VENDOR_CISCO, cisco_type::SETUP_TIME),
        Time(r.setup_ms),
    );
    f(
        Vendor(VENDOR_CISCO, cisco_type::CONNECT_TIME),
        Time(r.connect_ms),
    );
    f(
        Vendor(VENDOR_CISCO, cisco_type::DISCONNECT_TIME),
        Time(r.disconnect_ms),
    );
    f(Vendor(VENDOR_ACME, acme_type::PROTOCOL_TYPE), Text("SIP"));
    for (t, v) in [
        (acme_type::INGRESS_CALL_ID, r.ingress_call_id()),
        (acme_type::EGRESS_CALL_ID, r.egress_call_id()),
        (acme_type::INGRESS_REALM, r.ingress_realm()),
        (acme_type::EGRESS_REALM, r.egress_realm()),
        (acme_type::ORIGINATING_TRUNK_GROUP, r.ingress_agent()),
        (acme_type::TERMINATING_TRUNK_GROUP, r.egress_agent()),
        (acme_type::INGRESS_REMOTE_ADDR, r.caller_address()),
        (acme_type::EGRESS_REMOTE_ADDR, r.callee_address()),
        (acme_type::NODE, r.node()),
    ] {
        f(Vendor(VENDOR_ACME, t), Text(v));
    }
    f(
        Vendor(VENDOR_ACME, acme_type::SIP_STATUS),
        Integer(u32::from(r.status)),
    );
    f(
        Vendor(VENDOR_ACME, acme_type::CDR_SEQUENCE),
        Integer(r.interim),
    );
    if r.reroutes > 0 {
        f(
            Vendor(VENDOR_ACME, acme_type::REROUTES),
            Decimal(u64::from(r.reroutes)),
        );
    }
}

/// The longest value of a string attribute: RFC 2865 caps an attribute at 255 octets; a
/// vendor-specific one spends 6 more on vendor, type and length.
fn value_cap(key: Key) -> usize {
    match key {
        Key::Standard(_) => 253,
        Key::Vendor(..) => 247,
    }
}

/// `s` cut to at most `cap` bytes, on a character boundary (a Call-ID can be longer).
fn cut(s: &str, cap: usize) -> &str {
    if s.len() <= cap {
        return s;
    }
    let mut end = cap;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Appends `field`'s value to `out`; `false` (and nothing appended) when it is left out.
fn write_value(out: &mut Vec<u8>, key: Key, field: Field<'_>, text_cap: usize) -> bool {
    match field {
        Field::Text("") => false,
        Field::Text(s) => {
            out.extend_from_slice(cut(s, value_cap(key).min(text_cap)).as_bytes());
            true
        }
        Field::Integer(n) => {
            out.extend_from_slice(&n.to_be_bytes());
            true
        }
        Field::Decimal(n) => {
            time::write_decimal(out, n);
            true
        }
        Field::Time(ms) => time::write_h323(out, ms),
    }
}

/// Appends the attributes of `record`'s Accounting-Request sent `delay_secs` after it was
/// generated to `out`, encoded (RFC 2865 §5: type, length, value; a vendor's inside type 26
/// with its Vendor-Id, type and length, §5.26), as [`attributes`] lists them. Nothing is
/// allocated beyond `out`'s growth.
pub fn encode_attributes(record: &CallRecord, delay_secs: u32, out: &mut Vec<u8>) {
    encode_attributes_cut(record, delay_secs, usize::MAX, out);
}

/// [`encode_attributes`] with every string also cut to at most `text_cap` octets: what the
/// node sends when a record with long strings would not fit a packet's 4096 octets
/// (better a shorter Call-ID than no record).
pub fn encode_attributes_cut(
    record: &CallRecord,
    delay_secs: u32,
    text_cap: usize,
    out: &mut Vec<u8>,
) {
    each_attribute(record, delay_secs, &mut |key, field| {
        let at = out.len();
        match key {
            Key::Standard(t) => out.extend_from_slice(&[t, 0]),
            Key::Vendor(vendor, t) => {
                out.extend_from_slice(&[26, 0]);
                out.extend_from_slice(&vendor.to_be_bytes());
                out.extend_from_slice(&[t, 0]);
            }
        }
        let header = out.len() - at;
        if !write_value(out, key, field, text_cap) {
            out.truncate(at);
            return;
        }
        // Every value is capped above: the lengths fit an octet.
        let len = out.len() - at;
        out[at + 1] = u8::try_from(len).unwrap_or(u8::MAX);
        if header == 8 {
            out[at + 7] = u8::try_from(len - 6).unwrap_or(u8::MAX);
        }
    });
}

/// The attributes of `record`'s Accounting-Request sent `delay_secs` after it was generated,
/// as values (what [`encode_attributes`] writes). Empty strings are left out (RFC 2865: a
/// string attribute has at least one octet); strings are cut to fit an attribute.
#[must_use]
pub fn attributes(record: &CallRecord, delay_secs: u32) -> Vec<Attribute> {
    let mut out = Vec::with_capacity(32);
    each_attribute(record, delay_secs, &mut |key, field| {
        let value = match field {
            Field::Integer(n) => Value::Integer(n),
            other => {
                let mut bytes = Vec::new();
                if !write_value(&mut bytes, key, other, usize::MAX) {
                    return;
                }
                Value::Text(String::from_utf8(bytes).unwrap_or_default())
            }
        };
        out.push(match key {
            Key::Standard(t) => Attribute::Standard(t, value),
            Key::Vendor(v, t) => Attribute::Vendor(v, t, value),
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{sample, EndedBy, RecordKind, TextField};

    #[test]
    fn a_stop_carries_its_times_cause_and_media_and_no_empty_string() {
        let mut r = sample(RecordKind::Stop);
        r.connect_ms = 1_764_849_601_250;
        r.disconnect_ms = 1_764_849_661_999;
        r.ended_by = EndedBy::Callee;
        r.caller_to_callee.octets = 1720;
        let a = attributes(&r, 3);
        assert!(a.contains(&Attribute::Standard(
            std_type::ACCT_STATUS_TYPE,
            Value::Integer(2)
        )));
        assert!(a.contains(&Attribute::Standard(
            std_type::ACCT_DELAY_TIME,
            Value::Integer(3)
        )));
        assert!(a.contains(&Attribute::Standard(
            std_type::ACCT_SESSION_TIME,
            Value::Integer(60)
        )));
        assert!(a.contains(&Attribute::Standard(
            std_type::ACCT_TERMINATE_CAUSE,
            Value::Integer(1)
        )));
        assert!(a.contains(&Attribute::Vendor(
            VENDOR_CISCO,
            cisco_type::DISCONNECT_TIME,
            Value::Text("12:01:01.999 UTC Thu Dec 04 2025".into())
        )));
        assert!(a.contains(&Attribute::Vendor(
            VENDOR_ACME,
            acme_type::DURATION_MS,
            Value::Text("60749".into())
        )));
        assert!(!a
            .iter()
            .any(|x| matches!(x, Attribute::Standard(std_type::ACCT_MULTI_SESSION_ID, _))));
    }

    /// Reads encoded attributes back as (vendor or 0, type, value octets); type 26 holds a
    /// vendor's.
    fn parse(mut bytes: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        let mut out = Vec::new();
        while let [t, len, ..] = *bytes {
            let (this, rest) = bytes.split_at(usize::from(len));
            out.push(if t == 26 {
                let vendor = u32::from_be_bytes(this[2..6].try_into().expect("vendor"));
                assert_eq!(usize::from(this[7]) + 6, this.len(), "vendor length");
                (vendor, this[6], this[8..].to_vec())
            } else {
                (0, t, this[2..].to_vec())
            });
            bytes = rest;
        }
        out
    }

    fn as_octets(a: &Attribute) -> (u32, u8, Vec<u8>) {
        let bytes = |v: &Value| match v {
            Value::Text(s) => s.as_bytes().to_vec(),
            Value::Integer(n) => n.to_be_bytes().to_vec(),
        };
        match a {
            Attribute::Standard(t, v) => (0, *t, bytes(v)),
            Attribute::Vendor(vendor, t, v) => (*vendor, *t, bytes(v)),
        }
    }

    #[test]
    fn the_encoding_holds_the_listed_attributes_in_order() {
        let mut stop = sample(RecordKind::Stop);
        stop.connect_ms = 1_764_849_601_250;
        stop.disconnect_ms = 1_764_849_661_999;
        stop.ended_by = EndedBy::Caller;
        stop.reroutes = 2;
        stop.text.set(TextField::IngressCallId, &"é".repeat(200));
        for r in [sample(RecordKind::Start), stop] {
            let mut out = vec![9, 9];
            encode_attributes(&r, 5, &mut out);
            assert_eq!(&out[..2], &[9, 9], "appended after what was there");
            let listed: Vec<_> = attributes(&r, 5).iter().map(as_octets).collect();
            let read = parse(&out[2..]);
            assert_eq!(read, listed);
            assert!(read.iter().all(|(_, _, b)| !b.is_empty() && b.len() <= 253));
        }
    }

    #[test]
    fn octets_beyond_four_gib_are_counted_in_gigawords() {
        let mut r = sample(RecordKind::Stop);
        r.caller_to_callee.octets = 5 * (1 << 32) + 7;
        r.callee_to_caller.octets = 9;
        let a = attributes(&r, 0);
        let std = |t| {
            a.iter().find_map(|x| match x {
                Attribute::Standard(at, Value::Integer(n)) if *at == t => Some(*n),
                _ => None,
            })
        };
        assert_eq!(std(std_type::ACCT_INPUT_OCTETS), Some(7));
        assert_eq!(std(std_type::ACCT_INPUT_GIGAWORDS), Some(5));
        assert_eq!(std(std_type::ACCT_OUTPUT_OCTETS), Some(9));
        assert_eq!(
            std(std_type::ACCT_OUTPUT_GIGAWORDS),
            None,
            "not wrapped: left out"
        );
    }

    #[test]
    fn a_long_call_id_is_cut_to_fit_an_attribute() {
        let mut r = sample(RecordKind::Start);
        r.text.set(TextField::IngressCallId, &"é".repeat(200));
        for a in attributes(&r, 0) {
            if let Attribute::Vendor(_, _, Value::Text(s))
            | Attribute::Standard(_, Value::Text(s)) = a
            {
                assert!(s.len() <= 247);
            }
        }
    }
}
