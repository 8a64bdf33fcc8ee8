//! `sbc-lab chart`: an SVG chart of a benchmark's CSV, written by hand like the demo's chart
//! (no plotting dependency).
//!
//! Two kinds, both a column of panels sharing one x axis:
//! - `lines`: time series, x is a numeric column (e.g. `t`), each panel draws one or more
//!   numeric columns as lines (or steps), with optional vertical markers (phases);
//! - `bars`: grouped bars, x is a category column (e.g. the offered load `1x`, `2x`, `5x`) and
//!   one bar per value of a group column (e.g. the system: `kamailio`, `sbc-prsm`), each
//!   panel draws one numeric column with its value printed on the bar.
//!
//! A panel is given as `TITLE=COL[,COL...]` followed by optional `;key=value` settings:
//! `unit=%` (tick suffix), `ref=95` (a dashed reference line, repeatable), `max=100` (fixed
//! y maximum), `step` (draw lines as steps, for counts such as workers), `height=120`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

/// The series colours, in order.
const COLORS: [&str; 8] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];
const WIDTH: f64 = 1100.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 220.0;
const GAP: f64 = 34.0;

/// A CSV file: a header row, then rows of cells (comma-separated, no quoting).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses comma-separated text; blank lines and lines starting with `#` are skipped.
    pub(crate) fn parse(text: &str) -> Result<Self, String> {
        let mut lines = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'));
        let header: Vec<String> = lines
            .next()
            .ok_or("empty CSV")?
            .split(',')
            .map(|s| s.trim().to_string())
            .collect();
        let rows = lines
            .map(|l| l.split(',').map(|s| s.trim().to_string()).collect())
            .collect();
        Ok(Self { header, rows })
    }

    fn col(&self, name: &str) -> Result<usize, String> {
        self.header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("no column {name:?} in the CSV (has {:?})", self.header))
    }

    fn cell(&self, row: usize, col: usize) -> &str {
        self.rows[row].get(col).map_or("", String::as_str)
    }

    fn num(&self, row: usize, col: usize) -> Option<f64> {
        self.cell(row, col)
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
    }
}

/// One panel of a chart.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PanelSpec {
    title: String,
    columns: Vec<String>,
    unit: String,
    refs: Vec<f64>,
    max: Option<f64>,
    step: bool,
    height: f64,
}

impl FromStr for PanelSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(';');
        let head = parts.next().unwrap_or_default();
        let (title, cols) = head
            .rsplit_once('=')
            .ok_or_else(|| format!("panel {s:?}: expected TITLE=COL[,COL...][;key=value...]"))?;
        let columns: Vec<String> = cols
            .split(',')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect();
        if columns.is_empty() {
            return Err(format!("panel {s:?}: no column"));
        }
        let mut p = Self {
            title: title.trim().to_string(),
            columns,
            unit: String::new(),
            refs: Vec::new(),
            max: None,
            step: false,
            height: 150.0,
        };
        let number = |k: &str, v: &str| {
            v.parse::<f64>()
                .map_err(|_| format!("panel {s:?}: {k}={v:?} is not a number"))
        };
        for kv in parts {
            match kv.split_once('=') {
                Some(("unit", v)) => p.unit = v.to_string(),
                Some(("ref", v)) => p.refs.push(number("ref", v)?),
                Some(("max", v)) => p.max = Some(number("max", v)?),
                Some(("height", v)) => p.height = number("height", v)?.clamp(40.0, 600.0),
                None if kv == "step" => p.step = true,
                _ => return Err(format!("panel {s:?}: unknown setting {kv:?}")),
            }
        }
        Ok(p)
    }
}

/// A vertical line on a `lines` chart: `T:LABEL`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Marker {
    t: f64,
    label: String,
}

impl FromStr for Marker {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (t, label) = s.split_once(':').unwrap_or((s, ""));
        let t = t
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("marker {s:?}: expected T:LABEL with T in x units"))?;
        Ok(Self {
            t,
            label: label.to_string(),
        })
    }
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// A "nice" tick step for a range.
fn tick_step(range: f64, ticks: f64) -> f64 {
    let raw = (range / ticks).max(1e-9);
    let mag = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 2.5, 5.0] {
        if raw <= m * mag {
            return m * mag;
        }
    }
    10.0 * mag
}

/// The y maximum of a panel: fixed, or the data (and reference lines) plus 10 %, rounded up
/// to a tick.
fn y_max(panel: &PanelSpec, data_max: f64) -> f64 {
    if let Some(m) = panel.max {
        return m.max(1e-9);
    }
    let m = panel.refs.iter().copied().fold(data_max, f64::max).max(1.0) * 1.1;
    let s = tick_step(m, 4.0);
    (m / s).ceil() * s
}

