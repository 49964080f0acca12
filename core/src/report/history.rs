//! `benchkit history show` and `check` as the terminal shows them.

use crate::history::change::Change;
use crate::history::series::{Point, Regression, Series};
use std::fmt::Write;

/// A day and time from Unix milliseconds, UTC: `2026-11-30 07:42`.
fn when(unix_ms: i64) -> String {
    let [year, month, day, h, m, _] = crate::measure::env::utc(unix_ms);
    format!("{year:04}-{month:02}-{day:02} {h:02}:{m:02}")
}

/// `text` with its control characters (a terminal's escapes among them)
/// shown as `?`: labels and names come from results written elsewhere.
fn plain(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}

/// The day and time of `unix_ms` without the year, for a chart's axis: `11-30 07:42`.
pub(super) fn day(unix_ms: i64) -> String {
    when(unix_ms).get(5..).unwrap_or_default().to_string()
}

/// A run by its name and, where that is not its id, its id.
fn who(p: &Point) -> String {
    match p.name() {
        name if name == p.run_id => plain(&name),
        name => plain(&format!("{name} (run {})", p.run_id)),
    }
}

/// A change in words: `−23.1 % at run 16 (3.4σ…)`.
fn change_line(s: &Series, c: &Change) -> String {
    let p = &s.points[c.at];
    let kind = if c.confirmed { "change" } else { "possible change (the newest run alone)" };
    format!(
        "{kind} at {}: {:.4} → {:.4} ({:+.1} %, {:.1} standard errors; noise σ {:.4}), first run {}",
        when(p.created_unix_ms),
        c.before,
        c.after,
        c.pct(),
        c.z,
        c.sigma,
        who(p)
    )
}

/// Every series, its runs and its changes.
pub fn show(series: &[Series]) -> String {
    let mut out = String::new();
    if series.is_empty() {
        out.push_str("no series: add results with `benchkit history add <RESULTS_DIR>`\n");
    }
    for s in series {
        let _ = writeln!(
            out,
            "\n{} · {} · series {} · {} run(s), {}",
            plain(&s.cell),
            plain(&s.machine),
            s.id,
            s.points.len(),
            s.figure.column()
        );
        for (i, p) in s.points.iter().enumerate() {
            let mark =
                s.changes.iter().find(|c| c.at == i).map_or("  ", |c| if c.confirmed { "▶ " } else { "? " });
            let spread = p.spread.map_or(String::new(), |(lo, hi)| format!(" [{lo:.4} – {hi:.4}]"));
            let _ = writeln!(
                out,
                "  {mark}{}  {:<16} {:>12.4}{spread}  burn {} · {} · benchkit {}",
                when(p.created_unix_ms),
                plain(&p.name()),
                p.value,
                plain(&p.burn_version),
                plain(&p.engine),
                plain(&p.benchkit_version)
            );
        }
        for c in &s.changes {
            let _ = writeln!(out, "  {}", change_line(s, c));
        }
    }
    out
}

/// What `check` found: each regression with the range to bisect, or that none fell.
pub fn check(series: &[Series], regressions: &[Regression]) -> String {
    let mut out = String::new();
    for r in regressions {
        let _ = writeln!(
            out,
            "REGRESSION {} · {} ({}): {}\n  last good {} at {}, first bad {} at {}: bisect between them",
            plain(&r.series.cell),
            plain(&r.series.machine),
            r.series.figure.column(),
            change_line(r.series, r.change),
            who(r.last_good),
            when(r.last_good.created_unix_ms),
            who(r.first_bad),
            when(r.first_bad.created_unix_ms),
        );
    }
    for s in series {
        if let Some(c) = s.possible() {
            let _ = writeln!(
                out,
                "watch {} · {} ({}): {}; the next run confirms it or not",
                plain(&s.cell),
                plain(&s.machine),
                s.figure.column(),
                change_line(s, c)
            );
        }
    }
    if regressions.is_empty() {
        let _ = writeln!(
            out,
            "no regression: no newest runs of the {} series fell from their recent level on two runs",
            series.len()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn unix_milliseconds_are_shown_as_a_utc_day_and_time() {
        assert_eq!(super::when(0), "1970-01-01 00:00");
        // 2026-11-30 07:42:05 UTC.
        assert_eq!(super::when(1_796_024_525_000), "2026-11-30 07:42");
        assert_eq!(super::when(951_782_400_000), "2000-02-29 00:00");
    }
}
