//! `predict.html`: predicted scaling efficiency against the replicas (log
//! scale, 1 to 1,024 or the most predicted for) for weak and strong scaling, ring and tree, with the
//! measured cells' efficiencies as points on the same chart, and the
//! assumptions, in one self-contained page.

use super::check::{Check, COLUMNS};
use super::{Algorithm, Point, Scaling};
use std::fmt::Write;

const WIDTH: f64 = 680.0;
const HEIGHT: f64 = 360.0;
const MARGIN: f64 = 52.0;

/// (scaling, algorithm, colour, dash) of each predicted line.
const LINES: [(Scaling, Algorithm, &str, &str); 4] = [
    (Scaling::Weak, Algorithm::Ring, "#1f77b4", ""),
    (Scaling::Weak, Algorithm::Tree, "#1f77b4", "6 4"),
    (Scaling::Strong, Algorithm::Ring, "#d62728", ""),
    (Scaling::Strong, Algorithm::Tree, "#d62728", "6 4"),
];

/// Where `replicas` sits on an axis running to `span` replicas.
fn x(replicas: usize, span: usize) -> f64 {
    MARGIN + (replicas.max(1) as f64).log2() / (span.max(2) as f64).log2() * (WIDTH - 2.0 * MARGIN)
}

fn y(efficiency: f64, top: f64) -> f64 {
    HEIGHT - MARGIN - efficiency.clamp(0.0, top) / top * (HEIGHT - 2.0 * MARGIN)
}

/// `text` safe inside HTML text and attribute values.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The chart: axes, one polyline per (scaling, algorithm), a circle per check.
fn chart(table: &[(Scaling, Algorithm, Point)], checks: &[Check]) -> String {
    let top = checks.iter().map(|c| c.measured_efficiency).filter(|e| e.is_finite()).fold(1.0, f64::max);
    let most = table.iter().map(|(_, _, p)| p.replicas).chain(checks.iter().map(|c| c.replicas)).max();
    let span = most.unwrap_or(1).max(1024).next_power_of_two();
    let x = |replicas: usize| x(replicas, span);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"scaling efficiency against replicas\">\n"
    );
    let (left, right, bottom) = (MARGIN, WIDTH - MARGIN, HEIGHT - MARGIN);
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{right}\" y2=\"{bottom}\" stroke=\"#444\"/><line x1=\"{left}\" y1=\"{MARGIN}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#444\"/>"
    );
    for replicas in std::iter::successors(Some(1_usize), |w| Some(w * 4)).take_while(|&w| w <= span) {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">{replicas}</text>",
            x(replicas),
            bottom + 16.0
        );
    }
    for tick in [0.0, 0.25, 0.5, 0.75, 1.0] {
        let ty = y(tick * top, top);
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{:.0} %</text><line x1=\"{left}\" y1=\"{ty:.1}\" x2=\"{right}\" y2=\"{ty:.1}\" stroke=\"#eee\"/>",
            left - 6.0,
            ty + 4.0,
            tick * top * 100.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">replicas</text>",
        (left + right) / 2.0,
        HEIGHT - 10.0
    );
    for (scaling, algorithm, colour, dash) in LINES {
        let points: Vec<String> = table
            .iter()
            .filter(|(s, a, _)| *s == scaling && *a == algorithm)
            .map(|(_, _, p)| format!("{:.1},{:.1}", x(p.replicas), y(p.efficiency, top)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline class=\"predicted\" fill=\"none\" stroke=\"{colour}\" stroke-dasharray=\"{dash}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
    }
    for c in checks {
        let colour = if c.scaling == "weak" { "#1f77b4" } else { "#d62728" };
        let _ = writeln!(
            svg,
            "<circle class=\"measured\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"5\" fill=\"white\" stroke=\"{colour}\" stroke-width=\"2\"><title>{}: measured {:.1} %, predicted {:.1} %</title></circle>",
            x(c.replicas),
            y(c.measured_efficiency, top),
            escape(&c.label),
            c.measured_efficiency * 100.0,
            c.predicted_efficiency * 100.0
        );
    }
    svg.push_str("</svg>\n");
    svg
}

/// The whole page for the prediction from cell `id`.
pub fn page(
    id: &str,
    table: &[(Scaling, Algorithm, Point)],
    checks: &[Check],
    assumptions: &[String],
) -> String {
    let title = format!("Predicted scaling of {}", escape(id));
    let mut rows = String::new();
    for c in checks {
        let [cell, rest @ ..] = c.values();
        let rest: String = rest.iter().map(|v| format!("<td>{}</td>", escape(v))).collect();
        let _ = writeln!(rows, "<tr><td style=\"text-align:left\">{}</td>{rest}</tr>", escape(&cell));
    }
    let head: String = COLUMNS.iter().map(|h| format!("<th>{h}</th>")).collect();
    let checked = if checks.is_empty() {
        "<p>No measured multi-replica cell of this run is over the link the prediction uses, so there is nothing to check it against.</p>".to_string()
    } else {
        format!("<h2>Against what was measured</h2>\n<p>Each measured step is less its data wait (the median over repeats of the cell's compute p50: from the batch's arrival to the optimizer's end, the all-reduce it waited for included), as the prediction holds none; both efficiencies are against the base cell's step measured the same way.</p>\n<table><tr>{head}</tr>\n{rows}</table>")
    };
    let listed: String = assumptions.iter().map(|a| format!("<li>{}</li>", escape(a))).collect();
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}</style></head>\n<body>\n<h1>{title}</h1>\n<p>Scaling efficiency against replicas: weak scaling (fixed per-replica batch) in blue, strong (fixed global batch) in red; ring all-reduce solid, tree dashed; circles are measured cells.</p>\n{}{checked}\n<h2>Assumptions</h2><ul>{listed}</ul>\n</body></html>\n",
        chart(table, checks)
    )
}
