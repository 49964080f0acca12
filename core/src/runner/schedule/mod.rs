//! The scheduler: opens a run (new, or resumed from its results
//! directory), runs every unfinished repeat of every cell in order through
//! an [`Executor`], records each event in the store before any reporter
//! sees it, replays the finished cells of a resumed run to the reporters,
//! and finishes the reports. It never trains: executors do.
//!
//! Its parts: [`open`] (a run's matrix and directory), [`executor`] (who
//! runs a repeat) and [`attempt`] (cell processes started, watched and
//! stopped), [`batch_search`] (the trial cells of `batch_size = "max"`),
//! [`progress`] (what a run says while it goes), [`slice`] and [`merge`] (a
//! matrix split over machines, and joined again), and [`rerender`] (a
//! stored run reported again).

pub mod attempt;
pub mod batch_search;
pub mod executor;
pub mod merge;
pub mod open;
pub mod progress;
pub mod rerender;
mod rounds;
pub mod slice;

use super::cell::prepare::load;
use super::message::CellMessage;
use super::ranks::peers::Peers;
use super::store::artifacts::write_artifacts;
use super::store::events::cell_events;
use super::store::{CellRecord, FailedRepeat, Store};
use super::{RunOptions, RunSource, RunSummary, RunnerError};
use crate::config::{Cell, PluginPlan};
use crate::plugin::{PluginHost, PluginKind, PluginSource};
use crate::report::{
    CellFailed, CellHeader, CellStart, CellStatus, CellSummary, EpochEnd, Event, PluginReport, Report,
    ReportError, Reports, RunEnd, RunStart, Stamped, Terminal, SCHEMA_VERSION,
};
use attempt::Attempt;
use benchkit_schema::Machine;
use benchkit_schema::{Failure, FailureKind};
use executor::{Executor, Mock, Processes};
use open::{open, Opened};
use progress::Progress;
use std::time::Instant;

/// Run every unfinished cell of `source` and report the run.
pub fn run(source: &RunSource, options: &RunOptions) -> Result<RunSummary, RunnerError> {
    if let RunSource::Config(config) = source {
        crate::config::sample_data::prepare_study_data(config)?;
    }
    if options.mock {
        return run_with(source, options, &mut Mock::from_env());
    }
    let program = match &options.cell_program {
        Some(p) => p.clone(),
        None => std::env::current_exe().map_err(|e| {
            RunnerError::Setup(format!("cannot find the benchkit executable to run cells: {e}"))
        })?,
    };
    run_with(source, options, &mut Processes { program })
}

/// Reporter plugins `plans`, started; one that cannot start is a
/// warning, and the run and the others go on.
pub(crate) fn start_reporters(host: &PluginHost, plans: &[PluginPlan]) -> (Reports, Vec<ReportError>) {
    let mut reports = Reports::default();
    let mut errors = Vec::new();
    for r in plans {
        let started = load(host, r, PluginKind::Reporter).and_then(|p| host.reporter(&p, &r.config_json()));
        match started {
            Ok(instance) => {
                let builtin = matches!(r.source, PluginSource::Builtin(_));
                reports.push(Box::new(PluginReport::new(instance, builtin)))
            }
            Err(e) => errors.push(ReportError { reporter: r.source.to_string(), message: e.to_string() }),
        }
    }
    (reports, errors)
}

/// What the scheduler holds while the run goes on.
struct Session<'a> {
    store: Store,
    reports: Reports,
    executor: &'a mut dyn Executor,
    progress: Progress,
    /// A `--mock` run: every summary is marked.
    mock: bool,
    peers: Option<Peers>,
    /// Where the cells run, recorded with each.
    machine: Machine,
    /// Cells whose repeats began in an earlier round (`interleave_repeats`).
    begun: std::collections::BTreeMap<usize, rounds::Begun>,
}

/// Write `event` to the store's log, then hand it to the reports.
fn record(store: &mut Store, reports: &mut Reports, event: Event, now: u64) -> Result<(), RunnerError> {
    let stamped = Stamped { event, time_ms: now };
    store.event(&stamped)?;
    reports.deliver(&stamped);
    Ok(())
}

