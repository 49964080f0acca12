//! The charts each question's section draws, chosen by what is on the
//! x axis: a categorical axis (model, backend, link, pipeline) as grouped
//! bars, a numeric one (replicas, batch, threads) as lines, with the ideal
//! on scaling charts; cells of workloads whose scales differ more than
//! [`PANEL_RATIO`] times on panels of their own.

use crate::svg::{bars, esc, lines, rows, Chart, Point, Series};
use benchkit_pdk::report::{axis_value, finished, RunLog};
use benchkit_pdk::schema::tables::{panels, suspect, PANEL_RATIO};
use benchkit_pdk::schema::{Axis, CellSummary, REPLICA_COUNT_KEYS};
use std::fmt::Write;

/// Whether every value of `axis` is a number: drawn as lines, in order.
fn numeric(axis: &Axis) -> bool {
    !axis.values.is_empty() && axis.values.iter().all(|v| v.is_number())
}

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

/// A panel's name: the model its cells train, as a label shows it.
fn workload_name(cells: &[&CellSummary]) -> String {
    let Some(first) = cells.first() else { return String::new() };
    match first.axes.get("model") {
        Some(v) => axis_value("model", v),
        None => first.model.clone().unwrap_or_default(),
    }
}

/// Why the cell's figures are suspect, in one line, if they are.
pub fn suspect_line(s: &CellSummary) -> Option<String> {
    let why = suspect(s);
    (!why.is_empty()).then(|| why.join("; "))
}

fn images_per_s(s: &CellSummary) -> Option<f64> {
    s.images_per_s.map(|x| x.median)
}

/// The finished cells in panels by their images/s.
fn throughput_panels(log: &RunLog) -> Vec<Vec<&CellSummary>> {
    let cells: Vec<&CellSummary> = log.summaries.iter().filter(|s| finished(s)).collect();
    if cells.is_empty() {
        return Vec::new();
    }
    panels(&cells, images_per_s)
}

/// Images/s against each swept axis: one chart per axis and panel. The
/// model axis is drawn only when its workloads share a panel.
pub fn throughput(h: &mut String, log: &RunLog, axes: &[Axis]) {
    let split = throughput_panels(log);
    if split.len() > 1 {
        let _ = write!(
            h,
            "<p class=\"env\">The models' images/s differ more than {PANEL_RATIO}×: each model has panels of its own.</p>"
        );
    }
    let names = log.axes();
    let mut drawn = 0;
    for axis in axes {
        let key = axis.key.as_str();
        if key == "model" && split.len() > 1 {
            continue;
        }
        drawn += 1;
        for panel in &split {
            let except: Vec<&str> = if split.len() > 1 { vec![key, "model"] } else { vec![key] };
            let title = match split.len() {
                1 => format!("Training images/s by {key}"),
                _ => format!("Training images/s by {key}: {}", workload_name(panel)),
            };
            *h += &throughput_chart(title, axis, panel, &names, &except);
        }
    }
    if drawn == 0 {
        // The models alone were swept, too far apart for one axis: a row each.
        let cells: Vec<&CellSummary> = split.concat();
        figure_rows(h, &cells, "Training images/s", "images/s (median over repeats)", &images_per_s);
    }
}

/// One throughput chart: bars over a categorical axis, lines over a
/// numeric one, each series' ideal on a replicas axis.
fn throughput_chart(
    title: String,
    axis: &Axis,
    cells: &[&CellSummary],
    names: &[String],
    except: &[&str],
) -> String {
    let key = axis.key.as_str();
    let is_numeric = numeric(axis);
    let mut order: Vec<usize> = (0..axis.values.len()).collect();
    if is_numeric {
        order.sort_by(|&a, &b| {
            let v = |i: usize| axis.values[i].as_f64().unwrap_or(0.0);
            v(a).total_cmp(&v(b))
        });
    }
    let xs: Vec<String> = order.iter().map(|&i| axis_value(key, &axis.values[i])).collect();
    let scaling = REPLICA_COUNT_KEYS.contains(&key);
    let mut series: Vec<Series> = Vec::new();
    for s in cells {
        let Some(i) = axis.values.iter().position(|v| s.axes.get(key) == Some(v)) else { continue };
        let Some(ips) = s.images_per_s else { continue };
        let x = order.iter().position(|&o| o == i).unwrap_or(i);
        let name = series_name(s, names, except);
        let point = Point { x, median: ips.median, min: ips.min, max: ips.max, suspect: suspect_line(s) };
        // Linear from the 1-replica baseline: at this cell, baseline × replicas;
        // where this axis is 1, that over this cell's value of it (the other
        // replica axis, if swept too, held where it is).
        let ideal = s.weak_scaling.as_ref().filter(|_| scaling).map(|w| {
            let scaled = w.ideal_images_per_s();
            let one = order.iter().position(|&o| axis.values[o].as_f64() == Some(1.0));
            let here = axis.values[i].as_f64().filter(|v| *v >= 1.0);
            let base = one.zip(here).map(|(o, v)| (o, scaled / v));
            (base, (x, scaled))
        });
        let at = match series.iter().position(|x| x.name == name) {
            Some(at) => at,
            None => {
                series.push(Series { name, points: Vec::new(), ideal: Vec::new() });
                series.len() - 1
            }
        };
        let line = &mut series[at];
        line.points.push(point);
        if let Some((base, scaled)) = ideal {
            line.ideal.extend(base);
            line.ideal.push(scaled);
        }
    }
    for s in &mut series {
        s.points.sort_by_key(|p| p.x);
        s.ideal.sort_by_key(|p| p.0);
        s.ideal.dedup_by_key(|p| p.0);
    }
    let chart = Chart {
        title,
        axis: key,
        x_label: key,
        y_label: "images/s (median, min–max)",
        xs,
        series,
        reference: None,
    };
    if is_numeric {
        lines(&chart)
    } else {
        bars(&chart)
    }
}

