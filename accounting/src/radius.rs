//! A record as RADIUS accounting attributes (RFC 2866), as Oracle's SBC sends them: the
//! standard attributes, Cisco's `h323-*-time` strings (vendor 9) for the three times, and
//! Acme Packet's vendor-specific attributes (vendor 9148, FreeRADIUS's `dictionary.acme`)
//! where no standard attribute says it. The packet itself (Identifier, Request Authenticator)
//! is built by the node with the `radius` crate; this is only what goes in it.

use crate::record::CallRecord;

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
    if ms == 0 {
        return None;
    }
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%H:%M:%S%.3f UTC %a %b %d %Y").to_string())
}

fn u32_of(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// The attributes of `record`'s Accounting-Request sent `delay_secs` after it was generated.
/// Empty strings are left out (RFC 2865: a string attribute has at least one octet).
#[must_use]
pub fn attributes(record: &CallRecord, delay_secs: u32) -> Vec<Attribute> {
    use Attribute::{Standard, Vendor};
    use Value::{Integer, Text};
    let mut out = Vec::with_capacity(32);
    let text = |out: &mut Vec<Attribute>, a: Attribute| {
        let empty = matches!(&a, Standard(_, Text(s)) | Vendor(_, _, Text(s)) if s.is_empty());
        if !empty {
            out.push(a);
        }
    };
    let r = record;
    out.push(Standard(
        std_type::ACCT_STATUS_TYPE,
        Integer(r.kind.status_type()),
    ));
    text(
        &mut out,
        Standard(std_type::ACCT_SESSION_ID, Text(r.session_id.clone())),
    );
    text(
        &mut out,
        Standard(
            std_type::ACCT_MULTI_SESSION_ID,
            Text(r.linked_session_id.clone()),
        ),
    );
    out.push(Standard(std_type::ACCT_DELAY_TIME, Integer(delay_secs)));
    text(
        &mut out,
        Standard(std_type::NAS_IDENTIFIER, Text(r.node.clone())),
    );
    text(
        &mut out,
        Standard(std_type::USER_NAME, Text(r.calling.clone())),
    );
    text(
        &mut out,
        Standard(std_type::CALLING_STATION_ID, Text(r.calling.clone())),
    );
    text(
        &mut out,
        Standard(std_type::CALLED_STATION_ID, Text(r.called.clone())),
    );
    if r.kind != crate::record::RecordKind::Start {
        out.push(Standard(
            std_type::ACCT_SESSION_TIME,
            Integer(u32_of(r.duration_ms() / 1000)),
        ));
        let (i, o) = (&r.caller_to_callee, &r.callee_to_caller);
        out.push(Standard(
            std_type::ACCT_INPUT_OCTETS,
            Integer(u32_of(i.octets)),
        ));
        out.push(Standard(
            std_type::ACCT_OUTPUT_OCTETS,
            Integer(u32_of(o.octets)),
        ));
        out.push(Standard(
            std_type::ACCT_INPUT_PACKETS,
            Integer(u32_of(i.packets)),
        ));
        out.push(Standard(
            std_type::ACCT_OUTPUT_PACKETS,
            Integer(u32_of(o.packets)),
        ));
        out.push(Vendor(
            VENDOR_ACME,
            acme_type::CALLING_LOST,
            Integer(u32_of(i.lost)),
        ));
        out.push(Vendor(
            VENDOR_ACME,
            acme_type::CALLED_LOST,
            Integer(u32_of(o.lost)),
        ));
        out.push(Vendor(
            VENDOR_ACME,
            acme_type::DURATION_MS,
            Text(r.duration_ms().to_string()),
        ));
    }
    if let Some(cause) = r.ended_by.terminate_cause() {
        out.push(Standard(std_type::ACCT_TERMINATE_CAUSE, Integer(cause)));
        out.push(Vendor(
            VENDOR_ACME,
            acme_type::DISCONNECT_INITIATOR,
            Integer(r.ended_by.initiator()),
        ));
        text(
            &mut out,
            Vendor(
                VENDOR_ACME,
                acme_type::ENDED_BY,
                Text(r.ended_by.as_str().into()),
            ),
        );
    }
    for (t, ms) in [
        (cisco_type::SETUP_TIME, r.setup_ms),
        (cisco_type::CONNECT_TIME, r.connect_ms),
        (cisco_type::DISCONNECT_TIME, r.disconnect_ms),
    ] {
        if let Some(s) = h323_time(ms) {
            out.push(Vendor(VENDOR_CISCO, t, Text(s)));
        }
    }
    out.push(Vendor(
        VENDOR_ACME,
        acme_type::PROTOCOL_TYPE,
        Text("SIP".into()),
    ));
    for (t, v) in [
        (acme_type::INGRESS_CALL_ID, &r.ingress_call_id),
        (acme_type::EGRESS_CALL_ID, &r.egress_call_id),
        (acme_type::INGRESS_REALM, &r.ingress_realm),
        (acme_type::EGRESS_REALM, &r.egress_realm),
        (acme_type::ORIGINATING_TRUNK_GROUP, &r.ingress_agent),
        (acme_type::TERMINATING_TRUNK_GROUP, &r.egress_agent),
        (acme_type::INGRESS_REMOTE_ADDR, &r.caller_address),
        (acme_type::EGRESS_REMOTE_ADDR, &r.callee_address),
        (acme_type::NODE, &r.node),
    ] {
        text(&mut out, Vendor(VENDOR_ACME, t, Text(v.clone())));
    }
    out.push(Vendor(
        VENDOR_ACME,
        acme_type::SIP_STATUS,
        Integer(u32::from(r.status)),
    ));
    out.push(Vendor(
        VENDOR_ACME,
        acme_type::CDR_SEQUENCE,
        Integer(r.interim),
    ));
    if r.reroutes > 0 {
        out.push(Vendor(
            VENDOR_ACME,
            acme_type::REROUTES,
            Text(r.reroutes.to_string()),
        ));
    }
    // RFC 2865 caps a string at 253 octets; a longer one (a Call-ID can be) is cut, on a
    // character boundary.
    for a in &mut out {
        match a {
            Standard(_, Text(s)) => truncate_at_char(s, 253),
            // A vendor-specific attribute spends 6 octets on vendor, type and length.
            Vendor(_, _, Text(s)) => truncate_at_char(s, 247),
            _ => {}
        }
    }
    out
}

fn truncate_at_char(s: &mut String, cap: usize) {
    if s.len() > cap {
        let mut end = cap;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{sample, EndedBy, RecordKind};

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

    #[test]
    fn a_long_call_id_is_cut_to_fit_an_attribute() {
        let mut r = sample(RecordKind::Start);
        r.ingress_call_id = "é".repeat(200);
        for a in attributes(&r, 0) {
            if let Attribute::Vendor(_, _, Value::Text(s))
            | Attribute::Standard(_, Value::Text(s)) = a
            {
                assert!(s.len() <= 247);
            }
        }
    }
}
