//! What the demo's chart shows: calls per second, established calls, memory and health of
//! both nodes and which node is active, over time, with the demo's events on a timeline. It
//! is drawn by the lab's chart module ([`crate::chart`]), as the benchmarks' charts are.

use crate::chart::{
    Chart, Content, MarkerStyle, Panel, RefLabel, RefLine, Series, Span, Stroke, Swatch, XAxis,
    YAxis,
};

pub(crate) use crate::chart::Marker;

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

/// The colours of sbc-a and sbc-b.
pub(crate) const NODE_COLORS: [&str; 2] = ["#1f77b4", "#ff7f0e"];
const NODES: [&str; 2] = ["sbc-a", "sbc-b"];

/// A panel of lines from 0, its maximum automatic (at least `floor`) or fixed.
fn panel(title: &str, height: f64, y: YAxis, series: Vec<Series>) -> Panel {
    Panel {
        title: title.to_string(),
        height,
        y,
        refs: Vec::new(),
        content: Content::Lines(series),
    }
}

fn auto(floor: f64, unit: &str) -> YAxis {
    YAxis {
        unit: unit.to_string(),
        max: None,
        floor,
    }
}

/// The runs of samples with the same active node, as spans from one run's first sample to
/// the next run's.
fn active_spans(samples: &[Sample]) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut i = 0;
    while i < samples.len() {
        let who = samples[i].active;
        let mut j = i;
        while j + 1 < samples.len() && samples[j + 1].active == who {
            j += 1;
        }
        if let Some(kind) = who {
            spans.push(Span {
                from: samples[i].t,
                to: samples.get(j + 1).map_or(samples[j].t, |s| s.t),
                kind,
            });
        }
        i = j + 1;
    }
    spans
}

/// The chart as an SVG document.
pub(crate) fn svg(title: &str, subtitle: &str, samples: &[Sample], markers: &[Marker]) -> String {
    let line = |label: &str, stroke: Stroke, f: &dyn Fn(&Sample) -> Option<f64>| Series {
        label: label.to_string(),
        points: samples
            .iter()
            .map(|s| (s.t, f(s).unwrap_or(f64::NAN)))
            .collect(),
        stroke,
        step: false,
    };
    let per_node =
        |what: &str, f: &dyn Fn(&Sample, usize) -> Option<f64>, dash: [Option<&'static str>; 2]| {
            (0..2)
                .map(|i| {
                    let stroke = Stroke {
                        color: NODE_COLORS[i],
                        width: 2.2,
                        dash: dash[i],
                    };
                    line(&format!("{} {what}", NODES[i]), stroke, &|s| f(s, i))
                })
                .collect::<Vec<_>>()
        };
    let mut memory = panel(
        "Memory of each node (process resident / memory-limit-mb 64)",
        190.0,
        auto(100.0, "%"),
        per_node("memory", &|s, i| s.memory[i], [None, None]),
    );
    memory.refs = [
        ("minor 60%", 60.0, "#d4b106"),
        ("major 70%", 70.0, "#e8740c"),
        ("critical 80%", 80.0, "#d62728"),
    ]
    .into_iter()
    .map(|(name, value, color)| RefLine {
        value,
        label: RefLabel::Name(name.to_string()),
        color,
    })
    .collect();
    let panels = vec![
        panel(
            "Calls per second (the lab UAC toward the pair's service address)",
            130.0,
            auto(5.0, ""),
            vec![
                line("attempted / s", Stroke::dashed("#888", 1.5, "5,3"), &|s| {
                    Some(s.cps_attempted)
                }),
                line("answered / s", Stroke::solid("#2ca02c", 2.2), &|s| {
                    Some(s.cps_answered)
                }),
            ],
        ),
        panel(
            "Calls established (caller's view) and dialogs held by the active node",
            130.0,
            auto(10.0, ""),
            vec![
                line("established (UAC)", Stroke::solid("#222", 2.2), &|s| {
                    Some(s.established as f64)
                }),
                line(
                    "dialogs on the active",
                    Stroke::dashed("#c77dff", 2.0, "6,4"),
                    &|s| s.dialogs.map(|d| d as f64),
                ),
            ],
        ),
        memory,
        // sbc-b dashed so that equal scores stay visible.
        panel(
            "Health score of each node",
            100.0,
            YAxis {
                max: Some(100.0),
                ..YAxis::default()
            },
            per_node(
                "health",
                &|s, i| s.health[i].map(f64::from),
                [None, Some("7,4")],
            ),
        ),
        Panel {
            title: "Active node".to_string(),
            height: 28.0,
            y: YAxis::default(),
            refs: Vec::new(),
            content: Content::Spans {
                kinds: (0..2)
                    .map(|i| Swatch {
                        label: format!("{} active", NODES[i]),
                        color: NODE_COLORS[i],
                    })
                    .collect(),
                spans: active_spans(samples),
            },
        },
    ];
    Chart {
        title: title.to_string(),
        subtitle: subtitle.to_string(),
        x: Some(XAxis {
            label: "seconds since the demo started".to_string(),
            unit: "s".to_string(),
            min: Some(0.0),
            max: None,
            ticks: 12.0,
        }),
        panels,
        markers: markers.to_vec(),
        marker_style: MarkerStyle::Timeline,
    }
    .to_svg()
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
        assert_eq!(s.matches("<polyline").count(), 8, "{s}");
        assert!(s.contains("switchover &lt;sbc-b&gt;"));
        assert!(s.contains("12 s  switchover"));
        assert!(s.contains("sbc-a active") && s.contains("sbc-b active"));
        for name in ["minor 60%", "major 70%", "critical 80%"] {
            assert!(s.contains(name), "{name}");
        }
    }

    #[test]
    fn active_node_spans() {
        let at = |t: f64, active: Option<usize>| Sample {
            t,
            active,
            ..Sample::default()
        };
        let samples = [
            at(0.0, None),
            at(1.0, Some(0)),
            at(2.0, Some(0)),
            at(3.0, None),
            at(4.0, Some(1)),
            at(5.0, Some(1)),
        ];
        let span = |from, to, kind| Span { from, to, kind };
        assert_eq!(
            active_spans(&samples),
            [span(1.0, 3.0, 0), span(4.0, 5.0, 1)]
        );
        assert!(active_spans(&[]).is_empty());
    }

    #[test]
    fn no_samples_no_markers() {
        let s = svg("t", "", &[], &[]);
        assert!(s.ends_with("</svg>\n"));
        assert!(!s.contains("NaN"));
    }
}
