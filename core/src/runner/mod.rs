//! Runs a config's matrix: every cell, every repeat, each in its own
//! process (a crash, an out-of-memory kill or a time-out in one never takes
//! down the run or skews the next). The parent writes the results store as
//! cells finish, feeds the reporters and draws the progress bars; the cell
//! process ([`cell`]) prepares, trains and reports back over a pipe.

mod artifacts;
mod attempt;
mod cell;
mod store;

pub use artifacts::{write_artifacts, MAX_ARTIFACTS};
use attempt::{attempt_cell, Attempt};
pub use cell::{run_cell, serve, CellMessage, CellOrder, FailureCause, MARK};
pub use store::{load_cells, write_atomic, CellRecord, Failure, RunRecord, Store, StoredRun};

use crate::config::{Cell, ConfigError, Mode, Plan, PluginPlan, Sweep};
use crate::data::{self, DataError, Dataset, Decode, LoaderConfig, OpenSpec, Pipeline, SourceKind};
use crate::measure::env::unix_ms;
use crate::measure::Environment;
use crate::model::{Graph, GraphError};
use crate::plugin::{
    ImageShape, InputSpec, Plugin, PluginError, PluginHost, PluginKind, PluginSource, TransformInstance,
};
use crate::report::{
    score_scaling, CellHeader, CellResult, CellSummary, Event, PluginReport, PluginUse, Report, ReportError,
    Reports, Terminal,
};
use crate::train::TrainError;
use std::path::PathBuf;
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
    #[error(transparent)]
    Config(#[from] ConfigError),
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
    pub dataset: Dataset,
    pub decode: Decode,
    pub graph: Graph,
    /// One transform instance per loader worker.
    pub transforms: Vec<TransformInstance>,
}

fn plugin_use(role: &str, p: &Plugin) -> PluginUse {
    PluginUse {
        role: role.into(),
        origin: p.origin.clone(),
        name: p.info.name.clone(),
        version: p.info.version.clone(),
        sha256: p.sha256.clone(),
    }
}

fn load(host: &PluginHost, plan: &PluginPlan, kind: PluginKind) -> Result<Plugin, PluginError> {
    let plugin = host.load(&plan.source)?;
    PluginHost::expect_kind(&plugin, kind, &plan.key)?;
    Ok(plugin)
}

/// Refuse a graph whose training would need more memory than the budget
/// (`plugins.model_memory_mib`, else the machine's or the GPU's), before
/// burn allocates any of it.
fn check_model_memory(plan: &Plan, model: &Plugin, graph: &Graph) -> Result<(), RunError> {
    let (budget, whose) = match plan.plugin_limits.model_memory_mib {
        Some(mib) => (mib.saturating_mul(1 << 20), "plugins.model_memory_mib"),
        None => {
            let gpu = if plan.backend.is_gpu() { crate::measure::gpu::device_memory_bytes(0) } else { None };
            match gpu {
                Some(bytes) => (bytes, "the GPU's memory; set plugins.model_memory_mib to change it"),
                None => match crate::measure::env::machine_memory_bytes() {
                    Some(bytes) => {
                        (bytes, "this machine's memory; set plugins.model_memory_mib to change it")
                    }
                    None => return Ok(()),
                },
            }
        }
    };
    // Data-parallel replicas of one process hold their shares side by side,
    // so the process's whole batch counts.
    let batch = plan.train.batch_size;
    let value_bytes = plan.train.precision.bytes();
    let need = graph.memory_estimate(batch, value_bytes);
    let eval = graph.eval_peak_bytes(plan.train.eval_batch_size, value_bytes);
    let mib = |b: u64| b.div_ceil(1 << 20);
    if need.total_bytes() > budget {
        return Err(RunError::Setup(format!(
            "model {} would need at least {} MiB to train at batch {batch} in {} ({} MiB of parameters, gradients and momentum, {} MiB of activations kept for the backward pass), more than the budget of {} MiB ({whose})",
            model.origin,
            mib(need.total_bytes()),
            plan.train.precision,
            mib(need.parameter_bytes),
            mib(need.activation_bytes),
            mib(budget),
        )));
    }
    if eval > budget {
        return Err(RunError::Setup(format!(
            "model {} would need at least {} MiB to evaluate at train.eval_batch_size = {}, more than the budget of {} MiB ({whose}); lower train.eval_batch_size",
            model.origin,
            mib(eval),
            plan.train.eval_batch_size,
            mib(budget),
        )));
    }
    Ok(())
}

