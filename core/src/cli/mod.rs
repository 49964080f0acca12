//! The command line: clap definitions and one function per command. Commands
//! call the library and print; they hold no logic of their own.

mod advise;
mod collective;
mod data;
mod history;
mod kernels;
mod plugin;
mod predict;
#[cfg(test)]
mod reference;
mod retired;
mod runs;

pub use retired::refused as retired_word;

use crate::analysis::compare::Comparison;
use crate::config::{ConfigError, Sweep};
use crate::plugin::PluginError;
use crate::runner::{self, RunOptions, RunSource, RunnerError};
use clap::{Parser, Subcommand};
use std::io::IsTerminal;
use std::io::Write;
use std::path::PathBuf;

/// Benchmark deep-learning training for computer vision.
#[derive(Parser, Debug)]
#[command(name = "benchkit", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Train every cell of a config's matrix and report throughput, step times, data wait and accuracy.
    Run {
        /// The config file (TOML).
        #[arg(required_unless_present = "resume", conflicts_with = "resume")]
        config: Option<PathBuf>,
        /// Results directory [default: results/<name>-<UTC time>].
        #[arg(long, short, conflicts_with = "resume")]
        output: Option<PathBuf>,
        /// Finish an interrupted run: run only the cells its results directory lacks.
        #[arg(long, value_name = "DIR")]
        resume: Option<PathBuf>,
        /// Cell the table's relative speeds are measured against [default: the first].
        #[arg(long, value_name = "CELL")]
        reference: Option<String>,
        /// No progress bars or per-cell lines on stderr.
        #[arg(long, short)]
        quiet: bool,
        /// Train nothing: every repeat answers at once with figures that
        /// depend only on its cell, at a fixed time (for snapshot tests).
        #[arg(long, hide = true)]
        mock: bool,
        /// Run one slice of the matrix: the cells at positions p (from 0)
        /// with p mod N = I; `auto` reads a Slurm array task's or a
        /// Kubernetes Indexed Job's index. Join slices with `benchkit merge`.
        #[arg(long, value_name = "I/N|auto", conflicts_with = "resume")]
        slice: Option<String>,
        /// Add the run to the history database as it finishes (`benchkit
        /// history add`): this one, or without a value the default one.
        #[arg(long, value_name = "DB", num_args = 0..=1, default_missing_value = "")]
        history: Option<PathBuf>,
    },
    /// Join the slices of one matrix (`run --slice`) into one results
    /// directory: same config, each cell from exactly one slice, each
    /// cell's machine kept; the reports rebuilt as `report` does.
    Merge {
        /// The merged results directory (new).
        output: PathBuf,
        /// The slices' results directories.
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Cell the table's relative speeds are measured against [default: the first].
        #[arg(long, value_name = "CELL")]
        reference: Option<String>,
    },
    /// Render a run again from its events: the table, and the reporters'
    /// files, written into its results directory.
    Report {
        /// The results directory.
        dir: PathBuf,
        /// A reporter plugin to render with (`builtin:html`, or a .wasm
        /// file), in place of the run's own; repeat for several.
        #[arg(long, value_name = "PLUGIN")]
        reporter: Vec<String>,
        /// Cell the table's relative speeds are measured against [default: the first].
        #[arg(long, value_name = "CELL")]
        reference: Option<String>,
    },
    /// Measure the all-reduce between processes as nccl-tests does: time,
    /// algorithm and bus bandwidth per message size, and a latency and
    /// bandwidth fit.
    Collective(collective::CollectiveArgs),
    /// Predict the step time, images/s and scaling efficiency of 1 to 1,024
    /// replicas from a single-replica cell and a network link (ring and tree
    /// all-reduce, weak and strong scaling).
    Predict(predict::PredictArgs),
    /// Name what limits each cell's step, predict the changes that would
    /// shorten it from what the run measured, write a follow-up config of
    /// them, and with --verify measure it and check each prediction.
    Advise(advise::AdviseArgs),
    /// Check a config, its matrix, plugins, data and model graphs without training.
    Validate {
        /// The config file (TOML).
        config: PathBuf,
        /// Check the keys and values alone, not the data, plugin files and
        /// backends they name: a config written for another machine.
        #[arg(long)]
        config_only: bool,
    },
    /// Compare two results directories cell by cell; exits with status 3 on a regression.
    Compare {
        /// The results directory compared against.
        baseline: PathBuf,
        /// The results directory whose cells are judged.
        new: PathBuf,
        /// Slow-down that counts as a regression, e.g. 5% or 0.05.
        #[arg(long, default_value = "5%", value_parser = parse_threshold)]
        threshold: f64,
    },
    /// Run one cell for `benchkit run` (reads its order on stdin).
    #[command(hide = true)]
    Cell,
    /// Pack datasets into record shards and check them.
    #[command(subcommand)]
    Shards(data::ShardsCommand),
    /// Dataset tools.
    #[command(subcommand)]
    Data(data::DataCommand),
    /// List the built-in plugins, start a plugin project, or check a built component.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// List or clear the kernels and tuning results burn's JIT backends
    /// (`cuda`, `wgpu`) keep between cells and runs.
    #[command(subcommand)]
    Kernels(kernels::KernelsCommand),
    /// List the ops a model graph may use, with their attributes.
    Ops,
    /// Print the JSON Schema of a results file (run, cell, event, summary,
    /// collective, advice); with no name, list them.
    Schema {
        /// Which file's schema.
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(["run", "cell", "event", "summary", "collective", "advice"]))]
        name: Option<String>,
    },
    /// Write a cell as a standalone PyTorch script.
    #[command(subcommand)]
    Export(ExportCommand),
    /// Every run in one database: add results, show each series with its
    /// change points, check the newest runs (exits with status 3 on a regression).
    History(history::HistoryArgs),
}

