//! The demo's chart: a self-contained SVG written by hand (no plotting dependency): calls per
//! second, established calls, memory and health of both nodes and which node is active, over
//! time, with the demo's events marked.

use std::fmt::Write as _;

/// One point in time of the demo.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Sample {
    /// Seconds since the demo started.
    pub(crate) t: f64,
    /// New calls attempted per second (the caller's rate).
    pub(crate) cps_attempted: f64,
    /// New calls answered per second.
    pub(crate) cps_answered: f64,
    /// Calls established now, as the caller sees them.
    pub(crate) established: u64,
    /// Dialogs the active node holds.
    pub(crate) dialogs: Option<u64>,
    /// Memory utilisation of each node, percent.
    pub(crate) memory: [Option<f64>; 2],
    /// Health score of each node.
    pub(crate) health: [Option<u8>; 2],
    /// Which node is active (index), if any.
    pub(crate) active: Option<usize>,
}

/// A vertical line across the chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marker {
    /// Seconds since the demo started.
    pub(crate) t: f64,
    /// What happened.
    pub(crate) label: String,
    /// An SVG colour.
    pub(crate) color: &'static str,
}

/// The colours of sbc-a and sbc-b.
pub(crate) const NODE_COLORS: [&str; 2] = ["#1f77b4", "#ff7f0e"];

const WIDTH: f64 = 1100.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 190.0;
const GAP: f64 = 26.0;

struct Panel {
    title: &'static str,
    height: f64,
    y_max: f64,
    unit: &'static str,
}

struct Frame {
    x0: f64,
    x1: f64,
    t_max: f64,
}

