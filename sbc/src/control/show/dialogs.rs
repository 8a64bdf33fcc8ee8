//! `show dialogs`: the dialog table of every shard, each with its live media counters.

use std::collections::HashMap;
use std::fmt::Write as _;

use sbc_proto::sip::dialog::Dialog;
use serde_json::{json, Value};

use crate::runtime::SessionReport;

/// Dialogs listed in the text view; `--json` gives all.
const TEXT_LIMIT: usize = 200;

/// The dialogs and the media relay's live counters by call.
pub(crate) struct DialogsView {
    /// Every dialog, without its replicated media copy (the live one is in `media`).
    pub(crate) dialogs: Vec<Dialog>,
    /// Live media counters by call id.
    pub(crate) media: HashMap<u64, SessionReport>,
}

impl DialogsView {
    /// The view of `dialogs` with the relay's `calls`.
    pub(crate) fn new(mut dialogs: Vec<Dialog>, calls: Vec<SessionReport>) -> Self {
        // Live media counters (the dialog's own copy is what was last replicated).
        for d in &mut dialogs {
            d.media = None;
        }
        Self {
            dialogs,
            media: calls.into_iter().map(|s| (s.call, s)).collect(),
        }
    }
}

/// The text view.
pub(crate) fn text(v: &DialogsView) -> String {
    let mut out = format!("{} dialogs\n", v.dialogs.len());
    for d in v.dialogs.iter().take(TEXT_LIMIT) {
        let media = v.media.get(&d.id).map_or(String::new(), |s| {
            format!(
                "  media {}/{} packets, {}/{} lost",
                s.from_caller.packets,
                s.from_callee.packets,
                s.from_caller.lost,
                s.from_callee.lost
            )
        });
        let _ = writeln!(
            out,
            "{:016x} {:<10} caller {} {}  callee {} {}{media}",
            d.id,
            format!("{:?}", d.state).to_lowercase(),
            d.caller.peer,
            d.caller.call_id,
            d.callee.peer,
            d.callee.call_id
        );
    }
    if v.dialogs.len() > TEXT_LIMIT {
        out.push_str("... (first 200 shown; --json gives all)\n");
    }
    out
}

/// The JSON view.
pub(crate) fn json(v: &DialogsView) -> Value {
    let media: Vec<_> = v.dialogs.iter().map(|d| v.media.get(&d.id)).collect();
    json!({"dialogs": v.dialogs, "media": media})
}
