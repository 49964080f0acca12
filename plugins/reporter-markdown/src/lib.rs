//! `markdown`: `report.md`, a page to paste into a pull request or a wiki:
//! the run, where it ran, the cells as a table (median over repeats, with
//! speed relative to the first cell), failures and warnings.

use benchkit_pdk::report::{
    finished, fixed, input_bound, num, show, text, Gathered, RunLog, RunReport, SCALING_NOTE,
};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind};
use std::fmt::Write;

struct Markdown;

/// `s` safe inside a table cell.
fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

impl RunReport for Markdown {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "markdown".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "report.md: environment, the cells table, failures and warnings".into(),
            config_schema: "{}".into(),
        }
    }

    fn create(_cfg: &mut Config) -> Result<Self, String> {
        Ok(Self)
    }

    fn render(&self, log: &RunLog) -> Result<Vec<Artifact>, String> {
        let env = &log.start["environment"];
        let mut md = String::new();
        let _ = writeln!(md, "# benchkit run `{}`\n", log.name());
        let _ = writeln!(md, "- run id: `{}`", text(&log.start, "run_id"));
        let _ = writeln!(
            md,
            "- machine: {} ({} logical cores, {} GiB), {}, kernel {}",
            text(env, "cpu_model"),
            text(env, "logical_cores"),
            text(env, "memory_gib"),
            text(env, "os"),
            text(env, "kernel")
        );
        if let Some(gpus) = env["gpus"].as_array().filter(|g| !g.is_empty()) {
            let names: Vec<String> = gpus.iter().map(show).collect();
            let _ = writeln!(md, "- GPUs: {} (driver {})", names.join(", "), text(env, "gpu_driver"));
        }
        let _ = writeln!(
            md,
            "- benchkit {} ({}), burn {}, wasmtime {}",
            text(env, "benchkit_version"),
            text(env, "git_commit"),
            text(env, "burn_version"),
            text(env, "wasmtime_version")
        );
        if let Some(plugins) = log.start["plugins"].as_array() {
            let list: Vec<String> = plugins
                .iter()
                .map(|p| {
                    format!(
                        "{} {} ({})",
                        text(p, "name"),
                        text(p, "version"),
                        &text(p, "sha256").chars().take(12).collect::<String>()
                    )
                })
                .collect();
            let _ = writeln!(md, "- plugins: {}", list.join(", "));
        }
        let axes = log.axes();
        if !axes.is_empty() {
            let swept: Vec<String> = axes
                .iter()
                .map(|a| {
                    let values: Vec<String> = log.axis_values(a).iter().map(show).collect();
                    format!("`{a}` ∈ {{{}}}", values.join(", "))
                })
                .collect();
            let _ = writeln!(md, "- swept: {}", swept.join("; "));
        }
        let _ = writeln!(md, "- repeats per cell: {}\n", text(&log.start, "repeats"));

        let base = log.reference_speed();
        let _ = writeln!(md, "## Cells\n");
        let _ = writeln!(
            md,
            "| cell | model | img/s (median) | variation | rel | step p50 ms | step p90 ms | data wait % | input-bound | test acc % | time to target s | $/epoch | status |"
        );
        let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|");
        for s in &log.summaries {
            let ips = num(s, "images_per_s.median");
            let rel = match (ips, base) {
                (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
                _ => "-".into(),
            };
            let variation = match num(s, "images_per_s.n") {
                Some(n) if n > 1.0 => format!("{:.1} %", num(s, "images_per_s.variation_pct").unwrap_or(0.0)),
                _ => "-".into(),
            };
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(&text(s, "cell")),
                if s["model"].is_string() { cell(&text(s, "model")) } else { "-".into() },
                fixed(ips, 1),
                variation,
                rel,
                fixed(num(s, "step_p50_ms.median"), 1),
                fixed(num(s, "step_p90_ms.median"), 1),
                fixed(num(s, "data_wait_pct.median"), 1),
                input_bound(s),
                fixed(num(s, "final_test_accuracy.median").map(|a| 100.0 * a), 2),
                fixed(num(s, "time_to_target_s.median"), 1),
                fixed(num(s, "usd_per_epoch.median"), 4),
                if finished(s) { format!("ok ×{}", text(s, "repeats")) } else { text(s, "status") },
            );
        }
        if let Some(rows) = log.parallel_table() {
            let _ = writeln!(md, "\n## Data parallel\n");
            for (i, row) in rows.iter().enumerate() {
                let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
                let _ = writeln!(md, "| {} |", cells.join(" | "));
                if i == 0 {
                    let _ = writeln!(md, "|---|{}", "--:|".repeat(row.len() - 1));
                }
            }
            let _ = writeln!(md, "\n{SCALING_NOTE}");
        }
        let notes: Vec<String> = log
            .notes()
            .iter()
            .map(|n| {
                if n.failed {
                    format!("- **{}** {}", cell(&n.cell), n.text)
                } else {
                    format!("- {}: {}", cell(&n.cell), n.text)
                }
            })
            .collect();
        if !notes.is_empty() {
            let _ = writeln!(md, "\n## Notes\n\n{}", notes.join("\n"));
        }
        if let Some(wall) = num(&log.end, "wall_s") {
            let _ = writeln!(
                md,
                "\n{} cell(s), {} failed, {:.1} s wall.",
                text(&log.end, "cells"),
                text(&log.end, "failed"),
                wall
            );
        }
        Ok(vec![Artifact { name: "report.md".into(), contents: md.into_bytes() }])
    }
}

export_reporter!(Gathered<Markdown>);
