//! `sbc-lab chart`: a [`Chart`] of a benchmark's CSV (lab/bench), the panels given on the
//! command line.
//!
//! Two kinds, both a column of panels sharing one x axis:
//! - [`lines`]: time series, x is a numeric column (e.g. `t`), each panel draws one or more
//!   numeric columns as lines (or steps), with optional vertical markers (phases);
//! - [`bars`]: grouped bars, x is a category column (e.g. the offered load `1x`, `2x`, `5x`)
//!   and one bar per value of a group column (e.g. the system: `kamailio`, `sbc-prsm`), each
//!   panel draws one numeric column with its value printed on the bar.
//!
//! A panel is given as `TITLE=COL[,COL...]` followed by optional `;key=value` settings
//! ([`PanelSpec`]): `unit=%` (tick suffix), `ref=95` (a dashed reference line, repeatable),
//! `max=100` (fixed y maximum), `step` (draw lines as steps, for counts such as workers),
//! `height=120`, `spans` (`lines` only: the one column holds words, not numbers, e.g. a node's
//! role, drawn as a strip of coloured spans, one colour per word across every such panel; see
//! [`runs`]).

use std::collections::BTreeMap;
use std::str::FromStr;

use super::{
    Chart, Content, Marker, MarkerStyle, Panel, RefLabel, RefLine, Series, Span, Stroke, Swatch,
    XAxis, YAxis, PALETTE,
};

/// The colour of reference lines.
const REF_COLOR: &str = "#444";
/// The colour of marker lines.
const MARKER_COLOR: &str = "#999";

/// A CSV file: a header row, then rows of cells (comma-separated, no quoting).
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses comma-separated text; blank lines and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// When there is no header row.
    pub fn parse(text: &str) -> Result<Self, String> {
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

    /// A finite number, or none.
    fn num(&self, row: usize, col: usize) -> Option<f64> {
        self.cell(row, col)
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
    }

    /// Distinct values of a column, in order of first appearance.
    fn distinct(&self, col: usize) -> Vec<String> {
        let mut seen = Vec::new();
        for r in 0..self.rows.len() {
            let v = self.cell(r, col).to_string();
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
        seen
    }
}

/// One panel of a chart: `TITLE=COL[,COL...][;unit=U][;ref=N]...[;max=N][;step][;height=N]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PanelSpec {
    title: String,
    columns: Vec<String>,
    unit: String,
    refs: Vec<f64>,
    max: Option<f64>,
    step: bool,
    spans: bool,
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
            spans: false,
            height: 150.0,
        };
        let number = |k: &str, v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("panel {s:?}: {k}={v:?} is not a number"))
        };
        for kv in parts {
            match kv.split_once('=') {
                Some(("unit", v)) => p.unit = v.to_string(),
                Some(("ref", v)) => p.refs.push(number("ref", v)?),
                Some(("max", v)) => {
                    let m = number("max", v)?;
                    if m <= 0.0 {
                        return Err(format!("panel {s:?}: max={v:?} is not positive"));
                    }
                    p.max = Some(m);
                }
                Some(("height", v)) => p.height = number("height", v)?.clamp(40.0, 600.0),
                None if kv == "step" => p.step = true,
                None if kv == "spans" => p.spans = true,
                _ => return Err(format!("panel {s:?}: unknown setting {kv:?}")),
            }
        }
        if p.spans && p.columns.len() != 1 {
            return Err(format!("panel {s:?}: spans take exactly one column"));
        }
        Ok(p)
    }
}

impl PanelSpec {
    /// The panel with this content; reference lines labelled with their value.
    fn panel(&self, content: Content) -> Panel {
        Panel {
            title: self.title.clone(),
            height: self.height,
            y: YAxis {
                unit: self.unit.clone(),
                max: self.max,
                floor: 1.0,
            },
            refs: self
                .refs
                .iter()
                .map(|&value| RefLine {
                    value,
                    label: RefLabel::Value,
                    color: REF_COLOR,
                })
                .collect(),
            content,
        }
    }
}

/// A vertical line on a `lines` chart: `T:LABEL`.
#[derive(Debug, Clone, PartialEq)]
pub struct MarkerSpec {
    t: f64,
    label: String,
}

impl FromStr for MarkerSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (t, label) = s.split_once(':').unwrap_or((s, ""));
        let t = t
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|t| t.is_finite())
            .ok_or_else(|| format!("marker {s:?}: expected T:LABEL with T in x units"))?;
        Ok(Self {
            t,
            label: label.to_string(),
        })
    }
}

