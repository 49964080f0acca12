//! benchkit's typed results, shared by the host and its reporter plugins:
//! every event of a run, the result of one repeat of a cell, a cell's
//! statistics over its repeats, and the figures inside them.
//!
//! The host writes these types as JSON (`events.jsonl`, `cells/*.json`) and
//! hands the same JSON to reporter plugins, whose SDK reads it back into
//! these types. [`SCHEMA_VERSION`] is the plugin contract's version, under
//! the rules of [`version`]: a minor version only adds, a renamed or retyped
//! field is a new major version, and a plugin or results directory the
//! rules refuse is refused with both versions named. This crate
//! holds data and the statistics over it; it must not measure, train or
//! load anything.

pub mod batch;
pub mod bootstrap;
pub mod collective;
pub mod energy;
pub mod env;
pub mod event;
pub mod gpu;
pub mod machine;
pub mod phases;
pub mod pipeline;
pub mod record;
pub mod result;
pub mod scaling;
pub mod seeds;
pub mod stats;
pub mod summary;
pub mod verdict;
pub mod version;

pub use batch::{BatchSearchReport, BatchTrial};
pub use collective::{CollectiveReport, Communication, LinkFit, LinkShare, SizeResult};
pub use energy::EnergyReport;
pub use env::Environment;
pub use event::{
    check_version, declared_version, read_events, Axis, CellFailed, CellHeader, CellStart, EpochEnd, Event,
    FailureKind, PluginUse, RunEnd, RunStart, SchemaError, Stamped,
};
pub use gpu::{GpuDeviceReport, GpuReport, GpuSample};
pub use machine::Machine;
pub use phases::{Phase, PhaseMs, RankSpread, StepPhases};
pub use pipeline::{PipelineReport, StageReport, PIPELINE_NOTE};
pub use record::{CellRecord, Failure};
pub use result::{
    CellResult, CutFile, Engine, EpochRecord, InputBound, LoaderReport, Mode, ParallelReport, RankReport,
    ShortBatches, Warmup,
};
pub use scaling::{CellScaling, Scaling};
pub use seeds::SeedSpread;
pub use stats::{median, Spread, Summary};
pub use summary::{CellStatus, CellSummary};
pub use verdict::{Bottleneck, Figures, Verdict};

/// The version of the results schema and of the plugin contract
/// (`wit/benchkit.wit`'s package version): they change together.
pub const SCHEMA_VERSION: &str = "1.4.0";

/// What every table and report of a `--mock` run says above its figures.
pub const MOCK_NOTE: &str =
    "MOCK RUN: benchkit run --mock trained nothing; every figure below is invented for testing reports.";
