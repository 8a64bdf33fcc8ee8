//! `show memory`: memory, heap and CPU against their limits, the process, the lab ballast.

use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::status::MemoryReport;

/// The text view.
pub(crate) fn text(m: &MemoryReport) -> String {
    let r = &m.readings;
    let pct = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.1} %"));
    let mb = |b: Option<u64>| b.map_or("-".to_owned(), |b| format!("{} MB", b >> 20));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<22} {:>12}   (source: {})",
        "memory-utilisation",
        pct(r.memory_percent),
        r.memory_source
    );
    if let Some((used, limit)) = r.memory_bytes {
        let _ = writeln!(
            out,
            "{:<22} {:>12} of {} MB",
            "memory-used",
            format!("{} MB", used >> 20),
            limit >> 20
        );
    }
    let rows = [
        (
            "process-resident",
            format!("{} MB", m.process_resident_bytes >> 20),
        ),
        ("heap-allocated", mb(r.heap_allocated)),
        ("heap-resident", mb(r.heap_resident)),
        ("heap-utilisation", pct(r.heap_percent)),
        ("cpu-utilisation", pct(r.cpu_percent)),
        ("lab-ballast", format!("{} MB", m.ballast_mb)),
    ];
    for (name, value) in rows {
        let _ = writeln!(out, "{name:<22} {value:>12}");
    }
    out
}

/// The JSON view.
pub(crate) fn json(m: &MemoryReport) -> Value {
    json!({
        "readings": m.readings,
        "process_resident_bytes": m.process_resident_bytes,
        "ballast_mb": m.ballast_mb,
    })
}
