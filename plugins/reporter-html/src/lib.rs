//! `html`: `report.html`, one self-contained page (inline CSS and SVG, no
//! script, nothing fetched) with the run's environment, the cells table and
//! four charts: images/s against each swept axis (median, min–max bars, one
//! line per combination of the other axes), scaling efficiency against
//! replicas (devices × processes) when cells trained on several, the
//! step-time distribution of each cell, each cell's step split into data
//! wait and compute, the profiled cells' steps phase by phase, and each
//! detector's precision–recall curve epoch by epoch.

mod svg;

use benchkit_pdk::report::{
    axis_value, figure_anchor, finished, number, Gathered, RunLog, RunReport, FIGURES_NOTE, FIGURES_PAGE,
    MOCK_NOTE, PHASES_NOTE, SCALING_NOTE, SEEDS_NOTE,
};
use benchkit_pdk::schema::{Axis, CellResult, CellSummary, Phase, RunStart, StepPhases};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use std::fmt::Write;
use svg::{esc, line_chart, rows_chart, Series};

struct Html;

/// The series a cell belongs to: its values of the axes not in `except`.
fn series_name(summary: &CellSummary, axes: &[String], except: &[&str]) -> String {
    let others: Vec<String> = axes
        .iter()
        .filter(|a| !except.contains(&a.as_str()))
        .filter_map(|a| Some(axis_value(a, summary.axes.get(a)?)))
        .collect();
    if others.is_empty() {
        "all".to_string()
    } else {
        others.join(" · ")
    }
}

/// Images/s against axis `key`, one series per combination of the other axes.
fn throughput_chart(log: &RunLog, axis: &Axis) -> String {
    let key = axis.key.as_str();
    let xs: Vec<String> = axis.values.iter().map(|v| axis_value(key, v)).collect();
    let axes = log.axes();
    let mut series: Vec<Series> = Vec::new();
    for s in log.summaries.iter().filter(|s| finished(s)) {
        let Some(i) = axis.values.iter().position(|v| s.axes.get(key) == Some(v)) else { continue };
        let Some(ips) = s.images_per_s else { continue };
        let name = series_name(s, &axes, &[key]);
        let point = (i, ips.median, ips.min, ips.max);
        match series.iter_mut().find(|x| x.name == name) {
            Some(x) => x.points.push(point),
            None => series.push(Series { name, points: vec![point] }),
        }
    }
    line_chart(&format!("Training images/s vs {key}"), key, "images/s (median, min–max)", &xs, &series, None)
}

/// Scaling efficiency (median, min–max over repeats) against the cell's replicas,
/// `devices × processes`: one line per baseline and kind, from the
/// 1-replica baseline at 100 % to each cell measured against it.
fn scaling_chart(log: &RunLog) -> Option<String> {
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| finished(s)).collect();
    let labels = log.labels();
    let mut counts: Vec<usize> = vec![1];
    // (replicas, median, min, max) of each line's points.
    let mut lines: Vec<(String, Vec<(usize, f64, f64, f64)>)> = Vec::new();
    for s in &cells {
        for (kind, scaling) in [("weak", &s.weak_scaling), ("strong", &s.strong_scaling)] {
            let Some(x) = scaling else { continue };
            counts.push(x.replicas);
            let name = format!("{kind} vs {}", labels.get(x.baseline_cell.as_str()).unwrap_or(&x.baseline_cell.as_str()));
            let e = &x.efficiency;
            let point = (x.replicas, e.median, e.min, e.max);
            match lines.iter_mut().find(|(n, _)| *n == name) {
                Some((_, points)) => points.push(point),
                None => lines.push((name, vec![(1, 1.0, 1.0, 1.0), point])),
            }
        }
    }
    counts.sort_unstable();
    counts.dedup();
    if lines.is_empty() {
        return None;
    }
    let at = |n: usize| counts.iter().position(|&c| c == n).unwrap_or(0);
    let series: Vec<Series> = lines
        .into_iter()
        .map(|(name, mut points)| {
            points.sort_by_key(|p| p.0);
            let points =
                points.iter().map(|&(n, m, lo, hi)| (at(n), 100.0 * m, 100.0 * lo, 100.0 * hi)).collect();
            Series { name, points }
        })
        .collect();
    let xs: Vec<String> = counts.iter().map(|n| n.to_string()).collect();
    let title = "Scaling efficiency vs replicas (devices × processes)";
    Some(line_chart(title, "replicas", "% of linear scaling", &xs, &series, Some(100.0)))
}