/// Open the plan's dataset and settle the shape every sample decodes to.
pub fn open_data(plan: &Plan) -> Result<(Dataset, Decode), DataError> {
    let d = &plan.data;
    let [c, h, w] = d.shape;
    let dataset = data::open(&OpenSpec {
        kind: d.source,
        path: d.path.as_deref(),
        num_classes: d.num_classes,
        train_limit: d.train_limit,
        test_limit: d.test_limit,
        synthetic: Some((ImageShape { channels: c, height: h, width: w }, d.samples, d.test_samples)),
        tokenizer: d.tokenizer,
        test_fraction: d.test_fraction,
        labels: d.labels.as_deref(),
        seed: plan.seed,
    })?;
    let stored = dataset.train.shape();
    let [height, width] = d.resize.unwrap_or([stored.height, stored.width]);
    let shape = ImageShape { channels: d.channels.unwrap_or(stored.channels), height, width };
    Ok((dataset, Decode { shape, resize: d.resize.is_some() }))
}

/// The loader settings of a plan.
pub fn loader_config(plan: &Plan) -> LoaderConfig {
    let d = &plan.data;
    LoaderConfig {
        batch_size: plan.train.batch_size,
        eval_batch_size: plan.train.eval_batch_size,
        pipeline: d.pipeline,
        workers: d.workers,
        prefetch: d.prefetch,
        shuffle: d.shuffle,
        interleave: d.interleave,
        seed: plan.seed,
        on_corrupt: d.on_corrupt,
        fixed: d.source == SourceKind::Synthetic,
    }
}

/// Load and check everything a cell needs, without training: its model and
/// transform plugins (and their kinds), data, the model graph and the
/// transform's config.
pub fn prepare(plan: &Plan) -> Result<Prepared, RunError> {
    let host = PluginHost::new(plan.plugin_limits)?;
    let model = load(&host, &plan.model, PluginKind::Model)?;
    let transform = load(&host, &plan.transform, PluginKind::Transform)?;
    let (dataset, decode) = open_data(plan)?;
    let (vocab_size, max_tokens) = match &dataset.vocabulary {
        Some((v, longest)) => (v.len() as u32, longest.saturating_sub(1) as u32),
        None => (0, 0),
    };
    let spec = InputSpec { shape: decode.shape, num_classes: dataset.num_classes, vocab_size, max_tokens };
    let wit_graph = host.describe(&model, &plan.model.config_json(), spec)?;
    let graph = Graph::from_wit(&wit_graph, (max_tokens > 0).then_some(max_tokens as usize))?;
    check_model_memory(plan, &model, &graph)?;
    let path = || plan.data.path.as_deref().map_or("?".into(), |p| p.display().to_string());
    match (graph.reads_tokens(), vocab_size > 0) {
        (true, true) => {
            if graph.output_shape() != [max_tokens as usize, vocab_size as usize] {
                return Err(RunError::Setup(format!(
                    "sequence model {} outputs shape {:?}, but the captions need [tokens, vocabulary] = [{max_tokens}, {vocab_size}]",
                    model.origin,
                    graph.output_shape(),
                )));
            }
        }
        (false, true) if plan.mode == Mode::Train => {
            return Err(RunError::Setup(format!(
                "data source \"captions\" ({}) has captions, not class labels, and model {} does not read them; train a sequence model such as builtin:captioner on it, or run it with mode = \"loader-only\" to measure the pipeline",
                path(),
                model.origin
            )))
        }
        (true, false) => {
            return Err(RunError::Setup(format!(
                "model {} is a sequence model (it reads caption tokens), but data {} has no captions; use data.source = \"captions\"",
                model.origin,
                path()
            )))
        }
        _ => {
            if plan.mode == Mode::Train && graph.output_shape() != [dataset.num_classes as usize] {
                let (what, fix) = if dataset.multi_label {
                    ("labels", "data.labels")
                } else {
                    ("classes", "data.num_classes")
                };
                return Err(RunError::Setup(format!(
                    "model {} outputs shape {:?} but the dataset has {} {what}; set the model's num_classes or {fix}",
                    model.origin,
                    graph.output_shape(),
                    dataset.num_classes
                )));
            }
        }
    }
    let target = match graph.input_shape() {
        &[c, h, w] => ImageShape { channels: c as u32, height: h as u32, width: w as u32 },
        other => {
            return Err(RunError::Setup(format!(
                "model input shape {other:?} is not [channels, height, width]"
            )))
        }
    };
    let instances = match (plan.data.pipeline, plan.data.source) {
        (_, SourceKind::Synthetic) | (Pipeline::Naive, _) => 1,
        (Pipeline::Optimized, _) => plan.data.workers,
    };
    let transforms = (0..instances)
        .map(|_| host.transform(&transform, &plan.transform.config_json(), decode.shape, target))
        .collect::<Result<Vec<_>, _>>()?;
    let transform_instance = &transforms[0];
    if transform_instance.output_shape() != target {
        return Err(RunError::Setup(format!(
            "transform {} produces {:?} but model {} wants {:?}",
            transform.origin,
            transform_instance.output_shape(),
            model.origin,
            target
        )));
    }
    Ok(Prepared { host, model, transform, dataset, decode, graph, transforms })
}

