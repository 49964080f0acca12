//! `batch_size = "max"`: the cells a search tries (one warm-up step and
//! one measured step at a batch, evaluated on one test batch, in a fresh
//! process held under a memory limit), which of their failures mean "too
//! large", and the cell as it then runs.

use super::attempt::Attempt;
use super::Session;
use crate::config::{BatchSearch, Cell, TrainPlan};
use crate::report::{CellFailed, Event};
use crate::runner::store::CellRecord;
use crate::runner::RunnerError;
use benchkit_schema::Failure;
use benchkit_schema::{BatchSearchReport, BatchTrial};

/// Steps a trial takes: one to warm up, one measured.
const TRIAL_STEPS: usize = 2;

/// The share of this machine's memory a CPU trial may hold, when
/// `train.memory_limit_mib` does not say.
const CPU_SHARE: f64 = 0.9;

/// `cell` at global batch `batch`, with the evaluation batch following it
/// unless the config gave one.
pub(crate) fn at_batch(cell: &Cell, batch: usize) -> Cell {
    let mut cell = cell.clone();
    let train = &mut cell.plan.train;
    if let Some(BatchSearch { eval_batch_given: false }) = train.batch_search {
        train.eval_batch_size = TrainPlan::default_eval_batch(batch);
    }
    train.batch_size = batch;
    train.batch_search = None;
    cell
}

/// The short cell that tries `batch`.
pub(crate) fn trial_cell(cell: &Cell, batch: usize) -> Cell {
    let mut trial = at_batch(cell, batch);
    let plan = &mut trial.plan;
    plan.repeats = 1;
    let train = &mut plan.train;
    train.epochs = 1;
    train.max_steps_per_epoch = Some(TRIAL_STEPS);
    train.warmup_steps = 1;
    train.target_accuracy = None;
    train.profile = false;
    if train.memory_limit_mib.is_none() && !plan.backend.is_gpu() {
        train.memory_limit_mib = crate::measure::env::machine_memory_bytes()
            .map(|bytes| (CPU_SHARE * bytes as f64 / f64::from(1 << 20)) as u64);
    }
    // One evaluation batch is enough to know it fits.
    let eval = train.eval_batch_size;
    plan.data.test_limit = Some(plan.data.test_limit.map_or(eval, |l| l.min(eval)));
    plan.data.test_samples = plan.data.test_samples.min(eval);
    trial
}

/// After the cell at `search.chosen` failed for `reason`: the largest batch
/// below it whose trial fit, if the failure means the batch is too large.
/// The failed batch joins the trials as not fitting.
pub(crate) fn step_down(search: &mut BatchSearchReport, reason: &str) -> Option<usize> {
    if !too_large(reason) {
        return None;
    }
    let failed = search.chosen;
    let smaller = search.trials.iter().filter(|t| t.fits && t.batch < failed).map(|t| t.batch).max()?;
    for t in search.trials.iter_mut().filter(|t| t.batch == failed) {
        t.fits = false;
        t.reason = Some(format!("fit its trial, then {}", reason.trim()));
    }
    Some(smaller)
}

/// Whether a trial's failure means the batch is too large: it ran out of
/// host or device memory (LibTorch's "CUDA out of memory", CubeCL's
/// out-of-memory launch error and buffer it cannot allocate, the driver's
/// CUDA_ERROR_OUT_OF_MEMORY), was refused by the memory estimate, was
/// killed (the out-of-memory killer), or the training set has fewer images.
pub(crate) fn too_large(reason: &str) -> bool {
    let lower = reason.to_lowercase();
    [
        "out of memory",
        "out-of-memory",
        "out_of_memory",
        "outofmemory",
        "can't allocate buffer",
        "buffertoobig",
        crate::runner::cell::prepare::OVER_BUDGET,
        "sigkill",
        "fewer than one batch",
        "cannot allocate memory",
        "memory allocation",
    ]
    .iter()
    .any(|m| lower.contains(m))
}

