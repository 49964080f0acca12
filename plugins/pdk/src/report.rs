//! For reporter plugins: the run's typed events gathered by kind
//! ([`RunLog`]), the table words and notes benchkit's own table uses, and
//! small formatting helpers. Reporters that render once, from the whole
//! run, implement [`RunReport`] and export `Gathered<Self>`.

use crate::schema::{
    machine, CellFailed, CellResult, CellStart, CellSummary, EpochEnd, Event, RunEnd, RunStart, Spread,
    Stamped,
};
use crate::Reporter;

/// Hand `event` to the hook of `reporter` for its kind.
pub fn dispatch<R: Reporter>(reporter: &mut R, event: &Stamped) -> Result<(), String> {
    let t = event.time_ms;
    match &event.event {
        Event::RunStart(e) => reporter.run_start(e, t),
        Event::CellStart(e) => reporter.cell_start(e, t),
        Event::Epoch(e) => reporter.epoch(e, t),
        Event::Cell(e) => reporter.cell(e, t),
        Event::CellFailed(e) => reporter.cell_failed(e, t),
        Event::CellSummary(e) => reporter.cell_summary(e, t),
        Event::RunEnd(e) => reporter.run_end(e, t),
        Event::Timeline(e) => reporter.timeline(e, t),
    }
}

/// An event and when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct Timed<T> {
    pub time_ms: u64,
    pub event: T,
}

/// Every event of a run, by kind, in arrival order.
#[derive(Default, Debug, Clone)]
pub struct RunLog {
    pub start: Option<Timed<RunStart>>,
    pub cell_starts: Vec<Timed<CellStart>>,
    pub epochs: Vec<EpochEnd>,
    /// One finished repeat of a cell each.
    pub repeats: Vec<CellResult>,
    pub failures: Vec<Timed<CellFailed>>,
    /// One per cell, its statistics over repeats.
    pub summaries: Vec<CellSummary>,
    pub end: Option<Timed<RunEnd>>,
    /// Every event as it came, timelines left out (they are large; a
    /// reporter that draws them takes the `timeline` hook).
    pub events: Vec<Stamped>,
}

impl RunLog {
    /// File `event` under its kind.
    pub fn push(&mut self, event: &Stamped) {
        let time_ms = event.time_ms;
        match &event.event {
            Event::RunStart(e) => self.start = Some(Timed { time_ms, event: (**e).clone() }),
            Event::CellStart(e) => self.cell_starts.push(Timed { time_ms, event: e.clone() }),
            Event::Epoch(e) => self.epochs.push(e.clone()),
            Event::Cell(e) => self.repeats.push((**e).clone()),
            Event::CellFailed(e) => self.failures.push(Timed { time_ms, event: e.clone() }),
            Event::CellSummary(e) => self.summaries.push((**e).clone()),
            // Timelines are large: a reporter that draws them takes the `timeline` hook.
            Event::Timeline(_) => return,
            Event::RunEnd(e) => {
                // Scaling compares cells, so it arrives once all are in.
                crate::schema::scaling::apply(&mut self.summaries, &e.scaling);
                self.end = Some(Timed { time_ms, event: e.clone() })
            }
        }
        self.events.push(event.clone());
    }

    /// Whether the run is a `--mock` run, whose every figure is invented.
    pub fn mock(&self) -> bool {
        self.start.as_ref().is_some_and(|s| s.event.mock) || self.summaries.iter().any(|s| s.mock)
    }

    /// The run's start; an error when the host sent none.
    pub fn run_start(&self) -> Result<&RunStart, String> {
        self.start.as_ref().map(|s| &s.event).ok_or_else(|| "the run sent no run-start event".to_string())
    }

    /// The run's name ("" before `run-start`).
    pub fn name(&self) -> String {
        self.start.as_ref().map(|s| s.event.name.clone()).unwrap_or_default()
    }

    /// The swept keys, in the order written.
    pub fn axes(&self) -> Vec<String> {
        self.start.iter().flat_map(|s| s.event.axes.iter().map(|a| a.key.clone())).collect()
    }

    /// What a person calls each cell, by id ([`CellSummary::shown`]): its
    /// label from the run's start or its summary where it is
    /// [`crate::schema::tables::label::readable`]. A cell absent here is
    /// called by its id.
    pub fn labels(&self) -> std::collections::BTreeMap<&str, &str> {
        use crate::schema::tables::label::readable;
        let announced =
            self.start.iter().flat_map(|s| &s.event.cells).map(|c| (c.cell.as_str(), c.label.as_deref()));
        let summarised = self.summaries.iter().map(|s| (s.cell.as_str(), s.label.as_deref()));
        summarised
            .chain(announced)
            .filter_map(|(id, label)| Some((id, label.filter(|l| readable(l))?)))
            .collect()
    }

