//! The lab's charts: one SVG plotter for `sbc-demo`'s chart ([`crate::demo`]) and the
//! benchmarks' charts (`sbc-lab chart`, drawn from a CSV by [`csv`]).
//!
//! A caller says what to show, a [`Chart`]: a title, a subtitle, a column of [`Panel`]s that
//! share one x axis, and [`Marker`]s of events across all of them. This module owns how it
//! looks and everything between the data and the SVG text:
//! - the page: its size, margins, title and subtitle, where the panels go;
//! - scales ([`Scale`]) and "nice" ticks ([`tick_step`], [`ticks`], [`nice_max`]) of the y
//!   axes (from 0, automatic or fixed maximum) and of the shared x axis;
//! - what a panel holds ([`Content`]): series (lines or steps, a gap where a value is not a
//!   finite number), grouped bars with their values printed (`n/a` where one is missing),
//!   or spans of time (a strip saying who was active when);
//! - reference lines (thresholds, targets) and each panel's legend, right of the panel;
//! - the markers, in one of two [`MarkerStyle`]s: short labels above the first panel (the
//!   benchmarks' phases), or the demo's timeline: numbered badges over the panels with a key
//!   of what happened at what time under the title;
//! - how numbers are written ([`fmt_num`]) and the escaping of every label ([`esc`]).
//!
//! Written by hand, with no plotting dependency: the charts are a few primitives (lines,
//! rectangles, text) placed on a fixed grid, the annotations (staggered labels, the timeline,
//! legends beside the panels) would be drawn by hand with a plotting crate too, and the SVG
//! needs no font, system library or build step.

pub mod csv;

use std::fmt::Write as _;

/// Colours for series and groups, in order (Tableau 10).
pub const PALETTE: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

/// The page width.
const WIDTH: f64 = 1100.0;
/// Left of the panels: the y tick labels.
const LEFT: f64 = 70.0;
/// Room for a legend right of the panels.
const LEGEND_WIDTH: f64 = 184.0;
/// The legend's distance from the panels, and more when reference values are labelled there.
const LEGEND_GAP: f64 = 14.0;
const LEGEND_GAP_WITH_REFS: f64 = 36.0;
/// Between panels: room for the next panel's title, and for category labels under bars.
const GAP: f64 = 26.0;
const GAP_WITH_CATEGORIES: f64 = 34.0;
/// Below the last panel: the x axis, or the category labels.
const BOTTOM_AXIS: f64 = 50.0;
const BOTTOM_CATEGORIES: f64 = 30.0;
/// Rough width of one character of a marker label (font size 10).
const LABEL_CHAR: f64 = 6.0;
/// Badges of the timeline closer than this go on another row.
const BADGE_SPACING: f64 = 17.0;

/// A chart: panels stacked on one x axis, markers across them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chart {
    pub title: String,
    /// Under the title; `\n` starts a new line.
    pub subtitle: String,
    /// The shared x axis, drawn under the last panel; `None` for charts of bars only.
    pub x: Option<XAxis>,
    pub panels: Vec<Panel>,
    pub markers: Vec<Marker>,
    pub marker_style: MarkerStyle,
}

/// The shared numeric x axis of series, spans and markers.
#[derive(Debug, Clone, PartialEq)]
pub struct XAxis {
    /// Under the tick labels.
    pub label: String,
    /// After a time in the timeline's key (`"s"`: "12.3 s").
    pub unit: String,
    /// The ends of the axis; `None`: from the data and the markers.
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// About how many tick labels.
    pub ticks: f64,
}

impl Default for XAxis {
    fn default() -> Self {
        Self {
            label: String::new(),
            unit: String::new(),
            min: None,
            max: None,
            ticks: 8.0,
        }
    }
}

/// One panel: a title, a y axis from 0, reference lines, what it shows, a legend.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub title: String,
    /// Of the plot area, in px.
    pub height: f64,
    pub y: YAxis,
    pub refs: Vec<RefLine>,
    pub content: Content,
}

/// A y axis from 0.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct YAxis {
    /// After each tick label (and reference value): `%`.
    pub unit: String,
    /// A fixed maximum; `None` (or not a positive number): the data and the reference lines
    /// plus 10 %, at least `floor`, rounded up to a tick ([`nice_max`]).
    pub max: Option<f64>,
    pub floor: f64,
}

/// A horizontal dashed line at a value.
#[derive(Debug, Clone, PartialEq)]
pub struct RefLine {
    pub value: f64,
    pub label: RefLabel,
    pub color: &'static str,
}

/// How a reference line is labelled.
#[derive(Debug, Clone, PartialEq)]
pub enum RefLabel {
    /// Its value and the axis unit, right of the panel (labels of close lines pushed apart).
    Value,
    /// A name, inside the panel at its right end, above the line.
    Name(String),
}

/// What a panel shows.
#[derive(Debug, Clone, PartialEq)]
pub enum Content {
    /// Series against the x axis; the legend lists them.
    Lines(Vec<Series>),
    /// Grouped bars: a cluster per category, a bar per group, `values[category][group]`
    /// (`None` or a missing entry: `n/a`); the legend lists the groups.
    Bars {
        categories: Vec<String>,
        groups: Vec<Swatch>,
        values: Vec<Vec<Option<f64>>>,
    },
    /// Spans of the x axis in the colour of their kind (no y axis); the legend lists the kinds.
    Spans {
        kinds: Vec<Swatch>,
        spans: Vec<Span>,
    },
}