/// What the trial at `batch` showed: whether it fit, or the error (a
/// failure that is not the batch's size) that ends the search.
pub(crate) fn trial_of(batch: usize, attempt: Attempt) -> Result<BatchTrial, String> {
    match attempt {
        Attempt::Done(r) if r.steps_measured == 0 => Ok(BatchTrial {
            batch,
            fits: false,
            images_per_s: f64::NAN,
            peak_rss_mib: r.peak_rss_mib,
            gpu_memory_mib: None,
            reason: Some(format!(
                "the training set holds fewer than {TRIAL_STEPS} batches of {batch}, so no step could be measured"
            )),
        }),
        Attempt::Done(r) => Ok(BatchTrial {
            batch,
            fits: true,
            images_per_s: r.images_per_s,
            peak_rss_mib: r.peak_rss_mib,
            gpu_memory_mib: r.gpu.as_ref().and_then(|g| {
                g.devices.iter().map(|d| d.memory_mib.max).filter(|m| m.is_finite()).reduce(f64::max)
            }),
            reason: None,
        }),
        // A plugin's own failure is never the batch's size: its words are its own to forge.
        Attempt::Failed(cause) if cause.plugin.is_none() && too_large(&cause.reason) => Ok(BatchTrial {
            batch,
            fits: false,
            images_per_s: f64::NAN,
            peak_rss_mib: None,
            gpu_memory_mib: None,
            reason: Some(cause.reason),
        }),
        Attempt::Failed(cause) | Attempt::LostPeer(cause) => {
            Err(format!("batch_size = \"max\": the trial at batch {batch} failed: {}", cause.reason))
        }
    }
}

