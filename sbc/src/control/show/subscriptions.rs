//! `show subscriptions`: the subscription dialogs (SUBSCRIBE, and REFER's implicit one) with
//! their event, both legs, expiry and NOTIFYs relayed, and the counters.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::SubscriptionsReport;

/// The text view.
pub(crate) fn text(r: &SubscriptionsReport) -> String {
    let mut out = format!("{} subscriptions\n", r.subscriptions);
    if !r.rows.is_empty() {
        let _ = writeln!(
            out,
            "  {:<16} {:<18} {:<11} {:<24} {:<24} {:>9} {:>8}",
            "id", "event", "state", "subscriber", "notifier", "expires-s", "notifies"
        );
    }
    for row in &r.rows {
        let expires = row
            .expires_s
            .map_or_else(|| "-".to_owned(), |s| s.to_string());
        let _ = writeln!(
            out,
            "  {:<16} {:<18} {:<11} {:<24} {:<24} {:>9} {:>8}",
            row.id, row.event, row.state, row.subscriber, row.notifier, expires, row.notifies
        );
    }
    if r.rows.len() < r.subscriptions {
        let _ = writeln!(out, "  ... {} more", r.subscriptions - r.rows.len());
    }
    let _ = writeln!(
        out,
        "accepted {}, refused {}, ended by NOTIFY or 481 {}, expired {}",
        r.accepted, r.refused, r.ended, r.expired
    );
    out
}

/// The JSON view.
pub(crate) fn json(r: &SubscriptionsReport) -> Value {
    json!(r)
}