impl Session<'_> {
    fn record(&mut self, event: Event) -> Result<(), RunnerError> {
        let now = (self.executor.clock())();
        record(&mut self.store, &mut self.reports, event, now)
    }

    /// Run the repeats of `cell` that `record` lacks; why it failed, if it
    /// did. A repeat that fails for a transient cause is tried again, up to
    /// `retries` times over the cell; every failed attempt stays in the record.
    ///
    /// Repeats stop at `upto` (a round of `interleave_repeats`); `first`:
    /// this session's first call for the cell, which sets aside a resumed
    /// cell's failures to try them again.
    fn run_repeats(
        &mut self,
        cell: &Cell,
        record: &mut CellRecord,
        upto: u32,
        first: bool,
    ) -> Result<Option<String>, RunnerError> {
        let repeats = cell.plan.repeats_per_cell();
        let upto = upto.min(repeats);
        let mut retries_left = cell.plan.retries;
        // Failed repeats are tried again; finished ones are kept.
        if first {
            record.failures.clear();
        }
        record.summary = None;
        let searched = match cell.plan.train.batch_search {
            None => None,
            Some(_) => match self.search_batch(cell, record)? {
                Ok(search) => Some((batch_search::at_batch(cell, search.chosen), search)),
                Err(reason) => {
                    let repeat = record.repeats.len() as u32 + 1;
                    self.fail(cell, record, repeat, Failure::plain(reason.clone()), 0.0, false)?;
                    return Ok(Some(reason));
                }
            },
        };
        let (unsearched, mut searched) = (cell, searched);
        while record.repeats.len() < upto as usize {
            let cell = searched.as_ref().map_or(unsearched, |(c, _)| c);
            let repeat = record.repeats.len() as u32 + 1;
            let mut seeded = cell.clone();
            seeded.plan.seed = cell.plan.seed_of(repeat);
            let cell = &seeded;
            let config = serde_json::to_value(&cell.plan).unwrap_or_default();
            self.record(Event::CellStart(CellStart { cell: cell.id.clone(), repeat, repeats, config }))?;
            let started = Instant::now();
            let tries = record.failures.len();
            let missing = self.peers.as_ref().and_then(|p| p.gate(cell, repeat, tries, self.store.dir()));
            let outcome = match missing {
                Some(cause) => Attempt::Failed(cause),
                None => match self.attempt(cell, repeat)? {
                    Attempt::Failed(failure) => Attempt::Failed(self.account(cell, repeat, failure, false)),
                    Attempt::LostPeer(failure) => Attempt::Failed(self.account(cell, repeat, failure, true)),
                    done => done,
                },
            };
            match outcome {
                Attempt::Done(mut result) => {
                    result.batch_search = searched.as_ref().map(|(_, s)| s.clone());
                    self.record(Event::Cell(Box::new(result.clone())))?;
                    record.repeats.push(result);
                }
                Attempt::Failed(cause) | Attempt::LostPeer(cause) => {
                    if record.repeats.is_empty()
                        && self.step_down(unsearched, repeat, &cause, &mut searched)?
                    {
                        continue;
                    }
                    let reason = cause.reason.clone();
                    let retry = cause.kind == FailureKind::Transient && retries_left > 0;
                    let wall_s = started.elapsed().as_secs_f64();
                    self.fail(cell, record, repeat, cause, wall_s, retry)?;
                    if retry {
                        retries_left -= 1;
                        self.progress.say(format!(
                            "{}: repeat {repeat} failed for a transient cause; trying it again ({retries_left} retr{} left)",
                            cell.id,
                            if retries_left == 1 { "y" } else { "ies" }
                        ));
                        continue;
                    }
                    return Ok(Some(reason));
                }
            }
            self.store.write_cell(&cell.slug, record)?;
        }
        Ok(None)
    }

    /// Record that an attempt at repeat `repeat` of `cell` failed for
    /// `cause`, and whether it is `retried`.
    fn fail(
        &mut self,
        cell: &Cell,
        record: &mut CellRecord,
        repeat: u32,
        cause: Failure,
        wall_s: f64,
        retried: bool,
    ) -> Result<(), RunnerError> {
        let failure = Failure { retried, ..cause };
        self.record(Event::CellFailed(CellFailed {
            cell: cell.id.clone(),
            repeat,
            failure: failure.clone(),
        }))?;
        record.failures.push(FailedRepeat { repeat, wall_s, failure });
        self.store.write_cell(&cell.slug, record)
    }

    /// A failure of repeat `repeat` of `cell`, as the ranks of an external
    /// launch account for it ([`Peers::account`]); as it is otherwise.
    fn account(&self, cell: &Cell, repeat: u32, failure: Failure, lost_peer: bool) -> Failure {
        match &self.peers {
            Some(peers) => peers.account(cell, repeat, failure, lost_peer, self.store.dir()),
            None => failure,
        }
    }

    /// One attempt at repeat `repeat`, with its progress bar and epoch events.
    fn attempt(&mut self, cell: &Cell, repeat: u32) -> Result<Attempt, RunnerError> {
        let bar = self.progress.bar(cell, repeat);
        let clock = self.executor.clock();
        let Session { store, reports, executor, .. } = self;
        let mut log_error = None;
        let outcome = executor.attempt(cell, repeat, &mut |m| match m {
            CellMessage::Step { done, total } => {
                bar.set_length(total as u64);
                bar.set_position(done as u64);
            }
            CellMessage::Epoch(epoch) => {
                if !epoch.test_accuracy.is_nan() {
                    bar.set_message(format!(
                        "epoch {} test acc {:.2} %",
                        epoch.epoch,
                        100.0 * epoch.test_accuracy
                    ));
                }
                let event = Event::Epoch(EpochEnd { cell: cell.id.clone(), repeat, record: epoch });
                if let Err(e) = record(store, reports, event, clock()) {
                    log_error.get_or_insert(e);
                }
            }
            CellMessage::Timeline(timeline) => {
                if let Err(e) = record(store, reports, Event::Timeline(timeline), clock()) {
                    log_error.get_or_insert(e);
                }
            }
            CellMessage::Phase(_)
            | CellMessage::Done(_)
            | CellMessage::Failed(_)
            | CellMessage::LostPeer(_) => {}
        })?;
        if let Some(e) = log_error {
            return Err(e);
        }
        let line = match &outcome {
            Attempt::Done(r) if r.final_test_accuracy.is_nan() => {
                format!("{:.1} img/s, {:.0} s", r.images_per_s, r.wall_s)
            }
            Attempt::Done(r) => format!(
                "{:.1} img/s, test acc {:.2} %, {:.0} s",
                r.images_per_s,
                100.0 * r.final_test_accuracy,
                r.wall_s
            ),
            Attempt::Failed(cause) | Attempt::LostPeer(cause) => format!("FAILED: {}", cause.reason),
        };
        if matches!(outcome, Attempt::Done(_)) {
            bar.finish_with_message(line.clone());
        } else {
            bar.abandon_with_message(line.clone());
        }
        if !self.progress.bars {
            self.progress.say(format!("{} #{repeat}/{}: {line}", cell.id, cell.plan.repeats_per_cell()));
        }
        Ok(outcome)
    }

    /// One cell: replayed when a previous run finished it, else run (its
    /// kept repeats replayed first).
    fn cell(
        &mut self,
        cell: &Cell,
        previous: Option<CellRecord>,
        log: &[Stamped],
    ) -> Result<CellSummary, RunnerError> {
        // Each machine pays its own price (`[cost.machines]`), found where
        // the cell runs: a resumed run may go on elsewhere.
        let mut cell = cell.clone();
        cell.plan.usd_per_hour = cell.plan.price_on(&self.machine);
        let cell = &cell;
        let mut record = previous.unwrap_or_else(|| super::store::new_record(cell));
        if let Some(why) = &cell.unavailable {
            // Not trained: listed with what is missing. Its record has no
            // repeat, so a resume on a build that has it trains it.
            let summary = named(CellSummary::unavailable(cell.index, &cell.id, &cell.axes, why), cell);
            self.progress.say(format!("{}: not available: {why}", cell.id));
            record.summary = Some(summary.clone());
            self.store.write_cell(&cell.slug, &record)?;
            self.record(Event::CellSummary(Box::new(summary.clone())))?;
            return Ok(summary);
        }
        let begun = self.begun.remove(&cell.index);
        let summary = if record.finished() && begun.is_none() {
            let summary = record.summary.clone().unwrap_or_else(|| summarise(cell, &record, None, self.mock));
            self.replay(log, &record, &summary);
            summary
        } else {
            let (set_aside, failure, first) = match begun {
                Some(b) => (b.set_aside, b.failure, false),
                None => (self.begin(log, &mut record), None, true),
            };
            let failure = match failure {
                Some(why) => Some(why),
                None => self.run_repeats(cell, &mut record, cell.plan.repeats_per_cell(), first)?,
            };
            let mut summary = summarise(cell, &record, failure.as_deref(), self.mock);
            summary.machine = Some(self.machine.clone());
            summary.warnings.extend(set_aside);
            record.summary = Some(summary.clone());
            self.store.write_cell(&cell.slug, &record)?;
            self.record(Event::CellSummary(Box::new(summary.clone())))?;
            summary
        };
        Ok(summary)
    }

    /// The repeats a resumed cell kept from another kind of machine, set
    /// aside (its log keeps them), so that one cell's figures come from one
    /// kind of machine; what was set aside.
    fn set_aside_elsewhere(&mut self, record: &mut CellRecord) -> Option<String> {
        let before = record.machine.as_ref()?;
        if record.repeats.is_empty() || before.kind() == self.machine.kind() {
            return None;
        }
        let note = format!(
            "{} repeat(s) measured on another kind of machine ({}) before the run was resumed here were set aside; \
             events.jsonl keeps them",
            record.repeats.len(),
            before.kind()
        );
        self.progress.say(format!("{}: {note}", record.cell));
        record.repeats.clear();
        Some(note)
    }

    /// Every multi-replica cell's scaling, now that all cells are in: set in
    /// `summaries` and in the cell records of the store.
    fn score_scaling(
        &mut self,
        cells: &[Cell],
        summaries: &mut [CellSummary],
    ) -> Result<Vec<benchkit_schema::CellScaling>, RunnerError> {
        let scaling = benchkit_schema::scaling::scaling(summaries);
        benchkit_schema::scaling::apply(summaries, &scaling);
        for (cell, summary) in cells.iter().zip(summaries.iter()) {
            if summary.weak_scaling.is_none() && summary.strong_scaling.is_none() {
                continue;
            }
            if let Some(mut record) = self.store.cell(&cell.slug)? {
                record.summary = Some(summary.clone());
                self.store.write_cell(&cell.slug, &record)?;
            }
        }
        Ok(scaling)
    }

    /// Hand the repeats of an unfinished cell that an interrupted run
    /// finished, and that are kept, to the reporters again.
    fn replay_kept(&mut self, log: &[Stamped], record: &CellRecord) {
        let kept = record.repeats.len() as u32;
        for event in cell_events(log, &record.cell) {
            let repeat = match &event.event {
                Event::CellStart(s) => s.repeat,
                Event::Epoch(e) => e.repeat,
                Event::Cell(r) => r.repeat,
                _ => continue,
            };
            if repeat <= kept {
                self.reports.deliver(&event);
            }
        }
    }

    /// Hand a finished cell of an interrupted run to the reporters again:
    /// its events from the log, or, where the log lacks them, its results.
    fn replay(&mut self, log: &[Stamped], record: &CellRecord, summary: &CellSummary) {
        let events = cell_events(log, &record.cell);
        if events.iter().any(|e| matches!(e.event, Event::CellSummary(_))) {
            for event in &events {
                self.reports.deliver(event);
            }
            return;
        }
        let now = (self.executor.clock())();
        for r in &record.repeats {
            self.reports.deliver(&Stamped { event: Event::Cell(Box::new(r.clone())), time_ms: now });
        }
        self.reports.deliver(&Stamped { event: Event::CellSummary(Box::new(summary.clone())), time_ms: now });
    }
}

