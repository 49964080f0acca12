//! `markdown`: `report.md`, a page to paste into a pull request or a wiki:
//! the run, where it ran, the cells as a table (median over repeats, with
//! speed relative to the first cell), failures and warnings.

use benchkit_pdk::report::{
    finished, fixed, input_bound, median, number, show, Gathered, RunLog, RunReport, SCALING_NOTE,
};
use benchkit_pdk::schema::RunStart;
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
        let mut md = header(log.run_start()?);
        cells(&mut md, log);
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
        if let Some(end) = &log.end {
            let end = &end.event;
            let _ =
                writeln!(md, "\n{} cell(s), {} failed, {:.1} s wall.", end.cells, end.failed, end.wall_s);
        }
        Ok(vec![Artifact { name: "report.md".into(), contents: md.into_bytes() }])
    }
}

/// The run, where it ran, with what, and what it swept.
fn header(start: &RunStart) -> String {
    let env = &start.environment;
    let mut md = String::new();
    let _ = writeln!(md, "# benchkit run `{}`\n", start.name);
    let _ = writeln!(md, "- run id: `{}`", start.run_id);
    let _ = writeln!(
        md,
        "- machine: {} ({} logical cores, {} GiB), {}, kernel {}",
        env.cpu_model,
        env.logical_cores,
        number(env.memory_gib),
        env.os,
        env.kernel
    );
    if !env.gpus.is_empty() {
        let _ = writeln!(
            md,
            "- GPUs: {} (driver {})",
            env.gpus.join(", "),
            env.gpu_driver.as_deref().unwrap_or_default()
        );
    }
    let _ = writeln!(
        md,
        "- benchkit {} ({}), burn {}, wasmtime {}",
        env.benchkit_version, env.git_commit, env.burn_version, env.wasmtime_version
    );
    let list: Vec<String> = start
        .plugins
        .iter()
        .map(|p| format!("{} {} ({})", p.name, p.version, p.sha256.chars().take(12).collect::<String>()))
        .collect();
    let _ = writeln!(md, "- plugins: {}", list.join(", "));
    if !start.axes.is_empty() {
        let swept: Vec<String> = start
            .axes
            .iter()
            .map(|a| {
                let values: Vec<String> = a.values.iter().map(show).collect();
                format!("`{}` ∈ {{{}}}", a.key, values.join(", "))
            })
            .collect();
        let _ = writeln!(md, "- swept: {}", swept.join("; "));
    }
    let _ = writeln!(md, "- repeats per cell: {}\n", start.repeats);
    md
}

/// The cells table: medians over repeats, speed relative to the first cell.
fn cells(md: &mut String, log: &RunLog) {
    let base = log.reference_speed();
    let _ = writeln!(md, "## Cells\n");
    let _ = writeln!(
        md,
        "| cell | model | img/s (median) | variation | rel | step p50 ms | step p90 ms | data wait % | input-bound | peak mem MiB | test acc % | time to target s | $/epoch | J/img | status |"
    );
    let _ = writeln!(md, "|---|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|--:|--:|---|");
    for s in &log.summaries {
        let ips = median(&s.images_per_s);
        let rel = match (ips, base) {
            (Some(v), Some(b)) if b > 0.0 => format!("{:.2}×", v / b),
            _ => "-".into(),
        };
        let variation = match s.images_per_s {
            Some(spread) if spread.n > 1 => format!("{:.1} %", spread.variation_pct),
            _ => "-".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            cell(&s.cell),
            s.model.as_deref().map_or("-".into(), cell),
            fixed(ips, 1),
            variation,
            rel,
            fixed(median(&s.step_p50_ms), 1),
            fixed(median(&s.step_p90_ms), 1),
            fixed(median(&s.data_wait_pct), 1),
            input_bound(s),
            fixed(median(&s.peak_rss_mib), 0),
            fixed(median(&s.final_test_accuracy).map(|a| 100.0 * a), 2),
            fixed(median(&s.time_to_target_s), 1),
            fixed(median(&s.usd_per_epoch), 4),
            fixed(median(&s.joules_per_image), 3),
            if finished(s) { format!("ok ×{}", s.repeats) } else { s.status.name().into() },
        );
    }
}

export_reporter!(Gathered<Markdown>);