/// The median of the finite values in `v`.
fn median_of(v: Vec<f64>) -> Option<f64> {
    Some(benchkit_pdk::schema::median(&v)).filter(|m| m.is_finite())
}

/// Where the run ran and with what.
fn environment(h: &mut String, start: &RunStart) {
    let env = &start.environment;
    let _ = write!(h, "<h1>benchkit run <code>{}</code></h1>", esc(&start.name));
    if start.mock {
        let _ = write!(h, "<p class=\"mock\"><b>{}</b></p>", esc(MOCK_NOTE));
    }
    let _ = write!(
        h,
        "<p class=\"env\">{} · {} logical cores · {} GiB · {} · kernel {}<br>benchkit {} ({}) · burn {} · wasmtime {} · run id <code>{}</code> · {}</p>",
        esc(&env.cpu_model),
        env.logical_cores,
        number(env.memory_gib),
        esc(&env.os),
        esc(&env.kernel),
        esc(&env.benchkit_version),
        esc(&env.git_commit),
        esc(&env.burn_version),
        esc(&env.wasmtime_version),
        esc(&start.run_id),
        if start.seeds > 1 {
            format!("{} seeds × {} repeat(s) per cell", start.seeds, start.repeats)
        } else {
            format!("{} repeat(s) per cell", start.repeats)
        },
    );
    if !env.gpus.is_empty() {
        let names: Vec<String> = env.gpus.iter().map(|g| esc(g)).collect();
        let _ = write!(
            h,
            "<p class=\"env\">GPUs: {} (driver {})</p>",
            names.join(", "),
            esc(env.gpu_driver.as_deref().unwrap_or_default())
        );
    }
}

/// The cells table: medians over repeats, speed relative to the first cell.
fn cells_table(h: &mut String, log: &RunLog) {
    *h += "<h2>Cells</h2><div class=\"wide\"><table>";
    let table = log.cells_table();
    let header: String = table.rows[0]
        .iter()
        .map(|c| format!("<th title=\"{FIGURES_PAGE}#{}\">{}</th>", figure_anchor(c), esc(c)))
        .collect();
    let _ = write!(h, "<tr>{header}</tr>");
    for (s, row) in log.summaries.iter().zip(&table.rows[1..]) {
        // The label first, its full definition (the cell's id) on hover.
        let cells: String = row
            .iter()
            .enumerate()
            .map(|(i, c)| match i {
                0 => format!("<td title=\"{}\">{}</td>", esc(&s.cell), esc(c)),
                _ => format!("<td>{}</td>", esc(c)),
            })
            .collect();
        let _ = write!(h, "<tr class=\"{}\">{cells}</tr>", s.status.name());
    }
    *h += "</table></div>";
    if let Some(note) = log.rel_note() {
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(&note));
    }
    let _ = write!(h, "<p class=\"env\">{}; each header's tooltip names its entry</p>", esc(FIGURES_NOTE));
    let legend = log.machine_legend();
    if !legend.is_empty() {
        let items: String = legend.iter().map(|l| format!("<li>{}</li>", esc(l))).collect();
        let _ = write!(h, "<p class=\"env\">Machines the cells ran on:</p><ul class=\"notes\">{items}</ul>");
    }
    if let Some(rows) = log.parallel_table() {
        *h += "<h2>Data parallel</h2>";
        plain_table(h, &rows);
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(SCALING_NOTE));
    }
    if let Some(rows) = log.seeds_table() {
        *h += "<h2>Seeds</h2>";
        plain_table(h, &rows);
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(SEEDS_NOTE));
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
}

