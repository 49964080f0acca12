//! `collective.html`: a sweep's bus bandwidth against message size as an
//! inline SVG chart (log-scaled sizes), the latency–bandwidth fit, and the
//! table, in one self-contained page.

use benchkit_schema::CollectiveReport;
use std::fmt::Write;

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 320.0;
const MARGIN: f64 = 48.0;

/// A size in bytes as people read it: `8 B`, `64 KiB`, `1 GiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if value.fract() == 0.0 {
        format!("{value} {}", UNITS[unit])
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// The chart's points, `(x, y)` in SVG units, of every size with a finite busbw.
fn points(report: &CollectiveReport) -> Vec<(f64, f64, u64)> {
    let finite: Vec<_> = report.sizes.iter().filter(|s| s.busbw_gbps.is_finite() && s.bytes > 0).collect();
    let (Some(first), Some(last)) = (finite.first(), finite.last()) else {
        return Vec::new();
    };
    let (lo, hi) = ((first.bytes as f64).log2(), (last.bytes as f64).log2());
    let top = finite.iter().map(|s| s.busbw_gbps).fold(0.0, f64::max).max(1e-9);
    finite
        .iter()
        .map(|s| {
            let across = if hi > lo { ((s.bytes as f64).log2() - lo) / (hi - lo) } else { 0.5 };
            let x = MARGIN + across * (WIDTH - 2.0 * MARGIN);
            let y = HEIGHT - MARGIN - s.busbw_gbps / top * (HEIGHT - 2.0 * MARGIN);
            (x, y, s.bytes)
        })
        .collect()
}

/// The whole page.
pub fn page(report: &CollectiveReport) -> String {
    let over = report.link.as_ref().map_or(String::new(), |l| format!(", each on an emulated {l} link"));
    let title = format!("{} all-reduce over {} ranks{over}", report.collective, report.ranks);
    let top = report.sizes.iter().map(|s| s.busbw_gbps).filter(|b| b.is_finite()).fold(0.0, f64::max);
    let points = points(report);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" aria-label=\"busbw against message size\">\n"
    );
    let (left, bottom) = (MARGIN, HEIGHT - MARGIN);
    let _ = writeln!(
        svg,
        "<line x1=\"{left}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#444\"/><line x1=\"{left}\" y1=\"{MARGIN}\" x2=\"{left}\" y2=\"{bottom}\" stroke=\"#444\"/>",
        WIDTH - MARGIN
    );
    let _ = writeln!(svg, "<text x=\"4\" y=\"{}\" font-size=\"11\">{top:.2} GB/s</text>", MARGIN + 4.0);
    let _ = writeln!(svg, "<text x=\"4\" y=\"{bottom}\" font-size=\"11\">0</text>");
    let path: Vec<String> = points.iter().map(|(x, y, _)| format!("{x:.1},{y:.1}")).collect();
    let _ = writeln!(
        svg,
        "<polyline fill=\"none\" stroke=\"#1f6feb\" stroke-width=\"2\" points=\"{}\"/>",
        path.join(" ")
    );
    let every = points.len().div_ceil(8).max(1);
    for (i, (x, y, bytes)) in points.iter().enumerate() {
        let _ = writeln!(svg, "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"#1f6feb\"/>");
        if i % every == 0 || i + 1 == points.len() {
            let _ = writeln!(
                svg,
                "<text x=\"{x:.1}\" y=\"{}\" font-size=\"11\" text-anchor=\"middle\">{}</text>",
                bottom + 16.0,
                size(*bytes)
            );
        }
    }
    svg.push_str("</svg>\n");
    let fit = match &report.fit {
        Some(f) => format!(
            "<p>Fit <code>time = α + β·S</code>: α = {:.1} µs, 1/β = {:.3} GB/s algbw ({:.3} GB/s busbw), worst relative error {:.1} %.</p>",
            f.alpha_us,
            f.algbw_gbps,
            f.busbw_gbps,
            100.0 * f.max_error
        ),
        None => "<p>Too few sizes to fit latency and bandwidth.</p>".into(),
    };
    let mut rows = String::new();
    for s in &report.sizes {
        let _ = writeln!(
            rows,
            "<tr><td>{}</td><td>{}</td><td>{:.1}</td><td>{:.1}</td><td>{:.4}</td><td>{:.4}</td><td>{}</td></tr>",
            size(s.bytes),
            s.bytes,
            s.time_us,
            s.max_rank_time_us,
            s.algbw_gbps,
            s.busbw_gbps,
            s.wrong
        );
    }
    format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:right}}</style></head>\n<body>\n<h1>{title}</h1>\n<p>busbw (GB/s, nccl-tests' definition: algbw × 2(n − 1)/n) against message size; machines {}; {} warm-up all-reduce(s) a size.</p>\n{svg}{fit}\n<table><tr><th>size</th><th>bytes</th><th>time µs</th><th>slowest rank µs</th><th>algbw GB/s</th><th>busbw GB/s</th><th>wrong</th></tr>\n{rows}</table>\n</body></html>\n",
        report.machines.join(", "),
        report.warmup
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::SizeResult;

    #[test]
    fn sizes_read_in_binary_units() {
        assert_eq!(size(8), "8 B");
        assert_eq!(size(64 << 10), "64 KiB");
        assert_eq!(size(1 << 30), "1 GiB");
        assert_eq!(size(1536), "1.5 KiB");
    }

    /// The smallest size sits at the left edge, the largest at the right,
    /// the best busbw at the top.
    #[test]
    fn the_chart_spans_the_sizes_and_the_bandwidth() {
        let report = CollectiveReport {
            schema: "x".into(),
            collective: "gloo".into(),
            ranks: 2,
            machines: vec!["a1b2c3".into()],
            link: None,
            warmup: 5,
            sizes: vec![
                SizeResult::of(8, 10, 2, &[1e-5, 1e-5], 0),
                SizeResult::of(1 << 20, 10, 2, &[1e-3, 1e-3], 0),
                SizeResult::of(1 << 30, 10, 2, &[2.0, 2.0], 0),
            ],
            fit: None,
            environment: crate::measure::env::detect(),
            started_unix_ms: 0,
        };
        let p = points(&report);
        assert_eq!(p.len(), 3);
        assert!((p[0].0 - MARGIN).abs() < 1e-9 && (p[2].0 - (WIDTH - MARGIN)).abs() < 1e-9);
        // 1 MiB in 1 ms (1.05 GB/s) beats 1 GiB in 2 s (0.54 GB/s): it is the top.
        assert!((p[1].1 - MARGIN).abs() < 1e-9, "{p:?}");
        // log2 sizes 3, 20, 30: 1 MiB lies 17/27 of the way across.
        assert!((p[1].0 - (MARGIN + 17.0 / 27.0 * (WIDTH - 2.0 * MARGIN))).abs() < 1e-9, "{p:?}");
        let html = page(&report);
        assert!(html.contains("<svg") && html.contains("1 GiB") && html.contains("<td>8 B</td>"), "{html}");
    }
}
