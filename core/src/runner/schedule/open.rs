//! A run opened: a config's matrix (one slice of it with `--slice`) and a
//! new results directory, or a resumed run's matrix and directory with the
//! events it logged; the ranks of an external launch met; the plugins loaded.

use crate::config::{Axis, Cell, Plan, Sweep};
use crate::plugin::PluginHost;
use crate::report::{Stamped, SCHEMA_VERSION};
use crate::runner::cell::prepare::load_plugins;
use crate::runner::ranks::peers::{self, Peers};
use crate::runner::ranks::rendezvous;
use crate::runner::store::{layout, RunRecord, Store};
use crate::runner::{RunOptions, RunSource, RunnerError};
use std::path::PathBuf;

/// A run's matrix and store, opened.
pub(crate) struct Opened {
    pub(super) run_id: String,
    pub(super) base: Plan,
    pub(super) axes: Vec<Axis>,
    pub(super) cells: Vec<Cell>,
    pub(super) store: Store,
    /// The events an interrupted run of the same id wrote (resumed runs).
    pub(super) log: Vec<Stamped>,
    pub(super) plugins: Vec<crate::report::PluginUse>,
    pub(super) resumed_run: bool,
    /// The other ranks of an external launch.
    pub(super) peers: Option<Peers>,
}

/// Where a run's store comes from: made new for a config, or the store of
/// a run being resumed with the events it logged.
enum Origin {
    New { config_file: std::path::PathBuf, config_text: String },
    Resumed { store: Store, log: Vec<Stamped> },
}

/// Open `source` at `now` on the machine of `env`, its plugins in the
/// sandbox `host_of` makes for its base plan.
pub(crate) fn open(
    source: &RunSource,
    options: &RunOptions,
    host_of: impl Fn(&Plan) -> Result<PluginHost, RunnerError>,
    env: &crate::measure::Environment,
    now: u64,
) -> Result<(Opened, PluginHost), RunnerError> {
    let (run_id, base, axes, cells, origin, slice) = match source {
        RunSource::Config(path) => {
            let (sweep, source) = Sweep::load_with_source(path, &options.launcher)?;
            let mut run_id =
                format!("{}-{}", crate::config::slug(&sweep.base.name), crate::runner::timestamp(now));
            let (cells, slice) = match &options.slice {
                None => (sweep.cells, None),
                Some(spec) => {
                    let record = spec.record(source.as_bytes(), &sweep.cells);
                    run_id = format!("{run_id}-slice-{}-of-{}", spec.index, spec.count);
                    (sweep.cells.into_iter().filter(|c| spec.owns(c.index)).collect(), Some(record))
                }
            };
            // Absolute, so that the run can be read again from any folder.
            let config_file = std::path::absolute(path).unwrap_or_else(|_| path.clone());
            (run_id, sweep.base, sweep.axes, cells, Origin::New { config_file, config_text: source }, slice)
        }
        RunSource::Resume(dir) => {
            let (store, stored, log) = Store::open(dir)?;
            if stored.mock != options.mock {
                let (was, is) =
                    if stored.mock { ("a --mock run", "measured") } else { ("measured", "--mock") };
                return Err(RunnerError::Setup(format!(
                    "{} holds {was}; resuming it {is} would mix invented and measured figures",
                    dir.display()
                )));
            }
            // What this build or machine lacks is asked again: a resume on a
            // build that has it trains the cells the first run could not.
            let mut cells = stored.cells;
            for cell in &mut cells {
                cell.unavailable = crate::config::unavailable(&cell.plan);
            }
            (stored.run_id, stored.base, stored.axes, cells, Origin::Resumed { store, log }, stored.slice)
        }
    };

    let ranks = peers::meet(&base.name, &cells, env)?;
    // A cell of one process in an external launch is rank 0's alone: the
    // other ranks go on to the cells they train together, so that none
    // measures it twice or slows rank 0's measurement of it.
    let rank = peers::own_rank(&cells, &options.launcher);
    let all = cells.len();
    let cells: Vec<Cell> = if rank == 0 { cells } else { cells.into_iter().filter(peers::shared).collect() };
    if cells.is_empty() && all > 0 && !options.quiet {
        eprintln!("rank {rank}: every cell of this run is of one process, and those are rank 0's alone");
    }
    if let (Some((map, at, _)), false) = (&ranks, options.quiet) {
        eprint!("{}", rendezvous::render(map, at));
    }
    let host = host_of(&base)?;
    let plugins = load_plugins(&host, &cells, &base.reporters)?;
    let resumed_run = matches!(origin, Origin::Resumed { .. });
    let (store, log) = match origin {
        Origin::Resumed { store, log } => (store, log),
        Origin::New { config_file, config_text } => {
            let dir = options.output.clone().unwrap_or_else(|| PathBuf::from("results").join(&run_id));
            let commit = crate::measure::env::checkout_commit(&config_file);
            let record = RunRecord {
                schema: SCHEMA_VERSION,
                run_id: &run_id,
                name: &base.name,
                config_file: &config_file,
                config_text: Some(&config_text),
                config_commit: commit.as_deref(),
                created_unix_ms: now,
                environment: env,
                plugins: &plugins,
                base: &base,
                axes: &axes,
                cells: &cells,
                mock: options.mock,
                slice: slice.as_ref(),
                merged_from: &[],
            };
            (Store::create(&dir, &record)?, Vec::new())
        }
    };
    let peers = match ranks {
        Some((map, _, peers)) => {
            let json = serde_json::to_vec_pretty(&map).map_err(|e| RunnerError::Setup(e.to_string()))?;
            store.write_file(layout::RANKS, &json)?;
            Some(peers)
        }
        None => None,
    };
    Ok((Opened { run_id, base, axes, cells, store, log, plugins, resumed_run, peers }, host))
}