/// Scaling efficiency (median, min–max over repeats) against the cell's
/// replicas, `devices × processes`: one line per kind and per combination
/// of the axes other than the replicas', from the 1-replica baseline at
/// 100 %, the ideal (100 %) dashed.
pub fn scaling(log: &RunLog) -> Option<String> {
    let names = log.axes();
    let mut counts: Vec<usize> = vec![1];
    // (name, points as (replicas, median, min, max, suspect)).
    type Line = (String, Vec<(usize, f64, f64, f64, Option<String>)>);
    let mut found: Vec<Line> = Vec::new();
    for s in log.summaries.iter().filter(|s| finished(s)) {
        for (kind, scaling) in [("weak", &s.weak_scaling), ("strong", &s.strong_scaling)] {
            let Some(x) = scaling else { continue };
            counts.push(x.replicas);
            let name = format!("{kind} · {}", series_name(s, &names, &REPLICA_COUNT_KEYS));
            let e = &x.efficiency;
            let why = if kind == "weak" { suspect_line(s) } else { None };
            let point = (x.replicas, 100.0 * e.median, 100.0 * e.min, 100.0 * e.max, why);
            match found.iter_mut().find(|(n, _)| *n == name) {
                Some((_, points)) => points.push(point),
                None => found.push((name, vec![(1, 100.0, 100.0, 100.0, None), point])),
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    counts.sort_unstable();
    counts.dedup();
    let at = |n: usize| counts.iter().position(|&c| c == n).unwrap_or(0);
    let series = found
        .into_iter()
        .map(|(name, mut points)| {
            points.sort_by_key(|p| p.0);
            let points = points
                .into_iter()
                .map(|(n, median, min, max, suspect)| Point { x: at(n), median, min, max, suspect })
                .collect();
            Series { name, points, ideal: Vec::new() }
        })
        .collect();
    let chart = Chart {
        title: "Scaling efficiency by replicas (devices × processes)".into(),
        axis: "replicas",
        x_label: "replicas",
        y_label: "% of linear scaling (dashed: ideal)",
        xs: counts.iter().map(|n| n.to_string()).collect(),
        series,
        reference: Some(100.0),
    };
    Some(lines(&chart))
}

/// One rows chart per panel of `cells` (split by `figure`'s scale): each
/// row a cell, drawn by `draw(svg, cell, y, x-scale)`, the x axis up to
/// the panel's largest `extent`.
pub fn rows_by_panel(
    h: &mut String,
    cells: &[&CellSummary],
    title: &str,
    x_label: &str,
    extent: &dyn Fn(&CellSummary) -> Option<f64>,
    draw: &dyn Fn(&mut String, &CellSummary, f64, &dyn Fn(f64) -> f64),
) {
    if cells.is_empty() {
        return;
    }
    let split = panels(cells, extent);
    for panel in &split {
        let names: Vec<(String, Option<String>)> =
            panel.iter().map(|s| (s.shown().to_string(), suspect_line(s))).collect();
        let x_max =
            panel.iter().filter_map(|s| extent(*s)).filter(|v| v.is_finite()).fold(0.0, f64::max) * 1.05;
        let title = match split.len() {
            1 => title.to_string(),
            _ => format!("{title}: {}", workload_name(panel)),
        };
        *h += &rows(&title, x_label, &names, x_max, &|svg, i, y, x| draw(svg, panel[i], y, x));
    }
}

/// A plain bar per cell for one figure (`value`, with its unit in `x_label`).
pub fn figure_rows(
    h: &mut String,
    cells: &[&CellSummary],
    title: &str,
    x_label: &str,
    value: &dyn Fn(&CellSummary) -> Option<f64>,
) {
    let cells: Vec<&CellSummary> = cells.iter().copied().filter(|s| value(s).is_some()).collect();
    rows_by_panel(h, &cells, title, x_label, value, &|svg, s, y, x| {
        let v = value(s).unwrap_or(0.0);
        let _ = write!(
            svg,
            r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="16" fill="#1f77b4"><title>{}: {v:.2}</title></rect><text x="{:.1}" y="{:.1}" class="tick">{}</text>"##,
            x(0.0),
            y - 8.0,
            (x(v) - x(0.0)).max(0.0),
            esc(s.shown()),
            x(v) + 6.0,
            y + 4.0,
            short(v)
        );
    });
}

/// A figure as a row's end shows it: three significant digits or so.
pub fn short(v: f64) -> String {
    match v.abs() {
        a if a >= 100.0 => format!("{v:.0}"),
        a if a >= 10.0 => format!("{v:.1}"),
        _ => format!("{v:.2}"),
    }
}