#[derive(Subcommand, Debug)]
pub enum ExportCommand {
    /// A PyTorch script of a cell: its model graph as torch.nn code, its recipe,
    /// synthetic data of its shape, each step timed as benchkit times one.
    Torch {
        /// The config file (TOML).
        config: PathBuf,
        /// The cell: its id as the table shows it, its file-name slug or its
        /// position from 0 [default: the only cell].
        #[arg(long)]
        cell: Option<String>,
        /// Write the script here [default: standard output].
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// Exit status of `compare` when a cell regressed.
pub const REGRESSION_EXIT: u8 = 3;

fn parse_threshold(text: &str) -> Result<f64, String> {
    let (number, percent) = match text.trim().strip_suffix('%') {
        Some(n) => (n, true),
        None => (text.trim(), false),
    };
    let value: f64 =
        number.trim().parse().map_err(|_| format!("`{text}` is not a threshold; give e.g. 5% or 0.05"))?;
    let fraction = if percent || value >= 1.0 { value / 100.0 } else { value };
    if (0.0..1.0).contains(&fraction) {
        Ok(fraction)
    } else {
        Err(format!("`{text}`: the threshold must be between 0 % and 100 %"))
    }
}

/// What a successful command asks the process to exit with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Success,
    /// `compare` found a regression.
    Regression,
    /// A check failed (`plugin check`); what failed is already printed.
    Failed,
}

/// A command's failure.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Run(#[from] RunnerError),
    #[error(transparent)]
    Plugin(#[from] PluginError),
    #[error(transparent)]
    Data(#[from] crate::data::DataError),
    #[error(transparent)]
    Graph(#[from] crate::model::GraphError),
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    #[error(transparent)]
    Launcher(#[from] crate::config::LaunchEnvError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("predict: {0}")]
    Predict(String),
    #[error("advise: {0}")]
    Advise(String),
    #[error("{0}")]
    History(String),
    #[error(transparent)]
    Scaffold(#[from] crate::scaffold::ScaffoldError),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Usage(String),
    #[error("{failed} of {cells} cell(s) failed (see the table); results in {dir}")]
    CellsFailed { failed: usize, cells: usize, dir: String },
}

/// Run the parsed command line.
pub fn execute(cli: Cli) -> Result<Exit, CliError> {
    match cli.command {
        Command::Run { config, output, resume, reference, quiet, mock, slice, history } => {
            let slice = slice
                .map(|s| runner::schedule::slice::SliceSpec::parse(&s, |k| std::env::var(k).ok()))
                .transpose()
                .map_err(CliError::Usage)?;
            let source = match (config, resume) {
                (_, Some(dir)) => RunSource::Resume(dir),
                (Some(config), None) => RunSource::Config(config),
                (None, None) => {
                    return Err(RunnerError::Setup("give a config file or --resume <DIR>".into()).into())
                }
            };
            let progress = !quiet && std::io::stderr().is_terminal() && !mock;
            // An Indexed Job's index numbers the slice, not a rank.
            let hidden = |k: &str| slice.as_ref().is_some_and(|s| s.hides(k));
            let launcher = crate::config::LaunchEnv::from_vars(|k| {
                (!hidden(k)).then(|| std::env::var(k).ok()).flatten()
            })?;
            let options =
                RunOptions { output, progress, quiet, reference, cell_program: None, mock, launcher, slice };
            if let (true, Some(_)) = (mock, &history) {
                return Err(CliError::Usage("--history keeps measurements: a --mock run is invented".into()));
            }
            runs::run(&source, &options, history.as_deref())
        }
        Command::Merge { output, dirs, reference } => runs::merge(&output, &dirs, reference),
        Command::Report { dir, reporter, reference } => runs::report(&dir, &reporter, reference),
        Command::Shards(command) => {
            data::shards(command)?;
            Ok(Exit::Success)
        }
        Command::Data(command) => {
            data::data(command)?;
            Ok(Exit::Success)
        }
        Command::Cell => {
            runner::serve()?;
            Ok(Exit::Success)
        }
        Command::Compare { baseline, new, threshold } => {
            let (base_cells, new_cells) = runner::load_pair(&baseline, &new)?;
            let comparison = Comparison::of(&base_cells, &new_cells, threshold);
            print!("{}", comparison.render());
            Ok(if comparison.regressions() > 0 { Exit::Regression } else { Exit::Success })
        }
        Command::Validate { config, config_only: false } => validate(&config),
        Command::Validate { config, config_only: true } => validate_keys(&config),
        Command::Plugin(command) => plugin::plugin(command),
        Command::Export(ExportCommand::Torch { config, cell, output }) => {
            export_torch(&config, cell.as_deref(), output.as_deref())?;
            Ok(Exit::Success)
        }
        Command::Collective(args) => {
            collective::collective(&args)?;
            Ok(Exit::Success)
        }
        Command::Advise(args) => advise::advise(&args),
        Command::History(args) => history::history(&args),
        Command::Predict(args) => {
            predict::predict(&args)?;
            Ok(Exit::Success)
        }
        Command::Schema { name: None } => {
            use benchkit_schema::json_schema::FILES;
            println!("results schema {}", benchkit_schema::SCHEMA_VERSION);
            for (name, file, _) in FILES {
                println!("{name:<12} {file}");
            }
            Ok(Exit::Success)
        }
        Command::Schema { name: Some(name) } => match benchkit_schema::json_schema::schema(&name) {
            Some(schema) => {
                // A reader that stops early (`| head`) is not an error.
                let text = serde_json::to_string_pretty(&schema).unwrap_or_default();
                let _ = writeln!(std::io::stdout(), "{text}");
                Ok(Exit::Success)
            }
            None => Ok(Exit::Failed),
        },
        Command::Kernels(command) => kernels::kernels(command),
        Command::Ops => {
            for (op, attrs) in crate::model::graph::ops() {
                println!("{op:<22} {attrs}");
            }
            Ok(Exit::Success)
        }
    }
}

/// `benchkit validate`: every cell prepared, and what it would train.
fn validate(config: &std::path::Path) -> Result<Exit, CliError> {
    runner::cell::inspect::validate(config, &mut |line| println!("{line}"))?;
    Ok(Exit::Success)
}

/// `benchkit validate --config-only`: the keys and values of every cell.
fn validate_keys(config: &std::path::Path) -> Result<Exit, CliError> {
    let sweep = Sweep::load_keys(config)?;
    println!(
        "{}: keys ok, {} cell(s) (data, plugin files and backends not checked)",
        config.display(),
        sweep.cells.len()
    );
    Ok(Exit::Success)
}

/// `benchkit export torch`: the chosen cell's script, to `output` or stdout.
fn export_torch(
    config: &std::path::Path,
    cell: Option<&str>,
    output: Option<&std::path::Path>,
) -> Result<(), CliError> {
    let script = runner::cell::inspect::torch_script(config, cell)?;
    match output {
        Some(path) => std::fs::write(path, script)
            .map_err(|source| CliError::Write { path: path.display().to_string(), source })?,
        None => print!("{script}"),
    }
    Ok(())
}
