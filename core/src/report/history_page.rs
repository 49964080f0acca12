//! `benchkit history show --html PAGE`: one chart per series, every run a
//! point (its repeats' range a bar), each level a grey line, each change a
//! red line with its size (orange where the newest run alone makes it),
//! and a point's commit, versions, engine and host on hover; one
//! self-contained page.

use crate::history::series::{Point, Series};
use crate::predict::html::escape;
use std::fmt::Write;

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 240.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 16.0;
const BOTTOM: f64 = 36.0;
/// Date labels closer than this on the axis would overlap.
const LABEL_GAP: f64 = 80.0;

/// What hovering a point shows.
fn hover(p: &Point, value: f64) -> String {
    let mut lines = vec![format!("{} · {:.4}", p.name(), value)];
    if let Some((lo, hi)) = p.spread {
        lines.push(format!("repeats {lo:.4} – {hi:.4}"));
    }
    lines.push(format!("commit {}", p.code_commit.as_deref().unwrap_or("- (no git checkout)")));
    lines.push(format!(
        "burn {} · {} · benchkit {} ({})",
        p.burn_version, p.engine, p.benchkit_version, p.benchkit_commit
    ));
    lines.push(format!("host {} · run {}", p.hostname, p.run_id));
    escape(&lines.join("\n"))
}

/// The y range of `s`: its values and its repeats' ranges, padded.
fn range(s: &Series) -> (f64, f64) {
    let values = s.points.iter().flat_map(|p| [Some(p.value), p.spread.map(|r| r.0), p.spread.map(|r| r.1)]);
    let (lo, hi) = values
        .flatten()
        .filter(|v| v.is_finite())
        .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.01).max(1e-9);
    (lo - pad, hi + pad)
}

/// One series' chart.
fn chart(s: &Series) -> String {
    let n = s.points.len();
    let (lo, hi) = range(s);
    let x = |i: f64| LEFT + (i + 0.5) / n.max(1) as f64 * (WIDTH - LEFT - RIGHT);
    let y = |v: f64| TOP + (hi - v) / (hi - lo) * (HEIGHT - TOP - BOTTOM);
    let bottom = HEIGHT - BOTTOM;
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"100%\" style=\"max-width:{WIDTH}px\" role=\"img\" aria-label=\"{} over {n} runs\">\n",
        s.figure.column()
    );
    let _ = writeln!(
        svg,
        "<line x1=\"{LEFT}\" y1=\"{bottom}\" x2=\"{}\" y2=\"{bottom}\" stroke=\"#444\"/><line x1=\"{LEFT}\" y1=\"{TOP}\" x2=\"{LEFT}\" y2=\"{bottom}\" stroke=\"#444\"/>",
        WIDTH - RIGHT
    );
    for k in 0..=4 {
        let v = lo + (hi - lo) * f64::from(k) / 4.0;
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            LEFT - 6.0,
            y(v) + 4.0,
            short(v)
        );
    }
    // The first run, every change's first run and the last run, by date; a
    // label too near the one before it is left out, a change's kept before
    // the last run's.
    let changes: Vec<usize> = s.changes.iter().map(|c| c.at).collect();
    let mut wanted: Vec<usize> = vec![0, n.saturating_sub(1)];
    wanted.extend(&changes);
    wanted.sort_unstable();
    wanted.dedup();
    let mut labelled: Vec<usize> = Vec::new();
    for i in wanted.into_iter().filter(|&i| i < n) {
        match labelled.last() {
            Some(&j) if x(i as f64) - x(j as f64) < LABEL_GAP => {
                if changes.contains(&i) && !changes.contains(&j) && j != 0 {
                    labelled.pop();
                    labelled.push(i);
                }
            }
            _ => labelled.push(i),
        }
    }
    for i in labelled {
        let _ = writeln!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"middle\">{}</text>",
            x(i as f64),
            bottom + 14.0,
            escape(&super::history::day(s.points[i].created_unix_ms))
        );
    }
    // Each level: from one change (or the first run) to the next.
    let mut starts: Vec<usize> = std::iter::once(0).chain(s.changes.iter().map(|c| c.at)).collect();
    starts.push(n);
    for w in starts.windows(2) {
        let (a, b) = (w[0], w[1]);
        if b > a {
            let mean = s.points[a..b].iter().map(|p| p.value).sum::<f64>() / (b - a) as f64;
            let _ = writeln!(
                svg,
                "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\" stroke-width=\"2\"/>",
                x(a as f64 - 0.4),
                y(mean),
                x(b as f64 - 0.6),
                y(mean)
            );
        }
    }
    for c in &s.changes {
        let (colour, at) = (if c.confirmed { "#d62728" } else { "#ff7f0e" }, x(c.at as f64 - 0.5));
        let _ = writeln!(
            svg,
            "<line x1=\"{at:.1}\" y1=\"{TOP}\" x2=\"{at:.1}\" y2=\"{bottom}\" stroke=\"{colour}\" stroke-dasharray=\"5 3\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"{colour}\">{:+.1} %{}</text>",
            at + 4.0,
            TOP + 12.0,
            c.pct(),
            if c.confirmed { "" } else { " ?" }
        );
    }
    for (i, p) in s.points.iter().enumerate() {
        let cx = x(i as f64);
        let _ = write!(svg, "<g><title>{}</title>", hover(p, p.value));
        if let Some((a, b)) = p.spread {
            let _ = write!(
                svg,
                "<line x1=\"{cx:.1}\" y1=\"{:.1}\" x2=\"{cx:.1}\" y2=\"{:.1}\" stroke=\"#1f77b4\" stroke-opacity=\"0.5\" stroke-width=\"3\"/>",
                y(a),
                y(b)
            );
        }
        let _ =
            writeln!(svg, "<circle cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#1f77b4\"/></g>", y(p.value));
    }
    svg + "</svg>\n"
}

/// Four significant digits, without an exponent.
fn short(v: f64) -> String {
    let digits = match v.abs() {
        a if a >= 1000.0 => 0,
        a if a >= 100.0 => 1,
        a if a >= 10.0 => 2,
        _ => 3,
    };
    format!("{v:.digits$}")
}

/// The page: every series of `series`, `db` the history they were read from.
pub fn page(series: &[Series], db: &str) -> String {
    let mut out = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>benchkit history</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:62em}}p.m{{color:#555;margin-top:0}}</style>\
         </head><body>\n<h1>History</h1>\n<p class=\"m\">{} series from {}. Each point is a run (hover for its commit, \
         versions, engine and host), a bar its repeats' range; grey lines are levels, red dashed lines changes found on \
         two runs, orange the newest run alone.</p>\n",
        series.len(),
        escape(db)
    );
    for s in series {
        let _ = writeln!(
            out,
            "<h2>{}</h2>\n<p class=\"m\">{} · series {} · {} run(s) · {}</p>",
            escape(&s.cell),
            escape(&s.machine),
            escape(&s.id),
            s.points.len(),
            s.figure.column()
        );
        out += &chart(s);
        if let Some(r) = s.regression() {
            let _ = writeln!(
                out,
                "<p><b>Regression</b>: {:+.1} % from {} (last good: {}); bisect between them.</p>",
                r.change.pct(),
                escape(&r.first_bad.name()),
                escape(&r.last_good.name())
            );
        }
    }
    out + "</body></html>\n"
}