fn fmt_num(v: f64) -> String {
    if (v - v.round()).abs() < 1e-9 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Frame, y grid, title and reference lines of one panel; returns the y mapping's scale.
fn panel_frame(out: &mut String, top: f64, panel: &PanelSpec, ymax: f64) {
    let (x0, x1, h) = (LEFT, WIDTH - RIGHT, panel.height);
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{top:.1}" width="{:.1}" height="{h:.1}" fill="#fbfbfb" stroke="#999"/>"##,
        x1 - x0
    );
    let _ = writeln!(
        out,
        r##"<text x="{x0}" y="{:.1}" font-size="13" font-weight="bold" fill="#333">{}</text>"##,
        top - 6.0,
        esc(&panel.title)
    );
    let s = tick_step(ymax, 4.0);
    let mut v = 0.0;
    for _ in 0..100 {
        if v > ymax + 1e-9 {
            break;
        }
        let y = top + h - v / ymax * h;
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e3e3e3"/><text x="{:.1}" y="{:.1}" font-size="11" text-anchor="end" fill="#555">{}{}</text>"##,
            x0 - 6.0,
            y + 4.0,
            fmt_num(v),
            esc(&panel.unit)
        );
        v += s;
    }
    // Reference lines, their labels pushed apart when lines are close.
    let mut refs: Vec<f64> = panel.refs.clone();
    refs.sort_by(|a, b| b.total_cmp(a));
    let mut last_label = f64::NEG_INFINITY;
    for r in &refs {
        let y = top + h - (r / ymax).clamp(0.0, 1.0) * h;
        let label_y = (y + 3.0).max(last_label + 10.0);
        last_label = label_y;
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#444" stroke-dasharray="6,4"/><text x="{:.1}" y="{label_y:.1}" font-size="10" fill="#444">{}{}</text>"##,
            x1 + 4.0,
            fmt_num(*r),
            esc(&panel.unit)
        );
    }
}

fn legend(out: &mut String, x: f64, y: f64, items: &[(String, &str)]) {
    for (i, (label, color)) in items.iter().enumerate() {
        let yy = y + i as f64 * 16.0;
        let _ = writeln!(
            out,
            r##"<rect x="{x:.1}" y="{:.1}" width="14" height="8" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="11" fill="#333">{}</text>"##,
            yy - 4.0,
            x + 20.0,
            yy + 4.0,
            esc(label)
        );
    }
}

fn header(out: &mut String, title: &str, subtitle: &str, height: f64) {
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0}" viewBox="0 0 {WIDTH} {height:.0}" font-family="sans-serif">"#
    );
    let _ = writeln!(
        out,
        r##"<rect width="100%" height="100%" fill="white"/><text x="{LEFT}" y="24" font-size="16" font-weight="bold" fill="#222">{}</text>"##,
        esc(title)
    );
    for (i, line) in subtitle.split('\n').enumerate() {
        let _ = writeln!(
            out,
            r##"<text x="{LEFT}" y="{:.1}" font-size="11" fill="#555">{}</text>"##,
            42.0 + i as f64 * 14.0,
            esc(line)
        );
    }
}

/// The top of each panel and the document height.
fn layout(panels: &[PanelSpec], first_top: f64, bottom: f64) -> (Vec<f64>, f64) {
    let mut tops = Vec::new();
    let mut y = first_top;
    for p in panels {
        tops.push(y);
        y += p.height + GAP;
    }
    (tops, y - GAP + bottom)
}