/// A time-series chart of `panels` against the numeric column `x`.
///
/// # Errors
/// When a column is missing, or `x` has no number.
pub fn lines(
    table: &Table,
    x: &str,
    x_label: &str,
    panels: &[PanelSpec],
    markers: &[MarkerSpec],
    title: &str,
    subtitle: &str,
) -> Result<String, String> {
    let xc = table.col(x)?;
    let xs: Vec<f64> = (0..table.rows.len())
        .map(|r| table.num(r, xc).unwrap_or(f64::NAN))
        .collect();
    if !xs.iter().any(|v| v.is_finite()) {
        return Err(format!("column {x:?} has no number"));
    }
    // A column has the same colour in every panel, and so has a word of the spans panels
    // (in order of first appearance, row by row across those panels).
    let mut color_of: BTreeMap<&str, &'static str> = BTreeMap::new();
    let span_cols = panels
        .iter()
        .filter(|p| p.spans)
        .map(|p| table.col(&p.columns[0]))
        .collect::<Result<Vec<_>, _>>()?;
    let mut word_color: Vec<(&str, &'static str)> = Vec::new();
    for r in 0..table.rows.len() {
        for &c in &span_cols {
            let w = table.cell(r, c);
            if !w.is_empty() && !word_color.iter().any(|&(k, _)| k == w) {
                word_color.push((w, PALETTE[word_color.len() % PALETTE.len()]));
            }
        }
    }
    let mut out = Vec::with_capacity(panels.len());
    for p in panels {
        if p.spans {
            let c = table.col(&p.columns[0])?;
            let words: Vec<&str> = (0..table.rows.len()).map(|r| table.cell(r, c)).collect();
            let mut kinds: Vec<Swatch> = Vec::new();
            let mut spans = Vec::new();
            for (from, to, word) in runs(&xs, &words) {
                let kind = if let Some(k) = kinds.iter().position(|k| k.label == word) {
                    k
                } else {
                    let color = word_color
                        .iter()
                        .find(|&&(k, _)| k == word)
                        .map_or(PALETTE[0], |&(_, c)| c);
                    kinds.push(Swatch {
                        label: word.to_string(),
                        color,
                    });
                    kinds.len() - 1
                };
                spans.push(Span { from, to, kind });
            }
            out.push(p.panel(Content::Spans { kinds, spans }));
            continue;
        }
        let mut series = Vec::with_capacity(p.columns.len());
        for name in &p.columns {
            let c = table.col(name)?;
            let n = color_of.len();
            let color = *color_of.entry(name).or_insert(PALETTE[n % PALETTE.len()]);
            series.push(Series {
                label: name.clone(),
                points: xs
                    .iter()
                    .enumerate()
                    .map(|(r, &xv)| (xv, table.num(r, c).unwrap_or(f64::NAN)))
                    .collect(),
                stroke: Stroke::solid(color, 2.0),
                step: p.step,
            });
        }
        out.push(p.panel(Content::Lines(series)));
    }
    Ok(Chart {
        title: title.to_string(),
        subtitle: subtitle.to_string(),
        x: Some(XAxis {
            label: x_label.to_string(),
            ticks: 8.0,
            ..XAxis::default()
        }),
        panels: out,
        markers: markers
            .iter()
            .map(|m| Marker {
                t: m.t,
                label: m.label.clone(),
                color: MARKER_COLOR,
            })
            .collect(),
        marker_style: MarkerStyle::Labels,
    }
    .to_svg())
}

/// The runs of equal, non-empty `words` along `xs` (rows in order): `(from, to, word)`, from a
/// run's first x to the x of the row after its last (the next sample), or to its own last x at
/// the end of the table. A row with an empty word or no finite x ends a run and starts none.
#[must_use]
pub fn runs<'a>(xs: &[f64], words: &[&'a str]) -> Vec<(f64, f64, &'a str)> {
    let mut out: Vec<(f64, f64, &'a str)> = Vec::new();
    let mut open: Option<(f64, f64, &'a str)> = None;
    for (&x, &w) in xs.iter().zip(words) {
        if !x.is_finite() || w.is_empty() {
            if let Some((from, last, word)) = open.take() {
                out.push((from, if x.is_finite() { x } else { last }, word));
            }
            continue;
        }
        match open {
            Some((from, _, word)) if word == w => open = Some((from, x, word)),
            Some((from, _, word)) => {
                out.push((from, x, word));
                open = Some((x, x, w));
            }
            None => open = Some((x, x, w)),
        }
    }
    out.extend(open);
    out
}

/// A grouped bar chart: one cluster per value of `category`, one bar per value of `group`,
/// one panel per spec (its first column).
///
/// # Errors
/// When a column is missing, or there is no row.
pub fn bars(
    table: &Table,
    category: &str,
    group: &str,
    panels: &[PanelSpec],
    title: &str,
    subtitle: &str,
) -> Result<String, String> {
    if let Some(p) = panels.iter().find(|p| p.spans) {
        return Err(format!("panel {:?}: spans are for lines charts", p.title));
    }
    let cc = table.col(category)?;
    let gc = table.col(group)?;
    let categories = table.distinct(cc);
    let groups = table.distinct(gc);
    if categories.is_empty() {
        return Err("no rows".into());
    }
    let swatches: Vec<Swatch> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| Swatch {
            label: g.clone(),
            color: PALETTE[i % PALETTE.len()],
        })
        .collect();
    let mut out = Vec::with_capacity(panels.len());
    for p in panels {
        let vc = table.col(&p.columns[0])?;
        let value = |cat: &str, grp: &str| {
            (0..table.rows.len())
                .find(|&r| table.cell(r, cc) == cat && table.cell(r, gc) == grp)
                .and_then(|r| table.num(r, vc))
        };
        let values = categories
            .iter()
            .map(|c| groups.iter().map(|g| value(c, g)).collect())
            .collect();
        out.push(p.panel(Content::Bars {
            categories: categories.clone(),
            groups: swatches.clone(),
            values,
        }));
    }
    Ok(Chart {
        title: title.to_string(),
        subtitle: subtitle.to_string(),
        x: None,
        panels: out,
        markers: Vec::new(),
        marker_style: MarkerStyle::Labels,
    }
    .to_svg())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERIES: &str =
        "t,offered_cps,answered_cps,load,workers\n0,10,9,5,2\n1,10,10,,2\n2,100,98,80,3\n";

    #[test]
    fn tables() -> Result<(), String> {
        let t = Table::parse("# a comment\n\na, b ,c\n1,2\n 3 , x ,5,6\n")?;
        assert_eq!(t.header, ["a", "b", "c"]);
        assert_eq!(t.num(0, 1), Some(2.0));
        // A missing cell, a cell that is not a number.
        assert_eq!(t.num(0, 2), None);
        assert_eq!(t.num(1, 1), None);
        assert_eq!(t.num(1, 0), Some(3.0));
        assert!(t.col("d").is_err());
        assert!(Table::parse("# only a comment\n").is_err());
        // Not finite: not a number.
        let t = Table::parse("v\nNaN\ninf\n-inf\n1e400\n")?;
        assert!((0..4).all(|r| t.num(r, 0).is_none()));
        Ok(())
    }

    #[test]
    fn panel_specs() -> Result<(), String> {
        let p: PanelSpec = "Load (%)=load;unit=%;ref=70;ref=18;max=100;step".parse()?;
        assert_eq!(p.title, "Load (%)");
        assert_eq!(p.columns, ["load"]);
        assert_eq!(p.unit, "%");
        assert_eq!(p.refs, [70.0, 18.0]);
        assert_eq!(p.max, Some(100.0));
        assert!(p.step);
        // The title may hold '=': the columns follow the last one.
        let p: PanelSpec = "a=b (ms)=c,d;height=5000".parse()?;
        assert_eq!((p.title.as_str(), p.height), ("a=b (ms)", 600.0));
        assert_eq!(p.columns, ["c", "d"]);
        assert!("no columns".parse::<PanelSpec>().is_err());
        assert!("t=".parse::<PanelSpec>().is_err());
        assert!("t=a;bogus".parse::<PanelSpec>().is_err());
        for bad in ["nan", "inf", "-inf", "x"] {
            assert!(format!("t=a;max={bad}").parse::<PanelSpec>().is_err());
            assert!(format!("t=a;ref={bad}").parse::<PanelSpec>().is_err());
            assert!(format!("t=a;height={bad}").parse::<PanelSpec>().is_err());
        }
        assert!("t=a;max=0".parse::<PanelSpec>().is_err());
        let m: MarkerSpec = "30:100 cps".parse()?;
        assert_eq!((m.t, m.label.as_str()), (30.0, "100 cps"));
        let m: MarkerSpec = "12.5".parse()?;
        assert_eq!((m.t, m.label.as_str()), (12.5, ""));
        assert!("NaN:x".parse::<MarkerSpec>().is_err());
        assert!("soon:x".parse::<MarkerSpec>().is_err());
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
        let markers = ["1:phase <2>".parse()?];
        let svg = lines(&t, "t", "s", &panels, &markers, "title <x>", "sub")?;
        assert!(svg.starts_with("<?xml") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("title &lt;x&gt;"));
        assert!(svg.contains("phase &lt;2&gt;"));
        // offered, answered, workers; load is two points alone (a gap at t=1): two dots.
        assert_eq!(svg.matches("<polyline").count(), 3);
        assert_eq!(svg.matches("<circle").count(), 2);
        // A legend entry per column.
        for c in ["offered_cps", "answered_cps", "load", "workers"] {
            assert!(svg.contains(&format!(">{c}</text>")), "{c}");
        }
        assert!(lines(&t, "nope", "", &panels, &[], "", "").is_err());
        let bad = ["X=nope".parse()?];
        assert!(lines(&t, "t", "", &bad, &[], "", "").is_err());
        let t = Table::parse("t,v\nx,1\n")?;
        assert!(lines(&t, "t", "", &["V=v".parse()?], &[], "", "").is_err());
        Ok(())
    }

    #[test]
    fn a_column_keeps_its_colour_across_panels() -> Result<(), String> {
        let t = Table::parse(SERIES)?;
        let panels = [
            "A=offered_cps,answered_cps".parse()?,
            "B=answered_cps".parse()?,
        ];
        let svg = lines(&t, "t", "s", &panels, &[], "", "")?;
        let answered = format!(r#"stroke="{}""#, PALETTE[1]);
        // Two polylines and two legend lines in the second colour.
        assert_eq!(svg.matches(&answered).count(), 4, "{svg}");
        Ok(())
    }

    #[test]
    fn runs_of_words() {
        let xs = [0.0, 2.0, 4.0, 6.0, 8.0, f64::NAN, 12.0, 14.0];
        let w = [
            "active", "active", "standby", "", "down", "down", "down", "active",
        ];
        assert_eq!(
            runs(&xs, &w),
            [
                (0.0, 4.0, "active"),
                (4.0, 6.0, "standby"),
                (8.0, 8.0, "down"),
                (12.0, 14.0, "down"),
                (14.0, 14.0, "active"),
            ]
        );
        assert!(runs(&[], &[]).is_empty());
        assert_eq!(runs(&[1.0], &["x"]), [(1.0, 1.0, "x")]);
    }

    #[test]
    fn spans_panels_share_a_colour_per_word() -> Result<(), String> {
        let t = Table::parse(
            "t,a_role,b_role,v\n0,active,standby,1\n1,active,standby,2\n2,down,active,3\n3,standby,active,4\n",
        )?;
        let panels = [
            "V=v".parse()?,
            "A=a_role;spans;height=30".parse()?,
            "B=b_role;spans;height=30".parse()?,
        ];
        let svg = lines(&t, "t", "s", &panels, &[], "", "")?;
        // Words take colours in order of first appearance, row by row across the spans panels:
        // active, standby, down.
        let fill = |c: &str| format!(r#"fill="{c}"/>"#);
        // active: a span in A (t 0..2), one in B (t 2..3), a swatch in each legend.
        assert_eq!(svg.matches(&fill(PALETTE[0])).count(), 4, "{svg}");
        // standby: a span in A (t 3, zero width), one in B (t 0..2), a swatch in each legend.
        assert_eq!(svg.matches(&fill(PALETTE[1])).count(), 4, "{svg}");
        // down: a span in A and its swatch.
        assert_eq!(svg.matches(&fill(PALETTE[2])).count(), 2, "{svg}");
        assert!("A=a_role,b_role;spans".parse::<PanelSpec>().is_err());
        assert!(bars(&t, "t", "a_role", &panels, "", "").is_err());
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
        assert!(svg.contains(">95%</text>"));
        assert!(bars(&t, "load", "nope", &panels, "t", "s").is_err());
        let empty = Table::parse("load,system,goodput_pct\n")?;
        assert!(bars(&empty, "load", "system", &panels, "t", "s").is_err());
        Ok(())
    }
}
