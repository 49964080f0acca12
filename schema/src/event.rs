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
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct Axis {
    /// Dotted config key, e.g. `train.batch_size`.
    pub key: String,
    pub values: Vec<serde_json::Value>,
}

/// A cell as announced at the start of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellHeader {
    pub index: usize,
    pub cell: String,
    /// What a person calls the cell ([`crate::CellSummary::label`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// Swept key -> this cell's value.
    pub axes: serde_json::Map<String, serde_json::Value>,
}

/// The run begins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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
    /// Runs of each cell per seed.
    pub repeats: u32,
    /// Seeds each cell trains with (`repeats` repeats each).
    #[serde(default = "one")]
    pub seeds: u32,
    /// Cells already finished by an earlier, interrupted run of the same id.
    pub resumed_cells: usize,
    /// `benchkit run --mock`: every figure of the run is invented.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mock: bool,
    /// The cell relative speeds are against (`--reference`); the first
    /// finished cell when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<String>,
}

/// One repeat of a cell begins.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct EpochEnd {
    pub cell: String,
    pub repeat: u32,
    #[serde(flatten)]
    pub record: EpochRecord,
}

/// One repeat of a cell failed; the run goes on.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct CellFailed {
    pub cell: String,
    pub repeat: u32,
    /// Why, its fields at this object's top level.
    #[serde(flatten)]
    pub failure: crate::failure::Failure,
}

/// Whether a failure would happen again on the same machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// It would: a config or data error, a plugin refused or trapped, out
    /// of memory at this size, a crash. Not repeated.
    #[default]
    Deterministic,
    /// It might not: the process was killed, ran past the cell time limit
    /// or lost a peer. Tried again up to `retries` times.
    Transient,
}

/// The run is over.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
pub struct RunEnd {
    pub run_id: String,
    pub name: String,
    pub cells: usize,
    pub failed: usize,
    /// Cells not trained for what the build or machine lacks. Since 2.7.0.
    #[serde(default, skip_serializing_if = "crate::summary::is_zero")]
    pub unavailable: usize,
    pub wall_s: f64,
    /// Every multi-replica cell's scaling efficiency, computed once all
    /// cells were in ([`crate::scaling`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scaling: Vec<crate::CellScaling>,
}

/// One event of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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
    /// What each rank of one repeat did over time (schema 2.2.0; with a
    /// `[timeline]` table or the `timeline` reporter), sent before its `cell`.
    Timeline(Box<crate::CellTimeline>),
}

impl Event {
    /// Every `event` tag of this schema version.
    pub const KINDS: [&'static str; 8] =
        ["run-start", "cell-start", "epoch", "cell", "cell-failed", "cell-summary", "run-end", "timeline"];

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
            Event::Timeline(_) => "timeline",
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
            Event::Timeline(t) => Some(&t.cell),
        }
    }
}

/// An event with the wall-clock time it happened at: one line of `events.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
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
                let why = crate::version::reads_results(found).err().map(|r| format!(": {}", r.of_results()));
                write!(
                    f,
                    "written with results schema {found}, but this build reads schema {expected}{}",
                    why.unwrap_or_default()
                )
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

