//! `html`: `report.html`, one self-contained page (inline CSS and SVG, no
//! script, nothing fetched) with the run's environment, the cells table and
//! four charts: images/s against each swept axis (median, min–max bars, one
//! line per combination of the other axes), scaling efficiency when a
//! `devices` or `workers` axis is swept, the step-time distribution of each
//! cell, and each cell's step split into data wait and compute.

use benchkit_pdk::report::{
    finished, fixed, input_bound, num, show, text, Gathered, RunLog, RunReport, SCALING_NOTE,
};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use serde_json::Value;
use std::fmt::Write;

struct Html;

const COLORS: &[&str] =
    &["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"];
const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;

fn esc(s: &str) -> String {
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

struct Series {
    name: String,
    /// (x position, median, min, max)
    points: Vec<(usize, f64, f64, f64)>,
}

/// A line chart over categorical x values.
fn line_chart(
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
fn rows_chart(
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

/// The series a cell belongs to on a chart over axis `key`: its values of the other axes.
fn series_name(summary: &Value, axes: &[String], key: &str) -> String {
    let others: Vec<String> = axes
        .iter()
        .filter(|a| *a != key)
        .map(|a| format!("{a}={}", summary["axes"].get(a).map(show).unwrap_or_default()))
        .collect();
    if others.is_empty() {
        "all".to_string()
    } else {
        others.join(", ")
    }
}

/// Images/s against axis `key`, one series per combination of the other axes.
fn throughput_chart(log: &RunLog, key: &str) -> String {
    let values = log.axis_values(key);
    let xs: Vec<String> = values.iter().map(show).collect();
    let axes = log.axes();
    let mut series: Vec<Series> = Vec::new();
    for s in log.summaries.iter().filter(|s| finished(s)) {
        let Some(i) = values.iter().position(|v| s["axes"].get(key) == Some(v)) else { continue };
        let name = series_name(s, &axes, key);
        let point = (
            i,
            num(s, "images_per_s.median").unwrap_or(0.0),
            num(s, "images_per_s.min").unwrap_or(0.0),
            num(s, "images_per_s.max").unwrap_or(0.0),
        );
        match series.iter_mut().find(|x| x.name == name) {
            Some(x) => x.points.push(point),
            None => series.push(Series { name, points: vec![point] }),
        }
    }
    line_chart(&format!("Training images/s vs {key}"), key, "images/s (median, min–max)", &xs, &series, None)
}

/// Per-worker images/s over the smallest worker count's, per series, in percent.
fn scaling_chart(log: &RunLog, key: &str) -> String {
    let values = log.axis_values(key);
    let xs: Vec<String> = values.iter().map(show).collect();
    let axes = log.axes();
    let mut groups: Vec<(String, Vec<(usize, f64, f64)>)> = Vec::new();
    for s in log.summaries.iter().filter(|s| finished(s)) {
        let Some(i) = values.iter().position(|v| s["axes"].get(key) == Some(v)) else { continue };
        let Some(n) = values[i].as_f64().filter(|n| *n > 0.0) else { continue };
        let name = series_name(s, &axes, key);
        let ips = num(s, "images_per_s.median").unwrap_or(0.0);
        match groups.iter_mut().find(|g| g.0 == name) {
            Some(g) => g.1.push((i, n, ips)),
            None => groups.push((name, vec![(i, n, ips)])),
        }
    }
    let series: Vec<Series> = groups
        .into_iter()
        .filter_map(|(name, mut pts)| {
            pts.sort_by(|a, b| a.1.total_cmp(&b.1));
            let &(_, n0, ips0) = pts.first()?;
            let points = pts
                .iter()
                .map(|&(i, n, ips)| {
                    let eff = 100.0 * (ips / n) / (ips0 / n0);
                    (i, eff, eff, eff)
                })
                .collect();
            Some(Series { name, points })
        })
        .collect();
    line_chart(&format!("Scaling efficiency vs {key}"), key, "% of linear scaling", &xs, &series, Some(100.0))
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.retain(|x| x.is_finite());
    v.sort_by(f64::total_cmp);
    (!v.is_empty()).then(|| {
        if v.len() % 2 == 1 {
            v[v.len() / 2]
        } else {
            (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
        }
    })
}

/// The page's body: environment, table, notes and charts.
fn body(log: &RunLog) -> String {
    let env = &log.start["environment"];
    let mut h = String::new();
    let _ = write!(h, "<h1>benchkit run <code>{}</code></h1>", esc(&log.name()));
    let _ = write!(
            h,
            "<p class=\"env\">{} · {} logical cores · {} GiB · {} · kernel {}<br>benchkit {} ({}) · burn {} · wasmtime {} · run id <code>{}</code> · {} repeat(s) per cell</p>",
            esc(&text(env, "cpu_model")),
            esc(&text(env, "logical_cores")),
            esc(&text(env, "memory_gib")),
            esc(&text(env, "os")),
            esc(&text(env, "kernel")),
            esc(&text(env, "benchkit_version")),
            esc(&text(env, "git_commit")),
            esc(&text(env, "burn_version")),
            esc(&text(env, "wasmtime_version")),
            esc(&text(&log.start, "run_id")),
            esc(&text(&log.start, "repeats")),
        );
    if let Some(gpus) = env["gpus"].as_array().filter(|g| !g.is_empty()) {
        let names: Vec<String> = gpus.iter().map(|g| esc(&show(g))).collect();
        let _ = write!(
            h,
            "<p class=\"env\">GPUs: {} (driver {})</p>",
            names.join(", "),
            esc(&text(env, "gpu_driver"))
        );
    }

    let base = log.reference_speed();
    h += "<h2>Cells</h2><div class=\"wide\"><table><tr><th>cell</th><th>model</th><th>img/s</th><th>variation</th><th>rel</th><th>step p50 ms</th><th>step p90 ms</th><th>data wait %</th><th>input-bound</th><th>test acc %</th><th>time to target s</th><th>$/epoch</th><th>status</th></tr>";
    for s in &log.summaries {
        let ips = num(s, "images_per_s.median");
        let rel = match (ips, base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
            _ => "-".into(),
        };
        let status = text(s, "status");
        let _ = write!(
                h,
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&status),
                esc(&text(s, "cell")),
                esc(&text(s, "model")),
                fixed(ips, 1),
                fixed(num(s, "images_per_s.variation_pct").filter(|_| num(s, "images_per_s.n").unwrap_or(0.0) > 1.0), 1),
                rel,
                fixed(num(s, "step_p50_ms.median"), 1),
                fixed(num(s, "step_p90_ms.median"), 1),
                fixed(num(s, "data_wait_pct.median"), 1),
                input_bound(s),
                fixed(num(s, "final_test_accuracy.median").map(|a| 100.0 * a), 2),
                match (num(s, "time_to_target_s.median"), num(s, "target_accuracy")) {
                    (Some(t), _) => format!("{t:.1}"),
                    (None, Some(_)) if finished(s) => "not reached".into(),
                    _ => "-".into(),
                },
                fixed(num(s, "usd_per_epoch.median"), 4),
                if finished(s) { format!("ok ×{}", esc(&text(s, "repeats"))) } else { esc(&status) },
            );
    }
    h += "</table></div>";
    if let Some(rows) = log.parallel_table() {
        h += "<h2>Data parallel</h2><div class=\"wide\"><table>";
        for (i, row) in rows.iter().enumerate() {
            let tag = if i == 0 { "th" } else { "td" };
            let cells: String = row.iter().map(|c| format!("<{tag}>{}</{tag}>", esc(c))).collect();
            let _ = write!(h, "<tr>{cells}</tr>");
        }
        let _ = write!(h, "</table></div><p class=\"env\">{}</p>", esc(SCALING_NOTE));
    }
    let notes: Vec<String> = log
        .notes()
        .iter()
        .map(|n| {
            if n.failed {
                format!("<li><b>{}</b> {}</li>", esc(&n.cell), esc(&n.text))
            } else {
                format!("<li>{}: {}</li>", esc(&n.cell), esc(&n.text))
            }
        })
        .collect();
    if !notes.is_empty() {
        let _ = write!(h, "<ul class=\"notes\">{}</ul>", notes.join(""));
    }

    h += "<h2>Throughput</h2>";
    let axes = log.axes();
    if axes.is_empty() {
        h += "<p>No axis swept: one cell.</p>";
    }
    for key in &axes {
        h += &throughput_chart(log, key);
    }
    h += "<h2>Scaling efficiency</h2>";
    match axes.iter().find(|a| a.ends_with("devices") || a.ends_with("workers")) {
            Some(key) => h += &scaling_chart(log, key),
            None => h += "<p>Sweep <code>devices</code> (or <code>workers</code>) to see how throughput scales: per-worker images/s against the smallest worker count of the same cell.</p>",
        }

    let cells: Vec<&Value> = log.summaries.iter().filter(|s| finished(s)).collect();
    let names: Vec<String> = cells.iter().map(|s| text(s, "cell")).collect();
    let step = |s: &Value, f: &str| median(log.runs_of(&text(s, "cell")).filter_map(|r| num(r, f)).collect());
    let stats: Vec<[f64; 5]> = cells
        .iter()
        .map(|s| {
            let min = log
                .runs_of(&text(s, "cell"))
                .filter_map(|r| num(r, "step_ms.min"))
                .fold(f64::INFINITY, f64::min);
            let max = log.runs_of(&text(s, "cell")).filter_map(|r| num(r, "step_ms.max")).fold(0.0, f64::max);
            [
                min,
                step(s, "step_ms.p50").unwrap_or(0.0),
                step(s, "step_ms.p90").unwrap_or(0.0),
                step(s, "step_ms.p99").unwrap_or(0.0),
                max,
            ]
        })
        .collect();
    h += "<h2>Step time</h2>";
    if !cells.is_empty() {
        let x_max = stats.iter().map(|s| s[4]).fold(0.0, f64::max) * 1.05;
        h += &rows_chart(
            "Step time: min–max whisker, p50–p90 box, p99 tick",
            "ms per step (warm-up excluded)",
            &names,
            x_max,
            &|svg, i, y, x| {
                let [min, p50, p90, p99, max] = stats[i];
                let _ = write!(
                    svg,
                    r##"<line x1="{:.1}" x2="{:.1}" y1="{y:.1}" y2="{y:.1}" stroke="#555"/><rect x="{:.1}" y="{:.1}" width="{:.1}" height="14" fill="#1f77b4" opacity="0.7"><title>p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms</title></rect><line x1="{:.1}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#d62728" stroke-width="2"/>"##,
                    x(min),
                    x(max),
                    x(p50),
                    y - 7.0,
                    (x(p90) - x(p50)).max(1.5),
                    p50,
                    p90,
                    p99,
                    x(p99),
                    x(p99),
                    y - 9.0,
                    y + 9.0
                );
            },
        );
        let split: Vec<(f64, f64)> = cells
            .iter()
            .map(|s| (step(s, "data_wait_ms.mean").unwrap_or(0.0), step(s, "compute_ms.mean").unwrap_or(0.0)))
            .collect();
        let x_max = split.iter().map(|(w, c)| w + c).fold(0.0, f64::max) * 1.05;
        h += "<h2>Data wait vs compute</h2>";
        h += &rows_chart(
            "Mean step: waiting for data (orange) and compute (blue)",
            "ms per step",
            &names,
            x_max,
            &|svg, i, y, x| {
                let (wait, compute) = split[i];
                let share = if wait + compute > 0.0 { 100.0 * wait / (wait + compute) } else { 0.0 };
                let _ = write!(
                    svg,
                    r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="16" fill="#ff7f0e"><title>data wait {wait:.2} ms ({share:.1} %)</title></rect><rect x="{:.1}" y="{:.1}" width="{:.1}" height="16" fill="#1f77b4"><title>compute {compute:.2} ms</title></rect><text x="{:.1}" y="{:.1}" class="tick">{share:.1} % wait</text>"##,
                    x(0.0),
                    y - 8.0,
                    x(wait) - x(0.0),
                    x(wait),
                    y - 8.0,
                    x(wait + compute) - x(wait),
                    x(wait + compute) + 6.0,
                    y + 4.0
                );
            },
        );
    } else {
        h += "<p>No cell finished.</p>";
    }
    h
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:960px;color:#222}.wide{overflow-x:auto}\
table{border-collapse:collapse;font-size:12px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
td:first-child,td:nth-child(2),th{text-align:left}tr.failed{background:#fdd}.env{color:#555;font-size:13px}\
svg{display:block;margin:1em 0}.title{font-size:14px;font-weight:600}.tick{font-size:11px;fill:#333}\
.axis{font-size:12px;fill:#333}.grid{stroke:#e3e3e3}.ref{stroke:#888;stroke-dasharray:4 3}";

impl RunReport for Html {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "html".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "report.html: one self-contained page with the cells table and SVG charts".into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let page = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>benchkit {}</title><style>{STYLE}</style></head><body>{}</body></html>\n",
            esc(&log.name()),
            body(log)
        );
        Ok(vec![Artifact { name: "report.html".into(), contents: page.into_bytes() }])
    }
}

export_reporter!(Gathered<Html>);