/// A line through points `(x, y)`; a point whose x or y is not a finite number breaks it, a
/// point alone between breaks is drawn as a dot.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// In the legend (none when empty).
    pub label: String,
    pub points: Vec<(f64, f64)>,
    pub stroke: Stroke,
    /// A step from one value to the next (counts such as workers) rather than a slope.
    pub step: bool,
}

/// How a line is drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke {
    pub color: &'static str,
    pub width: f64,
    /// An SVG dash array (`"5,3"`), or solid.
    pub dash: Option<&'static str>,
}

impl Stroke {
    /// A solid line.
    #[must_use]
    pub fn solid(color: &'static str, width: f64) -> Self {
        Self {
            color,
            width,
            dash: None,
        }
    }

    /// A dashed line.
    #[must_use]
    pub fn dashed(color: &'static str, width: f64, dash: &'static str) -> Self {
        Self {
            color,
            width,
            dash: Some(dash),
        }
    }
}

/// A labelled colour: a bar group, a kind of span.
#[derive(Debug, Clone, PartialEq)]
pub struct Swatch {
    pub label: String,
    pub color: &'static str,
}

/// `from..to` on the x axis, of `kinds[kind]`, whose label is written in it when it is wide
/// enough.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Span {
    pub from: f64,
    pub to: f64,
    pub kind: usize,
}

/// An event at `t` on the x axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub t: f64,
    pub label: String,
    /// Of its line (and of its badge and key entry on a timeline).
    pub color: &'static str,
}

/// How markers are drawn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum MarkerStyle {
    /// A dotted line in each panel, the label above the first panel (moved up a row when it
    /// would overlap another).
    #[default]
    Labels,
    /// A numbered badge over the panels (staggered when events are close) with a dashed line
    /// down through them, and a key under the subtitle: number, time, label.
    Timeline,
}

/// Escapes text for SVG content or a (double-quoted) attribute value; control characters
/// that XML does not allow are dropped.
#[must_use]
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// A number for a label: whole numbers without decimals, otherwise 1 decimal from 10 up and
/// 2 below, trailing zeros dropped (`2.5`, `0.25`, `12.3`); `NaN`, `inf` as such.
#[must_use]
pub fn fmt_num(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let s = if (v - v.round()).abs() < 1e-9 {
        format!("{:.0}", v.round())
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        &s
    };
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A "nice" tick step (1, 2, 2.5 or 5 times a power of ten) for about `ticks` ticks over
/// `range`; 1 when the range is not a positive finite number.
#[must_use]
pub fn tick_step(range: f64, ticks: f64) -> f64 {
    let raw = range / ticks.max(1.0);
    if !raw.is_finite() || raw <= 0.0 {
        return 1.0;
    }
    let raw = raw.max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0] {
        if raw <= m * mag * (1.0 + 1e-9) {
            return m * mag;
        }
    }
    10.0 * mag
}

/// The multiples of `step` from `lo` to `hi` (ends included); none when the bounds or the
/// step are not finite, the step not positive or `hi < lo`; at most 1000.
#[must_use]
pub fn ticks(lo: f64, hi: f64, step: f64) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite() && step.is_finite()) || step <= 0.0 || hi < lo {
        return Vec::new();
    }
    let first = (lo / step - 1e-9).ceil();
    let last = (hi / step + 1e-9).floor();
    if last - first > 1000.0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut k = first;
    while k <= last {
        let v = k * step;
        out.push(if v == 0.0 { 0.0 } else { v });
        k += 1.0;
    }
    out
}

/// An automatic axis maximum: `max` (at least `floor`) plus 10 %, rounded up to a tick of
/// about 4 ticks; 1 when that is not a positive finite number.
#[must_use]
pub fn nice_max(max: f64, floor: f64) -> f64 {
    let m = max.max(floor) * 1.1;
    if !m.is_finite() || m <= 0.0 {
        return 1.0;
    }
    let s = tick_step(m, 4.0);
    (m / s - 1e-9).ceil() * s
}

/// A linear map from a domain onto a range of px, clamped to the range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scale {
    lo: f64,
    hi: f64,
    from: f64,
    to: f64,
}

impl Scale {
    /// Maps `lo..hi` onto `from..to` (`to < from` for a y axis, up the page). A domain that
    /// is empty (`hi <= lo`) or not finite becomes `lo..lo + 1` (`0..1` when `lo` is not
    /// finite).
    #[must_use]
    pub fn new((lo, hi): (f64, f64), (from, to): (f64, f64)) -> Self {
        let lo = if lo.is_finite() { lo } else { 0.0 };
        let hi = if hi.is_finite() && hi > lo {
            hi
        } else {
            lo + 1.0
        };
        Self { lo, hi, from, to }
    }

    /// The domain, as it is mapped.
    #[must_use]
    pub fn domain(&self) -> (f64, f64) {
        (self.lo, self.hi)
    }

