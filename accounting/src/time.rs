//! A record's times as text, written into a caller's buffer (no allocation per time): ISO 8601
//! for the CSV files, Cisco's `h323-*-time` form for RADIUS. Chrono does the calendar; the
//! digits are written here (its `format` parses a pattern for every call, the accounting
//! thread's largest cost per record once measured).

use chrono::{Datelike as _, Timelike as _};

const WEEKDAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn utc(ms: u64) -> Option<chrono::DateTime<chrono::Utc>> {
    if ms == 0 {
        return None;
    }
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
}

/// Appends `n` in decimal with at least `width` digits (leading zeros).
fn digits(out: &mut Vec<u8>, n: u64, width: usize) {
    let mut buf = [b'0'; 20];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let start = i.min(buf.len() - width.min(buf.len()));
    out.extend_from_slice(&buf[start..]);
}

/// Appends `n` in decimal.
pub fn write_decimal(out: &mut Vec<u8>, n: u64) {
    digits(out, n, 1);
}

fn clock(out: &mut Vec<u8>, t: &chrono::DateTime<chrono::Utc>) {
    digits(out, u64::from(t.hour()), 2);
    out.push(b':');
    digits(out, u64::from(t.minute()), 2);
    out.push(b':');
    digits(out, u64::from(t.second()), 2);
    out.push(b'.');
    digits(out, u64::from(t.timestamp_subsec_millis().min(999)), 3);
}

/// Appends `ms` (since the Unix epoch) as ISO 8601 UTC with milliseconds
/// (`2026-12-04T10:15:00.123Z`); nothing for 0 (never happened). Returns whether it wrote.
pub fn write_iso(out: &mut Vec<u8>, ms: u64) -> bool {
    let Some(t) = utc(ms) else {
        return false;
    };
    digits(out, u64::try_from(t.year()).unwrap_or(0), 4);
    out.push(b'-');
    digits(out, u64::from(t.month()), 2);
    out.push(b'-');
    digits(out, u64::from(t.day()), 2);
    out.push(b'T');
    clock(out, &t);
    out.push(b'Z');
    true
}

/// Appends `ms` as Cisco's `h323-*-time` string with milliseconds, as Oracle's SBC writes it
/// (`10:15:00.123 UTC Fri Dec 04 2026`); nothing for 0. Returns whether it wrote.
pub fn write_h323(out: &mut Vec<u8>, ms: u64) -> bool {
    let Some(t) = utc(ms) else {
        return false;
    };
    clock(out, &t);
    out.extend_from_slice(b" UTC ");
    let weekday = t.weekday().num_days_from_monday() as usize;
    out.extend_from_slice(WEEKDAYS.get(weekday).unwrap_or(&"Mon").as_bytes());
    out.push(b' ');
    let month = t.month0() as usize;
    out.extend_from_slice(MONTHS.get(month).unwrap_or(&"Jan").as_bytes());
    out.push(b' ');
    digits(out, u64::from(t.day()), 2);
    out.push(b' ');
    digits(out, u64::try_from(t.year()).unwrap_or(0), 4);
    true
}

/// Runs `write` into a new string (what the owned forms use).
pub(crate) fn to_string(write: impl FnOnce(&mut Vec<u8>) -> bool) -> Option<String> {
    let mut out = Vec::with_capacity(40);
    write(&mut out).then(|| String::from_utf8(out).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chrono_form(ms: u64, pattern: &str) -> String {
        utc(ms)
            .map(|t| t.format(pattern).to_string())
            .unwrap_or_default()
    }

    #[test]
    fn times_read_as_chrono_formats_them() {
        // Around the epoch, leap days, a year's last millisecond, a far year.
        for ms in [
            1,
            999,
            1_000,
            951_782_400_000,
            1_709_164_800_123,
            1_764_849_661_999,
            1_798_761_599_999,
            4_102_444_800_007,
            253_402_300_799_999,
        ] {
            assert_eq!(
                to_string(|o| write_iso(o, ms)).unwrap_or_default(),
                chrono_form(ms, "%Y-%m-%dT%H:%M:%S%.3fZ"),
                "{ms}"
            );
            assert_eq!(
                to_string(|o| write_h323(o, ms)).unwrap_or_default(),
                chrono_form(ms, "%H:%M:%S%.3f UTC %a %b %d %Y"),
                "{ms}"
            );
        }
        assert_eq!(to_string(|o| write_iso(o, 0)), None);
        assert_eq!(to_string(|o| write_h323(o, 0)), None);
    }

    #[test]
    fn decimals_have_every_digit() {
        for n in [0, 7, 10, 99, 1_000, u64::from(u32::MAX), u64::MAX] {
            let mut out = Vec::new();
            write_decimal(&mut out, n);
            assert_eq!(out, n.to_string().into_bytes());
        }
    }
}