/// `rows` (the first is the header) as a table.
fn plain_table(h: &mut String, rows: &[Vec<String>]) {
    *h += "<div class=\"wide\"><table>";
    for (i, row) in rows.iter().enumerate() {
        let tag = if i == 0 { "th" } else { "td" };
        let cells: String = row.iter().map(|c| format!("<{tag}>{}</{tag}>", esc(c))).collect();
        let _ = write!(h, "<tr>{cells}</tr>");
    }
    *h += "</table></div>";
}

/// Each phase's colour in the stacked bars, in [`Phase::ALL`]'s order.
const PHASE_COLOURS: [&str; 7] =
    ["#ff7f0e", "#9467bd", "#1f77b4", "#2ca02c", "#d62728", "#8c564b", "#7f7f7f"];

/// A stacked bar per profiled cell: its mean profiled step, phase by
/// phase, with the phases table under it.
fn phase_chart(h: &mut String, log: &RunLog) {
    let Some(rows) = log.phases_table() else { return };
    let cells: Vec<(&CellSummary, &StepPhases)> =
        log.summaries.iter().filter_map(|s| Some((s, s.phases.as_ref()?))).collect();
    let names: Vec<String> = cells.iter().map(|(s, _)| s.shown().to_string()).collect();
    let x_max = cells.iter().map(|(_, p)| p.step_ms).fold(0.0, f64::max) * 1.05;
    let legend: Vec<String> = Phase::ALL
        .iter()
        .zip(PHASE_COLOURS)
        .map(|(p, c)| format!("<span style=\"color:{c}\">■</span> {}", esc(p.label())))
        .collect();
    *h += "<h2>Step phases</h2>";
    *h += &rows_chart("Mean profiled step, phase by phase", "ms per step", &names, x_max, &|svg, i, y, x| {
        let p = cells[i].1;
        let mut at = 0.0;
        for (phase, colour) in Phase::ALL.iter().zip(PHASE_COLOURS) {
            let ms = p.get(*phase);
            if !(ms > 0.0) {
                continue;
            }
            let _ = write!(
                svg,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="16" fill="{colour}"><title>{} {ms:.2} ms ({:.1} %)</title></rect>"##,
                x(at),
                y - 8.0,
                x(at + ms) - x(at),
                esc(phase.label()),
                p.pct(*phase)
            );
            at += ms;
        }
    });
    let _ = write!(h, "<p class=\"env\">{}</p>", legend.join(" &nbsp; "));
    plain_table(h, &rows);
    let _ = write!(h, "<p class=\"env\">{}</p>", esc(PHASES_NOTE));
}

/// The pipeline cells' stages, as a table.
fn pipeline_section(h: &mut String, log: &RunLog) {
    let Some(rows) = log.pipeline_table() else { return };
    *h += "<h2>Pipeline stages</h2>";
    plain_table(h, &rows);
    let _ = write!(h, "<p class=\"env\">{}</p>", esc(benchkit_pdk::schema::PIPELINE_NOTE));
}

