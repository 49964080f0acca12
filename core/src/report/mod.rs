//! Reporting: one [`Report`] trait whose hooks default to nothing, a
//! [`Reports`] fan-out that forwards every event, the built-in terminal table
//! and reporter plugins, and the tables of `compare` and of a study. A
//! failing reporter never loses measured results. The events and results
//! are the typed schema of `benchkit_schema`. Nothing here measures or
//! computes a figure: results arrive computed (`analysis`), and reporters
//! only render.

pub mod collective;
mod compare;
pub mod history;
pub mod history_page;
mod plugin;
pub mod study;
mod table;
mod terminal;

pub use benchkit_schema::{
    Axis, CellFailed, CellHeader, CellResult, CellStart, CellStatus, CellSummary, EpochEnd, Event,
    InputBound, LoaderReport, ParallelReport, PluginUse, RankReport, RunEnd, RunStart, Stamped, Warmup,
    SCHEMA_VERSION,
};
pub use plugin::PluginReport;
pub use terminal::Terminal;

/// `event`, stamped with the current wall-clock time.
pub fn stamp(event: Event) -> Stamped {
    Stamped { event, time_ms: crate::measure::env::unix_ms() }
}

/// A reporter that failed; the others and the results are unaffected.
#[derive(Debug, thiserror::Error)]
#[error("reporter {reporter}: {message}")]
pub struct ReportError {
    pub reporter: String,
    pub message: String,
}

/// The files one reporter returned: (name, contents), unchecked.
#[derive(Clone, Debug)]
pub struct Artifacts {
    pub reporter: String,
    /// A reporter built into benchkit, whose files are reserved for it.
    pub builtin: bool,
    pub files: Vec<(String, Vec<u8>)>,
}

/// Something that wants to hear about a run.
pub trait Report {
    /// Who this report is, in warnings about it.
    fn name(&self) -> String {
        "benchkit".into()
    }

    /// Whether this report is one of benchkit's own.
    fn builtin(&self) -> bool {
        true
    }
    /// Every event, in order, stamped with the time it happened.
    fn event(&mut self, _event: &Stamped) {}
    /// A cell is over (also delivered through `event`).
    fn summary(&mut self, _summary: &CellSummary) {}
    /// The run is over: files to write, as (name, contents).
    fn finish(&mut self) -> Result<Vec<(String, Vec<u8>)>, ReportError> {
        Ok(Vec::new())
    }
}

/// Fan-out to several reports.
#[derive(Default)]
pub struct Reports {
    reports: Vec<Box<dyn Report>>,
}

impl Reports {
    pub fn push(&mut self, report: Box<dyn Report>) {
        self.reports.push(report);
    }

    /// Deliver `event` to every report.
    pub fn deliver(&mut self, event: &Stamped) {
        for r in &mut self.reports {
            r.event(event);
            if let Event::CellSummary(summary) = &event.event {
                r.summary(summary);
            }
        }
    }

    /// Finish every report; artifacts from the ones that worked, errors of the rest.
    pub fn finish(&mut self) -> (Vec<Artifacts>, Vec<ReportError>) {
        let (mut artifacts, mut errors) = (Vec::new(), Vec::new());
        for r in &mut self.reports {
            match r.finish() {
                Ok(files) => artifacts.push(Artifacts { reporter: r.name(), builtin: r.builtin(), files }),
                Err(e) => errors.push(e),
            }
        }
        (artifacts, errors)
    }
}
