//! The local CDR files (`file-output`): one CSV line per record, one header per file, and when
//! a file is closed for a new one (`max-file-size`, `file-rotate-time`).

use crate::record::CallRecord;

/// The CSV columns, in order (the manual's table documents each).
pub const COLUMNS: [&str; 28] = [
    "node",
    "session-id",
    "record",
    "interim",
    "linked-session-id",
    "calling",
    "called",
    "ingress-realm",
    "egress-realm",
    "ingress-agent",
    "egress-agent",
    "ingress-call-id",
    "egress-call-id",
    "caller-address",
    "callee-address",
    "setup-time",
    "connect-time",
    "disconnect-time",
    "duration-ms",
    "status",
    "ended-by",
    "reroutes",
    "caller-packets",
    "caller-octets",
    "caller-lost",
    "callee-packets",
    "callee-octets",
    "callee-lost",
];

/// A time in milliseconds since the Unix epoch as ISO 8601 UTC with milliseconds
/// (`2026-12-04T10:15:00.123Z`); empty for 0 (never happened).
#[must_use]
pub fn iso_time(ms: u64) -> String {
    if ms == 0 {
        return String::new();
    }
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

fn fields(r: &CallRecord) -> [String; 28] {
    [
        r.node.clone(),
        r.session_id.clone(),
        r.kind.as_str().to_owned(),
        r.interim.to_string(),
        r.linked_session_id.clone(),
        r.calling.clone(),
        r.called.clone(),
        r.ingress_realm.clone(),
        r.egress_realm.clone(),
        r.ingress_agent.clone(),
        r.egress_agent.clone(),
        r.ingress_call_id.clone(),
        r.egress_call_id.clone(),
        r.caller_address.clone(),
        r.callee_address.clone(),
        iso_time(r.setup_ms),
        iso_time(r.connect_ms),
        iso_time(r.disconnect_ms),
        r.duration_ms().to_string(),
        r.status.to_string(),
        r.ended_by.as_str().to_owned(),
        r.reroutes.to_string(),
        r.caller_to_callee.packets.to_string(),
        r.caller_to_callee.octets.to_string(),
        r.caller_to_callee.lost.to_string(),
        r.callee_to_caller.packets.to_string(),
        r.callee_to_caller.octets.to_string(),
        r.callee_to_caller.lost.to_string(),
    ]
}

fn line<I, S>(cells: I) -> Vec<u8>
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    // A line is a few hundred bytes: the writer's default 8 KiB buffer would be allocated
    // (and zeroed) for each record.
    let mut w = csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .buffer_capacity(512)
        .from_writer(Vec::with_capacity(512));
    // Writing into a Vec fails only on a programming error (a record of another length).
    if w.write_record(cells).is_err() {
        return Vec::new();
    }
    w.into_inner().unwrap_or_default()
}

/// The header line of every file (RFC 4180: CRLF ends each line).
#[must_use]
pub fn header() -> Vec<u8> {
    line(COLUMNS)
}

/// One record as a CSV line, quoted where a field needs it (a comma, a quote, a line break:
/// a display name can hold any of them).
#[must_use]
pub fn record_line(r: &CallRecord) -> Vec<u8> {
    line(fields(r))
}

/// When the open CDR file is closed and a new one started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rotation {
    /// `max-file-size`, bytes.
    pub max_file_size: u64,
    /// `file-rotate-time`, in milliseconds; 0: by size only.
    pub rotate_ms: u64,
}

impl Rotation {
    /// Whether a file of `size` bytes opened at `opened_ms` is closed before a line of
    /// `next` bytes is written at `now_ms` (a file holding only its header is never closed:
    /// every file has at least one record).
    #[must_use]
    pub fn due(&self, size: u64, header: u64, opened_ms: u64, now_ms: u64, next: u64) -> bool {
        if size <= header {
            return false;
        }
        size + next > self.max_file_size
            || (self.rotate_ms > 0 && now_ms.saturating_sub(opened_ms) >= self.rotate_ms)
    }
}

/// The name of a CDR file opened at `opened_ms` with sequence number `seq` (names sort in the
/// order the files were written): `cdr-20261204T101500.123Z-000001.csv`.
#[must_use]
pub fn file_name(opened_ms: u64, seq: u64) -> String {
    let stamp = iso_time(opened_ms.max(1)).replace(['-', ':'], "");
    format!("cdr-{stamp}-{seq:06}.csv")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{sample, RecordKind};

    #[test]
    fn a_record_is_one_quoted_line_with_every_column() {
        let mut r = sample(RecordKind::Stop);
        r.calling = "\"Bob, jr\" <b>".into();
        r.connect_ms = 1_764_849_601_250;
        r.disconnect_ms = 1_764_849_661_500;
        let text = String::from_utf8(record_line(&r)).expect("utf-8");
        assert!(text.ends_with("\r\n"));
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .from_reader(text.as_bytes());
        let row = reader.records().next().expect("a row").expect("valid");
        assert_eq!(row.len(), COLUMNS.len());
        assert_eq!(&row[5], "\"Bob, jr\" <b>");
        assert_eq!(&row[16], "2025-12-04T12:00:01.250Z");
        assert_eq!(&row[18], "60250");
        assert_eq!(
            String::from_utf8(header())
                .expect("utf-8")
                .split(',')
                .count(),
            28
        );
    }

    #[test]
    fn a_file_rotates_at_its_size_or_its_age_but_never_empty() {
        let r = Rotation {
            max_file_size: 1000,
            rotate_ms: 60_000,
        };
        assert!(!r.due(100, 100, 0, 10_000_000, 5000), "only a header");
        assert!(r.due(900, 100, 0, 1000, 200));
        assert!(!r.due(700, 100, 0, 1000, 200));
        assert!(r.due(700, 100, 0, 60_000, 200));
        assert_eq!(
            file_name(1_764_849_601_250, 7),
            "cdr-20251204T120001.250Z-000007.csv"
        );
    }
}
