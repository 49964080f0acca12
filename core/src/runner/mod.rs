//! Runs a plan: loads the plugins and data, builds the model from its graph,
//! trains, and hands every event to the reporters. If training fails part-way,
//! what was measured is still reported and written before the error returns.

use crate::backend;
use crate::config::{DataPlan, Plan, PluginPlan};
use crate::data::{load_idx, DataError, Dataset, Loader, LoaderConfig};
use crate::measure::Environment;
use crate::model::{Graph, GraphError};
use crate::plugin::{ImageShape, InputSpec, Plugin, PluginError, PluginHost, PluginKind, TransformInstance};
use crate::report::{CellResult, Event, PluginReport, PluginUse, Report, ReportError, Reports, Terminal};
use crate::train::{CellJob, TrainError};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Why a run stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Data(#[from] DataError),
    #[error(transparent)]
    Graph(#[from] GraphError),
    #[error(transparent)]
    Train(#[from] TrainError),
    #[error("{0}")]
    Setup(String),
    #[error("cannot write {path}: {source}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// Everything checked and loaded before training starts.
pub struct Prepared {
    pub host: PluginHost,
    pub model: Plugin,
    pub transform: Plugin,
    pub reporters: Vec<(Plugin, String)>,
    pub dataset: Dataset,
    pub graph: Graph,
    pub transform_instance: TransformInstance,
}

impl Prepared {
    /// The plugins in use, with versions and hashes, for the results.
    pub fn plugin_uses(&self) -> Vec<PluginUse> {
        let use_of = |role: &str, p: &Plugin| PluginUse {
            role: role.into(),
            origin: p.origin.clone(),
            name: p.info.name.clone(),
            version: p.info.version.clone(),
            sha256: p.sha256.clone(),
        };
        let mut uses = vec![use_of("model", &self.model), use_of("transform", &self.transform)];
        uses.extend(self.reporters.iter().map(|(p, _)| use_of("reporter", p)));
        uses
    }
}

fn load(host: &PluginHost, plan: &PluginPlan, kind: PluginKind) -> Result<Plugin, PluginError> {
    let plugin = host.load(&plan.source)?;
    PluginHost::expect_kind(&plugin, kind, &plan.key)?;
    Ok(plugin)
}

fn load_data(plan: &DataPlan) -> Result<Dataset, DataError> {
    match plan {
        DataPlan::Idx { path, num_classes, train_limit, test_limit } => {
            let mut data = load_idx(path, *num_classes)?;
            if let Some(n) = train_limit {
                data.train.truncate(*n);
            }
            if let Some(n) = test_limit {
                data.test.truncate(*n);
            }
            Ok(data)
        }
    }
}

/// Load and check everything a run needs, without training: plugins (and
/// their kinds), data, the model graph and the transform's config.
pub fn prepare(plan: &Plan) -> Result<Prepared, RunError> {
    let host = PluginHost::new(plan.plugin_limits)?;
    let model = load(&host, &plan.model, PluginKind::Model)?;
    let transform = load(&host, &plan.transform, PluginKind::Transform)?;
    let reporters = plan
        .reporters
        .iter()
        .map(|r| Ok((load(&host, r, PluginKind::Reporter)?, r.config_json())))
        .collect::<Result<Vec<_>, PluginError>>()?;
    let dataset = load_data(&plan.data)?;
    let spec = InputSpec { shape: dataset.train.shape, num_classes: dataset.num_classes };
    let wit_graph = host.describe(&model, &plan.model.config_json(), spec)?;
    let graph = Graph::from_wit(&wit_graph)?;
    if graph.output_shape() != [dataset.num_classes as usize] {
        return Err(RunError::Setup(format!(
            "model {} outputs shape {:?} but the dataset has {} classes; set the model's num_classes or data.num_classes",
            model.origin,
            graph.output_shape(),
            dataset.num_classes
        )));
    }
    let target = match graph.input_shape() {
        &[c, h, w] => ImageShape { channels: c as u32, height: h as u32, width: w as u32 },
        other => {
            return Err(RunError::Setup(format!(
                "model input shape {other:?} is not [channels, height, width]"
            )))
        }
    };
    let transform_instance =
        host.transform(&transform, &plan.transform.config_json(), dataset.train.shape, target)?;
    if transform_instance.output_shape() != target {
        return Err(RunError::Setup(format!(
            "transform {} produces {:?} but model {} wants {:?}",
            transform.origin,
            transform_instance.output_shape(),
            model.origin,
            target
        )));
    }
    Ok(Prepared { host, model, transform, reporters, dataset, graph, transform_instance })
}

/// How `run` presents itself.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Where reporter artifacts go; default `results/<name>`.
    pub output: Option<PathBuf>,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// What a run produced.
pub struct RunSummary {
    pub cells: Vec<CellResult>,
    /// The results table.
    pub table: String,
    pub output_dir: PathBuf,
    pub artifacts: Vec<PathBuf>,
    /// Reporters that failed; their failure did not affect the rest.
    pub reporter_errors: Vec<ReportError>,
}

fn write_artifacts(dir: &Path, files: Vec<(String, Vec<u8>)>) -> Result<Vec<PathBuf>, RunError> {
    std::fs::create_dir_all(dir).map_err(|source| RunError::Write { path: dir.into(), source })?;
    let mut written = Vec::new();
    for (name, contents) in files {
        let plain =
            Path::new(&name).file_name().is_some_and(|f| f == name.as_str()) && !name.starts_with('.');
        if !plain {
            return Err(RunError::Setup(format!(
                "a reporter returned artifact name {name:?}; only plain file names are allowed"
            )));
        }
        let path = dir.join(&name);
        std::fs::write(&path, contents).map_err(|source| RunError::Write { path: path.clone(), source })?;
        written.push(path);
    }
    Ok(written)
}

fn progress_bar(enabled: bool) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(0);
    let style =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} steps  {msg}  eta {eta}")
            .map(|s| s.progress_chars("=> "));
    if let Ok(style) = style {
        bar.set_style(style);
    }
    bar
}

/// Run `plan` to the end and report it.
pub fn run(plan: &Plan, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let env = Environment::detect();
    let prepared = prepare(plan)?;
    let plugins = prepared.plugin_uses();
    let Prepared { host, model, reporters, dataset, graph, transform_instance, .. } = prepared;

    let mut reports = Reports::default();
    for (plugin, config) in &reporters {
        reports.push(Box::new(PluginReport::new(host.reporter(plugin, config)?)));
    }
    let mut terminal = Terminal::default();
    reports.emit(&Event::RunStart { name: &plan.name, config: plan, environment: &env, plugins: &plugins });

    let cell = plan.name.clone();
    let loader_config =
        LoaderConfig { batch_size: plan.train.batch_size, prefetch: plan.train.prefetch, seed: plan.seed };
    let mut loader = Loader::new(transform_instance, loader_config);
    let bar = progress_bar(options.progress);
    bar.set_prefix(cell.clone());
    let mut epochs_done = 0;
    let cell_started = Instant::now();
    let outcome = backend::train_cell(
        plan.backend,
        CellJob {
            graph: &graph,
            plan: &plan.train,
            seed: plan.seed,
            loader: &mut loader,
            train_set: Arc::new(dataset.train),
            test_set: Arc::new(dataset.test),
            on_step: &mut |done, total| {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            },
            on_epoch: &mut |record| {
                bar.set_message(format!(
                    "epoch {} test acc {:.2} %",
                    record.epoch,
                    100.0 * record.test_accuracy
                ));
                reports.emit(&Event::Epoch { cell: &cell, record });
                epochs_done += 1;
            },
        },
    );
    bar.finish_and_clear();

    let mut cells = Vec::new();
    let failure = match outcome {
        Ok(outcome) => {
            let result = CellResult::new(
                &cell,
                &model.info.name,
                &plan.backend.to_string(),
                graph.forward_macs(),
                plan.train.batch_size,
                &outcome,
                cell_started.elapsed().as_secs_f64(),
            );
            reports.emit(&Event::Cell(&result));
            terminal.cell(&result);
            cells.push(result);
            None
        }
        Err(e) => Some(e),
    };
    reports.emit(&Event::RunEnd {
        name: &plan.name,
        cells: 1,
        failed: usize::from(failure.is_some()),
        wall_s: started.elapsed().as_secs_f64(),
    });
    let (files, reporter_errors) = reports.finish();
    let output_dir = options.output.clone().unwrap_or_else(|| PathBuf::from("results").join(&plan.name));
    let artifacts = write_artifacts(&output_dir, files)?;
    if let Some(e) = failure {
        return Err(RunError::Setup(format!(
            "cell {cell} failed after {} completed epoch(s) (reported in {}): {e}",
            epochs_done,
            output_dir.display()
        )));
    }
    Ok(RunSummary { cells, table: terminal.render(), output_dir, artifacts, reporter_errors })
}