/// A time-series chart of `panels` against the numeric column `x`.
pub(crate) fn lines(
    table: &Table,
    x: &str,
    x_label: &str,
    panels: &[PanelSpec],
    markers: &[Marker],
    title: &str,
    subtitle: &str,
) -> Result<String, String> {
    let xc = table.col(x)?;
    let xs: Vec<Option<f64>> = (0..table.rows.len()).map(|r| table.num(r, xc)).collect();
    let x_min = xs.iter().flatten().copied().fold(f64::INFINITY, f64::min);
    let x_max = xs
        .iter()
        .flatten()
        .copied()
        .chain(markers.iter().map(|m| m.t))
        .fold(f64::NEG_INFINITY, f64::max);
    if !x_min.is_finite() || !x_max.is_finite() {
        return Err(format!("column {x:?} has no number"));
    }
    let span = (x_max - x_min).max(1e-9);
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let px = |v: f64| x0 + ((v - x_min) / span).clamp(0.0, 1.0) * (x1 - x0);
    let sub_lines = subtitle.split('\n').count() as f64;
    // Marker labels go in rows above the first panel, a label moving down a row when it
    // would overlap one already placed (about 6 px per character at font size 10).
    let mut rows: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut label_row = Vec::with_capacity(markers.len());
    for m in markers {
        let (a, b) = (
            px(m.t),
            px(m.t) + 6.0 * m.label.chars().count() as f64 + 6.0,
        );
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
        label_row.push(row);
    }
    let first_top = 52.0 + sub_lines * 14.0 + rows.len() as f64 * 12.0;
    let (tops, height) = layout(panels, first_top, 44.0);
    let mut out = String::new();
    header(&mut out, title, subtitle, height);
    let mut color_of: BTreeMap<String, &str> = BTreeMap::new();
    for (panel, top) in panels.iter().zip(&tops) {
        let cols: Vec<usize> = panel
            .columns
            .iter()
            .map(|c| table.col(c))
            .collect::<Result<_, _>>()?;
        let data_max = cols
            .iter()
            .flat_map(|&c| (0..table.rows.len()).filter_map(move |r| table.num(r, c)))
            .fold(0.0, f64::max);
        let ymax = y_max(panel, data_max);
        panel_frame(&mut out, *top, panel, ymax);
        let py = |v: f64| top + panel.height - (v / ymax).clamp(0.0, 1.0) * panel.height;
        let mut items = Vec::new();
        for (name, &c) in panel.columns.iter().zip(&cols) {
            let n = color_of.len();
            let color = *color_of
                .entry(name.clone())
                .or_insert(COLORS[n % COLORS.len()]);
            items.push((name.clone(), color));
            // Runs of rows where both x and the value are numbers; a gap breaks the line.
            let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
            for (r, xv) in xs.iter().enumerate() {
                match (xv, table.num(r, c)) {
                    (Some(xv), Some(v)) => {
                        if let Some(run) = runs.last_mut() {
                            if panel.step {
                                if let Some(&(_, prev)) = run.last() {
                                    run.push((px(*xv), prev));
                                }
                            }
                            run.push((px(*xv), py(v)));
                        }
                    }
                    _ => {
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
                    r#"<polyline fill="none" stroke="{color}" stroke-width="2" stroke-linejoin="round" points="{}"/>"#,
                    pts.join(" ")
                );
            }
        }
        legend(&mut out, x1 + 36.0, top + 12.0, &items);
        for m in markers {
            let mx = px(m.t);
            let _ = writeln!(
                out,
                r##"<line x1="{mx:.1}" y1="{top:.1}" x2="{mx:.1}" y2="{:.1}" stroke="#999" stroke-dasharray="3,3"/>"##,
                top + panel.height
            );
        }
    }
    // Marker labels above the first panel, x ticks below the last one.
    if let Some(top) = tops.first() {
        let n = rows.len() as f64;
        for (m, row) in markers.iter().zip(&label_row) {
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="10" fill="#666">{}</text>"##,
                px(m.t) + 3.0,
                top - 20.0 - (n - 1.0 - *row as f64) * 12.0,
                esc(&m.label)
            );
        }
    }
    if let (Some(top), Some(p)) = (tops.last(), panels.last()) {
        let y = top + p.height;
        let s = tick_step(span, 8.0);
        let mut v = (x_min / s).ceil() * s;
        for _ in 0..200 {
            if v > x_max + 1e-9 {
                break;
            }
            let _ = writeln!(
                out,
                r##"<text x="{:.1}" y="{:.1}" font-size="11" text-anchor="middle" fill="#555">{}</text>"##,
                px(v),
                y + 16.0,
                fmt_num(v)
            );
            v += s;
        }
        let _ = writeln!(
            out,
            r##"<text x="{:.1}" y="{:.1}" font-size="12" text-anchor="middle" fill="#333">{}</text>"##,
            (x0 + x1) / 2.0,
            y + 34.0,
            esc(x_label)
        );
    }
    out.push_str("</svg>\n");
    Ok(out)
}

/// Distinct values of a column, in order of first appearance.
fn distinct(table: &Table, col: usize) -> Vec<String> {
    let mut seen = Vec::new();
    for r in 0..table.rows.len() {
        let v = table.cell(r, col).to_string();
        if !seen.contains(&v) {
            seen.push(v);
        }
    }
    seen
}

