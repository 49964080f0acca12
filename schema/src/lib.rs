//! benchkit's typed results, shared by the host and its reporter plugins:
//! every event of a run, the result of one repeat of a cell, a cell's
//! statistics over its repeats, and the figures inside them.
//!
//! The host writes these types as JSON (`events.jsonl`, `cells/*.json`) and
//! hands the same JSON to reporter plugins, whose SDK reads it back into
//! these types. [`SCHEMA_VERSION`] is the results schema's version and
//! [`CONTRACT_VERSION`] the plugin contract's, each under the rules of
//! [`version`]: a minor version only adds, a renamed or retyped field is a
//! new major version, and a plugin or results directory the rules refuse is
//! refused with both versions named; [`v1`] translates the names of results
//! schema 1.x. This crate
//! holds data and the statistics over it; it must not measure, train or
//! load anything.

pub mod advice;
pub mod batch;
pub mod bootstrap;
pub mod collective;
pub mod energy;
pub mod env;
pub mod event;
pub mod failure;
pub mod faults;
pub mod gpu;
pub mod hash;
#[cfg(feature = "json-schema")]
pub mod json_schema;
pub mod machine;
pub mod ops;
pub mod parallel;
pub mod phases;
pub mod pipeline;
pub mod record;
pub mod result;
pub mod run_file;
pub mod scaling;
pub mod seeds;
pub mod stats;
pub mod straggler;
pub mod summary;
pub mod summary_file;
pub mod tables;
pub mod timeline;
pub mod v1;
pub mod verdict;
pub mod version;
pub mod warmup;

pub use advice::{
    AdviceReport, CellAdvice, Change, ChangeKind, Decomposition, Measured, Refusal, Verification,
};
pub use batch::{BatchSearchReport, BatchTrial};
pub use collective::{CollectiveReport, Communication, LinkFit, LinkShare, SizeResult};
pub use energy::EnergyReport;
pub use env::Environment;
pub use event::{
    check_version, declared_version, read_events, Axis, CellFailed, CellHeader, CellStart, EpochEnd, Event,
    FailureKind, PluginUse, RunEnd, RunStart, SchemaError, Stamped,
};
pub use failure::Failure;
pub use faults::{same_but_faults, Expected, InjectedFaults, Throttle};
pub use gpu::{GpuDeviceReport, GpuReport, GpuSample};
pub use machine::Machine;
pub use ops::{OpCategory, OpCheck, OpProfile, OpRow};
pub use phases::{Phase, PhaseMs, RankSpread, StepPhases};
pub use pipeline::{PipelineReport, StageReport, PIPELINE_NOTE};
pub use record::{CellRecord, FailedRepeat};
pub use result::{
    CellResult, CutFile, Engine, EpochRecord, InputBound, LoaderReport, Mode, ParallelReport, RankReport,
    ShortBatches,
};
pub use run_file::RunFile;
pub use scaling::{CellScaling, Scaling, REPLICA_COUNT_KEYS};
pub use seeds::SeedSpread;
pub use stats::{median, Spread, Summary};
pub use straggler::{Cause as StragglerCause, Straggler};
pub use summary::{CellStatus, CellSummary};
pub use summary_file::RunSummary;
pub use timeline::{
    BatchTrace, BucketTrace, CellTimeline, OpTrace, PhaseTrace, RankTimeline, ReplicaTrace, StepTrace,
    TraceWindow,
};
pub use verdict::{Bottleneck, Figures, Verdict};
pub use warmup::{JitReport, Warmup, WarmupEnd};

/// The version of the results schema: `run.json`, `cells/*.json`, each
/// line of `events.jsonl`, and the events reporters of contract 1.5 and
/// later receive.
pub const SCHEMA_VERSION: &str = "2.11.0";

/// The version of the plugin contract, `wit/benchkit.wit`'s package
/// version. 1.5.0 added nothing to the WIT: its reporters receive events
/// of results schema 2, where reporters of 1.0 to 1.4 receive 1.x names;
/// 1.6.0 added the `timeline` event, which only its reporters receive.
pub const CONTRACT_VERSION: &str = "1.6.0";

/// What every table and report of a `--mock` run says above its figures.
pub const MOCK_NOTE: &str =
    "MOCK RUN: benchkit run --mock trained nothing; every figure below is invented for testing reports.";
