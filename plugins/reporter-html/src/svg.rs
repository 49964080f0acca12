//! Self-contained SVG charts, each scaled to the page's width: grouped bars
//! over a categorical axis, lines over a numeric one (with each series'
//! ideal where there is one), and one row per cell. Every chart names its
//! kind, axis and series count in `data-` attributes; a suspect point
//! carries a red mark whose tooltip gives the reason. Text is escaped here;
//! nothing is fetched or scripted.

use std::fmt::Write;

const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
/// The drawing's width in its own units; the page scales it to its column.
pub const WIDTH: f64 = 1000.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
/// The plot area's top and height.
const TOP: f64 = 34.0;
const PLOT_H: f64 = 240.0;
/// Room under the plot for the x ticks and the axis name.
const UNDER: f64 = 48.0;
const LEGEND_ROW: f64 = 18.0;
/// About the width of a character of an 11 px label, in drawing units.
const CHAR_W: f64 = 6.4;

pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Round tick step (1, 2 or 5 × 10^k) giving about five ticks up to `max`.
fn ticks(max: f64) -> Vec<f64> {
    if !(max > 0.0 && max.is_finite()) {
        return vec![0.0, 1.0];
    }
    let raw = max / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * mag).find(|s| *s >= raw).unwrap_or(10.0 * mag);
    (0..).map(|i| i as f64 * step).take_while(|t| *t <= max + step * 0.999).collect()
}

fn label(v: f64) -> String {
    if v != 0.0 && (v.abs() >= 1e5 || v.abs() < 1e-2) {
        format!("{v:.1e}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// `text` cut to `chars` characters, with an ellipsis when cut.
fn fit(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        text.chars().take(chars.saturating_sub(1)).chain(['…']).collect()
    }
}

/// One point of a series: its x position, median, min and max over
/// repeats, and why it is suspect, if it is.
pub struct Point {
    pub x: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub suspect: Option<String>,
}

pub struct Series {
    pub name: String,
    pub points: Vec<Point>,
    /// What the series would reach at each x if it scaled linearly (drawn dashed).
    pub ideal: Vec<(usize, f64)>,
}

/// A chart of series over the values of one axis.
pub struct Chart<'a> {
    pub title: String,
    /// The swept key the x axis shows (`data-axis`).
    pub axis: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub xs: Vec<String>,
    pub series: Vec<Series>,
    /// A horizontal line every series is read against (100 % of linear).
    pub reference: Option<f64>,
}

impl Chart<'_> {
    fn y_top(&self) -> f64 {
        let top = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.max.max(p.median)).chain(s.ideal.iter().map(|i| i.1)))
            .chain(self.reference)
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max)
            * 1.08;
        *ticks(top).last().unwrap_or(&1.0)
    }

    fn y(&self, top: f64) -> impl Fn(f64) -> f64 {
        move |v: f64| TOP + PLOT_H * (1.0 - v / top)
    }

    fn legend_rows(&self) -> usize {
        self.series.len() + usize::from(self.series.iter().any(|s| !s.ideal.is_empty()))
    }

    /// The opening tag, title, y grid and labels, x ticks and axis name.
    fn frame(&self, kind: &str, top: f64) -> String {
        let height = TOP + PLOT_H + UNDER + LEGEND_ROW * self.legend_rows() as f64 + 8.0;
        let mut svg = open(kind, self.axis, self.series.len(), height, &self.title);
        let y = self.y(top);
        for t in ticks(top) {
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"##,
                WIDTH - RIGHT,
                LEFT - 6.0,
                y(t) + 4.0,
                label(t),
                y = y(t)
            );
        }
        let _ = write!(
            svg,
            r##"<text transform="translate(14,{:.1}) rotate(-90)" class="axis" text-anchor="middle">{}</text>"##,
            TOP + PLOT_H / 2.0,
            esc(self.y_label)
        );
        let step = (WIDTH - LEFT - RIGHT) / self.xs.len().max(1) as f64;
        let room = ((step - 6.0) / CHAR_W).max(3.0) as usize;
        for (i, v) in self.xs.iter().enumerate() {
            let _ = write!(
                svg,
                r##"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}<title>{}</title></text>"##,
                LEFT + step * (i as f64 + 0.5),
                TOP + PLOT_H + 16.0,
                esc(&fit(v, room)),
                esc(v)
            );
        }
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"##,
            LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
            TOP + PLOT_H + 36.0,
            esc(self.x_label)
        );
        if let Some(r) = self.reference {
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" class="ref"/>"##,
                WIDTH - RIGHT,
                y(r),
                y(r)
            );
        }
        svg
    }

    /// The legend under the plot: a swatch and name per series, then the
    /// dashed ideal's meaning where one is drawn.
    fn legend(&self, svg: &mut String) {
        let room = ((WIDTH - LEFT - RIGHT - 24.0) / CHAR_W) as usize;
        let base = TOP + PLOT_H + UNDER;
        for (k, s) in self.series.iter().enumerate() {
            let ly = base + LEGEND_ROW * k as f64 + 10.0;
            let _ = write!(
                svg,
                r##"<rect x="{LEFT}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{}" y="{ly:.1}" class="tick">{}</text>"##,
                ly - 10.0,
                COLORS[k % COLORS.len()],
                LEFT + 18.0,
                esc(&fit(&s.name, room))
            );
        }
        if self.series.iter().any(|s| !s.ideal.is_empty()) {
            let ly = base + LEGEND_ROW * self.series.len() as f64 + 10.0;
            let _ = write!(
                svg,
                r##"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" stroke="#555" class="ideal"/><text x="{}" y="{ly:.1}" class="tick">ideal: linear from the 1-replica cell (dashed, each series' colour)</text>"##,
                LEFT + 12.0,
                ly - 4.0,
                ly - 4.0,
                LEFT + 18.0
            );
        }
    }
}