/// What to run.
#[derive(Clone, Debug)]
pub enum RunSource {
    /// A config file: a new run.
    Config(PathBuf),
    /// A results directory: finish the cells an earlier run did not.
    Resume(PathBuf),
}

/// How `run` presents itself.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Results directory of a new run [default: `results/<name>-<UTC time>`].
    pub output: Option<PathBuf>,
    /// Draw progress bars on stderr.
    pub progress: bool,
    /// Print nothing on stderr while running.
    pub quiet: bool,
    /// Cell whose images/s the others are compared with.
    pub reference: Option<String>,
    /// The program that runs a cell (`<program> cell`) [default: this executable].
    pub cell_program: Option<PathBuf>,
}

/// What a run produced.
pub struct RunSummary {
    pub run_dir: PathBuf,
    pub summaries: Vec<CellSummary>,
    /// The results table.
    pub table: String,
    pub artifacts: Vec<PathBuf>,
    /// Reporters that failed; their failure did not affect the rest.
    pub reporter_errors: Vec<ReportError>,
    /// Cells that failed.
    pub failed: usize,
    /// Cells finished by an earlier run and not run again.
    pub resumed: usize,
}

/// `YYYYmmdd-HHMMSS` (UTC) of Unix time `ms`.
fn timestamp(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (proleptic Gregorian).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}{month:02}{day:02}-{:02}{:02}{:02}", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// The plugins every cell and the reporters use, each loaded (and so checked) once.
pub fn load_plugins(
    host: &PluginHost,
    cells: &[Cell],
    reporters: &[PluginPlan],
) -> Result<Vec<PluginUse>, RunError> {
    let mut seen: Vec<PluginSource> = Vec::new();
    let mut uses = Vec::new();
    let wanted = cells
        .iter()
        .flat_map(|c| {
            [
                (&c.plan.model, PluginKind::Model, "model"),
                (&c.plan.transform, PluginKind::Transform, "transform"),
            ]
        })
        .chain(reporters.iter().map(|r| (r, PluginKind::Reporter, "reporter")));
    for (plan, kind, role) in wanted {
        if seen.contains(&plan.source) {
            continue;
        }
        seen.push(plan.source.clone());
        uses.push(plugin_use(role, &load(host, plan, kind)?));
    }
    Ok(uses)
}

/// Write `event` to the store's log and hand it to the reports, rendered once.
fn record_event(store: &mut Store, reports: &mut Reports, event: &Event<'_>) -> Result<(), RunError> {
    let json = event.to_json();
    store.event(&json)?;
    reports.deliver(event, &json);
    Ok(())
}

fn bar_style() -> Option<indicatif::ProgressStyle> {
    indicatif::ProgressStyle::with_template("{prefix:.bold} [{bar:30}] {pos}/{len} steps  {msg}  eta {eta}")
        .map(|s| s.progress_chars("=> "))
        .ok()
}

