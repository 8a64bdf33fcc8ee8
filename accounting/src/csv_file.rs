//! The local CDR files (`file-output`): one CSV line per record, one header per file, and when
//! a file is closed for a new one (`max-file-size`, `file-rotate-time`).

use crate::record::CallRecord;
use crate::time;

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
    time::to_string(|o| time::write_iso(o, ms)).unwrap_or_default()
}

/// One cell of a line, formatted only when it is written.
enum Cell<'a> {
    Text(&'a str),
    Number(u64),
    Time(u64),
}

fn cells(r: &CallRecord) -> [Cell<'_>; 28] {
    use Cell::{Number, Text, Time};
    let (i, o) = (&r.caller_to_callee, &r.callee_to_caller);
    [
        Text(r.node()),
        Text(r.session_id()),
        Text(r.kind.as_str()),
        Number(u64::from(r.interim)),
        Text(r.linked_session_id()),
        Text(r.calling()),
        Text(r.called()),
        Text(r.ingress_realm()),
        Text(r.egress_realm()),
        Text(r.ingress_agent()),
        Text(r.egress_agent()),
        Text(r.ingress_call_id()),
        Text(r.egress_call_id()),
        Text(r.caller_address()),
        Text(r.callee_address()),
        Time(r.setup_ms),
        Time(r.connect_ms),
        Time(r.disconnect_ms),
        Number(r.duration_ms()),
        Number(u64::from(r.status)),
        Text(r.ended_by.as_str()),
        Number(u64::from(r.reroutes)),
        Number(i.packets),
        Number(i.octets),
        Number(i.lost),
        Number(o.packets),
        Number(o.octets),
        Number(o.lost),
    ]
}

/// Appends one cell (RFC 4180): as it is, or quoted with its quotes doubled when it holds a
/// comma, a quote or a line break, as the `csv` crate's writer does (a test compares them).
/// Written here because the crate's writer, built per line and stepping a state machine per
/// byte, was the largest user-space cost of a record on the accounting thread.
fn write_cell(out: &mut Vec<u8>, cell: &[u8]) {
    // Every byte looked at, without a branch per byte (the compiler vectorises it).
    let special = cell.iter().fold(false, |seen, &b| {
        seen | matches!(b, b',' | b'"' | b'\r' | b'\n')
    });
    if !special {
        out.extend_from_slice(cell);
        return;
    }
    out.push(b'"');
    for &b in cell {
        if b == b'"' {
            out.push(b'"');
        }
        out.push(b);
    }
    out.push(b'"');
}

/// Whether a text cell would start a formula in a spreadsheet that opens the file (CSV
/// injection): its first byte is `=`, `@`, a tab or a carriage return, or `+` or `-` not
/// followed by digits only (`+15551234` is a number and stays as it is; `+1-555` or
/// `-cmd|...` is a formula). Such a cell is written with a `'` before it, as OWASP advises: a
/// caller chooses the calling number and the Call-ID, and the operator opens these files.
fn starts_a_formula(cell: &[u8]) -> bool {
    match cell.split_first() {
        Some((b'=' | b'@' | b'\t' | b'\r', _)) => true,
        Some((b'+' | b'-', rest)) => !rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

/// Appends a text cell of a record: [`write_cell`], with a `'` before a cell that
/// [`starts_a_formula`] (inside its quotes when it needs them).
fn write_text_cell(out: &mut Vec<u8>, cell: &[u8]) {
    if starts_a_formula(cell) {
        let mut guarded = Vec::with_capacity(cell.len() + 1);
        guarded.push(b'\'');
        guarded.extend_from_slice(cell);
        write_cell(out, &guarded);
    } else {
        write_cell(out, cell);
    }
}

/// Appends one line of `cells` to `out`, CRLF-terminated.
fn write_line<I, S>(cells: I, out: &mut Vec<u8>)
where
    I: IntoIterator<Item = S>,
    S: AsRef<[u8]>,
{
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_cell(out, cell.as_ref());
    }
    out.extend_from_slice(b"\r\n");
}

/// The header line of every file (RFC 4180: CRLF ends each line).
#[must_use]
pub fn header() -> Vec<u8> {
    let mut out = Vec::new();
    write_line(COLUMNS, &mut out);
    out
}

/// Appends one record as a CSV line to `out`, quoted where a field needs it (a comma, a
/// quote, a line break: a display name can hold any of them), a text field that would start
/// a spreadsheet formula after a `'` ([`starts_a_formula`]). Strings are copied from the
/// record, numbers and times written straight into `out`: no allocation per line.
pub fn write_record_line(r: &CallRecord, out: &mut Vec<u8>) {
    for (i, cell) in cells(r).iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        match cell {
            Cell::Text(s) => write_text_cell(out, s.as_bytes()),
            // Digits, and times of digits, '-', ':', '.', 'T' and 'Z': never quoted.
            Cell::Number(n) => time::write_decimal(out, *n),
            Cell::Time(ms) => {
                time::write_iso(out, *ms);
            }
        }
    }
    out.extend_from_slice(b"\r\n");
}