impl Frame {
    fn x(&self, t: f64) -> f64 {
        self.x0 + (t / self.t_max).clamp(0.0, 1.0) * (self.x1 - self.x0)
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" tick step for a range.
fn step(range: f64, ticks: f64) -> f64 {
    let raw = (range / ticks).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0, 10.0] {
        if raw <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

/// A polyline of the points that exist; gaps (None) break the line.
/// How a series is drawn: colour, width, dash pattern.
type Style<'a> = (&'a str, f64, Option<&'a str>);

fn lines(
    out: &mut String,
    frame: &Frame,
    top: f64,
    panel: &Panel,
    points: &[(f64, Option<f64>)],
    (color, width, dash): Style<'_>,
) {
    let y = |v: f64| top + panel.height - (v / panel.y_max).clamp(0.0, 1.0) * panel.height;
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (t, v) in points {
        match v {
            Some(v) => {
                if let Some(r) = runs.last_mut() {
                    r.push((frame.x(*t), y(*v)));
                }
            }
            None => {
                if runs.last().is_some_and(|r| !r.is_empty()) {
                    runs.push(Vec::new());
                }
            }
        }
    }
    for run in runs.iter().filter(|r| !r.is_empty()) {
        let pts: Vec<String> = run.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="{width}"{} stroke-linejoin="round" points="{}"/>"#,
            dash.map(|d| format!(r#" stroke-dasharray="{d}""#))
                .unwrap_or_default(),
            pts.join(" ")
        );
    }
}

fn panel_frame(out: &mut String, frame: &Frame, top: f64, panel: &Panel) {
    let _ = writeln!(
        out,
        r##"<rect x="{:.1}" y="{top:.1}" width="{:.1}" height="{:.1}" fill="#fbfbfb" stroke="#999"/>"##,
        frame.x0,
        frame.x1 - frame.x0,
        panel.height
    );
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="#333">{}</text>"##,
        frame.x0,
        top - 6.0,
        esc(panel.title)
    );
    let s = step(panel.y_max, 4.0);
    let mut v = 0.0;
    while v <= panel.y_max + 1e-9 {
        let y = top + panel.height - v / panel.y_max * panel.height;
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}{}</text>"##,
            frame.x0,
            frame.x1,
            frame.x0 - 6.0,
            y + 4.0,
            fmt_num(v),
            panel.unit
        );
        v += s;
    }
}

fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn legend(out: &mut String, x: f64, y: f64, items: &[(&str, &str, Option<&str>)]) {
    for (i, (label, color, dash)) in items.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{color}" stroke-width="2.5"{}/><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
            x + 22.0,
            dash.map(|d| format!(r#" stroke-dasharray="{d}""#))
                .unwrap_or_default(),
            x + 28.0,
            yy + 4.0,
            esc(label)
        );
    }
}

/// How many staggered rows the markers' badges need.
fn badge_rows(markers: &[Marker], frame: &Frame) -> usize {
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for m in markers {
        let x = frame.x(m.t);
        match rows
            .iter_mut()
            .find(|r| r.iter().all(|&o| (o - x).abs() >= 17.0))
        {
            Some(r) => r.push(x),
            None => rows.push(vec![x]),
        }
    }
    rows.len().max(1)
}

/// The chart as an SVG document.
pub(crate) fn svg(title: &str, subtitle: &str, samples: &[Sample], markers: &[Marker]) -> String {
    let t_max = samples
        .last()
        .map(|s| s.t)
        .unwrap_or(1.0)
        .max(markers.iter().map(|m| m.t).fold(1.0, f64::max))
        .max(1.0);
    let frame = Frame {
        x0: LEFT,
        x1: WIDTH - RIGHT,
        t_max,
    };
    let max_of = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(f).fold(0.0, f64::max);
    let cps_max = max_of(&|s| s.cps_attempted.max(s.cps_answered));
    let calls_max = max_of(&|s| (s.established as f64).max(s.dialogs.unwrap_or(0) as f64));
    let mem_max = max_of(&|s| s.memory[0].unwrap_or(0.0).max(s.memory[1].unwrap_or(0.0)));
    let nice_max = |m: f64, floor: f64| {
        let m = m.max(floor) * 1.1;
        let s = step(m, 4.0);
        (m / s).ceil() * s
    };
    let panels = [
        Panel {
            title: "Calls per second (the lab UAC toward the pair's service address)",
            height: 130.0,
            y_max: nice_max(cps_max, 5.0),
            unit: "",
        },
        Panel {
            title: "Calls established (caller's view) and dialogs held by the active node",
            height: 130.0,
            y_max: nice_max(calls_max, 10.0),
            unit: "",
        },
        Panel {
            title: "Memory of each node (process resident / memory-limit-mb 64)",
            height: 190.0,
            y_max: nice_max(mem_max, 100.0),
            unit: "%",
        },
        Panel {
            title: "Health score of each node",
            height: 100.0,
            y_max: 100.0,
            unit: "",
        },
        Panel {
            title: "Active node",
            height: 28.0,
            y_max: 1.0,
            unit: "",
        },
    ];
    // The header: title, subtitle, the key of the event markers (three columns), then a strip
    // for the markers' numbered badges.
    let key_rows = markers.len().div_ceil(3);
    let key_top = 62.0;
    let badges_top = key_top + key_rows as f64 * 15.0 + 2.0;
    let badge_rows = badge_rows(markers, &frame);
    let header = badges_top + badge_rows as f64 * 17.0;
    let mut tops = Vec::new();
    let mut y = header + GAP;
    for p in &panels {
        tops.push(y);
        y += p.height + GAP;
    }
    let bottom = y - GAP;
    let height = bottom + 50.0;

    let mut out = String::new();
    let _ = writeln!(
        out,
        r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="24" font-size="17" font-weight="bold" fill="#111">{}</text>
<text x="{LEFT}" y="42" font-size="12" fill="#444">{}</text>"##,
        esc(title),
        esc(subtitle)
    );
    let col = (WIDTH - LEFT - 40.0) / 3.0;
    for (k, m) in markers.iter().enumerate() {
        let x = LEFT + (k % 3) as f64 * col;
        let y = key_top + (k / 3) as f64 * 15.0;
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="6" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="9" font-weight="bold" fill="white" text-anchor="middle">{}</text><text x="{:.1}" y="{:.1}" font-size="11" fill="{c}">{} s  {}</text>"#,
            x + 6.0,
            y - 4.0,
            x + 6.0,
            y - 0.8,
            k + 1,
            x + 16.0,
            y,
            fmt_num((m.t * 10.0).round() / 10.0),
            esc(&m.label),
            c = m.color,
        );
    }

