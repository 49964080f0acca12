//! `markdown`: `report.md`, a page to paste into a pull request or a wiki:
//! the run, where it ran, the cells as a table (median over repeats, with
//! speed relative to the first cell), failures and warnings.

use benchkit_pdk::report::{
    number, show, Gathered, RunLog, RunReport, FIGURES_NOTE, MOCK_NOTE, PHASES_NOTE, SCALING_NOTE, SEEDS_NOTE,
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
            table(&mut md, &rows);
            let _ = writeln!(md, "\n{SCALING_NOTE}");
        }
        if let Some(rows) = log.seeds_table() {
            let _ = writeln!(md, "\n## Seeds\n");
            table(&mut md, &rows);
            let _ = writeln!(md, "\n{SEEDS_NOTE}");
        }
        if let Some(rows) = log.phases_table() {
            let _ = writeln!(md, "\n## Step phases\n");
            table(&mut md, &rows);
            let _ = writeln!(md, "\n{PHASES_NOTE}");
        }
        if let Some(rows) = log.pipeline_table() {
            let _ = writeln!(md, "\n## Pipeline stages\n");
            table(&mut md, &rows);
            let _ = writeln!(md, "\n{}", benchkit_pdk::schema::PIPELINE_NOTE);
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
            let unavailable = match end.unavailable {
                0 => String::new(),
                n => format!(", {n} not available"),
            };
            let _ = writeln!(
                md,
                "\n{} cell(s), {} failed{unavailable}, {:.1} s wall.",
                end.cells, end.failed, end.wall_s
            );
        }
        Ok(vec![Artifact { name: "report.md".into(), contents: md.into_bytes() }])
    }
}

/// `rows` (the first is the header) as a table, the first column left-aligned.
fn table(md: &mut String, rows: &[Vec<String>]) {
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row.iter().map(|c| cell(c)).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
        if i == 0 {
            let _ = writeln!(md, "|---|{}", "--:|".repeat(row.len() - 1));
        }
    }
}

/// The run, where it ran, with what, and what it swept.
fn header(start: &RunStart) -> String {
    let env = &start.environment;
    let mut md = String::new();
    let _ = writeln!(md, "# benchkit run `{}`\n", start.name);
    if start.mock {
        let _ = writeln!(md, "> **{MOCK_NOTE}**\n");
    }
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
    if start.seeds > 1 {
        let _ = writeln!(md, "- seeds per cell: {} ({} repeat(s) each)\n", start.seeds, start.repeats);
    } else {
        let _ = writeln!(md, "- repeats per cell: {}\n", start.repeats);
    }
    md
}

/// The cells table: medians over repeats, speed relative to the first cell.
fn cells(md: &mut String, log: &RunLog) {
    let _ = writeln!(md, "## Cells\n");
    let table = log.cells_table();
    let align: Vec<&str> = table.text.iter().map(|&text| if text { "---" } else { "--:" }).collect();
    for (i, row) in table.rows.iter().enumerate() {
        let cells: Vec<String> =
            row.iter().enumerate().map(|(c, v)| if c < 2 { cell(v) } else { v.clone() }).collect();
        let _ = writeln!(md, "| {} |", cells.join(" | "));
        if i == 0 {
            let _ = writeln!(md, "|{}|", align.join("|"));
        }
    }
    let legend = log.machine_legend();
    if !legend.is_empty() {
        let _ = writeln!(md, "\nMachines:\n");
        for line in legend {
            let _ = writeln!(md, "- {line}");
        }
    }
    if let Some(note) = log.rel_note() {
        let _ = writeln!(md, "\n{note}");
    }
    let _ = writeln!(md, "\n{FIGURES_NOTE}");
}

export_reporter!(Gathered<Markdown>);
