//! `benchkit history`: add results directories to the history database,
//! show each series with its change points, check the newest runs (exit
//! status 3 on a regression), export the points for pandas or polars.

use super::{CliError, Exit};
use crate::history::series::Figure;
use crate::history::{self, History, HistoryError};
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// The history database [default: $BENCHKIT_HISTORY, else ~/.local/share/benchkit/history.sqlite].
    #[arg(long, global = true, value_name = "PATH")]
    pub db: Option<PathBuf>,
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum HistoryCommand {
    /// Add results directories: every cell's figures and repeats, keyed by
    /// its config and machine, with the code's commit and the engines'
    /// versions. A run already there is left as it is.
    Add {
        #[arg(required = true)]
        dirs: Vec<PathBuf>,
        /// Name the runs by this (e.g. a release) rather than by their commit.
        #[arg(long)]
        label: Option<String>,
    },
    /// Each series, oldest run first, with its change points.
    Show {
        /// Only the series whose cell label, cell id or series id matches this glob.
        #[arg(long, value_name = "PATTERN")]
        cell: Option<String>,
        #[arg(long, value_enum, default_value = "images_per_s")]
        figure: Figure,
        /// Also write a page of one chart per series here (HTML, self-contained).
        #[arg(long, value_name = "PAGE")]
        html: Option<PathBuf>,
    },
    /// Whether the newest run of each series fell from its recent level
    /// beyond its noise; exits with status 3 if one did, naming the last
    /// good and first bad runs.
    Check {
        #[arg(long, value_name = "PATTERN")]
        cell: Option<String>,
        #[arg(long, value_enum, default_value = "images_per_s")]
        figure: Figure,
    },
    /// Every finished cell of the history (the `points` view), as CSV or Parquet.
    Export {
        #[arg(long, value_enum, default_value = "csv")]
        format: ExportFormat,
        /// Write here [default: standard output, CSV only].
        #[arg(long, short)]
        output: Option<PathBuf>,
    },
}

/// What `history export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Csv,
    Parquet,
}

fn refused(e: HistoryError) -> CliError {
    CliError::History(e.to_string())
}

/// The database `given` names, else the default one.
fn path_of(given: Option<&Path>) -> Result<PathBuf, CliError> {
    match given.filter(|p| !p.as_os_str().is_empty()) {
        Some(p) => Ok(p.to_path_buf()),
        None => history::default_path().ok_or_else(|| {
            CliError::Usage("no history database: give one, or set BENCHKIT_HISTORY or HOME".into())
        }),
    }
}

/// `run --history`: the finished run in `dir` added to the database `db`
/// names (the default one where empty).
pub(super) fn add_finished(db: &Path, dir: &Path) -> Result<(), CliError> {
    let path = path_of(Some(db))?;
    let mut history = History::open(&path).map_err(refused)?;
    let added = history::add(&mut history, dir, None).map_err(refused)?;
    println!("added run {} to the history {}, {} cell(s)", added.run_id, path.display(), added.cells);
    Ok(())
}

/// Refuse to write `out` where it is the database itself.
fn not_the_database(out: &Path, db: &Path) -> Result<(), CliError> {
    let same = match (std::fs::canonicalize(out), std::fs::canonicalize(db)) {
        (Ok(a), Ok(b)) => a == b,
        _ => std::path::absolute(out).ok() == std::path::absolute(db).ok(),
    };
    match same {
        true => {
            Err(CliError::Usage(format!("{} is the history database itself: write elsewhere", out.display())))
        }
        false => Ok(()),
    }
}

pub fn history(args: &HistoryArgs) -> Result<Exit, CliError> {
    let path = path_of(args.db.as_deref())?;
    let mut history = match &args.command {
        HistoryCommand::Add { .. } => History::open(&path),
        _ => History::open_existing(&path),
    }
    .map_err(refused)?;
    match &args.command {
        HistoryCommand::Add { dirs, label } => {
            let mut failed = Vec::new();
            for dir in dirs {
                match history::add(&mut history, dir, label.as_deref()) {
                    Ok(a) if a.already => {
                        println!("{}: run {} is in the history already", dir.display(), a.run_id)
                    }
                    Ok(a) => println!(
                        "{}: added run {} ({}), {} cell(s)",
                        dir.display(),
                        a.run_id,
                        a.name,
                        a.cells
                    ),
                    Err(e) => {
                        eprintln!("error: {e}");
                        failed.push(dir.display().to_string());
                    }
                }
            }
            println!("history: {}", history.path().display());
            match failed.is_empty() {
                true => Ok(Exit::Success),
                false => Err(CliError::History(format!("not added: {}", failed.join(", ")))),
            }
        }
        HistoryCommand::Show { cell, figure, html } => {
            let series = history.series(cell.as_deref(), *figure).map_err(refused)?;
            print!("{}", crate::report::history::show(&series));
            if let Some(page) = html {
                not_the_database(page, &path)?;
                let text = crate::report::history_page::page(&series, &path.display().to_string());
                crate::atomic::write_atomic(page, text.as_bytes())
                    .map_err(|source| CliError::Write { path: page.display().to_string(), source })?;
                println!("wrote {}", page.display());
            }
            Ok(Exit::Success)
        }
        HistoryCommand::Check { cell, figure } => {
            let series = history.series(cell.as_deref(), *figure).map_err(refused)?;
            if series.is_empty() {
                return Err(CliError::History(format!(
                    "no series to check in {}{}",
                    path.display(),
                    cell.as_deref().map_or(String::new(), |c| format!(" matching --cell {c:?}"))
                )));
            }
            let regressions: Vec<_> = series.iter().filter_map(|s| s.regression()).collect();
            print!("{}", crate::report::history::check(&series, &regressions));
            Ok(if regressions.is_empty() { Exit::Success } else { Exit::Regression })
        }
        HistoryCommand::Export { format, output } => {
            let bytes = match format {
                ExportFormat::Csv => history.csv().map_err(refused)?.into_bytes(),
                ExportFormat::Parquet => history.parquet().map_err(refused)?,
            };
            match (output, format) {
                (Some(out), _) => {
                    not_the_database(out, &path)?;
                    crate::atomic::write_atomic(out, &bytes)
                        .map_err(|source| CliError::Write { path: out.display().to_string(), source })?
                }
                (None, ExportFormat::Csv) => print!("{}", String::from_utf8_lossy(&bytes)),
                (None, ExportFormat::Parquet) => {
                    return Err(CliError::Usage("--format parquet writes a file: give -o PATH".into()))
                }
            }
            Ok(Exit::Success)
        }
    }
}
