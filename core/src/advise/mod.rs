//! `benchkit advise`: for each measured cell of a run, its step decomposed
//! ([`figures`]), the changes that could shorten it, each predicted from
//! the figures the run measured by a model that states its formula
//! ([`models`], [`changes`]), advised only where the predicted gain in
//! images/s is beyond the run's noise ([`models::noise_pct`]); a follow-up
//! config of the cell as it ran and one cell a change ([`follow_up`]); and,
//! once that config has run, each prediction against what it measured
//! ([`verify`]). Shown in the terminal ([`text`]), `advice.json` and
//! `advice.html` ([`html`]).

pub mod change;
pub mod changes;
pub mod exchange;
pub mod figures;
pub mod follow_up;
mod html;
pub mod models;
mod text;
pub mod verify;

use crate::runner::{self, RunnerError};
use benchkit_schema::{AdviceReport, CellAdvice, Refusal, SCHEMA_VERSION};
use figures::Figures;
use std::path::{Path, PathBuf};

pub use crate::runner::store::layout::{ADVICE_HTML, ADVICE_JSON, ADVICE_RUN, ADVICE_TOML};

#[derive(Debug, thiserror::Error)]
pub enum AdviseError {
    #[error(transparent)]
    Run(#[from] RunnerError),
    #[error("{0}")]
    Refused(String),
}

/// Advice on a run, and the follow-up config's text where a change can be measured.
pub struct Advice {
    pub report: AdviceReport,
    pub follow_up: Option<String>,
}

impl Advice {
    /// What the terminal shows.
    pub fn text(&self) -> String {
        text::render(&self.report)
    }

    /// `advice.html`.
    pub fn page(&self) -> String {
        html::page(&self.report)
    }
}

/// The config the run was made from, its text and directory: the text
/// `run.json` keeps (schema 2.10.0), else the file if it is still there.
/// The directory is where its relative paths point, made absolute when the
/// run was.
fn config_of(run: &runner::StoredRun) -> Result<(String, PathBuf), String> {
    let config_file = &run.config_file;
    let path = std::path::absolute(config_file).map_err(|e| format!("{}: {e}", config_file.display()))?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    if let Some(text) = &run.config_text {
        if text.len() as u64 > crate::bounds::CONFIG_BYTES {
            return Err(format!(
                "run.json's config_text holds {} bytes, over the bound of {} bytes a config may take",
                text.len(),
                crate::bounds::CONFIG_BYTES
            ));
        }
        return Ok((text.clone(), dir));
    }
    let text = crate::bounds::read_text(&path, "a config", crate::bounds::CONFIG_BYTES)
        .map_err(|e| format!("the config the run was made from is not readable ({e})"))?;
    Ok((text, dir))
}

/// The key a cell's batch is set by in `config`: `train.batch_per_replica`
/// where the config or the cell's axes set it, else `train.batch_size`.
fn batch_key(config: Option<&str>, axes: &serde_json::Map<String, serde_json::Value>) -> &'static str {
    let in_config = config
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.get("train").and_then(|t| t.get("batch_per_replica")).is_some());
    if in_config || axes.contains_key("train.batch_per_replica") {
        "train.batch_per_replica"
    } else {
        "train.batch_size"
    }
}