    /// The note under the cells table that says what `rel` is against
    /// ([`crate::schema::tables::rel_note`]).
    pub fn rel_note(&self) -> Option<String> {
        let named = self.start.as_ref().and_then(|s| s.event.reference.as_deref());
        crate::schema::tables::rel_note(&self.summaries.iter().collect::<Vec<_>>(), named)
    }

    /// The finished repeats of cell `id`.
    pub fn repeats_of<'a>(&'a self, id: &'a str) -> impl Iterator<Item = &'a CellResult> + 'a {
        self.repeats.iter().filter(move |r| r.cell == id)
    }

    /// The cell relative speeds compare with: the run's `--reference` cell
    /// when it finished, else the first finished cell (as benchkit's own table).
    pub fn reference(&self) -> Option<&CellSummary> {
        let named = self.start.as_ref().and_then(|s| s.event.reference.as_deref());
        crate::schema::tables::reference(&self.summaries.iter().collect::<Vec<_>>(), named)
    }

    /// The notes under the cells table, cell by cell
    /// ([`crate::schema::tables::notes`]).
    pub fn notes(&self) -> Vec<Note> {
        let labels = self.labels();
        self.summaries.iter().flat_map(|s| crate::schema::tables::notes(s, &labels)).collect()
    }

    /// The cells table benchkit's own terminal shows, in summary order
    /// ([`crate::schema::tables::cells`]): each reporter adds its own markup.
    pub fn cells_table(&self) -> CellsTable {
        crate::schema::tables::cells(&self.summaries.iter().collect::<Vec<_>>(), self.reference())
    }

    /// The kinds of machine the cells ran on, where there are several (a
    /// merged run's): the cells table then ends with a `machine` column of
    /// tags `m1`, `m2`, … that [`RunLog::machine_legend`] spells out.
    pub fn machine_kinds(&self) -> Vec<String> {
        machine::distinct_kinds(self.summaries.iter().map(|s| s.machine.as_ref()))
    }

    /// `m1: <kind> (host a, b)` for each kind of [`RunLog::machine_kinds`].
    pub fn machine_legend(&self) -> Vec<String> {
        machine::legend(&self.machine_kinds(), self.summaries.iter().filter_map(|s| s.machine.as_ref()))
    }

    /// The seeds table ([`crate::schema::tables::seeds`]).
    pub fn seeds_table(&self) -> Option<Vec<Vec<String>>> {
        crate::schema::tables::seeds(&self.summaries.iter().collect::<Vec<_>>())
    }

    /// The step phases table ([`crate::schema::tables::phases`]).
    pub fn phases_table(&self) -> Option<Vec<Vec<String>>> {
        crate::schema::tables::phases(&self.summaries.iter().collect::<Vec<_>>())
    }

    /// The pipeline table (header, then one row per pipeline cell), when
    /// any cell trained a pipeline: see [`benchkit_schema::PIPELINE_NOTE`].
    pub fn pipeline_table(&self) -> Option<Vec<Vec<String>>> {
        let cells: Vec<(&str, &benchkit_schema::PipelineReport)> =
            self.summaries.iter().filter_map(|s| Some((s.cell.as_str(), s.pipeline.as_ref()?))).collect();
        benchkit_schema::pipeline::table(&cells)
    }

    /// The data-parallel table (header, then one row per cell), when any
    /// cell trained on several replicas: layout, batch split, per-replica
    /// speed, weak and strong scaling efficiency, exposed communication
    /// time and share of the step, gradient bytes, learning rate, and
    /// whether the replicas ended identical. Figures are the first
    /// repeat's, but efficiency and the exposed share are medians over
    /// repeats.
    pub fn parallel_table(&self) -> Option<Vec<Vec<String>>> {
        if !self.summaries.iter().any(|s| s.replicas.is_some()) {
            return None;
        }
        let header = [
            "cell",
            "replicas",
            "processes × devices",
            "strategy",
            "batch (per replica)",
            "img/s per replica",
            "weak scaling",
            "strong scaling",
            "exposed comm. ms p50",
            "exposed comm. % of step",
            "gradient MB/step",
            "peak lr",
            "replicas agree",
        ];
        let mut rows = vec![header.iter().map(|h| h.to_string()).collect::<Vec<_>>()];
        let labels = self.labels();
        for s in self.summaries.iter().filter(|s| finished(s)) {
            let Some(repeat) = self.repeats_of(&s.cell).next() else { continue };
            let p = &repeat.parallel;
            rows.push(vec![
                s.shown().to_string(),
                p.replicas.to_string(),
                format!("{} × {}", p.processes, p.devices),
                if p.replicas > 1 { p.strategy.clone() } else { "-".into() },
                format!("{} ({})", p.global_batch, p.batch_per_replica),
                fixed(finite(p.images_per_s_per_replica), 1),
                scaling_cell(s.weak_scaling.as_ref(), &labels),
                scaling_cell(s.strong_scaling.as_ref(), &labels),
                fixed(finite(p.exposed_communication_ms.p50), 1),
                fixed(median(&s.exposed_communication_pct), 1),
                fixed(Some(p.gradient_bytes_per_step as f64).filter(|b| *b > 0.0).map(|b| b / 1e6), 2),
                match p.lr_scaling.as_str() {
                    "linear" => {
                        format!("{} (linear, {} warm-up epochs)", number(p.peak_lr), number(p.warmup_epochs))
                    }
                    _ => number(p.peak_lr),
                },
                match p.replicas_agree {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
            ]);
        }
        Some(rows)
    }
}

