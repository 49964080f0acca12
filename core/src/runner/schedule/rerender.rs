//! `benchkit report DIR`: a finished (or interrupted) run rendered again
//! from its `events.jsonl` alone, by the reporters its config named or by
//! others, with the terminal table. It never runs a cell, and writes only
//! the reporters' artifacts into the directory.

use super::start_reporters;
use crate::config::PluginPlan;
use crate::plugin::PluginHost;
use crate::report::{CellSummary, Event, Report, ReportError, RunEnd, RunStart, Stamped, Terminal};
use crate::runner::store::artifacts::write_artifacts;
use crate::runner::store::events::run_events;
use crate::runner::store::read::{read_log, read_run};
use crate::runner::RunnerError;
use std::path::{Path, PathBuf};

/// What re-rendering a run produced.
pub struct Rerendered {
    /// The results table.
    pub table: String,
    pub artifacts: Vec<PathBuf>,
    /// Reporters that failed; their failure did not affect the rest.
    pub reporter_errors: Vec<ReportError>,
    /// Cells with no summary in the log: the run did not reach them.
    pub unfinished: Vec<String>,
}

/// Render the run stored in `dir` with `reporters` (the run's own when
/// `None`), its relative speeds against cell `reference`.
pub fn rerender(
    dir: &Path,
    reporters: Option<&[PluginPlan]>,
    reference: Option<String>,
) -> Result<Rerendered, RunnerError> {
    let run = read_run(dir)?;
    let events = run_events(&read_log(dir)?);
    let Some(Event::RunStart(start)) = events.first().map(|e| &e.event) else {
        return Err(RunnerError::Setup(format!(
            "{}: events.jsonl holds no run-start event; nothing to render",
            dir.display()
        )));
    };
    let host = PluginHost::new(run.base.plugin_limits)?;
    let (mut reports, mut reporter_errors) = start_reporters(&host, reporters.unwrap_or(&run.base.reporters));
    let mut terminal = Terminal::new(run.axes.clone(), reference.clone());
    if start.mock {
        terminal.mock();
    }
    let mut summaries: Vec<CellSummary> = Vec::new();
    for event in &events {
        match &event.event {
            // Scaling compares cells: computed again from every summary.
            Event::RunEnd(end) => {
                let scaling = benchkit_schema::scaling::scaling(&summaries);
                let end = RunEnd { scaling, ..end.clone() };
                reports.deliver(&Stamped { event: Event::RunEnd(end), time_ms: event.time_ms });
            }
            // `--reference` given now is the one the reports use.
            Event::RunStart(start) if reference.is_some() => {
                let start = RunStart { reference: reference.clone(), ..(**start).clone() };
                reports.deliver(&Stamped { event: Event::RunStart(Box::new(start)), time_ms: event.time_ms });
            }
            Event::CellSummary(summary) => {
                reports.deliver(event);
                terminal.summary(summary);
                summaries.push((**summary).clone());
            }
            _ => reports.deliver(event),
        }
    }
    let scaling = benchkit_schema::scaling::scaling(&summaries);
    benchkit_schema::scaling::apply(&mut summaries, &scaling);
    terminal.scaling(&scaling);
    let summarised: Vec<String> = summaries.iter().map(|s| s.cell.clone()).collect();
    let unfinished =
        start.cells.iter().filter(|c| !summarised.contains(&c.cell)).map(|c| c.cell.clone()).collect();
    let (files, refused) = reports.finish();
    let (artifacts, bad) = write_artifacts(dir, files);
    reporter_errors.extend(refused.into_iter().chain(bad));
    let mut table = terminal.render();
    if let Some(study) = &run.base.study {
        table.push_str(&crate::report::study::render(
            study,
            &crate::analysis::study::judge(study, &summaries),
        ));
    }
    Ok(Rerendered { table, artifacts, reporter_errors, unfinished })
}
