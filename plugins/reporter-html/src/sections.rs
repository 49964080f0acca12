//! One section per question a run can answer, each its chart and its
//! table: throughput, scaling, input pipeline, communication, step time,
//! phases, ops, memory, energy, seeds, detection curves. A section the run has
//! no figure for is left out.

use crate::charts::{self, figure_rows, rows_by_panel};
use crate::plain_table;
use crate::svg::{esc, lines, Chart, Point, Series};
use benchkit_pdk::report::{finished, RunLog, PHASES_NOTE, SCALING_NOTE, SEEDS_NOTE};
use benchkit_pdk::schema::{Axis, CellResult, CellSummary, Phase, StepPhases};
use std::fmt::Write;

/// Each section's anchor and heading, in the page's order.
type Toc = Vec<(&'static str, &'static str)>;

/// Every section the run can answer, appended to `h`; their anchors and headings.
pub fn all(h: &mut String, log: &RunLog, axes: &[Axis]) -> Toc {
    let mut toc = Toc::new();
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| finished(s)).collect();
    // The cells whose repeats the results hold, for the figures read from them.
    let timed: Vec<&CellSummary> =
        cells.iter().copied().filter(|s| log.repeats_of(&s.cell).next().is_some()).collect();
    let drawn: [(&str, &str, &dyn Fn(&mut String) -> bool); 10] = [
        ("throughput", "Throughput", &|h| throughput(h, log, axes, &cells)),
        ("scaling", "Scaling", &|h| scaling(h, log)),
        ("input", "Input pipeline", &|h| input(h, log, &timed)),
        ("communication", "Communication", &|h| communication(h, &cells)),
        ("steps", "Step time", &|h| step_time(h, log, &timed)),
        ("phases", "Phases", &|h| phases(h, log)),
        ("ops", "Ops", &|h| crate::ops::ops(h, log)),
        ("memory", "Memory", &|h| memory(h, &cells)),
        ("energy", "Energy", &|h| energy(h, &cells)),
        ("accuracy", "Accuracy", &|h| accuracy(h, log)),
    ];
    for (id, name, draw) in drawn {
        let mut section = String::new();
        if draw(&mut section) {
            let _ = write!(h, "<section id=\"{id}\"><h2>{name}</h2>{section}</section>");
            toc.push((id, name));
        }
    }
    toc
}

fn median_of(v: Vec<f64>) -> Option<f64> {
    Some(benchkit_pdk::schema::median(&v)).filter(|m| m.is_finite())
}

/// Images/s by each swept axis, or by cell when nothing was swept.
fn throughput(h: &mut String, log: &RunLog, axes: &[Axis], cells: &[&CellSummary]) -> bool {
    if cells.is_empty() {
        return false;
    }
    if axes.is_empty() {
        figure_rows(h, cells, "Training images/s", "images/s (median over repeats)", &|s| {
            s.images_per_s.map(|x| x.median)
        });
    } else {
        charts::throughput(h, log, axes);
    }
    true
}

/// Scaling efficiency by replicas, the data-parallel table and what its figures mean.
fn scaling(h: &mut String, log: &RunLog) -> bool {
    let Some(rows) = log.parallel_table() else { return false };
    match charts::scaling(log) {
        Some(chart) => *h += &chart,
        None => *h += "<p>No cell has a 1-replica cell of the same settings to be measured against: sweep <code>devices</code> or <code>distributed.processes</code> with 1 among the values.</p>",
    }
    plain_table(h, &rows);
    let _ = write!(h, "<p class=\"env\">{}</p>", esc(SCALING_NOTE));
    true
}

