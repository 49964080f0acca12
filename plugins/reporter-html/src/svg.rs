//! Self-contained SVG charts: a line chart of series over categories with
//! min–max bars, and a chart of one row per cell. Text is escaped here;
//! nothing is fetched or scripted.

use std::fmt::Write;

const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;

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
    if v != 0.0 && (v.abs() >= 1e4 || v.abs() < 1e-2) {
        format!("{v:.1e}")
    } else {
        let s = format!("{v:.2}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// The opening of a chart `height` high whose plot area ends 70 px above
/// `plot_bottom`: title, y grid and labels. Returns it with the y range's top.
fn frame(title: &str, y_label: &str, y_max: f64, plot_bottom: f64, height: f64) -> (String, f64, f64) {
    let ts = ticks(y_max);
    let top = *ts.last().unwrap_or(&1.0);
    let plot_h = plot_bottom - 70.0;
    let y = |v: f64| 30.0 + plot_h * (1.0 - v / top);
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img"><title>{}</title><text x="{LEFT}" y="18" class="title">{}</text>"#,
        esc(title),
        esc(title)
    );
    for t in &ts {
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}" class="grid"/><text x="{}" y="{:.1}" class="tick" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y(*t) + 4.0,
            label(*t),
            y = y(*t)
        );
    }
    let _ = write!(
        svg,
        r#"<text transform="translate(14,{:.1}) rotate(-90)" class="axis" text-anchor="middle">{}</text>"#,
        30.0 + plot_h / 2.0,
        esc(y_label)
    );
    (svg, top, plot_h)
}

pub struct Series {
    pub name: String,
    /// (x position, median, min, max)
    pub points: Vec<(usize, f64, f64, f64)>,
}

/// A line chart over categorical x values.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    xs: &[String],
    series: &[Series],
    reference: Option<f64>,
) -> String {
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.3.max(p.1)))
        .chain(reference)
        .fold(0.0f64, f64::max)
        * 1.05;
    let height = 300.0 + 18.0 * series.len() as f64;
    let (mut svg, top, plot_h) = frame(title, y_label, y_max, 300.0, height);
    let y = |v: f64| 30.0 + plot_h * (1.0 - v / top);
    let step = (WIDTH - LEFT - RIGHT) / xs.len().max(1) as f64;
    let x = |i: usize| LEFT + step * (i as f64 + 0.5);
    for (i, v) in xs.iter().enumerate() {
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            x(i),
            30.0 + plot_h + 16.0,
            esc(v)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
        LEFT + (WIDTH - LEFT - RIGHT) / 2.0,
        30.0 + plot_h + 34.0,
        esc(x_label)
    );
    if let Some(r) = reference {
        let _ = write!(
            svg,
            r#"<line x1="{LEFT}" x2="{}" y1="{:.1}" y2="{:.1}" class="ref"/>"#,
            WIDTH - RIGHT,
            y(r),
            y(r)
        );
    }
    for (k, s) in series.iter().enumerate() {
        let color = COLORS[k % COLORS.len()];
        let path: Vec<String> = s.points.iter().map(|p| format!("{:.1},{:.1}", x(p.0), y(p.1))).collect();
        let _ = write!(
            svg,
            r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
            path.join(" ")
        );
        for p in &s.points {
            let _ = write!(
                svg,
                r#"<line x1="{x:.1}" x2="{x:.1}" y1="{:.1}" y2="{:.1}" stroke="{color}"/><circle cx="{x:.1}" cy="{:.1}" r="4" fill="{color}"><title>{}: {}</title></circle>"#,
                y(p.2),
                y(p.3),
                y(p.1),
                esc(&s.name),
                label(p.1),
                x = x(p.0)
            );
        }
        let ly = 300.0 + 18.0 * k as f64 + 4.0;
        let _ = write!(
            svg,
            r#"<rect x="{LEFT}" y="{:.1}" width="12" height="12" fill="{color}"/><text x="{}" y="{:.1}" class="tick">{}</text>"#,
            ly - 10.0,
            LEFT + 18.0,
            ly,
            esc(&s.name)
        );
    }
    svg + "</svg>"
}

/// Horizontal rows, one per cell, drawn by `draw(svg, row, y, x-scale)`.
pub fn rows_chart(
    title: &str,
    x_label: &str,
    names: &[String],
    x_max: f64,
    draw: &dyn Fn(&mut String, usize, f64, &dyn Fn(f64) -> f64),
) -> String {
    let left = 290.0;
    let row_h = 26.0;
    let height = 60.0 + row_h * names.len() as f64 + 30.0;
    let ts = ticks(x_max);
    let top = *ts.last().unwrap_or(&1.0);
    let x = move |v: f64| left + (WIDTH - left - RIGHT) * v / top;
    let mut svg = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img"><title>{}</title><text x="{LEFT}" y="18" class="title">{}</text>"#,
        esc(title),
        esc(title)
    );
    let bottom = 40.0 + row_h * names.len() as f64;
    for t in &ts {
        let _ = write!(
            svg,
            r#"<line x1="{xv:.1}" x2="{xv:.1}" y1="34" y2="{bottom:.1}" class="grid"/><text x="{xv:.1}" y="{:.1}" class="tick" text-anchor="middle">{}</text>"#,
            bottom + 14.0,
            label(*t),
            xv = x(*t)
        );
    }
    let _ = write!(
        svg,
        r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="middle">{}</text>"#,
        left + (WIDTH - left) / 2.0,
        bottom + 32.0,
        esc(x_label)
    );
    for (i, name) in names.iter().enumerate() {
        let yc = 40.0 + row_h * (i as f64 + 0.5);
        let short: String = if name.chars().count() > 44 {
            name.chars().take(43).chain(['…']).collect()
        } else {
            name.clone()
        };
        let _ = write!(
            svg,
            r#"<text x="{:.1}" y="{:.1}" class="tick" text-anchor="end">{}<title>{}</title></text>"#,
            left - 8.0,
            yc + 4.0,
            esc(&short),
            esc(name)
        );
        draw(&mut svg, i, yc, &x);
    }
    svg + "</svg>"
}