/// A chart's opening tag: scaled to the page, its kind, axis and series
/// count stated for whoever reads the page's structure.
fn open(kind: &str, axis: &str, series: usize, height: f64, title: &str) -> String {
    format!(
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height:.0}" preserveAspectRatio="xMinYMin meet" role="img" data-kind="{kind}" data-axis="{}" data-series="{series}"><title>{}</title><text x="{LEFT}" y="18" class="title">{}</text>"##,
        esc(axis),
        esc(title),
        esc(title)
    )
}

/// A red ring and `!` at (x, y), its tooltip the reason.
fn suspect_mark(svg: &mut String, x: f64, y: f64, why: &str) {
    let _ = write!(
        svg,
        r##"<g class="suspect"><circle cx="{x:.1}" cy="{y:.1}" r="8" fill="none" stroke="#c00" stroke-width="2"/><text x="{:.1}" y="{:.1}" class="warn">!</text><title>{}</title></g>"##,
        x + 8.0,
        y - 8.0,
        esc(why)
    );
}

/// Grouped bars: one group per x value, one bar per series in it, a
/// min–max whisker on each.
pub fn bars(chart: &Chart) -> String {
    let top = chart.y_top();
    let y = chart.y(top);
    let mut svg = chart.frame("bars", top);
    let step = (WIDTH - LEFT - RIGHT) / chart.xs.len().max(1) as f64;
    let n = chart.series.len().max(1) as f64;
    let bar = ((step * 0.8) / n).min(60.0);
    for (k, s) in chart.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        for p in &s.points {
            let x0 = LEFT + step * p.x as f64 + (step - bar * n) / 2.0 + bar * k as f64;
            let cx = x0 + bar / 2.0;
            let _ = write!(
                svg,
                r##"<rect x="{x0:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{color}"><title>{}: {}</title></rect><line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="#333"/>"##,
                y(p.median),
                (bar - 2.0).max(1.0),
                (y(0.0) - y(p.median)).max(0.0),
                esc(&s.name),
                label(p.median),
                y(p.min),
                y(p.max)
            );
            if let Some(why) = &p.suspect {
                suspect_mark(&mut svg, cx, y(p.max) - 10.0, why);
            }
        }
    }
    chart.legend(&mut svg);
    svg + "</svg>"
}

