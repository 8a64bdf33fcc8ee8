//! A process's CPU time and resident memory from `/proc` (Linux), for the benchmarks: the
//! relay's cost over a measured interval.

use std::io;

/// utime + stime of `pid` in clock ticks (fields 14 and 15 of `/proc/PID/stat`: every thread,
/// live and exited, of the process).
///
/// # Errors
/// No such process, or a stat line that cannot be read.
pub fn cpu_ticks(pid: u32) -> io::Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    parse_cpu_ticks(&stat)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "unreadable /proc/PID/stat"))
}

fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    // The command name (field 2) may hold spaces and parentheses: count after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // rest starts at field 3 (state): utime is field 14, the 12th from here.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// `VmRSS` of `pid`, in kB (`/proc/PID/status`).
///
/// # Errors
/// No such process, or no readable VmRSS line.
pub fn rss_kb(pid: u32) -> io::Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    parse_rss_kb(&status)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no VmRSS in /proc/PID/status"))
}

fn parse_rss_kb(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_ascii_whitespace().next())
        .and_then(|n| n.parse().ok())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_stat_and_status() {
        let stat =
            "1234 (rtp engine) (x)) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 37 0 0 20 0 5 0";
        assert_eq!(parse_cpu_ticks(stat), Some(287));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        let status = "Name:\tx\nVmPeak:\t  100 kB\nVmRSS:\t   5120 kB\n";
        assert_eq!(parse_rss_kb(status), Some(5120));
        assert_eq!(parse_rss_kb("Name: x\n"), None);
    }

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(cpu_ticks(me).is_ok());
        assert!(rss_kb(me).unwrap() > 0);
    }
}