/// [`run`] with the given executor.
pub fn run_with(
    source: &RunSource,
    options: &RunOptions,
    executor: &mut dyn Executor,
) -> Result<RunSummary, RunnerError> {
    let clock = executor.clock();
    let env = crate::measure::env::detect();
    let now = clock();
    let (opened, host) = open(source, options, |base| Ok(PluginHost::new(base.plugin_limits)?), &env, now)?;
    let Opened { run_id, base, axes, cells, store, log, plugins, resumed_run, peers } = opened;
    let (reports, mut reporter_errors) = start_reporters(&host, &base.reporters);
    let mut terminal = Terminal::new(axes.clone(), options.reference.clone());
    if options.mock {
        terminal.mock();
    }
    let machine = Machine::of(&env);
    let mut session = Session {
        store,
        reports,
        executor,
        progress: Progress::new(options),
        mock: options.mock,
        peers,
        machine,
        begun: Default::default(),
    };

    let mut previous = Vec::with_capacity(cells.len());
    for cell in &cells {
        previous.push(session.store.cell(&cell.slug)?);
    }
    let resumed = previous.iter().flatten().filter(|r| r.finished()).count();
    let headers: Vec<CellHeader> = cells
        .iter()
        .map(|c| CellHeader {
            index: c.index,
            cell: c.id.clone(),
            label: Some(c.label.clone()),
            axes: c.axes.clone(),
        })
        .collect();
    session.record(Event::RunStart(Box::new(RunStart {
        schema: SCHEMA_VERSION.into(),
        run_id: run_id.clone(),
        name: base.name.clone(),
        config: serde_json::to_value(&base).unwrap_or_default(),
        environment: env,
        plugins,
        axes,
        cells: headers,
        repeats: base.repeats,
        seeds: base.seeds,
        resumed_cells: resumed,
        mock: options.mock,
        reference: options.reference.clone(),
    })))?;
    if resumed_run {
        session.progress.say(format!(
            "resuming {}: {resumed} of {} cell(s) already finished",
            session.store.dir().display(),
            cells.len()
        ));
    }

    if base.interleave_repeats {
        let rounds = cells.iter().map(|c| c.plan.repeats_per_cell()).max().unwrap_or(1);
        for round in 1..rounds {
            for (cell, previous) in cells.iter().zip(previous.iter_mut()) {
                session.round(cell, previous, &log, round)?;
            }
        }
    }
    let mut summaries = Vec::new();
    for (cell, previous) in cells.iter().zip(previous) {
        let summary = session.cell(cell, previous, &log)?;
        terminal.summary(&summary);
        summaries.push(summary);
    }
    if let Some(peers) = &session.peers {
        peers.say_goodbye();
    }
    let scaling = session.score_scaling(&cells, &mut summaries)?;
    terminal.scaling(&scaling);
    let failed = summaries.iter().filter(|s| s.status == CellStatus::Failed).count();
    let unavailable = summaries.iter().filter(|s| s.status == CellStatus::Unavailable).count();
    session.record(Event::RunEnd(RunEnd {
        run_id,
        name: base.name.clone(),
        cells: cells.len(),
        failed,
        unavailable,
        wall_s: clock().saturating_sub(now) as f64 / 1e3,
        scaling,
    }))?;
    let (files, refused) = session.reports.finish();
    let (artifacts, bad) = write_artifacts(session.store.dir(), files);
    let mut table = terminal.render();
    let rank = super::ranks::peers::own_rank(&cells, &options.launcher);
    if let (Some(study), true) = (&base.study, rank > 0) {
        // Rank 0's run holds the one-process cells the checks compare against.
        table.push_str(&format!(
            "\nstudy: {}: judged by rank 0, whose results hold every cell\n",
            study.title
        ));
    } else if let Some(study) = &base.study {
        let judged = crate::analysis::study::judge(study, &summaries);
        table.push_str(&crate::report::study::render(study, &judged));
        let scores = crate::analysis::diagnoses::Scores::of(&summaries);
        if let Some(scores) = &scores {
            table.push_str(&crate::report::study::diagnoses(scores));
        }
        let json = serde_json::json!({ "study": study, "checks": judged, "diagnoses": scores });
        let bytes = serde_json::to_vec_pretty(&json).map_err(|e| RunnerError::Setup(e.to_string()))?;
        session.store.write_file(super::store::layout::STUDY, &bytes)?;
    }
    if let (None, Some(scores)) = (&base.study, crate::analysis::diagnoses::Scores::of(&summaries)) {
        table.push_str(&crate::report::study::diagnoses(&scores));
    }
    reporter_errors.extend(refused.into_iter().chain(bad));
    Ok(RunSummary {
        run_dir: session.store.dir().to_path_buf(),
        summaries,
        table,
        artifacts,
        reporter_errors,
        failed,
        resumed,
    })
}

/// A cell's statistics over its repeats; `mock` marks a `--mock` run's,
/// failed cells with no repeat included.
fn summarise(cell: &Cell, record: &CellRecord, failure: Option<&str>, mock: bool) -> CellSummary {
    let mut summary =
        named(CellSummary::of(cell.index, &cell.id, &cell.axes, &record.repeats, failure), cell);
    summary.retried = record.retried();
    summary.mock |= mock;
    summary
}

/// `summary` with its cell's label and workload.
fn named(mut summary: CellSummary, cell: &Cell) -> CellSummary {
    summary.label = Some(cell.label.clone());
    summary.workload = Some(cell.workload.clone());
    summary
}
