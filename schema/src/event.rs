//! The events of a run, in the order they happen: `run-start`, then per
//! repeat of each cell `cell-start`, `epoch`s and `cell` or `cell-failed`,
//! a `cell-summary` when the cell is over, and `run-end`. Each is one JSON
//! object with an `event` tag and the wall-clock `time_ms` it happened at;
//! `events.jsonl` holds them one per line, and every report can be rebuilt
//! from that file alone.

use crate::env::Environment;
use crate::result::{CellResult, EpochRecord};
use crate::summary::CellSummary;
use crate::SCHEMA_VERSION;
use serde::{Deserialize, Serialize};

/// A plugin the run used, with what identifies its build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PluginUse {
    /// `model`, `transform` or `reporter`.
    pub role: String,
    /// Where it was loaded from: `builtin:<name>` or a path.
    pub origin: String,
    pub name: String,
    pub version: String,
    pub sha256: String,
}

/// One swept key and its values, in the order written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Axis {
    /// Dotted config key, e.g. `train.batch_size`.
    pub key: String,
    pub values: Vec<serde_json::Value>,
}

/// A cell as announced at the start of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellHeader {
    pub index: usize,
    pub cell: String,
    /// Swept key -> this cell's value.
    pub axes: serde_json::Map<String, serde_json::Value>,
}

/// The run begins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunStart {
    /// The results schema the run's events follow ([`SCHEMA_VERSION`]).
    pub schema: String,
    pub run_id: String,
    pub name: String,
    /// The config without its matrix; each cell's own is in `cell-start`.
    pub config: serde_json::Value,
    pub environment: Environment,
    pub plugins: Vec<PluginUse>,
    pub axes: Vec<Axis>,
    pub cells: Vec<CellHeader>,
    pub repeats: u32,
    /// Cells already finished by an earlier, interrupted run of the same id.
    pub resumed_cells: usize,
}

/// One repeat of a cell begins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellStart {
    pub cell: String,
    /// 1-based.
    pub repeat: u32,
    pub repeats: u32,
    /// The cell's resolved config.
    pub config: serde_json::Value,
}

/// An epoch of a repeat ended, its test evaluation included.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochEnd {
    pub cell: String,
    pub repeat: u32,
    #[serde(flatten)]
    pub record: EpochRecord,
}

/// One repeat of a cell failed; the run goes on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellFailed {
    pub cell: String,
    pub repeat: u32,
    pub reason: String,
    /// The plugin at fault, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    /// The plugin call that failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call: Option<String>,
}

/// The run is over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    pub run_id: String,
    pub name: String,
    pub cells: usize,
    pub failed: usize,
    pub wall_s: f64,
}

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum Event {
    RunStart(Box<RunStart>),
    CellStart(CellStart),
    Epoch(EpochEnd),
    /// One repeat of a cell finished.
    Cell(Box<CellResult>),
    CellFailed(CellFailed),
    /// A cell is over: its statistics across repeats.
    CellSummary(Box<CellSummary>),
    RunEnd(RunEnd),
}

impl Event {
    /// The `event` tag this event is written with.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::RunStart(_) => "run-start",
            Event::CellStart(_) => "cell-start",
            Event::Epoch(_) => "epoch",
            Event::Cell(_) => "cell",
            Event::CellFailed(_) => "cell-failed",
            Event::CellSummary(_) => "cell-summary",
            Event::RunEnd(_) => "run-end",
        }
    }

    /// The cell this event belongs to; `None` for `run-start` and `run-end`.
    pub fn cell(&self) -> Option<&str> {
        match self {
            Event::RunStart(_) | Event::RunEnd(_) => None,
            Event::CellStart(e) => Some(&e.cell),
            Event::Epoch(e) => Some(&e.cell),
            Event::Cell(r) => Some(&r.cell),
            Event::CellFailed(e) => Some(&e.cell),
            Event::CellSummary(s) => Some(&s.cell),
        }
    }
}

/// An event with the wall-clock time it happened at: one line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stamped {
    #[serde(flatten)]
    pub event: Event,
    /// Unix milliseconds.
    pub time_ms: u64,
}

/// Why events could not be read.
#[derive(Clone, Debug, PartialEq)]
pub enum SchemaError {
    /// The events follow another version of the schema.
    Version { found: String, expected: String },
    /// Line `line` (1-based) is not an event of this schema.
    Line { line: usize, message: String },
    /// There are no events, or the first is not `run-start`.
    NoRunStart,
}

impl std::fmt::Display for SchemaError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaError::Version { found, expected } => {
                write!(f, "written with results schema {found}, but this build reads schema {expected}")
            }
            SchemaError::Line { line, message } => {
                write!(f, "line {line}: not a schema {SCHEMA_VERSION} event: {message}")
            }
            SchemaError::NoRunStart => write!(f, "the first event is not `run-start`"),
        }
    }
}

impl std::error::Error for SchemaError {}

/// The schema version a `run-start` event (as JSON) declares. Events
/// written before the schema carried a version say nothing: they are 0.1.0.
pub fn declared_version(run_start: &serde_json::Value) -> &str {
    run_start.get("schema").and_then(serde_json::Value::as_str).unwrap_or("0.1.0")
}

/// Check that `found` is the version this build reads.
pub fn check_version(found: &str) -> Result<(), SchemaError> {
    if found == SCHEMA_VERSION {
        Ok(())
    } else {
        Err(SchemaError::Version { found: found.into(), expected: SCHEMA_VERSION.into() })
    }
}

impl Stamped {
    /// Read one event from its JSON text.
    pub fn parse(text: &str) -> Result<Self, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    /// The event as one line of JSON (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// Every event of an `events.jsonl` text, in order. The first must be a
/// `run-start` of this schema version; a blank last line is allowed, and
/// so is a cut-off last line (a run killed mid-write), which is left out.
pub fn read_events(text: &str) -> Result<Vec<Stamped>, SchemaError> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let first: serde_json::Value =
        lines.first().and_then(|l| serde_json::from_str(l).ok()).ok_or(SchemaError::NoRunStart)?;
    if first.get("event").and_then(serde_json::Value::as_str) != Some("run-start") {
        return Err(SchemaError::NoRunStart);
    }
    check_version(declared_version(&first))?;
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match Stamped::parse(line) {
            Ok(event) => events.push(event),
            Err(_) if i + 1 == lines.len() && !line.trim_end().ends_with('}') => break,
            Err(message) => return Err(SchemaError::Line { line: i + 1, message }),
        }
    }
    Ok(events)
}
