//! Cells prepared and not trained: what `benchkit validate` checks and says
//! of each, and the script `benchkit export torch` writes for one.

use super::prepare::{load_plugins, prepare, Prepared};
use crate::config::{Cell, LaunchEnv, Mode, Sweep};
use crate::export::CellFacts;
use crate::plugin::PluginHost;
use crate::runner::RunnerError;
use crate::train::{Hits, Task};
use std::path::Path;

/// `benchkit validate`: every cell of `config` prepared (its sample data
/// made first when a study asks for it) and described to `say`, line by
/// line, as it is checked; the first cell that cannot train stops it. A
/// cell this build or machine lacks what it needs for is named with what
/// is missing, as `run` would list it.
pub fn validate(config: &Path, say: &mut dyn FnMut(String)) -> Result<(), RunnerError> {
    crate::config::sample_data::prepare_study_data(config)?;
    let sweep = Sweep::load_launched(config, &LaunchEnv::from_process()?)?;
    let host = PluginHost::new(sweep.base.plugin_limits)?;
    let plugins = load_plugins(&host, &sweep.cells, &sweep.base.reporters)?;
    let mut unavailable = 0;
    for cell in &sweep.cells {
        if let Some(why) = &cell.unavailable {
            say(format!("cell {}\n  not available: {why}", cell.id));
            unavailable += 1;
            continue;
        }
        let p = prepare(&cell.plan).map_err(|e| in_cell(cell, e))?;
        describe(cell, &p, say);
        fills_a_batch(cell, p.dataset.train.len()).map_err(|e| in_cell(cell, e))?;
    }
    let reporters: Vec<&str> =
        plugins.iter().filter(|p| p.role == "reporter").map(|p| p.name.as_str()).collect();
    say(format!("reporters: {}", reporters.join(", ")));
    let left_out = match unavailable {
        0 => String::new(),
        n => format!(", {n} of them not available here (see above)"),
    };
    say(format!("{}: ok, {} cell(s){left_out}", config.display(), sweep.cells.len()));
    Ok(())
}

/// `benchkit export torch`: the script of the cell of `config` named `cell`
/// (or its only cell).
pub fn torch_script(config: &Path, cell: Option<&str>) -> Result<String, RunnerError> {
    let sweep = Sweep::load(config)?;
    let cell = crate::export::pick(&sweep.cells, cell, &config.display().to_string())?;
    // The script trains elsewhere (often on a GPU): this machine's memory does not bound it.
    let mut plan = cell.plan.clone();
    plan.plugin_limits.model_memory_mib = Some(u64::MAX >> 20);
    let p = prepare(&plan).map_err(|e| in_cell(cell, e))?;
    let task = Task::of(&p.graph, p.dataset.multi_label, Hits::default());
    let model = format!("{} {}", p.model.info.name, p.model.info.version);
    let sizes = (p.dataset.train.len(), p.dataset.test.len());
    let facts = CellFacts::of(cell, &p.graph, task, model, sizes)?;
    Ok(crate::export::torch_script(&facts)?)
}

fn in_cell(cell: &Cell, source: RunnerError) -> RunnerError {
    RunnerError::Cell { cell: cell.id.clone(), source: Box::new(source) }
}

/// A cell whose training split (each process's share of it) fills no
/// batch would fail as it starts: `validate` says so now.
fn fills_a_batch(cell: &Cell, train_images: usize) -> Result<(), RunnerError> {
    let train = &cell.plan.train;
    if train.batch_search.is_some() || cell.plan.mode != Mode::Train {
        return Ok(());
    }
    let processes = train.parallel.processes.max(1);
    match crate::train::optim::lr_schedule::steps_per_epoch(train, train_images / processes) {
        Ok(_) => Ok(()),
        Err(e) => {
            let share = match processes {
                1 => String::new(),
                n => format!(" (each of its {n} processes trains a share of the {train_images} images)"),
            };
            Err(RunnerError::Setup(format!("{e}{share}; lower train.batch_size or add images")))
        }
    }
}

/// What `validate` says of a prepared cell.
fn describe(cell: &Cell, p: &Prepared, say: &mut dyn FnMut(String)) {
    let plan = &cell.plan;
    let shape = p.graph.input_shape();
    say(format!("cell {}", cell.id));
    say(format!(
        "  model      {} {} ({} params, {:.3} GMAC/image forward), input {}x{}x{}",
        p.model.info.name,
        p.model.info.version,
        p.graph.num_params(),
        p.graph.forward_macs() as f64 / 1e9,
        shape[0],
        shape[1],
        shape[2],
    ));
    say(format!("  transform  {} {}", p.transform.info.name, p.transform.info.version));
    let d = &plan.data;
    let classes = match (&p.dataset.vocabulary, p.dataset.multi_label) {
        (Some((v, longest)), _) => {
            format!("{}-token vocabulary, captions up to {longest} tokens", v.len())
        }
        (None, true) => {
            format!("{} labels ({})", p.dataset.num_classes, p.dataset.classes.join(", "))
        }
        (None, false) => format!("{} classes", p.dataset.num_classes),
    };
    let evaluated = p.dataset.evaluated.map(|dir| format!(" (evaluated: {dir}/)")).unwrap_or_default();
    say(format!(
        "  data       {} {} train / {} test images{evaluated}, decoded to {}x{}x{}, {classes}",
        p.dataset.kind,
        p.dataset.train.len(),
        p.dataset.test.len(),
        p.decode.shape.channels,
        p.decode.shape.height,
        p.decode.shape.width,
    ));
    say(format!(
        "  loader     {} pipeline, {} worker(s), prefetch {}, shuffle {}, interleave {}",
        format!("{:?}", d.pipeline).to_lowercase(),
        d.workers,
        d.prefetch,
        format!("{:?}", d.shuffle).to_lowercase(),
        d.interleave
    ));
    let batch = match plan.train.batch_search {
        Some(_) => format!("\"max\" (searched from {})", plan.train.batch_size),
        None => plan.train.batch_size.to_string(),
    };
    let parallel = &plan.train.parallel;
    let threads = match (parallel.processes, parallel.threads_per_device) {
        (1, None) => String::new(),
        (n, None) => format!(", {n} processes"),
        (1, Some(t)) => format!(", {t} thread(s) a replica"),
        (n, Some(t)) => {
            format!(", {n} processes ({} here), {t} thread(s) a replica", parallel.machine_processes)
        }
    };
    say(format!(
        "  train      {} epoch(s), batch {batch}, backend {}{threads}",
        plan.train.epochs, plan.backend
    ));
}