    /// Where `v` goes: clamped to the range (infinities to its ends); `NaN` stays `NaN`.
    #[must_use]
    pub fn map(&self, v: f64) -> f64 {
        let f = ((v - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0);
        self.from + f * (self.to - self.from)
    }
}

impl Panel {
    /// The largest finite value it shows, with its reference lines.
    fn data_max(&self) -> f64 {
        let data = match &self.content {
            Content::Lines(series) => series
                .iter()
                .flat_map(|s| s.points.iter().filter(|p| p.0.is_finite()).map(|p| p.1))
                .collect::<Vec<_>>(),
            Content::Bars { values, .. } => values.iter().flatten().flatten().copied().collect(),
            Content::Spans { .. } => Vec::new(),
        };
        data.into_iter()
            .chain(self.refs.iter().map(|r| r.value))
            .filter(|v| v.is_finite())
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// The top of its y axis.
    fn y_max(&self) -> f64 {
        match self.y.max {
            Some(m) if m.is_finite() && m > 0.0 => m,
            _ => nice_max(self.data_max(), self.y.floor),
        }
    }
}

/// Assigns each interval `(from, to)` to the first row where it overlaps no other; returns
/// each one's row and the number of rows.
fn rows(intervals: &[(f64, f64)]) -> (Vec<usize>, usize) {
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut out = Vec::with_capacity(intervals.len());
    for &(a, b) in intervals {
        let row = match rows
            .iter()
            .position(|r| r.iter().all(|&(c, d)| b <= c || a >= d))
        {
            Some(i) => i,
            None => {
                rows.push(Vec::new());
                rows.len() - 1
            }
        };
        rows[row].push((a, b));
        out.push(row);
    }
    (out, rows.len())
}

fn dash_attr(dash: Option<&str>) -> String {
    dash.map(|d| format!(r#" stroke-dasharray="{}""#, esc(d)))
        .unwrap_or_default()
}

/// Where the panels go across the page.
struct Frame {
    x0: f64,
    x1: f64,
    legend_x: f64,
    x: Scale,
}

/// Where things go down the page.
struct Layout {
    /// The baseline of the subtitle's last line.
    subtitle_end: f64,
    /// Each marker's row of labels or badges, and how many rows.
    rows: Vec<usize>,
    n_rows: usize,
    /// The top of each panel, the bottom of the last one, the page's height.
    tops: Vec<f64>,
    bottom: f64,
    height: f64,
}

impl Chart {
    /// The x domain: the axis' ends where given, else the data's and the markers'.
    fn x_domain(&self) -> (f64, f64) {
        let mut xs: Vec<f64> = self.markers.iter().map(|m| m.t).collect();
        for p in &self.panels {
            match &p.content {
                Content::Lines(series) => xs.extend(
                    series
                        .iter()
                        .flat_map(|s| s.points.iter().filter(|p| p.1.is_finite()).map(|p| p.0)),
                ),
                Content::Spans { spans, .. } => {
                    xs.extend(spans.iter().flat_map(|s| [s.from, s.to]));
                }
                Content::Bars { .. } => {}
            }
        }
        let xs = xs.into_iter().filter(|v| v.is_finite());
        let (lo, hi) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        let axis = self.x.as_ref();
        (
            axis.and_then(|a| a.min).unwrap_or(lo),
            axis.and_then(|a| a.max).unwrap_or(hi),
        )
    }

    /// Where the panels go across the page: the legends need more room when reference
    /// values are labelled right of the panels.
    fn frame(&self) -> Frame {
        let value_refs = self
            .panels
            .iter()
            .any(|p| p.refs.iter().any(|r| r.label == RefLabel::Value));
        let legend_gap = if value_refs {
            LEGEND_GAP_WITH_REFS
        } else {
            LEGEND_GAP
        };
        let (x0, x1) = (LEFT, WIDTH - LEGEND_WIDTH - legend_gap);
        Frame {
            x0,
            x1,
            legend_x: x1 + legend_gap,
            x: Scale::new(self.x_domain(), (x0, x1)),
        }
    }

    /// Where things go down the page: the title, the subtitle's lines, the markers' labels
    /// or the timeline's key and badges, the panels, the x axis.
    fn layout(&self, frame: &Frame, markers: &[&Marker]) -> Layout {
        let subtitle_end = 42.0 + (self.subtitle.split('\n').count() - 1) as f64 * 14.0;
        // Labels start at their marker, badges are centred on it.
        let ((rows, n_rows), annotations) = match self.marker_style {
            MarkerStyle::Labels => {
                let spans: Vec<(f64, f64)> = markers
                    .iter()
                    .map(|m| {
                        let x = frame.x.map(m.t);
                        (x, x + LABEL_CHAR * (m.label.chars().count() + 1) as f64)
                    })
                    .collect();
                let placed = rows(&spans);
                let h = placed.1 as f64 * 12.0;
                (placed, h)
            }
            MarkerStyle::Timeline => {
                let spans: Vec<(f64, f64)> = markers
                    .iter()
                    .map(|m| frame.x.map(m.t))
                    .map(|x| (x - BADGE_SPACING / 2.0, x + BADGE_SPACING / 2.0))
                    .collect();
                let (placed, n) = rows(&spans);
                let n = n.max(1);
                let key = markers.len().div_ceil(3) as f64 * 15.0;
                ((placed, n), key + n as f64 * BADGE_SPACING + 24.0)
            }
        };
        let gap = if self
            .panels
            .iter()
            .any(|p| matches!(p.content, Content::Bars { .. }))
        {
            GAP_WITH_CATEGORIES
        } else {
            GAP
        };
        let mut tops = Vec::with_capacity(self.panels.len());
        let mut y = subtitle_end + 24.0 + annotations;
        for p in &self.panels {
            tops.push(y);
            y += p.height + gap;
        }
        let bottom = y - gap;
        let margin = if self.x.is_some() {
            BOTTOM_AXIS
        } else {
            BOTTOM_CATEGORIES
        };
        Layout {
            subtitle_end,
            rows,
            n_rows,
            tops,
            bottom,
            height: bottom + margin,
        }
    }

    /// The chart as an SVG document.
    #[must_use]
    pub fn to_svg(&self) -> String {
        let frame = self.frame();
        let markers: Vec<&Marker> = self.markers.iter().filter(|m| m.t.is_finite()).collect();
        let at = self.layout(&frame, &markers);
        let mut out = String::new();
        let _ = writeln!(
            out,
            r##"<?xml version="1.0" encoding="UTF-8"?>
<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{:.0}" viewBox="0 0 {WIDTH} {:.0}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">
<rect width="100%" height="100%" fill="white"/>
<text x="{LEFT}" y="24" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
            at.height,
            at.height,
            esc(&self.title)
        );
        for (i, line) in self.subtitle.split('\n').enumerate() {
            let _ = writeln!(
                out,
                r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#555">{}</text>"##,
                42.0 + i as f64 * 14.0,
                esc(line)
            );
        }
        for (p, &top) in self.panels.iter().zip(&at.tops) {
            self.panel(&mut out, &frame, top, p, &markers);
        }
        if let Some(axis) = &self.x {
            x_axis(&mut out, &frame, at.bottom, axis);
        }
        match self.marker_style {
            MarkerStyle::Labels => {
                let first_top = at.tops.first().copied().unwrap_or(at.bottom);
                for (m, row) in markers.iter().zip(&at.rows) {
                    let _ = writeln!(
                        out,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#666">{}</text>"##,
                        frame.x.map(m.t) + 3.0,
                        first_top - 20.0 - (at.n_rows - 1 - row) as f64 * 12.0,
                        esc(&m.label)
                    );
                }
            }
            MarkerStyle::Timeline => {
                let unit = self.x.as_ref().map_or("", |a| a.unit.as_str());
                timeline(&mut out, &frame, &at, &markers, unit);
            }
        }
        out.push_str("</svg>\n");
        out
    }

    /// One panel: frame, grid, reference lines, content, legend, marker lines.
    fn panel(&self, out: &mut String, f: &Frame, top: f64, p: &Panel, markers: &[&Marker]) {
        let (x0, x1, h) = (f.x0, f.x1, p.height);
        let y_max = p.y_max();
        let y = Scale::new((0.0, y_max), (top + h, top));
        let fill = match p.content {
            Content::Spans { .. } => "#eee",
            _ => "#fbfbfb",
        };
        let _ = writeln!(
            out,
            r##"<rect x="{x0:.1}" y="{top:.1}" width="{:.1}" height="{h:.1}" fill="{fill}" stroke="#999"/>"##,
            x1 - x0
        );
        let _ = writeln!(
            out,
            r##"<text x="{x0:.1}" y="{:.1}" font-size="13" font-weight="bold" fill="#333">{}</text>"##,
            top - 6.0,
            esc(&p.title)
        );
        let unit = esc(&p.y.unit);
        if !matches!(p.content, Content::Spans { .. }) {
            for v in ticks(0.0, y_max, tick_step(y_max, 4.0)) {
                let yy = y.map(v);
                let _ = writeln!(
                    out,
                    r##"<line x1="{x0:.1}" y1="{yy:.1}" x2="{x1:.1}" y2="{yy:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}{unit}</text>"##,
                    x0 - 6.0,
                    yy + 4.0,
                    fmt_num(v)
                );
            }
        }
        // Reference lines, the labels of those right of the panel pushed apart when close.
        let mut refs: Vec<&RefLine> = p.refs.iter().filter(|r| r.value.is_finite()).collect();
        refs.sort_by(|a, b| b.value.total_cmp(&a.value));
        let mut last_label = f64::NEG_INFINITY;
        for r in refs {
            let yy = y.map(r.value);
            let c = esc(r.color);
            let _ = write!(
                out,
                r##"<line x1="{x0:.1}" y1="{yy:.1}" x2="{x1:.1}" y2="{yy:.1}" stroke="{c}" stroke-dasharray="6,4"/>"##
            );
            let _ = match &r.label {
                RefLabel::Value => {
                    let label_y = (yy + 3.0).max(last_label + 10.0);
                    last_label = label_y;
                    writeln!(
                        out,
                        r##"<text x="{:.1}" y="{label_y:.1}" font-size="10" fill="{c}">{}{unit}</text>"##,
                        x1 + 4.0,
                        fmt_num(r.value)
                    )
                }
                RefLabel::Name(name) => writeln!(
                    out,
                    r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="{c}" text-anchor="end">{}</text>"##,
                    x1 - 4.0,
                    yy - 3.0,
                    esc(name)
                ),
            };
        }
        let legend: Vec<(&str, Key)> = match &p.content {
            Content::Lines(series) => {
                for s in series {
                    polyline(out, &f.x, &y, s);
                }
                series
                    .iter()
                    .filter(|s| !s.label.is_empty())
                    .map(|s| (s.label.as_str(), Key::Line(s.stroke)))
                    .collect()
            }
            Content::Bars {
                categories,
                groups,
                values,
            } => {
                bars(out, f, top, h, &y, categories, groups, values);
                swatches(groups)
            }
            Content::Spans { kinds, spans } => {
                for s in spans {
                    span(out, f, top, h, kinds, s);
                }
                swatches(kinds)
            }
        };
        // The legend at the panel's top, or centred on a panel too short for it.
        let legend_top = top + 12.0_f64.min((h - (legend.len() as f64 - 1.0) * 16.0) / 2.0);
        legend_block(out, f.legend_x, legend_top, &legend);
        if self.marker_style == MarkerStyle::Labels {
            for m in markers {
                let mx = f.x.map(m.t);
                let _ = writeln!(
                    out,
                    r##"<line x1="{mx:.1}" y1="{top:.1}" x2="{mx:.1}" y2="{:.1}" stroke="{}" stroke-dasharray="3,3"/>"##,
                    top + h,
                    esc(m.color)
                );
            }
        }
    }
}

fn swatches(items: &[Swatch]) -> Vec<(&str, Key)> {
    items
        .iter()
        .map(|s| (s.label.as_str(), Key::Fill(s.color)))
        .collect()
}

/// A series: its runs of finite points as polylines, a point alone as a dot.
fn polyline(out: &mut String, x: &Scale, y: &Scale, s: &Series) {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for &(px, py) in &s.points {
        if px.is_finite() && py.is_finite() {
            if let Some(run) = runs.last_mut() {
                let p = (x.map(px), y.map(py));
                if s.step {
                    if let Some(&(_, prev)) = run.last() {
                        run.push((p.0, prev));
                    }
                }
                run.push(p);
            }
        } else if runs.last().is_some_and(|r| !r.is_empty()) {
            runs.push(Vec::new());
        }
    }
    let Stroke { color, width, dash } = s.stroke;
    let color = esc(color);
    for run in &runs {
        match run.as_slice() {
            [] => {}
            [(cx, cy)] => {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{cx:.1}" cy="{cy:.1}" r="{}" fill="{color}"/>"#,
                    width.max(1.0)
                );
            }
            run => {
                let pts: Vec<String> = run.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
                let _ = writeln!(
                    out,
                    r#"<polyline fill="none" stroke="{color}" stroke-width="{width}"{} stroke-linejoin="round" points="{}"/>"#,
                    dash_attr(dash),
                    pts.join(" ")
                );
            }
        }
    }
}

/// Grouped bars with their values, and the category labels under the panel.
#[allow(clippy::too_many_arguments)]
fn bars(
    out: &mut String,
    f: &Frame,
    top: f64,
    h: f64,
    y: &Scale,
    categories: &[String],
    groups: &[Swatch],
    values: &[Vec<Option<f64>>],
) {
    let base = top + h;
    let slot = (f.x1 - f.x0) / categories.len().max(1) as f64;
    let n = groups.len().max(1) as f64;
    let bar_w = (slot * 0.8 / n).min(60.0);
    for (ci, cat) in categories.iter().enumerate() {
        let cx = f.x0 + slot * (ci as f64 + 0.5);
        let left = cx - bar_w * groups.len() as f64 / 2.0;
        for (gi, g) in groups.iter().enumerate() {
            let bx = left + bar_w * gi as f64;
            let value = values
                .get(ci)
                .and_then(|v| v.get(gi))
                .copied()
                .flatten()
                .filter(|v| v.is_finite());
            match value {
                Some(v) => {
                    let bh = base - y.map(v);
                    let _ = writeln!(
                        out,
                        r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#222">{}</text>"##,
                        bx + 1.0,
                        base - bh,
                        bar_w - 2.0,
                        esc(g.color),
                        bx + bar_w / 2.0,
                        (base - bh - 3.0).max(top + 9.0),
                        fmt_num(v)
                    );
                }
                None => {
                    let _ = writeln!(
                        out,
                        r##"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#999">n/a</text>"##,
                        bx + bar_w / 2.0,
                        base - 3.0
                    );
                }
            }
        }
        let _ = writeln!(
            out,
            r##"<text x="{cx:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#333">{}</text>"##,
            base + 14.0,
            esc(cat)
        );
    }
}

/// A span of a strip, its kind's label in it when it is wide enough.
fn span(out: &mut String, f: &Frame, top: f64, h: f64, kinds: &[Swatch], s: &Span) {
    let Some(kind) = kinds.get(s.kind) else {
        return;
    };
    if !(s.from.is_finite() && s.to.is_finite()) {
        return;
    }
    let (a, b) = (f.x.map(s.from), f.x.map(s.to));
    let _ = writeln!(
        out,
        r#"<rect x="{a:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{}"/>"#,
        top + 1.0,
        (b - a).max(0.5),
        (h - 2.0).max(0.0),
        esc(kind.color)
    );
    if b - a > 60.0 {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="12" fill="white" text-anchor="middle" font-weight="bold">{}</text>"#,
            (a + b) / 2.0,
            top + h / 2.0 + 4.0,
            esc(&kind.label)
        );
    }
}

/// How a legend entry is marked.
#[derive(Clone, Copy)]
enum Key {
    /// As the series is drawn.
    Line(Stroke),
    /// A filled square.
    Fill(&'static str),
}

/// A legend: a mark and a label per entry, one under the other.
fn legend_block(out: &mut String, x: f64, y: f64, items: &[(&str, Key)]) {
    for (i, (label, key)) in items.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        let _ = match key {
            Key::Line(s) => write!(
                out,
                r#"<line x1="{x:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="{}" stroke-width="2.5"{}/>"#,
                x + 22.0,
                esc(s.color),
                dash_attr(s.dash)
            ),
            Key::Fill(color) => write!(
                out,
                r#"<rect x="{:.1}" y="{:.1}" width="14" height="8" fill="{}"/>"#,
                x + 4.0,
                yy - 4.0,
                esc(color)
            ),
        };
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
            x + 28.0,
            yy + 4.0,
            esc(label)
        );
    }
}

/// The x axis under the last panel: ticks, their labels, the axis label.
fn x_axis(out: &mut String, f: &Frame, bottom: f64, axis: &XAxis) {
    let (lo, hi) = f.x.domain();
    for v in ticks(lo, hi, tick_step(hi - lo, axis.ticks)) {
        let x = f.x.map(v);
        let _ = writeln!(
            out,
            r##"<line x1="{x:.1}" y1="{bottom:.1}" x2="{x:.1}" y2="{:.1}" stroke="#555"/><text x="{x:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
            bottom + 5.0,
            bottom + 18.0,
            fmt_num(v)
        );
    }
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{}</text>"##,
        (f.x0 + f.x1) / 2.0,
        bottom + 36.0,
        esc(&axis.label)
    );
}