    // Panels 1-4: axes and grid, then series.
    for (p, top) in panels.iter().zip(&tops).take(4) {
        panel_frame(&mut out, &frame, *top, p);
    }
    let series = |f: &dyn Fn(&Sample) -> Option<f64>| -> Vec<(f64, Option<f64>)> {
        samples.iter().map(|s| (s.t, f(s))).collect()
    };
    // 1: CPS.
    lines(
        &mut out,
        &frame,
        tops[0],
        &panels[0],
        &series(&|s| Some(s.cps_attempted)),
        ("#888", 1.5, Some("5,3")),
    );
    lines(
        &mut out,
        &frame,
        tops[0],
        &panels[0],
        &series(&|s| Some(s.cps_answered)),
        ("#2ca02c", 2.2, None),
    );
    legend(
        &mut out,
        frame.x1 + 14.0,
        tops[0] + 12.0,
        &[
            ("attempted / s", "#888", Some("5,3")),
            ("answered / s", "#2ca02c", None),
        ],
    );
    // 2: calls.
    lines(
        &mut out,
        &frame,
        tops[1],
        &panels[1],
        &series(&|s| Some(s.established as f64)),
        ("#222", 2.2, None),
    );
    lines(
        &mut out,
        &frame,
        tops[1],
        &panels[1],
        &series(&|s| s.dialogs.map(|d| d as f64)),
        ("#c77dff", 2.0, Some("6,4")),
    );
    legend(
        &mut out,
        frame.x1 + 14.0,
        tops[1] + 12.0,
        &[
            ("established (UAC)", "#222", None),
            ("dialogs on the active", "#c77dff", Some("6,4")),
        ],
    );
    // 3: memory, with the thresholds.
    for (name, value, color) in [
        ("minor 60%", 60.0, "#d4b106"),
        ("major 70%", 70.0, "#e8740c"),
        ("critical 80%", 80.0, "#d62728"),
    ] {
        let y = tops[2] + panels[2].height - value / panels[2].y_max * panels[2].height;
        let _ = writeln!(
            out,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{color}" stroke-dasharray="6,4"/><text x="{:.1}" y="{:.1}" font-size="10" fill="{color}" text-anchor="end">{name}</text>"#,
            frame.x0,
            frame.x1,
            frame.x1 - 4.0,
            y - 3.0
        );
    }
    for (i, color) in NODE_COLORS.iter().enumerate() {
        lines(
            &mut out,
            &frame,
            tops[2],
            &panels[2],
            &series(&|s| s.memory[i]),
            (color, 2.2, None),
        );
    }
    legend(
        &mut out,
        frame.x1 + 14.0,
        tops[2] + 12.0,
        &[
            ("sbc-a memory", NODE_COLORS[0], None),
            ("sbc-b memory", NODE_COLORS[1], None),
        ],
    );
    // 4: health (sbc-b dashed so that equal scores stay visible).
    for (i, color) in NODE_COLORS.iter().enumerate() {
        lines(
            &mut out,
            &frame,
            tops[3],
            &panels[3],
            &series(&|s| s.health[i].map(f64::from)),
            (color, 2.2, (i == 1).then_some("7,4")),
        );
    }
    legend(
        &mut out,
        frame.x1 + 14.0,
        tops[3] + 12.0,
        &[
            ("sbc-a health", NODE_COLORS[0], None),
            ("sbc-b health", NODE_COLORS[1], Some("7,4")),
        ],
    );
    // 5: the active node, as coloured spans.
    let strip = &panels[4];
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="#333">{}</text><rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="#eee" stroke="#999"/>"##,
        frame.x0,
        tops[4] - 6.0,
        strip.title,
        frame.x0,
        tops[4],
        frame.x1 - frame.x0,
        strip.height
    );
    let mut i = 0;
    while i < samples.len() {
        let who = samples[i].active;
        let mut j = i;
        while j + 1 < samples.len() && samples[j + 1].active == who {
            j += 1;
        }
        let t0 = samples[i].t;
        let t1 = samples.get(j + 1).map_or(samples[j].t, |s| s.t);
        if let Some(n) = who {
            let (x0, x1) = (frame.x(t0), frame.x(t1));
            let _ = writeln!(
                out,
                r#"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
                tops[4] + 1.0,
                (x1 - x0).max(0.5),
                strip.height - 2.0,
                NODE_COLORS[n]
            );
            if x1 - x0 > 60.0 {
                let _ = writeln!(
                    out,
                    r#"<text x="{:.1}" y="{:.1}" font-size="12" fill="white" text-anchor="middle" font-weight="bold">{} active</text>"#,
                    (x0 + x1) / 2.0,
                    tops[4] + strip.height / 2.0 + 4.0,
                    ["sbc-a", "sbc-b"][n]
                );
            }
        }
        i = j + 1;
    }
    legend(
        &mut out,
        frame.x1 + 14.0,
        tops[4] + 8.0,
        &[
            ("sbc-a active", NODE_COLORS[0], None),
            ("sbc-b active", NODE_COLORS[1], None),
        ],
    );

    // The time axis.
    let s = step(t_max, 12.0).max(1.0);
    let mut t = 0.0;
    while t <= t_max + 1e-9 {
        let x = frame.x(t);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#555"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
            fmt_num(t)
        );
        t += s;
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">seconds since the demo started</text>"##,
        (frame.x0 + frame.x1) / 2.0,
        bottom + 36.0
    );

    // Event markers: a dashed line through every panel from a numbered badge (staggered when
    // events are close together); the numbers are explained in the header's key.
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for (k, m) in markers.iter().enumerate() {
        let x = frame.x(m.t);
        let row = rows
            .iter()
            .position(|r| r.iter().all(|&o| (o - x).abs() >= 17.0))
            .unwrap_or_else(|| {
                rows.push(Vec::new());
                rows.len() - 1
            });
        rows[row].push(x);
        let by = badges_top + 8.0 + row as f64 * 17.0;
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{by:.1}" x2="{x:.1}" y2="{bottom:.1}" stroke="{c}" stroke-width="1.3" stroke-dasharray="4,3" opacity="0.85"/><circle cx="{x:.1}" cy="{by:.1}" r="7.5" fill="{c}"/><text x="{x:.1}" y="{:.1}" font-size="10" font-weight="bold" fill="white" text-anchor="middle">{}</text>"#,
            by + 3.5,
            k + 1,
            c = m.color,
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_series_and_marker() {
        let samples: Vec<Sample> = (0..40)
            .map(|i| Sample {
                t: i as f64 * 0.5,
                cps_attempted: 10.0,
                cps_answered: if i == 20 { 0.0 } else { 10.0 },
                established: i,
                dialogs: Some(i),
                memory: [Some(if i > 20 { 120.0 } else { 40.0 }), Some(30.0)],
                health: [Some(if i > 25 { 0 } else { 100 }), Some(100)],
                active: Some(usize::from(i > 26)),
            })
            .collect();
        let markers = vec![Marker {
            t: 12.0,
            label: "switchover <sbc-b>".into(),
            color: "#d62728",
        }];
        let s = svg("t", "sub", &samples, &markers);
        assert!(s.starts_with("<?xml"));
        assert!(s.ends_with("</svg>\n"));
        assert!(s.matches("<polyline").count() >= 8, "{s}");
        assert!(s.contains("switchover &lt;sbc-b&gt;"));
        assert!(s.contains("sbc-b active"));
    }

    #[test]
    fn nice_steps() {
        assert!((step(100.0, 4.0) - 25.0).abs() < 1e-9);
        assert!((step(60.0, 12.0) - 5.0).abs() < 1e-9);
    }
}