pub use crate::schema::tables::{figure_anchor, FIGURES_NOTE, FIGURES_PAGE, PHASES_NOTE, SEEDS_NOTE};

pub use crate::schema::tables::{finished, input_bound, CellsTable, Note};

/// What the data-parallel table's scaling efficiencies are, for under it.
pub const SCALING_NOTE: &str = "Scaling efficiency: the cell's images/s over replicas × the images/s of a 1-replica cell with the same settings (medians over repeats). Weak scaling (fixed per-replica batch): against the 1-replica cell whose batch is this cell's per-replica batch. Strong scaling (fixed global batch): against the 1-replica cell whose batch is this cell's global batch. Each is shown where its baseline cell ran.";

pub use crate::schema::MOCK_NOTE;

/// A scaling efficiency and its baseline, as the tables show it:
/// `90.0 % (vs 1 proc · batch 32)`, the baseline by its label in `labels`
/// (else its id), or `-` without a baseline.
pub fn scaling_cell(
    scaling: Option<&crate::schema::Scaling>,
    labels: &std::collections::BTreeMap<&str, &str>,
) -> String {
    scaling.map_or("-".into(), |x| {
        let baseline = labels.get(x.baseline_cell.as_str()).copied().unwrap_or(&x.baseline_cell);
        format!("{:.1} % (vs {baseline})", 100.0 * x.efficiency.median)
    })
}

/// The median of a spread, if there is one.
pub fn median(spread: &Option<Spread>) -> Option<f64> {
    spread.map(|s| s.median)
}

/// `value` unless it is NaN or infinite (figures a run could not measure).
pub fn finite(value: f64) -> Option<f64> {
    value.is_finite().then_some(value)
}

/// A number as JSON writes it (`0.1`, `2`), or "" when not finite.
pub fn number(value: f64) -> String {
    if value.is_finite() {
        serde_json::Number::from_f64(value).map(|n| n.to_string()).unwrap_or_default()
    } else {
        String::new()
    }
}

/// A JSON value as a person reads it: strings without quotes, null as "".
pub fn show(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Swept key `key`'s value `v` as a cell's label shows it
/// ([`crate::schema::tables::label`]): a model by its name (`resnet-18
/// ×0.25`), `2 proc`, `batch 64`, a word as itself, never raw JSON.
pub fn axis_value(key: &str, v: &serde_json::Value) -> String {
    use crate::schema::tables::label;
    match v.as_object() {
        Some(model) if key == "model" => label::model_text(model),
        _ => label::short(key, v),
    }
}

/// `value` with `digits` decimals, or "-" when absent.
pub fn fixed(value: Option<f64>, digits: usize) -> String {
    value.map_or("-".into(), |v| format!("{v:.digits$}"))
}

/// A cell id as a file-name part: anything but `[A-Za-z0-9._=,+-]` becomes `_`.
pub fn file_part(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || "._=,+-".contains(c) { c } else { '_' }).collect()
}

/// A reporter that writes its files from the whole run: it only renders,
/// [`Gathered`] collects the events. Export it with
/// `export_reporter!(Gathered<MyReport>)`.
pub trait RunReport: Sized + 'static {
    fn info() -> crate::PluginInfo;
    fn create(config: &mut crate::Config) -> Result<Self, String>;
    /// The files for the run in `log`.
    fn render(&self, log: &RunLog) -> Result<Vec<crate::Artifact>, String>;
}

/// A [`RunReport`] with the events gathered into a [`RunLog`].
pub struct Gathered<R> {
    report: R,
    log: RunLog,
}

impl<R: RunReport> Reporter for Gathered<R> {
    fn info() -> crate::PluginInfo {
        R::info()
    }

    fn create(config: &mut crate::Config) -> Result<Self, String> {
        Ok(Self { report: R::create(config)?, log: RunLog::default() })
    }

    fn on_event(&mut self, event: &Stamped) -> Result<(), String> {
        self.log.push(event);
        Ok(())
    }

    fn finish(&mut self) -> Result<Vec<crate::Artifact>, String> {
        self.report.render(&self.log)
    }
}