/// The timeline: the key (three columns under the subtitle), and per marker a numbered badge
/// with a dashed line down to the bottom of the last panel.
fn timeline(out: &mut String, f: &Frame, at: &Layout, markers: &[&Marker], unit: &str) {
    let col = (WIDTH - LEFT - 40.0) / 3.0;
    let unit = if unit.is_empty() {
        String::new()
    } else {
        format!(" {}", esc(unit))
    };
    let key_top = at.subtitle_end + 20.0;
    for (k, m) in markers.iter().enumerate() {
        let x = LEFT + (k % 3) as f64 * col;
        let y = key_top + (k / 3) as f64 * 15.0;
        let _ = writeln!(
            out,
            r#"<circle cx="{:.1}" cy="{:.1}" r="6" fill="{c}"/><text x="{:.1}" y="{:.1}" font-size="9" font-weight="bold" fill="white" text-anchor="middle">{}</text><text x="{:.1}" y="{y:.1}" font-size="11" fill="{c}">{}{unit}  {}</text>"#,
            x + 6.0,
            y - 4.0,
            x + 6.0,
            y - 0.8,
            k + 1,
            x + 16.0,
            fmt_num((m.t * 10.0).round() / 10.0),
            esc(&m.label),
            c = esc(m.color),
        );
    }
    let badges_top = key_top + markers.len().div_ceil(3) as f64 * 15.0 + 2.0;
    for (k, (m, row)) in markers.iter().zip(&at.rows).enumerate() {
        let x = f.x.map(m.t);
        let by = badges_top + 8.0 + *row as f64 * BADGE_SPACING;
        let _ = writeln!(
            out,
            r#"<line x1="{x:.1}" y1="{by:.1}" x2="{x:.1}" y2="{:.1}" stroke="{c}" stroke-width="1.3" stroke-dasharray="4,3" opacity="0.85"/><circle cx="{x:.1}" cy="{by:.1}" r="7.5" fill="{c}"/><text x="{x:.1}" y="{:.1}" font-size="10" font-weight="bold" fill="white" text-anchor="middle">{}</text>"#,
            at.bottom,
            by + 3.5,
            k + 1,
            c = esc(m.color),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn tick_steps_are_nice() {
        assert!(close(tick_step(100.0, 4.0), 25.0));
        assert!(close(tick_step(60.0, 12.0), 5.0));
        assert!(close(tick_step(7.0, 4.0), 2.0));
        assert!(close(tick_step(1.0, 4.0), 0.25));
        assert!(close(tick_step(300.0, 8.0), 50.0));
        assert!(close(tick_step(0.003, 4.0), 0.001));
        // A step exactly on a nice value stays there.
        assert!(close(tick_step(20.0, 4.0), 5.0));
        // Nothing to divide: 1.
        for r in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            assert!(close(tick_step(r, 4.0), 1.0), "{r}");
        }
    }

    #[test]
    fn ticks_are_the_multiples_in_range() {
        assert_eq!(ticks(0.0, 100.0, 25.0), [0.0, 25.0, 50.0, 75.0, 100.0]);
        assert_eq!(ticks(3.0, 11.0, 5.0), [5.0, 10.0]);
        assert_eq!(ticks(-10.0, 10.0, 10.0), [-10.0, 0.0, 10.0]);
        // No accumulated error: 0.3 is 3 * 0.1, and the end is included.
        let t = ticks(0.0, 0.3, 0.1);
        assert_eq!(t.len(), 4);
        assert_eq!(fmt_num(t[3]), "0.3");
        // A point: itself when on a multiple.
        assert_eq!(ticks(5.0, 5.0, 1.0), [5.0]);
        assert!(ticks(1.0, 0.0, 1.0).is_empty());
        assert!(ticks(0.0, 1.0, 0.0).is_empty());
        assert!(ticks(0.0, f64::INFINITY, 1.0).is_empty());
        assert!(ticks(f64::NAN, 1.0, 1.0).is_empty());
        assert!(ticks(0.0, 1.0, f64::NAN).is_empty());
        assert!(ticks(0.0, 1e12, 1.0).is_empty());
    }

    #[test]
    fn nice_maxima() {
        // 5 * 1.1 = 5.5, ticks of 2: 6.
        assert!(close(nice_max(0.0, 5.0), 6.0));
        // 100 * 1.1 = 110, ticks of 50: 150.
        assert!(close(nice_max(100.0, 1.0), 150.0));
        assert!(close(nice_max(90.0, 100.0), 150.0));
        assert!(close(nice_max(12.0, 1.0), 15.0));
        for (m, floor) in [
            (0.0, 0.0),
            (-3.0, 0.0),
            (f64::NAN, f64::NAN),
            (f64::INFINITY, 1.0),
        ] {
            assert!(close(nice_max(m, floor), 1.0), "{m} {floor}");
        }
        // NaN data with a floor: the floor.
        assert!(close(nice_max(f64::NAN, 5.0), 6.0));
    }

    #[test]
    fn scales_map_and_clamp() {
        let s = Scale::new((0.0, 10.0), (100.0, 200.0));
        assert!(close(s.map(0.0), 100.0));
        assert!(close(s.map(5.0), 150.0));
        assert!(close(s.map(10.0), 200.0));
        assert!(close(s.map(-1.0), 100.0));
        assert!(close(s.map(11.0), 200.0));
        assert!(close(s.map(f64::INFINITY), 200.0));
        assert!(close(s.map(f64::NEG_INFINITY), 100.0));
        assert!(s.map(f64::NAN).is_nan());
        // Up the page.
        let y = Scale::new((0.0, 4.0), (300.0, 100.0));
        assert!(close(y.map(1.0), 250.0));
        // Empty, reversed or infinite domains: one unit from the low end.
        assert_eq!(Scale::new((3.0, 3.0), (0.0, 1.0)).domain(), (3.0, 4.0));
        assert_eq!(Scale::new((3.0, 1.0), (0.0, 1.0)).domain(), (3.0, 4.0));
        assert_eq!(
            Scale::new((0.0, f64::INFINITY), (0.0, 1.0)).domain(),
            (0.0, 1.0)
        );
        assert_eq!(
            Scale::new((f64::NAN, f64::NAN), (0.0, 1.0)).domain(),
            (0.0, 1.0)
        );
        assert_eq!(
            Scale::new((f64::INFINITY, f64::NEG_INFINITY), (0.0, 1.0)).domain(),
            (0.0, 1.0)
        );
    }

    #[test]
    fn numbers_for_labels() {
        assert_eq!(fmt_num(0.0), "0");
        assert_eq!(fmt_num(-0.0), "0");
        assert_eq!(fmt_num(100.0), "100");
        assert_eq!(fmt_num(2.5), "2.5");
        assert_eq!(fmt_num(0.25), "0.25");
        assert_eq!(fmt_num(0.5), "0.5");
        assert_eq!(fmt_num(1.23456), "1.23");
        assert_eq!(fmt_num(12.34), "12.3");
        assert_eq!(fmt_num(12.04), "12");
        assert_eq!(fmt_num(-7.5), "-7.5");
        assert_eq!(fmt_num(-0.001), "0");
        assert_eq!(fmt_num(1e-10), "0");
        assert_eq!(fmt_num(f64::NAN), "NaN");
        assert_eq!(fmt_num(f64::INFINITY), "inf");
        assert_eq!(fmt_num(f64::NEG_INFINITY), "-inf");
    }

    #[test]
    fn labels_are_escaped() {
        assert_eq!(esc("a < b & c > d"), "a &lt; b &amp; c &gt; d");
        assert_eq!(esc(r#"say "hi" 'x'"#), "say &quot;hi&quot; 'x'");
        assert_eq!(esc("&amp;"), "&amp;amp;");
        assert_eq!(esc("µs → 2→6 ✓"), "µs → 2→6 ✓");
        assert_eq!(esc("bell\u{7} nul\0 esc\u{1b}"), "bell nul esc");
        assert_eq!(esc("tab\tnewline\n"), "tab\tnewline\n");
        assert_eq!(esc(""), "");
    }

    #[test]
    fn overlapping_annotations_go_on_new_rows() {
        // 0..66 and 100..130 fit on one row; 50..68 overlaps the first; 66..100 touches both.
        let placed = rows(&[(0.0, 66.0), (100.0, 130.0), (50.0, 68.0), (66.0, 100.0)]);
        assert_eq!(placed, (vec![0, 0, 1, 0], 2));
        assert_eq!(rows(&[]), (vec![], 0));
    }

    fn line_chart(points: Vec<(f64, f64)>) -> Chart {
        Chart {
            title: "t".into(),
            x: Some(XAxis::default()),
            panels: vec![Panel {
                title: "p".into(),
                height: 100.0,
                y: YAxis::default(),
                refs: Vec::new(),
                content: Content::Lines(vec![Series {
                    label: "s".into(),
                    points,
                    stroke: Stroke::solid(PALETTE[0], 2.0),
                    step: false,
                }]),
            }],
            ..Chart::default()
        }
    }

    #[test]
    fn empty_and_single_point_series() {
        // Nothing to draw: still a document, a panel, an axis of 0..1.
        let svg = line_chart(Vec::new()).to_svg();
        assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 0);
        assert_eq!(svg.matches("<circle").count(), 0);
        assert!(!svg.contains("NaN"));
        // One point: a dot.
        let svg = line_chart(vec![(3.0, 7.0)]).to_svg();
        assert_eq!(svg.matches("<polyline").count(), 0);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(!svg.contains("NaN"));
    }

    #[test]
    fn values_that_are_not_finite_break_the_line() {
        let svg = line_chart(vec![
            (0.0, 1.0),
            (1.0, 2.0),
            (2.0, f64::NAN),
            (3.0, 3.0),
            (4.0, 4.0),
            (f64::INFINITY, 4.0),
            (6.0, f64::INFINITY),
            (7.0, 5.0),
        ])
        .to_svg();
        // Two runs of two points, then one alone.
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"), "{svg}");
        // The axis runs over the finite points only: 0 to 7.
        assert!(svg.contains(">7</text>"));
    }

    #[test]
    fn a_step_series_steps() {
        let mut chart = line_chart(vec![(0.0, 1.0), (1.0, 2.0)]);
        if let Content::Lines(s) = &mut chart.panels[0].content {
            s[0].step = true;
        }
        let svg = chart.to_svg();
        let points = svg
            .split("points=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .unwrap_or_default();
        assert_eq!(points.split(' ').count(), 3, "{points}");
    }

    #[test]
    fn every_label_is_escaped_in_the_document() {
        let mut chart = line_chart(vec![(0.0, 1.0), (1.0, 2.0)]);
        chart.title = "<title>".into();
        chart.subtitle = "a & b\n<second>".into();
        chart.panels[0].title = "p<1>".into();
        chart.panels[0].y.unit = "<u>".into();
        chart.panels[0].refs.push(RefLine {
            value: 1.5,
            label: RefLabel::Name("<ref>".into()),
            color: "#444",
        });
        chart.markers.push(Marker {
            t: 0.5,
            label: "<m>".into(),
            color: "#999",
        });
        for style in [MarkerStyle::Labels, MarkerStyle::Timeline] {
            chart.marker_style = style;
            let svg = chart.to_svg();
            for raw in [
                "<title>", "<second>", "p<1>", "<u>", "<ref>", "<m>", "a & b",
            ] {
                assert!(!svg.contains(raw), "{raw} in {svg}");
            }
            for escaped in ["&lt;title&gt;", "a &amp; b", "&lt;second&gt;", "&lt;m&gt;"] {
                assert!(svg.contains(escaped), "{escaped} not in {svg}");
            }
        }
    }

    #[test]
    fn fixed_maximum_must_be_positive_and_finite() {
        let mut chart = line_chart(vec![(0.0, 10.0), (1.0, 20.0)]);
        chart.panels[0].y.max = Some(100.0);
        assert!(chart.to_svg().contains(">100</text>"));
        for bad in [f64::NAN, f64::INFINITY, 0.0, -1.0] {
            chart.panels[0].y.max = Some(bad);
            // Automatic: 20 * 1.1 = 22, ticks of 10: 30.
            let svg = chart.to_svg();
            assert!(svg.contains(">30</text>"), "{bad}");
            assert!(!svg.contains("NaN"), "{bad}");
        }
    }

    #[test]
    fn bars_with_missing_values() {
        let chart = Chart {
            panels: vec![Panel {
                title: "p".into(),
                height: 100.0,
                y: YAxis::default(),
                refs: vec![RefLine {
                    value: 95.0,
                    label: RefLabel::Value,
                    color: "#444",
                }],
                content: Content::Bars {
                    categories: vec!["1x".into(), "2x".into()],
                    groups: vec![
                        Swatch {
                            label: "a".into(),
                            color: PALETTE[0],
                        },
                        Swatch {
                            label: "b".into(),
                            color: PALETTE[1],
                        },
                    ],
                    // 2x has a NaN for a and no entry for b.
                    values: vec![vec![Some(99.0), Some(100.0)], vec![Some(f64::NAN)]],
                },
            }],
            ..Chart::default()
        };
        let svg = chart.to_svg();
        // 2 bars + background + frame + 2 legend squares.
        assert_eq!(svg.matches("<rect").count(), 2 + 2 + 2);
        assert_eq!(svg.matches(">n/a<").count(), 2);
        assert!(svg.contains(">95</text>"));
    }
}