/// Each cell's mean step split into waiting for data and compute; the
/// pipeline cells' stages.
fn input(h: &mut String, log: &RunLog, cells: &[&CellSummary]) -> bool {
    if cells.is_empty() {
        return false;
    }
    let step =
        |s: &CellSummary, f: fn(&CellResult) -> f64| median_of(log.repeats_of(&s.cell).map(f).collect());
    let split = |s: &CellSummary| {
        (step(s, |r| r.data_wait_ms.mean).unwrap_or(0.0), step(s, |r| r.compute_ms.mean).unwrap_or(0.0))
    };
    rows_by_panel(
        h,
        cells,
        "Mean step: waiting for data (orange) and compute (blue)",
        "ms per step",
        &|s| Some(split(s).0 + split(s).1),
        &|svg, s, y, x| {
            let (wait, compute) = split(s);
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
    if let Some(rows) = log.pipeline_table() {
        *h += "<h3>Pipeline stages</h3>";
        plain_table(h, &rows);
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(benchkit_pdk::schema::PIPELINE_NOTE));
    }
    true
}

/// The share of each multi-process cell's step spent waiting for the
/// all-reduce, and how its gradients travelled.
fn communication(h: &mut String, cells: &[&CellSummary]) -> bool {
    let shared: Vec<&CellSummary> = cells
        .iter()
        .copied()
        .filter(|s| s.exposed_communication_pct.is_some() || s.communication.is_some())
        .collect();
    if shared.is_empty() {
        return false;
    }
    figure_rows(
        h,
        &shared,
        "Exposed communication: share of the step waiting for the all-reduce",
        "% of step",
        &|s| s.exposed_communication_pct.map(|x| x.median),
    );
    let mut rows = vec![vec!["cell".to_string(), "all-reduce".to_string()]];
    rows.extend(
        shared.iter().filter_map(|s| Some(vec![s.shown().to_string(), s.communication.as_ref()?.line()])),
    );
    if rows.len() > 1 {
        plain_table(h, &rows);
    }
    true
}

/// Each finished cell's step-time distribution, medians over its repeats.
fn step_time(h: &mut String, log: &RunLog, cells: &[&CellSummary]) -> bool {
    if cells.is_empty() {
        return false;
    }
    let stats = |s: &CellSummary| -> [f64; 5] {
        let step =
            |f: fn(&CellResult) -> f64| median_of(log.repeats_of(&s.cell).map(f).collect()).unwrap_or(0.0);
        let min = log.repeats_of(&s.cell).map(|r| r.step_ms.min).filter(|x| x.is_finite()).reduce(f64::min);
        let max =
            log.repeats_of(&s.cell).map(|r| r.step_ms.max).filter(|x| x.is_finite()).fold(0.0, f64::max);
        [
            min.unwrap_or_else(|| step(|r| r.step_ms.p50)),
            step(|r| r.step_ms.p50),
            step(|r| r.step_ms.p90),
            step(|r| r.step_ms.p99),
            max,
        ]
    };
    rows_by_panel(
        h,
        cells,
        "Step time: min–max whisker, p50–p90 box, p99 tick",
        "ms per step (warm-up excluded)",
        &|s| Some(stats(s)[4]),
        &|svg, s, y, x| {
            let [min, p50, p90, p99, max] = stats(s);
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
    true
}

/// Each phase's colour in the stacked bars, in [`Phase::ALL`]'s order.
const PHASE_COLOURS: [&str; 7] =
    ["#ff7f0e", "#9467bd", "#1f77b4", "#2ca02c", "#d62728", "#8c564b", "#7f7f7f"];

/// A stacked bar per profiled cell, phase by phase (a panel per model where
/// their steps differ more than the panel ratio), the phases table under it.
fn phases(h: &mut String, log: &RunLog) -> bool {
    let Some(rows) = log.phases_table() else { return false };
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| s.phases.is_some()).collect();
    let legend: Vec<String> = Phase::ALL
        .iter()
        .zip(PHASE_COLOURS)
        .map(|(p, c)| format!("<span style=\"color:{c}\">■</span> {}", esc(p.label())))
        .collect();
    let _ = write!(h, "<p class=\"env\">{}</p>", legend.join(" &nbsp; "));
    let step = |s: &CellSummary| s.phases.as_ref().map(|p: &StepPhases| p.step_ms);
    rows_by_panel(h, &cells, "Mean profiled step, phase by phase", "ms per step", &step, &|svg, s, y, x| {
        let Some(p) = s.phases.as_ref() else { return };
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
    plain_table(h, &rows);
    let _ = write!(h, "<p class=\"env\">{}</p>", esc(PHASES_NOTE));
    true
}

/// The most memory each cell's process and GPUs held.
fn memory(h: &mut String, cells: &[&CellSummary]) -> bool {
    let host = |s: &CellSummary| s.peak_rss_mib.map(|x| x.median);
    let gpu = |s: &CellSummary| s.gpu_memory_mib.map(|x| x.median);
    let (any_host, any_gpu) =
        (cells.iter().any(|s| host(s).is_some()), cells.iter().any(|s| gpu(s).is_some()));
    if any_host {
        figure_rows(h, cells, "Peak resident memory of the cell's process", "MiB", &host);
    }
    if any_gpu {
        figure_rows(h, cells, "Most GPU memory held (NVML)", "MiB", &gpu);
    }
    any_host || any_gpu
}

/// Joules per trained image, where a meter could read.
fn energy(h: &mut String, cells: &[&CellSummary]) -> bool {
    let joules = |s: &CellSummary| s.joules_per_image.map(|x| x.median);
    if !cells.iter().any(|s| joules(s).is_some()) {
        return false;
    }
    figure_rows(h, cells, "Energy per trained image", "J/img", &joules);
    true
}

/// Accuracy across seeds, and each detector's precision–recall curves.
fn accuracy(h: &mut String, log: &RunLog) -> bool {
    let mut any = false;
    if let Some(rows) = log.seeds_table() {
        *h += "<h3>Seeds</h3>";
        plain_table(h, &rows);
        let _ = write!(h, "<p class=\"env\">{}</p>", esc(SEEDS_NOTE));
        any = true;
    }
    detection_curves(h, log) || any
}

/// A detector's precision–recall curve on the test set after each epoch
/// (six epochs at most, the first and last among them), one chart per
/// cell (its first repeat).
fn detection_curves(h: &mut String, log: &RunLog) -> bool {
    let mut cells: Vec<&str> = Vec::new();
    for e in log.epochs.iter().filter(|e| !e.record.pr_curve.is_empty()) {
        if !cells.contains(&e.cell.as_str()) {
            cells.push(&e.cell);
        }
    }
    if cells.is_empty() {
        return false;
    }
    let labels = log.labels();
    *h += "<h3>Precision–recall</h3><p>Detections of every class pooled, a hit at IoU 0.5; the precision at each recall is the best at that recall or more.</p>";
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
                points: e
                    .record
                    .pr_curve
                    .iter()
                    .enumerate()
                    .map(|(x, p)| Point { x, median: p[1], min: p[1], max: p[1], suspect: None })
                    .collect(),
                ideal: Vec::new(),
            })
            .collect();
        let name = labels.get(cell).copied().unwrap_or(cell);
        let chart = Chart {
            title: format!("Precision–recall: {name}"),
            axis: "recall",
            x_label: "recall",
            y_label: "precision",
            xs,
            series,
            reference: None,
        };
        *h += &lines(&chart);
    }
    true
}