/// Check that this build reads results of version `found` ([`crate::version`]).
pub fn check_version(found: &str) -> Result<(), SchemaError> {
    if crate::version::reads_results(found).is_ok() {
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

    /// Read one event of results schema 1.x from its JSON text, in 2.0 names.
    pub fn parse_v1(text: &str) -> Result<Self, String> {
        let mut value: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        crate::v1::upgrade(crate::v1::Document::Event, &mut value);
        serde_json::from_value(value).map_err(|e| e.to_string())
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
    let found = declared_version(&first);
    check_version(found)?;
    let v1 = crate::version::is_v1(found);
    let mut events = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        let parsed = if v1 { Stamped::parse_v1(line) } else { Stamped::parse(line) };
        match parsed {
            Ok(event) => events.push(event),
            // A last line with no newline after it was cut off mid-write.
            Err(_) if i + 1 == lines.len() && (!text.ends_with('\n') || !line.trim_end().ends_with('}')) => {
                break
            }
            Err(message) => return Err(SchemaError::Line { line: i + 1, message }),
        }
    }
    Ok(events)
}

fn one() -> u32 {
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn epoch(cell: &str, repeat: u32) -> Stamped {
        let record = EpochRecord {
            epoch: 1,
            steps: 10,
            images: 640,
            eval_images: 100,
            train_loss: 1.25,
            train_accuracy: f64::NAN,
            test_loss: 0.5,
            test_accuracy: 0.875,
            images_per_s: 1234.5,
            train_s: 0.1 + 0.2,
            eval_s: 0.25,
            lr_end: 0.1,
            end_unix_ms: 7,
            metrics: [("levenshtein".to_string(), 1.5)].into(),
            pr_curve: vec![[0.0, 1.0], [1.0, 0.5]],
        };
        Stamped { event: Event::Epoch(EpochEnd { cell: cell.into(), repeat, record }), time_ms: 42 }
    }

    fn start(schema: &str) -> String {
        let start = RunStart {
            schema: schema.into(),
            run_id: "r".into(),
            name: "n".into(),
            config: serde_json::json!({"train": {"batch_size": 32}}),
            environment: serde_json::from_value(serde_json::json!({
                "benchkit_version": "0", "git_commit": "", "burn_version": "", "wasmtime_version": "",
                "plugin_contract": schema, "os": "", "kernel": "", "cpu_model": "", "logical_cores": 2,
                "memory_gib": 24.0, "hostname": "", "gpus": [], "gpu_driver": null
            }))
            .unwrap(),
            plugins: Vec::new(),
            axes: vec![Axis { key: "train.batch_size".into(), values: vec![32.into()] }],
            cells: Vec::new(),
            repeats: 1,
            seeds: 1,
            resumed_cells: 0,
            mock: false,
            reference: None,
        };
        Stamped { event: Event::RunStart(Box::new(start)), time_ms: 1 }.to_line()
    }

    #[test]
    fn an_event_reads_back_as_written_with_its_tag_and_time() {
        let line = epoch("a", 2).to_line();
        let json: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(json["event"], "epoch");
        assert_eq!(json["time_ms"], 42);
        assert_eq!(json["epoch"], 1, "the record's fields sit beside the cell's");
        assert!(json["train_accuracy"].is_null(), "NaN is written as null");
        let back = Stamped::parse(&line).unwrap();
        let Event::Epoch(e) = &back.event else { panic!("{back:?}") };
        assert!(e.record.train_accuracy.is_nan());
        assert_eq!(e.record.train_s, 0.1 + 0.2, "floats round-trip exactly");
        assert_eq!((e.cell.as_str(), e.repeat, back.time_ms), ("a", 2, 42));
        assert_eq!(e.record.metrics["levenshtein"], 1.5);
    }

    #[test]
    fn a_log_of_another_schema_is_refused_naming_both_versions() {
        let text = format!("{}\n{}\n", start("0.1.0"), epoch("a", 1).to_line());
        let err = read_events(&text).unwrap_err();
        assert_eq!(err, SchemaError::Version { found: "0.1.0".into(), expected: SCHEMA_VERSION.into() });
        let message = err.to_string();
        assert!(message.contains("0.1.0") && message.contains(SCHEMA_VERSION), "{message}");
        let unversioned = start(SCHEMA_VERSION).replace(&format!("\"schema\":\"{SCHEMA_VERSION}\","), "");
        assert!(
            matches!(read_events(&unversioned), Err(SchemaError::Version { found, .. }) if found == "0.1.0")
        );
        assert_eq!(read_events(&epoch("a", 1).to_line()), Err(SchemaError::NoRunStart));
    }

    #[test]
    fn a_cut_off_last_line_is_left_out_and_a_bad_line_is_named() {
        let whole = epoch("a", 1).to_line();
        let text = format!("{}\n{whole}\n{}", start(SCHEMA_VERSION), &whole[..whole.len() / 2]);
        assert_eq!(read_events(&text).unwrap().len(), 2);
        let renamed = whole.replace("\"images\"", "\"pictures\"");
        let text = format!("{}\n{renamed}\n{whole}\n", start(SCHEMA_VERSION));
        match read_events(&text) {
            Err(SchemaError::Line { line: 2, message }) => assert!(message.contains("images"), "{message}"),
            other => panic!("{other:?}"),
        }
    }
}
