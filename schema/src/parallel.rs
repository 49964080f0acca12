//! How a cell's training was spread over replicas and processes, and each
//! process's own figures: the `parallel` part of a result.

use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// One process of a multi-process cell, over its measured steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct RankReport {
    pub rank: usize,
    /// The machine the rank ran on, as it names itself (schema 2.2.0).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub host: String,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub images_per_s: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub step_ms: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub data_wait_pct: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub exposed_communication_pct: f64,
    /// The rank's process's peak resident memory, in MiB (NaN where unknown).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub peak_rss_mib: f64,
    /// The rank's profiled steps, phase by phase (`profile = true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<crate::StepPhases>,
    /// The plain measured steps the work figures are over (schema 2.2.0).
    pub work_steps: usize,
    /// Its work a step, median over those steps, in ms: the step's compute
    /// less its exposed communication, i.e. what the rank did before it
    /// waited for the others at the all-reduce (schema 2.2.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub work_p50_ms: f64,
    /// Its work's step-to-step noise: 1.4826 × the median absolute
    /// deviation (σ for normal samples), in ms (schema 2.2.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub work_noise_ms: f64,
    /// Its exposed communication a step, median over the same steps, in ms (schema 2.2.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub exposed_communication_p50_ms: f64,
    /// Its data wait a step, median over the same steps, in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub data_wait_p50_ms: f64,
    /// Its arrival at the all-reduce: each step's data wait plus its work,
    /// the median over the same steps, in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub arrival_p50_ms: f64,
    /// Its arrival's step-to-step noise: 1.4826 × the median absolute
    /// deviation, in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub arrival_noise_ms: f64,
    /// Its all-reduces a step, overlapped or not, median over the same
    /// steps, in ms (schema 2.10.0).
    #[serde(default = "crate::stats::nan", deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub communication_p50_ms: f64,
}

/// How the cell's training was spread over replicas, and what that cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "json-schema", derive(schemars::JsonSchema))]
#[serde(default)]
pub struct ParallelReport {
    /// Replicas over all processes: `processes × devices`.
    pub replicas: usize,
    pub processes: usize,
    pub devices: usize,
    pub strategy: String,
    /// What carried the all-reduces between processes: "gloo" or "burn"
    /// ("-" within one process).
    pub collective: String,
    /// The network between the processes: `host` (this machine's
    /// loopback) or the rate each process's emulated link was shaped to,
    /// e.g. `1gbit` (several processes only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// What started the cell's processes: `benchkit` (this run, on this
    /// machine), or the external launcher (`torchrun`, `slurm`, `openmpi`,
    /// `mpich`, `kubernetes`, `ray`, or the name `BENCHKIT_LAUNCHER` gave);
    /// absent with one process (schema 2.4.0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launcher: Option<String>,
    /// The machines the cell's processes ran on.
    pub machines: usize,
    /// CPU threads each replica computed with
    /// (`distributed.threads_per_device`; absent: one a logical core).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads_per_device: Option<usize>,
    pub global_batch: usize,
    pub batch_per_replica: usize,
    /// Measured images per second per replica (the cell's total over `replicas`).
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub images_per_s_per_replica: f64,
    /// Exposed communication: the time the slowest replica's step waited
    /// for its gradient all-reduces after its backward pass, per measured
    /// step, in this process (rank 0's, with several processes: each
    /// rank's share is in `ranks`).
    pub exposed_communication_ms: Summary,
    /// Share of measured step time in exposed communication, in percent: the
    /// slowest replica's in one process; with several processes, the
    /// largest share any rank spent.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub exposed_communication_pct: f64,
    /// Gradient bytes each replica all-reduces per step, as its collective
    /// carries them (f32 over Gloo whatever the precision; the precision's
    /// own size over NCCL and burn-collective); 0 with one replica.
    pub gradient_bytes_per_step: usize,
    /// How the gradients travelled between processes: the collective,
    /// buckets, overlap with the backward pass and bandwidth achieved
    /// (several processes only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub communication: Option<crate::Communication>,
    pub lr_scaling: String,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub base_lr: f64,
    /// The rate after warm-up: `base_lr × replicas` with linear scaling.
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub peak_lr: f64,
    #[serde(deserialize_with = "crate::stats::f64_or_nan")]
    #[cfg_attr(feature = "json-schema", schemars(with = "Option<f64>"))]
    pub warmup_epochs: f64,
    /// Whether every replica ended with the same parameters (absent with one replica).
    pub replicas_agree: Option<bool>,
    /// Per process, rank order (several processes only).
    pub ranks: Vec<RankReport>,
    /// How far the ranks' profiled device work spreads (several profiled ranks).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank_spread: Option<crate::RankSpread>,
    /// The rank every other waited for, beyond the run's noise
    /// ([`crate::Straggler::of`]; several processes; schema 2.2.0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub straggler: Option<crate::Straggler>,
}

impl Default for ParallelReport {
    fn default() -> Self {
        Self {
            replicas: 1,
            processes: 1,
            devices: 1,
            strategy: "-".into(),
            collective: "-".into(),
            link: None,
            launcher: None,
            machines: 1,
            threads_per_device: None,
            global_batch: 0,
            batch_per_replica: 0,
            images_per_s_per_replica: f64::NAN,
            exposed_communication_ms: Summary::of(&[]),
            exposed_communication_pct: f64::NAN,
            gradient_bytes_per_step: 0,
            communication: None,
            lr_scaling: "none".into(),
            base_lr: f64::NAN,
            peak_lr: f64::NAN,
            warmup_epochs: 0.0,
            replicas_agree: None,
            ranks: Vec::new(),
            rank_spread: None,
            straggler: None,
        }
    }
}