/// The search as a run makes it: trials through its executor, each told.
impl Session<'_> {
    /// `batch_size = "max"`: a batch that fit its short trial but not the
    /// whole cell gives way to the next smaller batch that fit, which
    /// `searched` then holds; whether there was one.
    pub(super) fn step_down(
        &mut self,
        unsearched: &Cell,
        repeat: u32,
        cause: &Failure,
        searched: &mut Option<(Cell, BatchSearchReport)>,
    ) -> Result<bool, RunnerError> {
        let Some((_, search)) = searched.as_mut() else { return Ok(false) };
        let Some(smaller) = step_down(search, &cause.reason) else { return Ok(false) };
        self.progress.say(format!(
            "{}: batch {} ran out of memory over the whole cell; training at {smaller}",
            unsearched.id, search.chosen
        ));
        // The attempt's end, for the log and the reporters; the repeat
        // itself is tried again, so the cell keeps no failure.
        self.record(Event::CellFailed(CellFailed {
            cell: unsearched.id.clone(),
            repeat,
            failure: Failure {
                reason: format!("batch {}: {}", search.chosen, cause.reason),
                retried: true,
                ..cause.clone()
            },
        }))?;
        search.chosen = smaller;
        let chosen = at_batch(unsearched, smaller);
        *searched = searched.take().map(|(_, s)| (chosen, s));
        Ok(true)
    }

    /// `batch_size = "max"`: the search a kept repeat already made, or a
    /// new one, each trial in a fresh process; `Err` says why none fits.
    pub(super) fn search_batch(
        &mut self,
        cell: &Cell,
        record: &CellRecord,
    ) -> Result<Result<BatchSearchReport, String>, RunnerError> {
        if let Some(kept) = record.repeats.iter().find_map(|r| r.batch_search.clone()) {
            return Ok(Ok(kept));
        }
        let replicas = cell.plan.train.parallel.devices * cell.plan.train.parallel.processes;
        let unit = BatchSearch::START_PER_REPLICA * replicas;
        let mut setup_error = None;
        let search =
            BatchSearchReport::search(cell.plan.train.batch_size, unit, BatchSearch::LARGEST, |batch| {
                let trial = trial_cell(cell, batch);
                let attempt = match self.executor.attempt(&trial, 1, &mut |_| {}) {
                    Ok(attempt) => attempt,
                    Err(e) => {
                        let message = e.to_string();
                        setup_error = Some(e);
                        return Err(message);
                    }
                };
                let trial = trial_of(batch, attempt)?;
                self.progress.say(match trial.fits {
                    true => format!("{}: batch {batch} fits ({:.1} img/s)", cell.id, trial.images_per_s),
                    false => format!("{}: batch {batch} is too large", cell.id),
                });
                Ok(trial)
            });
        match setup_error {
            Some(e) => Err(e),
            None => Ok(search),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use benchkit_schema::Failure;

    #[test]
    fn a_batch_that_fails_the_whole_cell_steps_down_to_the_next_that_fit() {
        let trial = |batch: usize, fits: bool| BatchTrial {
            batch,
            fits,
            images_per_s: 1.0,
            peak_rss_mib: None,
            gpu_memory_mib: None,
            reason: None,
        };
        let mut search = BatchSearchReport {
            chosen: 48,
            trials: vec![trial(16, true), trial(32, true), trial(64, false), trial(48, true)],
        };
        let oom = "out of memory: the cell process's resident memory (with its children's) reached 400 MiB";
        assert_eq!(
            step_down(&mut search.clone(), "a plugin trapped"),
            None,
            "only memory failures step down"
        );
        assert_eq!(step_down(&mut search, oom), Some(32));
        let t48 = search.trials.iter().find(|t| t.batch == 48).unwrap();
        assert!(
            !t48.fits && t48.reason.as_deref().unwrap_or("").starts_with("fit its trial, then out of memory")
        );
        search.chosen = 16;
        assert_eq!(step_down(&mut search, oom), None, "nothing smaller fit");
    }

    fn cell(toml: &str) -> Cell {
        let text = format!(
            "name = \"t\"\n[data]\nsource = \"synthetic\"\nshape = [3, 32, 32]\nsamples = 4096\ntest_samples = 1000\n\
             [model]\nplugin = \"builtin:lenet\"\n[train]\n{toml}\n"
        );
        let sweep = crate::config::Sweep::parse(&text, std::path::Path::new("t.toml")).unwrap();
        sweep.cells.into_iter().next().unwrap()
    }

    #[test]
    fn a_trial_is_two_steps_one_test_batch_and_a_memory_limit() {
        let c = cell("batch_size = \"max\"\nepochs = 5\nwarmup_steps = 10\ntarget_accuracy = 0.9");
        assert_eq!(c.plan.train.batch_size, 8, "the search starts at 8 per replica");
        let t = trial_cell(&c, 512);
        let train = &t.plan.train;
        assert_eq!((train.batch_size, train.eval_batch_size), (512, 512));
        assert_eq!((train.epochs, train.max_steps_per_epoch, train.warmup_steps), (1, Some(2), 1));
        assert_eq!((train.target_accuracy, train.batch_search), (None, None));
        assert_eq!(t.plan.data.test_samples, 512);
        assert!(train.memory_limit_mib.is_some_and(|m| m > 64), "CPU trials are held under a limit");
        // The cell itself keeps its epochs; a given evaluation batch stays.
        let run = at_batch(&c, 512);
        assert_eq!((run.plan.train.epochs, run.plan.train.eval_batch_size), (5, 512));
        let c = cell("batch_size = \"max\"\neval_batch_size = 100");
        assert_eq!(at_batch(&c, 512).plan.train.eval_batch_size, 100);
        assert_eq!(trial_cell(&c, 512).plan.data.test_samples, 100);
    }

    #[test]
    fn only_memory_failures_mean_too_large() {
        for reason in [
            "out of memory: the cell process's resident memory (with its children's) reached 901 MiB, past its limit of 900 MiB",
            "the cell process died from signal 9 (SIGKILL: killed, e.g. by the out-of-memory killer)",
            "CUDA error: out of memory",
            "thread 'main' panicked at burn-cubecl: An out-of-memory error happened during launch",
            "DriverError(CUDA_ERROR_OUT_OF_MEMORY, \"out of memory\")",
            "OutOfMemory { reason: \"cuMemAlloc\" }",
            "called `Result::unwrap()` on an `Err` value: can't allocate buffer of size: 8589934592",
            "BufferTooBig { size: 8589934592 }",
            "model builtin:resnet would need about 16576 MiB to train 128 in f32 (…): more than the budget of 12053 MiB (this machine's memory over its 2 processes)",
            "the training set has 4096 images, fewer than one batch of 8192",
        ] {
            assert!(too_large(reason), "{reason}");
            let trial = trial_of(64, Attempt::Failed(Failure::plain(reason))).unwrap();
            assert!(!trial.fits && trial.reason.as_deref() == Some(reason));
        }
        let err = trial_of(64, Attempt::Failed(Failure::plain("plugin trapped: unreachable"))).unwrap_err();
        assert_eq!(err, "batch_size = \"max\": the trial at batch 64 failed: plugin trapped: unreachable");
        // A plugin that fails saying "out of memory" ends the search; it does not shrink the batch.
        let forged = Failure { plugin: Some("builtin:x".into()), ..Failure::plain("out of memory") };
        assert!(trial_of(64, Attempt::Failed(forged)).is_err());
        assert!(!too_large("cannot allocate a port"), "only memory allocation counts");
        assert!(too_large("Cannot allocate memory (os error 12)"));
    }
}