/// Each finished cell's step-time distribution and data-wait split,
/// medians over its repeats.
fn step_charts(h: &mut String, log: &RunLog) {
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| finished(s)).collect();
    let names: Vec<String> = cells.iter().map(|s| s.shown().to_string()).collect();
    let step =
        |s: &CellSummary, f: fn(&CellResult) -> f64| median_of(log.repeats_of(&s.cell).map(f).collect());
    let stats: Vec<[f64; 5]> = cells
        .iter()
        .map(|s| {
            let min = log
                .repeats_of(&s.cell)
                .map(|r| r.step_ms.min)
                .filter(|x| x.is_finite())
                .fold(f64::INFINITY, f64::min);
            let max =
                log.repeats_of(&s.cell).map(|r| r.step_ms.max).filter(|x| x.is_finite()).fold(0.0, f64::max);
            [
                min,
                step(s, |r| r.step_ms.p50).unwrap_or(0.0),
                step(s, |r| r.step_ms.p90).unwrap_or(0.0),
                step(s, |r| r.step_ms.p99).unwrap_or(0.0),
                max,
            ]
        })
        .collect();
    *h += "<h2>Step time</h2>";
    if cells.is_empty() {
        *h += "<p>No cell finished.</p>";
        return;
    }
    let x_max = stats.iter().map(|s| s[4]).fold(0.0, f64::max) * 1.05;
    *h += &rows_chart(
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
        .map(|s| {
            (step(s, |r| r.data_wait_ms.mean).unwrap_or(0.0), step(s, |r| r.compute_ms.mean).unwrap_or(0.0))
        })
        .collect();
    let x_max = split.iter().map(|(w, c)| w + c).fold(0.0, f64::max) * 1.05;
    *h += "<h2>Data wait vs compute</h2>";
    *h += &rows_chart(
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
}

/// A detector's precision–recall curve on the test set after each epoch
/// (six epochs at most, the first and last among them), one chart per
/// cell (its first repeat).
fn detection_curves(h: &mut String, log: &RunLog) {
    let mut cells: Vec<&str> = Vec::new();
    for e in log.epochs.iter().filter(|e| !e.record.pr_curve.is_empty()) {
        if !cells.contains(&e.cell.as_str()) {
            cells.push(&e.cell);
        }
    }
    if cells.is_empty() {
        return;
    }
    *h += "<h2>Precision–recall</h2><p>Detections of every class pooled, a hit at IoU 0.5; the precision at each recall is the best at that recall or more.</p>";
    for cell in cells {
        let all: Vec<_> = log.epochs.iter().filter(|e| e.cell == cell && e.repeat <= 1).collect();
        // At most six curves: the first, the last and evenly spaced ones between.
        let mut picks: Vec<usize> = (0..6).map(|k| k * all.len().saturating_sub(1) / 5).collect();
        picks.dedup();
        let epochs: Vec<_> = picks.into_iter().filter_map(|i| all.get(i)).collect();
        let Some(first) = epochs.first() else { continue };
        let xs: Vec<String> = first
            .record
            .pr_curve
            .iter()
            .enumerate()
            .map(|(i, p)| if i % 10 == 0 { format!("{:.1}", p[0]) } else { String::new() })
            .collect();
        let series: Vec<Series> = epochs
            .iter()
            .map(|e| Series {
                name: format!("epoch {} (mAP {:.3})", e.record.epoch, e.record.test_accuracy),
                points: e.record.pr_curve.iter().enumerate().map(|(i, p)| (i, p[1], p[1], p[1])).collect(),
            })
            .collect();
        *h += &line_chart(&format!("Precision–recall: {cell}"), "recall", "precision", &xs, &series, None);
    }
}

/// The page's body: environment, table, notes and charts.
fn body(log: &RunLog) -> Result<String, String> {
    let mut h = String::new();
    environment(&mut h, log.run_start()?);
    cells_table(&mut h, log);
    h += "<h2>Throughput</h2>";
    let axes = &log.run_start()?.axes;
    if axes.is_empty() {
        h += "<p>No axis swept: one cell.</p>";
    }
    for axis in axes {
        h += &throughput_chart(log, axis);
    }
    h += "<h2>Scaling efficiency</h2>";
    match scaling_chart(log) {
        Some(chart) => h += &chart,
        None => h += "<p>Sweep <code>devices</code> or <code>distributed.processes</code> with a 1-replica cell among them to see how throughput scales: per-replica images/s against the 1-replica cell of the same settings.</p>",
    }
    step_charts(&mut h, log);
    phase_chart(&mut h, log);
    pipeline_section(&mut h, log);
    detection_curves(&mut h, log);
    Ok(h)
}

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:960px;color:#222}.wide{overflow-x:auto}\
table{border-collapse:collapse;font-size:12px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}\
td:first-child,td:nth-child(2),th{text-align:left}tr.failed{background:#fdd}.env{color:#555;font-size:13px}.mock{background:#fe8;padding:4px}\
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
            body(log)?
        );
        Ok(vec![Artifact { name: "report.html".into(), contents: page.into_bytes() }])
    }
}

export_reporter!(Gathered<Html>);