/// A grouped bar chart: one cluster per value of `category`, one bar per value of `group`,
/// one panel per spec (its first column).
pub(crate) fn bars(
    table: &Table,
    category: &str,
    group: &str,
    panels: &[PanelSpec],
    title: &str,
    subtitle: &str,
) -> Result<String, String> {
    let cc = table.col(category)?;
    let gc = table.col(group)?;
    let cats = distinct(table, cc);
    let groups = distinct(table, gc);
    if cats.is_empty() {
        return Err("no rows".into());
    }
    let (x0, x1) = (LEFT, WIDTH - RIGHT);
    let slot = (x1 - x0) / cats.len() as f64;
    let bar_w = (slot * 0.8 / groups.len().max(1) as f64).min(60.0);
    let sub_lines = subtitle.split('\n').count() as f64;
    let (tops, height) = layout(panels, 52.0 + sub_lines * 14.0, 30.0);
    let mut out = String::new();
    header(&mut out, title, subtitle, height);
    let items: Vec<(String, &str)> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.clone(), COLORS[i % COLORS.len()]))
        .collect();
    for (panel, top) in panels.iter().zip(&tops) {
        let vc = table.col(&panel.columns[0])?;
        let value = |cat: &str, grp: &str| {
            (0..table.rows.len())
                .find(|&r| table.cell(r, cc) == cat && table.cell(r, gc) == grp)
                .and_then(|r| table.num(r, vc))
        };
        let data_max = (0..table.rows.len())
            .filter_map(|r| table.num(r, vc))
            .fold(0.0, f64::max);
        let ymax = y_max(panel, data_max);
        panel_frame(&mut out, *top, panel, ymax);
        let base = top + panel.height;
        for (ci, cat) in cats.iter().enumerate() {
            let cx = x0 + slot * (ci as f64 + 0.5);
            let left = cx - bar_w * groups.len() as f64 / 2.0;
            for (gi, grp) in groups.iter().enumerate() {
                let bx = left + bar_w * gi as f64;
                let color = COLORS[gi % COLORS.len()];
                match value(cat, grp) {
                    Some(v) => {
                        let h = (v / ymax).clamp(0.0, 1.0) * panel.height;
                        let _ = writeln!(
                            out,
                            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{h:.1}" fill="{color}"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle" fill="#222">{}</text>"##,
                            bx + 1.0,
                            base - h,
                            bar_w - 2.0,
                            bx + bar_w / 2.0,
                            (base - h - 3.0).max(top + 9.0),
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
        legend(&mut out, x1 + 36.0, top + 12.0, &items);
    }
    out.push_str("</svg>\n");
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIES: &str =
        "t,offered_cps,answered_cps,load,workers\n0,10,9,5,2\n1,10,10,,2\n2,100,98,80,3\n";

    #[test]
    fn panel_specs() -> Result<(), String> {
        let p: PanelSpec = "Load (%)=load;unit=%;ref=70;ref=18;max=100;step".parse()?;
        assert_eq!(p.title, "Load (%)");
        assert_eq!(p.columns, ["load"]);
        assert_eq!(p.unit, "%");
        assert_eq!(p.refs, [70.0, 18.0]);
        assert_eq!(p.max, Some(100.0));
        assert!(p.step);
        assert!("no columns".parse::<PanelSpec>().is_err());
        assert!("t=a;bogus".parse::<PanelSpec>().is_err());
        let m: Marker = "30:100 cps".parse()?;
        assert_eq!((m.t, m.label.as_str()), (30.0, "100 cps"));
        Ok(())
    }

    #[test]
    fn line_chart_has_every_series_and_breaks_on_gaps() -> Result<(), String> {
        let t = Table::parse(SERIES)?;
        let panels = [
            "CPS=offered_cps,answered_cps".parse()?,
            "Load=load;unit=%".parse()?,
            "Workers=workers;step".parse()?,
        ];
        let svg = lines(&t, "t", "s", &panels, &[], "title <x>", "sub")?;
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("title &lt;x&gt;"));
        // offered, answered, two runs of load (gap at t=1), workers.
        assert_eq!(svg.matches("<polyline").count(), 5);
        assert!(lines(&t, "nope", "", &panels, &[], "", "").is_err());
        Ok(())
    }

    #[test]
    fn bar_chart_has_one_bar_per_cell() -> Result<(), String> {
        let t = Table::parse(
            "load,system,goodput_pct\n1x,kamailio,99\n1x,sbc,100\n2x,kamailio,34\n2x,sbc,\n",
        )?;
        let panels = ["Goodput=goodput_pct;unit=%;ref=95".parse()?];
        let svg = bars(&t, "load", "system", &panels, "t", "s")?;
        // 3 bars + background + frame + 2 legend swatches.
        assert_eq!(svg.matches("<rect").count(), 3 + 2 + 2);
        assert!(svg.contains("n/a"));
        Ok(())
    }
}
