//! The built-in results table printed on stdout.

use super::{CellResult, Report};
use std::fmt::Write;

/// Collects cell results and renders them as an aligned table.
#[derive(Default)]
pub struct Terminal {
    rows: Vec<CellResult>,
}

impl Terminal {
    /// The table of every cell seen so far.
    pub fn render(&self) -> String {
        let header = [
            "cell",
            "model",
            "params",
            "img/s",
            "step p50",
            "step p90",
            "data wait",
            "warm-up",
            "test acc",
            "wall",
        ];
        let mut rows: Vec<Vec<String>> = vec![header.iter().map(|h| h.to_string()).collect()];
        for r in &self.rows {
            rows.push(vec![
                r.cell.clone(),
                r.model.clone(),
                format!("{:.2}M", r.params as f64 / 1e6),
                format!("{:.1}", r.images_per_s),
                format!("{:.1} ms", r.step_ms.p50),
                format!("{:.1} ms", r.step_ms.p90),
                format!("{:.1} %", r.data_wait_pct),
                format!("{}×{:.1} ms", r.warmup.steps, r.warmup.mean_step_ms),
                format!("{:.2} %", 100.0 * r.final_test_accuracy),
                format!("{:.1} s", r.wall_s),
            ]);
        }
        let widths: Vec<usize> =
            (0..header.len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
        let mut out = String::new();
        for (i, row) in rows.iter().enumerate() {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (v, w))| if c < 2 { format!("{v:<w$}") } else { format!("{v:>w$}") })
                .collect();
            let _ = writeln!(out, "{}", cells.join("  ").trim_end());
            if i == 0 {
                let rule: Vec<String> = widths.iter().map(|w| "─".repeat(*w)).collect();
                let _ = writeln!(out, "{}", rule.join("  "));
            }
        }
        out
    }
}

impl Report for Terminal {
    fn cell(&mut self, result: &CellResult) {
        self.rows.push(result.clone());
    }
}