/// One record as a CSV line ([`write_record_line`] into a new buffer).
#[must_use]
pub fn record_line(r: &CallRecord) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write_record_line(r, &mut out);
    out
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
    use crate::record::{sample, RecordKind, TextField};

    #[test]
    fn a_record_is_one_quoted_line_with_every_column() {
        let mut r = sample(RecordKind::Stop);
        r.text.set(TextField::Calling, "\"Bob, jr\" <b>");
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
    fn a_text_field_that_would_start_a_formula_is_written_after_a_quote_mark() {
        let read_back = |calling: &str| {
            let mut r = sample(RecordKind::Stop);
            r.text.set(TextField::Calling, calling);
            let line = record_line(&r);
            let mut reader = csv::ReaderBuilder::new()
                .has_headers(false)
                .from_reader(line.as_slice());
            let row = reader.records().next().expect("a row").expect("valid");
            row[5].to_owned()
        };
        for (calling, written) in [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "'=HYPERLINK(\"http://x\",\"y\")",
            ),
            ("@SUM(1+1)", "'@SUM(1+1)"),
            ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
            ("-2+3", "'-2+3"),
            ("+1-555", "'+1-555"),
            ("\tx", "'\tx"),
            ("\r=1", "'\r=1"),
            // Numbers, and text that starts with anything else, as they are.
            ("+15551234", "+15551234"),
            ("-42", "-42"),
            ("+", "+"),
            ("alice", "alice"),
            ("1=1", "1=1"),
            ("", ""),
        ] {
            assert_eq!(read_back(calling), written, "{calling:?}");
        }
        // Numbers and times are never guarded: an Acct-Session-Id or a status stays as is.
        let r = sample(RecordKind::Stop);
        let line = String::from_utf8(record_line(&r)).expect("utf-8");
        assert!(!line.contains('\''), "{line}");
    }

    #[test]
    fn cells_are_quoted_as_the_csv_crate_quotes_them() {
        let mut cells: Vec<String> = [
            "",
            "a",
            "a,b",
            "\"",
            "say \"hi\"",
            "x\r\ny",
            "\n",
            "\r",
            " lead",
            "trail ",
            "#",
            "é,\"ü\"",
            ",,,",
            "\"\"",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // Every string of up to three of the bytes that matter, and two that do not.
        let alphabet = [",", "\"", "\r", "\n", "a", " "];
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    cells.push(format!("{a}{b}{c}"));
                }
            }
        }
        for pair in cells.chunks(2) {
            let mut ours = Vec::new();
            write_line(pair, &mut ours);
            let mut theirs = Vec::new();
            {
                let mut w = csv::WriterBuilder::new()
                    .terminator(csv::Terminator::CRLF)
                    .from_writer(&mut theirs);
                w.write_record(pair).expect("written");
                w.flush().expect("flushed");
            }
            assert_eq!(
                String::from_utf8_lossy(&ours),
                String::from_utf8_lossy(&theirs),
                "{pair:?}"
            );
        }
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
