//! `{{name}}`: a benchkit reporter plugin. It receives the run's events as
//! typed records and returns files, which benchkit writes into the run's
//! results directory. This one writes `{{name}}.md`: a table of the cells
//! with their median images/s, step time and data wait.

use benchkit_pdk::schema::{CellSummary, RunStart, Spread};
use benchkit_pdk::{export_reporter, Artifact, Config, PluginInfo, PluginKind, Reporter};

#[derive(Default)]
struct Plugin {
    title: String,
    rows: Vec<String>,
}

/// `x` to one decimal, halves rounded up, computed the same way in every
/// language a scaffold is written in, so their files agree to the byte.
fn tenths(x: f64) -> String {
    let n = (x * 10.0 + 0.5).floor();
    let sign = if n < 0.0 { "-" } else { "" };
    let a = n.abs();
    format!("{sign}{}.{}", (a / 10.0).floor(), a % 10.0)
}

fn median(spread: &Option<Spread>) -> String {
    spread.as_ref().map(|s| tenths(s.median)).unwrap_or_else(|| "-".into())
}

impl Reporter for Plugin {
    fn info() -> PluginInfo {
        PluginInfo {
            name: "{{name}}".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            kind: PluginKind::Reporter,
            description: "{{description}}".into(),
            config_schema: r#"{"title": "string, default the run's name: the table's heading"}"#.into(),
        }
    }

    fn create(cfg: &mut Config) -> Result<Self, String> {
        Ok(Self { title: cfg.string("title", "")?, rows: Vec::new() })
    }

    fn run_start(&mut self, start: &RunStart, _time_ms: u64) -> Result<(), String> {
        if self.title.is_empty() {
            self.title = start.name.clone();
        }
        Ok(())
    }

    fn cell_summary(&mut self, s: &CellSummary, _time_ms: u64) -> Result<(), String> {
        self.rows.push(format!(
            "| {} | {} | {} | {} | {} |",
            s.cell,
            s.status.name(),
            median(&s.images_per_s),
            median(&s.step_p50_ms),
            median(&s.data_wait_pct)
        ));
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<Artifact>, String> {
        let mut text = format!("# {}\n\n", self.title);
        text.push_str("| cell | status | images/s | step p50 (ms) | data wait (%) |\n");
        text.push_str("|---|---|---|---|---|\n");
        for row in &self.rows {
            text.push_str(row);
            text.push('\n');
        }
        Ok(vec![Artifact { name: "{{name}}.md".into(), contents: text.into_bytes() }])
    }
}

export_reporter!(Plugin);
