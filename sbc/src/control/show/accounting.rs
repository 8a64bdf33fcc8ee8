//! `show accounting`: the accounting servers and their state, the spool, the records' counters.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::accounting::AccountingReport;

/// The text view.
pub(crate) fn text(a: &AccountingReport) -> String {
    let mut out = String::new();
    if !a.enabled {
        out.push_str("accounting is disabled (account-config state)\n");
        return out;
    }
    if a.servers.is_empty() {
        out.push_str("no account-server: records go to the CDR files only\n");
    }
    for s in &a.servers {
        let _ = write!(
            out,
            "{:<24} {:<4} {:<8} sent {}, resent {}, acknowledged {}, failures {}, waiting {}",
            s.address,
            s.transport,
            s.state,
            s.sent,
            s.resent,
            s.acknowledged,
            s.failures,
            s.outstanding
        );
        if s.transport == "tls" {
            let _ = write!(out, "; connection {} ({} opened)", s.connection, s.connects);
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "records generated {}, spooled {}, delivered {}, replayed {}, refused {}",
        a.records_generated,
        a.records_spooled,
        a.records_delivered,
        a.records_replayed,
        a.records_refused
    );
    let _ = writeln!(
        out,
        "spool {} records pending ({} in memory, {} on disk only), {} of {} bytes in {} \
         segments{}; queued {}, in flight {}",
        a.spool_pending,
        a.records_in_memory,
        a.records_on_disk_only,
        a.spool_bytes,
        a.spool_max_bytes,
        a.spool_segments,
        if a.spool_full { " FULL" } else { "" },
        a.queued,
        a.in_flight
    );
    let _ = writeln!(
        out,
        "files: {} lines written, {} rotated; write errors {}, torn spool entries {}",
        a.file_records, a.files_rotated, a.write_errors, a.spool_torn
    );
    out
}

/// The JSON view.
pub(crate) fn json(a: &AccountingReport) -> Value {
    json!(a)
}
