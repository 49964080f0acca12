//! `advice.html`: for each cell, its step decomposed as one stacked bar,
//! its changes as a table (predicted, and measured where verified), and the
//! bucket curve where one was swept, in one self-contained page.

use crate::predict::html::escape;
use benchkit_schema::{AdviceReport, CellAdvice, Change};
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const BAR: f64 = 28.0;
const CURVE_HEIGHT: f64 = 240.0;
const MARGIN: f64 = 48.0;
/// (part, colour) of the bar, in step order.
const COLOURS: [&str; 7] = ["#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#7f7f7f"];

/// The step as one bar, each part as wide as its share.
fn bar(c: &CellAdvice) -> String {
    let d = &c.decomposition;
    let parts: Vec<(&str, f64)> = if d.profiled {
        vec![
            ("data wait", d.data_wait_ms),
            ("forward", d.forward_ms.unwrap_or(0.0)),
            ("backward", d.backward_ms.unwrap_or(0.0)),
            ("optimizer", d.optimizer_ms.unwrap_or(0.0)),
            ("exposed comm.", d.exposed_communication_ms),
            ("other", d.other_ms),
        ]
    } else {
        vec![
            ("data wait", d.data_wait_ms),
            ("compute", d.compute_ms),
            ("exposed comm.", d.exposed_communication_ms),
            ("other", d.other_ms),
        ]
    };
    let total: f64 = parts.iter().map(|p| p.1.max(0.0)).sum::<f64>().max(f64::MIN_POSITIVE);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{}\" role=\"img\" aria-label=\"the step by part\">\n",
        BAR + 56.0
    );
    let (mut x, mut key_x, mut key_y) = (0.0, 0.0, BAR + 10.0);
    for (i, (name, ms)) in parts.iter().enumerate() {
        let w = ms.max(0.0) / total * WIDTH;
        let colour = COLOURS[i % COLOURS.len()];
        let _ = writeln!(
            svg,
            "<rect x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"{BAR}\" fill=\"{colour}\"><title>{name}: {ms:.1} ms</title></rect>"
        );
        let label = format!("{name} {ms:.1} ms");
        // About 6.5 px a character at 11 px, and a gap; a second row where the first is full.
        let key_w = 13.0 + 6.5 * label.chars().count() as f64 + 18.0;
        if key_x + key_w > WIDTH {
            (key_x, key_y) = (0.0, key_y + 16.0);
        }
        let _ = writeln!(
            svg,
            "<rect x=\"{key_x:.1}\" y=\"{key_y}\" width=\"10\" height=\"10\" fill=\"{colour}\"/><text x=\"{:.1}\" y=\"{}\" font-size=\"11\">{label}</text>",
            key_x + 13.0,
            key_y + 9.0
        );
        key_x += key_w;
        x += w;
    }
    svg + "</svg>\n"
}

/// The step against the bucket size (log scale).
fn curve(change: &Change) -> String {
    let points = &change.curve;
    let (lo, hi) = points.iter().fold((f64::MAX, f64::MIN), |(lo, hi), p| (lo.min(p[1]), hi.max(p[1])));
    let (x0, x1) = (points.first().map_or(1.0, |p| p[0]).log2(), points.last().map_or(2.0, |p| p[0]).log2());
    let span = (x1 - x0).max(1e-9);
    let x = |m: f64| MARGIN + (m.log2() - x0) / span * (WIDTH - 2.0 * MARGIN);
    let y = |s: f64| CURVE_HEIGHT - MARGIN - (s - lo) / (hi - lo).max(1e-9) * (CURVE_HEIGHT - 2.0 * MARGIN);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{CURVE_HEIGHT}\" role=\"img\" aria-label=\"step against bucket size\">\n"
    );
    let line: Vec<String> = points.iter().map(|p| format!("{:.1},{:.1}", x(p[0]), y(p[1]))).collect();
    let _ = writeln!(
        svg,
        "<polyline points=\"{}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\"/>",
        line.join(" ")
    );
    for p in points {
        let _ = writeln!(
            svg,
            "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#1f77b4\"><title>{} MiB: {:.1} ms</title></circle>\
             <text x=\"{:.1}\" y=\"{}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x(p[0]),
            y(p[1]),
            p[0],
            p[1],
            x(p[0]),
            CURVE_HEIGHT - MARGIN + 14.0,
            (p[0] * 100.0).round() / 100.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{MARGIN}\" y=\"{}\" font-size=\"11\">step {hi:.1} ms</text><text x=\"{MARGIN}\" y=\"{}\" font-size=\"11\">{lo:.1} ms</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">bucket MiB (log scale)</text>",
        MARGIN - 8.0,
        CURVE_HEIGHT - MARGIN + 28.0,
        WIDTH / 2.0,
        CURVE_HEIGHT - 4.0
    );
    svg + "</svg>\n"
}

fn rows(out: &mut String, changes: &[Change], advised: bool) {
    for c in changes {
        let measured = c.verified.as_ref().map_or("–".to_string(), |v| {
            if v.cell.is_empty() {
                format!("not measured: {}", escape(v.why.as_deref().unwrap_or("")))
            } else {
                format!(
                    "{:.1} ({:+.1} %{})",
                    v.measured.images_per_s,
                    v.error_pct,
                    v.why.as_ref().map_or(String::new(), |w| format!("; {}", escape(w)))
                )
            }
        });
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:+.1} %</td><td>{:.1}</td><td>{measured}</td></tr>",
            if advised { "advised" } else { "inside the noise" },
            escape(&c.title),
            c.predicted.images_per_s,
            c.gain_pct,
            c.predicted.step_ms
        );
    }
}

/// The page.
pub fn page(report: &AdviceReport) -> String {
    let mut out = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>benchkit advise: {}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:60em}}td,th{{padding:2px 8px;text-align:left}}</style>\
         </head><body>\n<h1>Advice on {}</h1>\n",
        escape(&report.run),
        escape(&report.run)
    );
    for c in &report.cells {
        let _ = writeln!(
            out,
            "<h2 title=\"{}\">{}</h2>\n<p>Step {:.1} ms; bottleneck: {}; noise {:.1} %.</p>",
            escape(&c.cell),
            escape(c.label.as_deref().unwrap_or(&c.cell)),
            c.decomposition.step_ms,
            escape(&c.bottleneck),
            c.noise_pct
        );
        out += &bar(c);
        if c.advised.is_empty() {
            out += "<p>Nothing here is worth changing: no change is predicted to gain more than the noise.</p>\n";
        }
        out += "<table><tr><th></th><th>change</th><th>predicted images/s</th><th>gain</th><th>step ms</th><th>measured images/s (error)</th></tr>\n";
        rows(&mut out, &c.advised, true);
        rows(&mut out, &c.not_advised, false);
        out += "</table>\n";
        for change in c.advised.iter().chain(&c.not_advised).filter(|c| !c.curve.is_empty()) {
            let _ = writeln!(out, "<h3>{}: the step against the bucket size</h3>", escape(&change.title));
            out += &curve(change);
        }
        for note in &c.notes {
            let _ = writeln!(out, "<p>Note: {}</p>", escape(note));
        }
    }
    for r in &report.refused {
        let _ = writeln!(out, "<h2>{}</h2><p>No advice: {}</p>", escape(&r.cell), escape(&r.why));
    }
    out + "</body></html>\n"
}