/// Run every unfinished cell of `source` and report the run.
pub fn run(source: &RunSource, options: &RunOptions) -> Result<RunSummary, RunError> {
    let started = Instant::now();
    let env = Environment::detect();
    let program = match &options.cell_program {
        Some(p) => p.clone(),
        None => std::env::current_exe()
            .map_err(|e| RunError::Setup(format!("cannot find the benchkit executable to run cells: {e}")))?,
    };
    let now = unix_ms();
    let (run_id, base, axes, cells, opened) = match source {
        RunSource::Config(path) => {
            let sweep = Sweep::load(path)?;
            let run_id = format!("{}-{}", crate::config::slug(&sweep.base.name), timestamp(now));
            (run_id, sweep.base, sweep.axes, sweep.cells, Err(path.as_path()))
        }
        RunSource::Resume(dir) => {
            let (store, stored) = Store::open(dir)?;
            (stored.run_id, stored.base, stored.axes, stored.cells, Ok(store))
        }
    };
    let name = base.name.clone();
    let host = PluginHost::new(base.plugin_limits)?;
    let plugins = load_plugins(&host, &cells, &base.reporters)?;
    // An opened store when resuming, else the config file of a new run.
    let resumed_run = opened.is_ok();
    let mut store = match opened {
        Ok(store) => store,
        Err(path) => {
            let dir = options.output.clone().unwrap_or_else(|| PathBuf::from("results").join(&run_id));
            let record = RunRecord {
                run_id: &run_id,
                name: &name,
                config_file: path,
                created_unix_ms: now,
                environment: &env,
                plugins: &plugins,
                base: &base,
                axes: &axes,
                cells: &cells,
            };
            Store::create(&dir, &record)?
        }
    };

    // A reporter that cannot start is a warning; the run and the others go on.
    let mut reports = Reports::default();
    let mut reporter_errors = Vec::new();
    for r in &base.reporters {
        let started = load(&host, r, PluginKind::Reporter).and_then(|p| host.reporter(&p, &r.config_json()));
        match started {
            Ok(instance) => reports.push(Box::new(PluginReport::new(instance))),
            Err(e) => {
                reporter_errors.push(ReportError { reporter: r.source.to_string(), message: e.to_string() })
            }
        }
    }
    let mut terminal = Terminal::new(axes.clone(), options.reference.clone());

    let mut previous = Vec::with_capacity(cells.len());
    for cell in &cells {
        previous.push(store.cell(&cell.slug)?);
    }
    let resumed = previous.iter().flatten().filter(|r| r.finished()).count();
    let headers: Vec<CellHeader> = cells
        .iter()
        .map(|c| CellHeader { index: c.index, cell: c.id.clone(), axes: c.axes.clone() })
        .collect();
    let start = Event::RunStart {
        run_id: &run_id,
        name: &name,
        config: &base,
        environment: &env,
        plugins: &plugins,
        axes: &axes,
        cells: &headers,
        repeats: base.repeats,
        resumed_cells: resumed,
    };
    record_event(&mut store, &mut reports, &start)?;

    let multi = if options.progress {
        indicatif::MultiProgress::new()
    } else {
        indicatif::MultiProgress::with_draw_target(indicatif::ProgressDrawTarget::hidden())
    };
    let say = |line: String| {
        if options.progress {
            let _ = multi.println(line);
        } else if !options.quiet {
            eprintln!("{line}");
        }
    };
    if resumed_run {
        say(format!(
            "resuming {}: {resumed} of {} cell(s) already finished",
            store.dir().display(),
            cells.len()
        ));
    }

    let mut summaries = Vec::new();
    // Every finished result so far: 1-worker baselines for scaling efficiency.
    let mut finished: Vec<CellResult> = Vec::new();
    for (cell, previous) in cells.iter().zip(previous) {
        let repeats = cell.plan.repeats;
        let mut record = previous.unwrap_or_else(|| CellRecord {
            index: cell.index,
            cell: cell.id.clone(),
            axes: cell.axes.clone(),
            repeats,
            runs: Vec::new(),
            failures: Vec::new(),
            summary: None,
        });
        let ran = !record.finished();
        if ran {
            // Failed repeats are tried again; finished ones are kept.
            record.failures.clear();
            record.summary = None;
            let mut failure = None;
            while failure.is_none() && record.runs.len() < repeats as usize {
                let repeat = record.runs.len() as u32 + 1;
                let begin = Event::CellStart { cell: &cell.id, repeat, repeats, config: &cell.plan };
                record_event(&mut store, &mut reports, &begin)?;
                let bar = multi.add(indicatif::ProgressBar::new(0));
                if let Some(style) = bar_style() {
                    bar.set_style(style);
                }
                bar.set_prefix(if repeats > 1 {
                    format!("{} #{repeat}/{repeats}", cell.id)
                } else {
                    cell.id.clone()
                });
                let attempt_started = Instant::now();
                let mut log_error = None;
                let outcome = attempt_cell(&program, cell, repeat, &mut |m| match m {
                    CellMessage::Step { done, total } => {
                        bar.set_length(total as u64);
                        bar.set_position(done as u64);
                    }
                    CellMessage::Epoch(record) => {
                        if !record.test_accuracy.is_nan() {
                            bar.set_message(format!(
                                "epoch {} test acc {:.2} %",
                                record.epoch,
                                100.0 * record.test_accuracy
                            ));
                        }
                        let event = Event::Epoch { cell: &cell.id, repeat, record: &record };
                        if let Err(e) = record_event(&mut store, &mut reports, &event) {
                            log_error.get_or_insert(e);
                        }
                    }
                    CellMessage::Done(_) | CellMessage::Failed(_) => {}
                })?;
                if let Some(e) = log_error {
                    return Err(e);
                }
                match outcome {
                    Attempt::Done(mut result) => {
                        score_scaling(&mut result, &finished);
                        let figures = if result.final_test_accuracy.is_nan() {
                            format!("{:.1} img/s, {:.0} s", result.images_per_s, result.wall_s)
                        } else {
                            format!(
                                "{:.1} img/s, test acc {:.2} %, {:.0} s",
                                result.images_per_s,
                                100.0 * result.final_test_accuracy,
                                result.wall_s
                            )
                        };
                        if !options.progress {
                            say(format!("{} #{repeat}/{repeats}: {figures}", cell.id));
                        }
                        bar.finish_with_message(figures);
                        let event = Event::Cell(&result);
                        record_event(&mut store, &mut reports, &event)?;
                        record.runs.push(result);
                    }
                    Attempt::Failed(cause) => {
                        let reason = cause.message;
                        bar.abandon_with_message(format!("FAILED: {reason}"));
                        if !options.progress {
                            say(format!("{} #{repeat}/{repeats}: FAILED: {reason}", cell.id));
                        }
                        let event = Event::CellFailed {
                            cell: &cell.id,
                            repeat,
                            reason: &reason,
                            plugin: cause.plugin.as_deref(),
                            call: cause.call.as_deref(),
                        };
                        record_event(&mut store, &mut reports, &event)?;
                        record.failures.push(Failure {
                            repeat,
                            reason: reason.clone(),
                            wall_s: attempt_started.elapsed().as_secs_f64(),
                            plugin: cause.plugin,
                            call: cause.call,
                            stderr_tail: cause.stderr_tail,
                        });
                        failure = Some(reason);
                    }
                }
                store.write_cell(&cell.slug, &record)?;
            }
            record.summary =
                Some(CellSummary::of(cell.index, &cell.id, &cell.axes, &record.runs, failure.as_deref()));
            store.write_cell(&cell.slug, &record)?;
        } else {
            for r in &record.runs {
                reports.emit(&Event::Cell(r));
            }
        }
        finished.extend(record.runs.iter().cloned());
        let summary = record
            .summary
            .clone()
            .unwrap_or_else(|| CellSummary::of(cell.index, &cell.id, &cell.axes, &record.runs, None));
        let event = Event::CellSummary(&summary);
        if ran {
            record_event(&mut store, &mut reports, &event)?;
        } else {
            reports.emit(&event);
        }
        terminal.summary(&summary);
        summaries.push(summary);
    }
    let failed = summaries.iter().filter(|s| s.status == crate::report::CellStatus::Failed).count();
    let end = Event::RunEnd {
        run_id: &run_id,
        name: &name,
        cells: cells.len(),
        failed,
        wall_s: started.elapsed().as_secs_f64(),
    };
    record_event(&mut store, &mut reports, &end)?;
    let (files, finished) = reports.finish();
    let (artifacts, refused) = write_artifacts(store.dir(), files);
    reporter_errors.extend(finished.into_iter().chain(refused));
    Ok(RunSummary {
        run_dir: store.dir().to_path_buf(),
        summaries,
        table: terminal.render(),
        artifacts,
        reporter_errors,
        failed,
        resumed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp(0), "19700101-000000");
        assert_eq!(timestamp(951_782_400_000 + 3_723_000), "20000229-010203");
        assert_eq!(timestamp(1_795_000_000_000), "20261118-110640");
    }
}