/// Advice on the cells of the run in `dir` (only `wanted`, by id or
/// index, where given).
pub fn advise(dir: &Path, wanted: Option<&str>) -> Result<Advice, AdviseError> {
    let run = runner::read_run(dir)?;
    let (mock, records) = runner::load_run_cells(dir)?;
    if mock {
        return Err(AdviseError::Refused(format!(
            "{} is a --mock run: its figures are invented, and no advice can be drawn from them",
            dir.display()
        )));
    }
    if let Some(want) = wanted {
        if !records.iter().any(|r| r.cell == want || r.index.to_string() == want) {
            let ids: Vec<&str> = records.iter().map(|r| r.cell.as_str()).collect();
            return Err(AdviseError::Refused(format!(
                "no cell `{want}` in {}; its cells: {}",
                dir.display(),
                ids.join(", ")
            )));
        }
    }
    let env = run.environment.as_ref();
    let (cores, memory) = (env.map(|e| e.logical_cores), env.map(|e| e.memory_gib));
    let config = config_of(&run);
    let all: Vec<Figures> = records.iter().filter_map(|r| Figures::of(r, cores, memory)).collect();
    let mut report = AdviceReport {
        schema: SCHEMA_VERSION.to_string(),
        run: dir.display().to_string(),
        cells: Vec::new(),
        refused: Vec::new(),
        follow_up: None,
        verified_in: None,
    };
    for record in records.iter().filter(|r| wanted.is_none_or(|w| r.cell == w || r.index.to_string() == w)) {
        let refuse = |why: String| Refusal { cell: record.cell.clone(), why };
        let Some(f) = all.iter().find(|f| f.record.cell == record.cell) else {
            let why = match record.failures.last() {
                Some(failure) => {
                    format!("it failed, so nothing was measured to advise from: {}", failure.reason)
                }
                None => "it has no finished repeat to advise from".to_string(),
            };
            report.refused.push(refuse(why));
            continue;
        };
        if !(f.step_ms > 0.0 && f.images_per_s > 0.0) {
            report.refused.push(refuse("it measured no step time or images/s".into()));
            continue;
        }
        let text = config.as_ref().ok().map(|(t, _)| t.as_str());
        let ctx = change::Context {
            batch_key: batch_key(text, &record.axes),
            config_dir: config.as_ref().ok().map(|(_, d)| d.as_path()),
        };
        let mut advice = cell_advice(f, &all, &ctx);
        verify::against_even(&mut advice, f, &all);
        report.cells.push(advice);
    }
    let follow_up = match &config {
        Ok((text, config_dir)) => follow_up::config(text, config_dir, &run.name, &report)
            .map_err(|e| AdviseError::Refused(format!("{}: {e}", run.config_file.display())))?,
        Err(why) => {
            if report.cells.iter().any(|c| !c.advised.is_empty()) {
                for cell in &mut report.cells {
                    cell.notes.push(format!("no follow-up config: {why}"));
                }
            }
            None
        }
    };
    if follow_up.is_some() {
        report.follow_up = Some(dir.join(ADVICE_TOML).display().to_string());
    }
    Ok(Advice { report, follow_up })
}

/// One measured cell's advice.
fn cell_advice(f: &Figures, all: &[Figures], ctx: &change::Context) -> CellAdvice {
    let (considered, mut notes) = changes::considered(f, all, ctx);
    let decomposition = f.decomposition();
    if !decomposition.profiled {
        let exchange = if f.replicas() > 1 {
            ", and the exchange model takes the backward pass as two thirds of it"
        } else {
            ""
        };
        notes.push(format!(
            "not profiled: forward, backward and optimizer are one figure here{exchange}; train.profile = true splits them"
        ));
    }
    if f.first.engine.is_some() {
        notes.push("a PyTorch row: only the changes its figures support are considered".into());
    }
    let (advised, not_advised) = considered.into_iter().partition(|c| c.gain_pct > f.noise_pct);
    CellAdvice {
        cell: f.record.cell.clone(),
        label: f.record.summary.as_ref().and_then(|s| s.label.clone()),
        axes: f.record.axes.clone(),
        measured: f.measured(),
        decomposition,
        bottleneck: match (&f.first.verdict, f.first.mode) {
            (Some(v), _) => v.bottleneck.label().into(),
            (None, benchkit_schema::Mode::LoaderOnly) => "input (a loader-only cell)".into(),
            (None, _) => "not named (the cell has no verdict)".into(),
        },
        noise_pct: f.noise_pct,
        advised,
        not_advised,
        notes,
        remeasured: None,
    }
}
