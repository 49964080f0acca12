//! Aligned plain-text tables for the terminal.

use std::fmt::Write;

/// `rows` (the first is the header) in aligned columns under a rule; columns
/// for which `left` holds are left-aligned, the others right-aligned.
pub fn render(rows: &[Vec<String>], left: impl Fn(usize) -> bool) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r.get(c).map_or(0, |v| v.chars().count())).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (v, w))| if left(c) { format!("{v:<w$}") } else { format!("{v:>w$}") })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
            let _ = writeln!(out, "{}", rule.join("  "));
        }
    }
    out
}