/// Lines over the x values in order, a min–max whisker at each point, each
/// series' ideal dashed in its colour.
pub fn lines(chart: &Chart) -> String {
    let top = chart.y_top();
    let y = chart.y(top);
    let mut svg = chart.frame("lines", top);
    let step = (WIDTH - LEFT - RIGHT) / chart.xs.len().max(1) as f64;
    let x = |i: usize| LEFT + step * (i as f64 + 0.5);
    for (k, s) in chart.series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        if s.ideal.len() > 1 {
            let path: Vec<String> =
                s.ideal.iter().map(|&(i, v)| format!("{:.1},{:.1}", x(i), y(v))).collect();
            let _ = write!(
                svg,
                r##"<polyline points="{}" fill="none" stroke="{color}" class="ideal"/>"##,
                path.join(" ")
            );
        }
        let path: Vec<String> =
            s.points.iter().map(|p| format!("{:.1},{:.1}", x(p.x), y(p.median))).collect();
        let _ = write!(
            svg,
            r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2" class="series"/>"##,
            path.join(" ")
        );
        for p in &s.points {
            let _ = write!(
                svg,
                r##"<line x1="{cx:.1}" x2="{cx:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}"/><circle cx="{cx:.1}" cy="{:.1}" r="4" fill="{color}"><title>{}: {}</title></circle>"##,
                y(p.min),
                y(p.max),
                y(p.median),
                esc(&s.name),
                label(p.median),
                cx = x(p.x)
            );
            if let Some(why) = &p.suspect {
                suspect_mark(&mut svg, x(p.x), y(p.median), why);
            }
        }
    }
    chart.legend(&mut svg);
    svg + "</svg>"
}

/// Horizontal rows, one per cell, drawn by `draw(svg, row, y, x-scale)`;
/// the names' column as wide as the longest (at most 40 % of the width), a
/// suspect row's name marked with its reason.
pub fn rows(
    title: &str,
    x_label: &str,
    names: &[(String, Option<String>)],
    x_max: f64,
    draw: &dyn Fn(&mut String, usize, f64, &dyn Fn(f64) -> f64),
) -> String {
    let longest = names.iter().map(|(n, _)| n.chars().count()).max().unwrap_or(0) as f64;
    let left = (longest * CHAR_W + 30.0).clamp(120.0, 0.4 * WIDTH);
    let room = ((left - 30.0) / CHAR_W) as usize;
    let row_h = 26.0;
    let bottom = 40.0 + row_h * names.len() as f64;
    let height = bottom + 44.0;
    let ts = ticks(x_max);
    let top = *ts.last().unwrap_or(&1.0);
    let x = move |v: f64| left + (WIDTH - left - RIGHT - 70.0) * v / top;
    let mut svg = open("rows", "cell", names.len(), height, title);
    for t in &ts {
        let _ = write!(
            svg,
            r##"<line x1="{xv:.1}" x2="{xv:.1}" y1="34" y2="{bottom:.1}" class="grid"/><text x="{xv:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"##,
            bottom + 14.0,
            label(*t),
            xv = x(*t)
        );
    }
    let _ = write!(
        svg,
        r##"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"##,
        left + (WIDTH - left) / 2.0,
        bottom + 34.0,
        esc(x_label)
    );
    for (i, (name, suspect)) in names.iter().enumerate() {
        let yc = 40.0 + row_h * (i as f64 + 0.5);
        let _ = write!(
            svg,
            r##"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}<title>{}</title></text>"##,
            left - 20.0,
            yc + 4.0,
            esc(&fit(name, room)),
            esc(name)
        );
        if let Some(why) = suspect {
            let _ = write!(
                svg,
                r##"<g class="suspect"><text x="{:.1}" y="{:.1}" class="warn">!</text><title>{}</title></g>"##,
                left - 14.0,
                yc + 5.0,
                esc(why)
            );
        }
        draw(&mut svg, i, yc, &x);
    }
    svg + "</svg>"
}
